import Testing
@testable import Inspect

@Suite struct SnifferPolyglotTests {
    @Test func gifWithPHPIsPHP() {
        let r = Sniffer.sniff(bytes("GIF89a<?php system($_GET[c]); ?>"))
        #expect(r.kind == .php)
        #expect(r.category == .script)
        #expect(r.mimeType == "application/x-php")
        #expect(r.disguisedAs == .gif)
        #expect(r.description == "php (disguised as gif)")
        #expect(!r.isCompatible(withDeclared: "image/gif"))
    }

    @Test func catJPGHoldingPHPIsAMismatch() {
        // cat.jpg, declared image/jpeg, content is a bare PHP script.
        let r = Sniffer.sniff(bytes("<?php echo shell_exec($_GET['cmd']); ?>"))
        #expect(r.kind == .php && r.disguisedAs == nil)
        #expect(!r.isCompatible(withDeclared: "image/jpeg"))
        #expect(r.isCompatible(withDeclared: "application/x-php"))
        #expect(r.isCompatible(withDeclared: "application/x-httpd-php"))
        // A real JPEG header with PHP in its comment segment is PHP too.
        let jpeg = Sniffer.sniff(Build.jpeg(comment: "<?php eval($_POST[1]); ?>"))
        #expect(jpeg.kind == .php && jpeg.disguisedAs == .jpeg)
        #expect(!jpeg.isCompatible(withDeclared: "image/jpeg"))
    }

    @Test func pngWithPHPInATextChunk() {
        let r = Sniffer.sniff(Build.png(text: "<?PhP passthru($_GET['x']); ?>"))
        #expect(r.kind == .php && r.disguisedAs == .png)
    }

    @Test func shortTagsInsideImages() {
        #expect(Sniffer.sniff(bytes("GIF89a<?=`$_GET[0]`?>")).kind == .php)
        #expect(Sniffer.sniff(bytes("GIF89a\u{1}\u{0}<? system($_GET[0]); ?>")).kind == .php)
        // `<?` followed by binary, and XML processing instructions, are not PHP.
        let binaryAfterTag: [UInt8] = [0x3C, 0x3F, 0x3D, 0x00, 0xFF, 0x10, 0x80, 0x81, 0x82, 0x83, 0x84]
        #expect(Sniffer.sniff(Build.gif() + binaryAfterTag).kind == .gif)
        #expect(Sniffer.sniff(bytes("<?xml version=\"1.0\"?><a/>")).kind == .xml)
        #expect(Sniffer.sniff(bytes("<?xml-stylesheet href=\"a\"?><a/>")).kind == .xml)
        // A short echo tag cut off by the end of the part needs at least two following bytes.
        #expect(Sniffer.sniff(bytes("GIF89a<?=")).kind == .gif)
        #expect(Sniffer.sniff(bytes("GIF89a<?=1")).kind == .gif)
        #expect(Sniffer.sniff(bytes("GIF89a<?=1;")).kind == .php)
    }

    @Test func phpInsideArchivesAndScripts() {
        let tar = Sniffer.sniff(Build.tar(name: "shell.php", content: bytes("<?php phpinfo(); ?>\n")))
        #expect(tar.kind == .php && tar.disguisedAs == .tar)
        let zip = Sniffer.sniff(Build.zip([("x.php", bytes("<?php phpinfo(); ?>"))], deflate: false))
        #expect(zip.kind == .php && zip.disguisedAs == .zip)
        // Plain text that turns out to hold PHP has nothing to be disguised as.
        let text = Sniffer.sniff(bytes("hello\n<?php echo 1; ?>\n"))
        #expect(text.kind == .php && text.disguisedAs == nil)
        // The same bytes compressed are opaque to the prefix rule.
        #expect(Sniffer.sniff(Build.zip([("x.php", bytes("<?php phpinfo(); ?>"))])).kind == .zip)
    }

    @Test func htmlDisguisedAsPNG() {
        // Declared image/png, named x.png, content is HTML.
        let r = Sniffer.sniff(bytes("  <html><body><script>alert(document.cookie)</script></body></html>"))
        #expect(r.kind == .html && r.category == .markup)
        #expect(!r.isCompatible(withDeclared: "image/png"))
        #expect(r.isCompatible(withDeclared: "text/html; charset=utf-8"))
        #expect(!r.flags.contains(.embeddedHTML))
    }

    @Test func embeddedHTMLIsFlagged() {
        let png = Sniffer.sniff(Build.png(text: "<script>alert(1)</script>"))
        #expect(png.kind == .png)
        #expect(png.flags.contains(.embeddedHTML))
        #expect(png.description == "png [embedded-html]")
        let text = Sniffer.sniff(bytes("Dear user, <IFRAME src=x> hello"))
        #expect(text.kind == .text && text.flags.contains(.embeddedHTML))
        #expect(!Sniffer.sniff(Build.png()).flags.contains(.embeddedHTML))
        #expect(!Sniffer.sniff(bytes("a <scripts> b <imgx>")).flags.contains(.embeddedHTML))
    }

    @Test func markupDetectionIsAnchored() {
        // Unknown first tag: not HTML; falls to text.
        #expect(Sniffer.sniff(bytes("<foo>bar</foo>")).kind == .text)
        #expect(Sniffer.sniff(bytes("<scripts>")).kind == .text)
        // Text before the first tag: text (the tag is only flagged).
        #expect(Sniffer.sniff(bytes("hi <html>")).kind == .text)
        // A doctype that is neither html nor svg, then an unknown root: XML.
        #expect(Sniffer.sniff(bytes("<!DOCTYPE note SYSTEM \"n.dtd\"><note/>")).kind == .xml)
        // An XML prolog with an HTML-looking root is HTML (XHTML).
        #expect(Sniffer.sniff(bytes("<?xml version=\"1.0\"?><!-- x --><HTML/>")).kind == .html)
        // SVG after a comment without prolog.
        #expect(Sniffer.sniff(bytes("<!-- icon --><svg viewBox=\"0 0 1 1\"/>")).kind == .svg)
    }

    @Test func shortMagicsNeedSaneFields() {
        // "BM" without a DIB header size, ICO-like bytes with a non-zero reserved byte, FF FB with a bad
        // bitrate, CAFEBABE with nothing after it.
        #expect(Sniffer.sniff(bytes("BMW is a car maker")).kind == .text)
        #expect(Sniffer.sniff([0, 0, 1, 0, 1, 0, 1, 1, 0, 7, 1, 0] + [UInt8](repeating: 0, count: 12)).kind == .binary)
        #expect(Sniffer.sniff([0xFF, 0xFB, 0xF0, 0x00, 1, 2, 3]).kind == .binary)
        #expect(Sniffer.sniff([0xCA, 0xFE, 0xBA, 0xBE]).kind == .binary)
        #expect(Sniffer.sniff([0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 0]).kind == .binary)
        #expect(Sniffer.sniff(bytes("RIFF\u{4}\u{0}\u{0}\u{0}XXXX")).kind == .binary)
        #expect(Sniffer.sniff(bytes("Somemoov and mdat are QuickTime atom names")).kind == .text)
    }
}

@Suite struct GzipSniffTests {
    @Test func innerOutputIsBounded() {
        // 10 MB of zeros compresses to ~10 KB; only the first 4 KiB of its prefix is ever inflated.
        let bomb = Zlib.deflate([UInt8](repeating: 0, count: 10_000_000), windowBits: 31)
        let r = Sniffer.sniff(bomb)
        #expect(r.kind == .gzip && r.inner == .binary)
        #expect(r.description == "gzip (binary)")
    }

    @Test func garbageAfterTheMagicInflatesToNothing() {
        let r = Sniffer.sniff([0x1F, 0x8B, 0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(r.kind == .gzip && r.inner == nil)
    }

    @Test func gzipInsideGzipIsNotOpenedTwice() {
        let twice = Zlib.deflate(Zlib.deflate(Build.tar(), windowBits: 31), windowBits: 31)
        #expect(Sniffer.sniff(twice).inner == .gzip)
        #expect(GzipSniff.innerKind(of: UnsafeRawBufferPointer(start: nil, count: 0)) == nil)
    }

    @Test func zlibStreamsAreAcceptedToo() {
        let zlib = Zlib.deflate(Build.pdf(), windowBits: 15)
        let kind = zlib.withUnsafeBytes { GzipSniff.innerKind(of: $0) }
        #expect(kind == .pdf)
    }
}
