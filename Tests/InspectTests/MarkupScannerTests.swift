import CLinux
import TestRandom
import Testing
@testable import Inspect

/// `MarkupScanner`: what counts as embedded markup anywhere in a part, and that slicing never changes the verdict.
@Suite struct MarkupScannerTests {
    private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    /// The verdict of feeding `data` in the given slices (sizes; the rest in one last slice).
    private func verdict(_ data: [UInt8], slices: [Int] = [], html: Bool? = true, shortTags: Bool = false)
        -> MarkupFinding? {
        var scanner = MarkupScanner(phpShortTags: shortTags)
        if let html { scanner.judgeHTML(html) }
        var at = 0
        data.withUnsafeBytes { all in
            for size in slices where at < all.count {
                let end = min(all.count, at + size)
                scanner.feed(UnsafeRawBufferPointer(rebasing: all[at..<end]))
                #expect(scanner.carriedCount <= MarkupScanner.lookahead)
                at = end
            }
            scanner.feed(UnsafeRawBufferPointer(rebasing: all[at...]))
        }
        scanner.finish()
        return scanner.finding
    }

    /// 5 KiB of binary that holds no markup: `<` bytes followed by non-printable ones, and near misses.
    private static let filler: [UInt8] = {
        var rng = SplitMix64(seed: 53)
        var out: [UInt8] = []
        while out.count < 5 * 1024 {
            let b = UInt8(truncatingIfNeeded: rng.next())
            out.append(b)
            if b == 0x3C { out.append(0x80) }  // a `<` is never followed by a printable run here
        }
        return out
    }()

    private static let payloads: [(String, MarkupFinding.Kind, String)] = [
        ("<?php system($_GET['c']); ?>", .php, "<?php"),
        ("<?PHP\nsystem($_GET['c']);", .php, "<?php"),
        ("<?=`$_GET[0]`?>", .php, "<?="),
        ("<% eval request(\"c\") %>", .asp, "<%"),
        ("<%@ Page Language=\"C#\" %><% Response.Write(1); %>", .asp, "<%"),
        ("<jsp:scriptlet>Runtime.getRuntime().exec(x);</jsp:scriptlet>", .jsp, "<jsp:"),
        ("<cfexecute name=\"cmd.exe\" arguments=\"/c dir\">", .coldFusion, "<cfexecute"),
        ("<CFSCRIPT>x = 1;</CFSCRIPT>", .coldFusion, "<cfscript"),
        ("<!--#exec cmd=\"id\" -->", .ssi, "<!--#exec"),
        ("<!--#include virtual=\"/cgi-bin/x\" -->", .ssi, "<!--#include"),
        ("<script>alert(document.cookie)</script>", .html, "<script"),
        ("<svg/onload=alert(1)>", .html, "<svg"),
        ("<img src=x onerror=alert(1)>", .html, "<img"),
    ]

    @Test func everyFormIsFoundDeepInBinary() {
        for (payload, kind, token) in Self.payloads {
            let data = Self.filler + bytes(payload) + [0x00, 0xFF] + Self.filler
            let found = verdict(data)
            #expect(found?.kind == kind, "\(payload)")
            #expect(found?.token == token, "\(payload)")
            #expect(found?.offset == UInt64(Self.filler.count), "\(payload)")
        }
        #expect(verdict(Self.filler + Self.filler) == nil)
    }

    @Test func nearMissesAreNotMarkup() {
        let clean = [
            "<?xml version=\"1.0\"?>", "<?phpinfo", "<?php", "<%\u{0}abcdefghijklmnopq", "<%abc\u{1}", "<jsp:1",
            "<cf>", "<cfab>", "<cfabcdefghijklmnopq>", "<cfx\u{0}", "<!--#echo var=\"x\" -->", "<scripts>",
            "<imgx src=a>", "<a href=x>", "<?= \u{0}\u{1}", "<?=123456789", "<cfscript>", "<cfset x\u{0}",
        ]
        for text in clean {
            // `<?php` at the very end of a part is PHP (PHP 8 accepts it); followed by binary it is not.
            let data = Self.filler + bytes(text) + [0x00] + Self.filler
            #expect(verdict(data) == nil, "\(text)")
        }
        #expect(verdict(bytes("abc <?php")).map(\.token) == "<?php")
    }

    @Test func shortOpenTagOnlyWhenAsked() {
        let data = Self.filler + bytes("<? system($_GET['c']); ?>") + [0]
        #expect(verdict(data) == nil)
        #expect(verdict(data, shortTags: true)?.token == "<?")
    }

    @Test func htmlCountsOnlyWhenJudged() {
        let data = bytes("<html><body><script>alert(1)</script></body></html>")
        #expect(verdict(data, html: false) == nil)
        #expect(verdict(data, html: nil) == nil)
        #expect(verdict(data, html: true)?.token == "<html")
        // Decided after the tag was seen: kept when HTML counts.
        var scanner = MarkupScanner()
        data.withUnsafeBytes { scanner.feed($0) }
        #expect(scanner.finding == nil)
        scanner.judgeHTML(true)
        #expect(scanner.finding?.token == "<html")
        // Server-side markup counts in markup too.
        #expect(verdict(bytes("<html><?php echo 1; ?></html>"), html: false)?.token == "<?php")
    }

    @Test func everySplitPointGivesTheSameVerdict() {
        for (payload, _, _) in Self.payloads {
            let data = Array(Self.filler.suffix(40)) + bytes(payload) + [0x00] + Array(Self.filler.prefix(40))
            let whole = verdict(data)
            #expect(whole != nil)
            for split in 0...data.count {
                #expect(verdict(data, slices: [split]) == whole, "\(payload) split at \(split)")
            }
            #expect(verdict(data, slices: Array(repeating: 1, count: data.count)) == whole, "\(payload) byte by byte")
        }
    }

    @Test func slicingNeverChangesTheVerdict() {
        // Random bytes rich in `<`, tag fragments and printable runs, cut at random.
        var rng = SplitMix64(seed: 0x53)
        let pieces = ["<", "<?", "<?php", " ", "<%", "abcdefgh", "<jsp:", "<cf", "exec", ">", "<!--#", "include",
                      "<script", "/", "=", "\u{0}", "\u{FF}", "<svg", "\n"].map { Array($0.utf8) }
        for round in 0..<300 {
            var data: [UInt8] = []
            for _ in 0..<rng.below(60) {
                if rng.below(3) == 0 {
                    data.append(UInt8(truncatingIfNeeded: rng.next()))
                } else {
                    data += pieces[rng.below(pieces.count)]
                }
            }
            let short = round % 2 == 0
            let whole = verdict(data, shortTags: short)
            var slices: [Int] = []
            var left = data.count
            while left > 0 {
                let n = 1 + rng.below(min(left, 30))
                slices.append(n)
                left -= n
            }
            #expect(verdict(data, slices: slices, shortTags: short) == whole, "round \(round): \(data)")
        }
    }

    /// The shim's filter lets through every `<` that starts a form the scan matches, in either case, at any
    /// position of a buffer (the vector loop and the tail).
    @Test func quickFilterKeepsEveryForm() {
        let initials = SniffClassifier.activeTags.map { $0.utf8Start.pointee } + Array("?%!jc".utf8)
        for b in initials + initials.map({ $0 >= 0x61 ? $0 - 0x20 : $0 }) {
            for at in [0, 5, 63, 64, 100, 198] {
                var data = [UInt8](repeating: 0x3C, count: 200)
                for k in stride(from: 1, to: 200, by: 2) { data[k] = 0x80 }
                for k in 0..<at where data[k] == 0x3C { data[k] = 0x3D }
                data[at] = 0x3C
                data[at + 1] = b
                let found = data.withUnsafeBytes { raw in
                    cl_find_markup_open(raw.baseAddress, raw.count).map { UnsafeRawPointer($0) - raw.baseAddress! }
                }
                #expect(found == at, "\(b) at \(at)")
            }
        }
        let none: [UInt8] = Array(repeating: 0, count: 300).enumerated().map { $0.offset % 2 == 0 ? 0x3C : 0x61 }
        #expect(none.withUnsafeBytes { cl_find_markup_open($0.baseAddress, $0.count) } == nil)
        // A `<` as the last byte comes back: what follows it is in the next slice.
        #expect(none.dropLast().withUnsafeBytes { cl_find_markup_open($0.baseAddress, $0.count) } != nil)
    }

    @Test func randomBinaryHoldsNoMarkup() {
        // 16 MiB of random bytes in 64 KiB slices: every `<` is looked at, none is markup.
        var rng = SplitMix64(seed: 0x5EED)
        var scanner = MarkupScanner(phpShortTags: true)
        scanner.judgeHTML(true)
        var slice = [UInt8](repeating: 0, count: 64 * 1024)
        for _ in 0..<256 {
            for i in stride(from: 0, to: slice.count, by: 8) {
                let word = rng.next()
                for k in 0..<8 { slice[i + k] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(k))) }
            }
            slice.withUnsafeBytes { scanner.feed($0) }
        }
        scanner.finish()
        #expect(scanner.finding == nil)
    }
}
