import CZlib
import Testing
@testable import Inspect
import TestRandom

// Disarm: JPEG, PNG, GIF, WebP and SVG samples built here, fed whole, byte by byte and split at every offset (identical
// output required); every attack stripped in .strip mode and thrown in .reject mode; truncated and mutated
// inputs throw and never trap.

/// What one run produced: the output and the `removed` list.
private struct Outcome: Equatable, CustomStringConvertible {
    var output: [UInt8]
    var removed: [String]
    var description: String { "\(removed) \(String(decoding: output, as: UTF8.self).prefix(400))" }
}

/// Feeds `input` to a fresh disarmer in the pieces that `cuts` (ascending offsets) delimit.
private func disarm(
    _ input: [UInt8], _ kind: DisarmKind, mode: SVGMode = .strip, cuts: [Int] = []
) throws(DisarmError) -> Outcome {
    let disarmer = makeDisarmer(for: kind, svgMode: mode)
    var out: [UInt8] = []
    var start = 0
    for cut in cuts + [input.count] where cut >= start {
        try feed(disarmer, Array(input[start..<min(cut, input.count)]), into: &out)
        start = min(cut, input.count)
    }
    try disarmer.finish { out.append(contentsOf: $0) }
    for patch in disarmer.patches {
        out.replaceSubrange(patch.offset..<patch.offset + patch.bytes.count, with: patch.bytes)
    }
    return Outcome(output: out, removed: disarmer.removed)
}

/// The outcome (or error description) of a run, for comparing splits of inputs that may be malformed.
private func result(_ input: [UInt8], _ kind: DisarmKind, mode: SVGMode = .strip, cuts: [Int] = []) -> String {
    do {
        return "ok \(try disarm(input, kind, mode: mode, cuts: cuts))"
    } catch {
        return "error"
    }
}

/// Asserts that whole, byte-by-byte and every two-piece split give the same outcome; returns it.
@discardableResult
private func disarmEverySplit(
    _ input: [UInt8], _ kind: DisarmKind, mode: SVGMode = .strip, sourceLocation: SourceLocation = #_sourceLocation
) throws -> Outcome {
    let whole = try disarm(input, kind, mode: mode)
    #expect(try disarm(input, kind, mode: mode, cuts: Array(0..<input.count)) == whole, sourceLocation: sourceLocation)
    for cut in 0...input.count {
        let split = try disarm(input, kind, mode: mode, cuts: [cut])
        #expect(split == whole, "cut at \(cut)", sourceLocation: sourceLocation)
        if split != whole { break }
    }
    return whole
}

private func ascii(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Feeds one piece, appending the output to `out`.
private func feed(_ disarmer: Disarmer, _ piece: [UInt8], into out: inout [UInt8]) throws(DisarmError) {
    let failure: DisarmError? = piece.withUnsafeBytes { raw in
        do throws(DisarmError) {
            try disarmer.feed(raw) { out.append(contentsOf: $0) }
            return nil
        } catch {
            return error
        }
    }
    if let failure { throw failure }
}

// MARK: - ICC profiles and payloads

/// The web shell the issue's corpus hides in images.
private let shell = ascii("<?php system($_GET['c']); ?>")

/// Whether `data` holds `<?php` anywhere.
private func carriesShell(_ data: [UInt8]) -> Bool {
    let tag = ascii("<?php")
    guard data.count >= tag.count else { return false }
    return (0...data.count - tag.count).contains { data[$0..<$0 + tag.count].elementsEqual(tag) }
}

/// A minimal well-formed ICC profile: a 128-byte header ("acsp" at 36), one `desc` tag holding `text`, and
/// `padding` zero bytes after it.
private func iccProfile(_ text: String, padding: Int = 0) -> [UInt8] {
    let tag = ascii("desc") + [0, 0, 0, 0] + ascii(text)
    let size = 128 + 4 + 12 + tag.count + padding
    var p = be32(UInt32(size)) + ascii("none") + [2, 0x10, 0, 0] + ascii("mntrRGB XYZ ")
    p += Array(repeating: 0, count: 12) + ascii("acsp")
    p += Array(repeating: 0, count: 128 - p.count)
    p += be32(1) + ascii("desc") + be32(144) + be32(UInt32(tag.count))
    return p + tag + Array(repeating: 0, count: padding)
}

// MARK: - JPEG samples

private func segment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] {
    let length = payload.count + 2
    return [0xFF, marker, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
}

/// APP1 EXIF, big-endian ("MM") or little-endian ("II"), IFD0 with Make and (optionally) the GPS IFD pointer.
private func exif(littleEndian: Bool, gps: Bool) -> [UInt8] {
    func u16(_ v: Int) -> [UInt8] { littleEndian ? [UInt8(v & 0xFF), UInt8(v >> 8)] : [UInt8(v >> 8), UInt8(v & 0xFF)] }
    func u32(_ v: Int) -> [UInt8] { littleEndian ? u16(v & 0xFFFF) + u16(v >> 16) : u16(v >> 16) + u16(v & 0xFFFF) }
    var tiff: [UInt8] = littleEndian ? [0x49, 0x49] : [0x4D, 0x4D]
    tiff += u16(42) + u32(8)
    let entries = gps ? 2 : 1
    tiff += u16(entries)
    tiff += u16(0x010F) + u16(2) + u32(4) + ascii("Cano")  // Make
    if gps { tiff += u16(0x8825) + u16(4) + u32(1) + u32(8 + 2 + 12 * entries + 4) }
    tiff += u32(0)  // no IFD1
    if gps {  // GPS IFD: GPSLatitudeRef "N"
        tiff += u16(1) + u16(0x0001) + u16(2) + u32(2) + ascii("N\0\0\0") + u32(0)
    }
    return segment(0xE1, ascii("Exif\0\0") + tiff)
}

private let soi: [UInt8] = [0xFF, 0xD8]
private let eoi: [UInt8] = [0xFF, 0xD9]
private let app0 = segment(0xE0, ascii("JFIF\0") + [1, 1, 0, 0, 1, 0, 1, 0, 0])
private let icc = segment(0xE2, ascii("ICC_PROFILE\0") + [1, 1] + iccProfile("sRGB IEC61966-2.1"))
private let adobe = segment(0xEE, ascii("Adobe") + [0, 100, 0, 0, 0, 0, 1])
private let xmp = segment(0xE1, ascii("http://ns.adobe.com/xap/1.0/\0<x:xmpmeta/>"))
private let iptc = segment(0xED, ascii("Photoshop 3.0\0") + ascii("8BIM") + [4, 4, 0, 0, 0, 0, 0, 0])
private let mpf = segment(0xE2, ascii("MPF\0") + [0, 0, 0, 0])
private let comment = segment(0xFE, ascii("taken at home, 48.85N 2.35E"))
private let dqt = segment(0xDB, [0x00] + (1...64).map { UInt8($0) })
private let sof0 = segment(0xC0, [8, 0, 16, 0, 16, 1, 1, 0x11, 0])
private let dht = segment(0xC4, [0x00] + [0, 1] + Array(repeating: 0, count: 14) + [0x05])
private let dri = segment(0xDD, [0, 4])
private let sos = segment(0xDA, [1, 1, 0x00, 0, 63, 0])
private let entropy: [UInt8] = [0x12, 0x34, 0xFF, 0x00, 0x56, 0xFF, 0xD0, 0x78, 0xFF, 0x00, 0x9A, 0xFF, 0xD1, 0xBC]

private let jpeg = soi + app0 + exif(littleEndian: false, gps: true) + comment + icc + adobe + dqt + sof0 + dht + dri
    + sos + entropy + eoi
private let jpegKept = soi + app0 + icc + adobe + dqt + sof0 + dht + dri + sos + entropy + eoi

// MARK: - PNG samples

private func crc(_ data: [UInt8]) -> UInt32 {
    UInt32(data.withUnsafeBytes { crc32(0, $0.baseAddress?.assumingMemoryBound(to: Bytef.self), uInt($0.count)) })
}

private func be32(_ v: UInt32) -> [UInt8] {
    [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
}

private func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
    be32(UInt32(data.count)) + ascii(type) + data + be32(crc(ascii(type) + data))
}

private let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
private let ihdr = chunk("IHDR", be32(1) + be32(1) + [8, 2, 0, 0, 0])
private let text = chunk("tEXt", ascii("Comment\0shot at 48.85N 2.35E"))
private let ztxt = chunk("zTXt", ascii("Author\0\0") + [0x78, 0x9C, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01])
private let itxt = chunk("iTXt", ascii("Description\0\0\0en\0\0hello"))
private let exifChunk = chunk("eXIf", ascii("MM\0*\0\0\0\u{8}\0\0"))
private let gama = chunk("gAMA", be32(45455))
private let idat = chunk("IDAT", [0x78, 0x9C, 0x63, 0xF8, 0xCF, 0xC0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00])
private let iend = chunk("IEND", [])
private let png = pngSignature + ihdr + text + gama + exifChunk + idat + ztxt + itxt + iend
private let pngKept = pngSignature + ihdr + gama + idat + iend

/// An iCCP chunk: profile name, NUL, method 0, the zlib-compressed profile.
private func iccpChunk(_ profile: [UInt8]) -> [UInt8] {
    var packed = [UInt8](repeating: 0, count: profile.count + 64)
    var length = uLongf(packed.count)
    _ = packed.withUnsafeMutableBytes { out in
        profile.withUnsafeBytes { input in
            compress(out.baseAddress?.assumingMemoryBound(to: Bytef.self), &length,
                     input.baseAddress?.assumingMemoryBound(to: Bytef.self), uLong(input.count))
        }
    }
    return chunk("iCCP", ascii("ICC\0") + [0] + Array(packed.prefix(Int(length))))
}

// MARK: - GIF samples

/// `data` as GIF sub-blocks (at most 255 bytes each) and the terminator.
private func subBlocks(_ data: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    var at = 0
    while at < data.count {
        let n = min(255, data.count - at)
        out += [UInt8(n)] + data[at..<at + n]
        at += n
    }
    return out + [0]
}

/// Header, 1×1 screen with a two-colour global table.
private let gifHeader = ascii("GIF89a") + [1, 0, 1, 0, 0x80, 0, 0] + [0, 0, 0, 255, 255, 255]
private let gifControl: [UInt8] = [0x21, 0xF9, 4, 1, 10, 0, 0, 0]
private let gifLoop: [UInt8] = [0x21, 0xFF, 11] + ascii("NETSCAPE2.0") + [3, 1, 0, 0, 0]
/// A 1×1 image with a two-colour local table and its LZW data.
private let gifImage: [UInt8] = [0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0x80, 0, 0, 0, 9, 9, 9, 2, 2, 0x4C, 0x01, 0]
private let gifComment: [UInt8] = [0x21, 0xFE] + subBlocks(shell)
private let gifXMP: [UInt8] = [0x21, 0xFF, 11] + ascii("XMP DataXMP")
    + subBlocks(shell + Array(repeating: 0x20, count: 300))
private let gifPlainText: [UInt8] = [0x21, 0x01, 12] + Array(repeating: 0, count: 12) + subBlocks(shell)

// MARK: - WebP samples

private func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }

/// A RIFF chunk with its pad byte.
private func riffChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
    ascii(type) + le32(data.count) + data + (data.count % 2 == 1 ? [0] : [])
}

/// A WebP file: the RIFF header (size from `chunks`) and `chunks`.
private func webp(_ chunks: [UInt8]) -> [UInt8] { ascii("RIFF") + le32(chunks.count + 4) + ascii("WEBP") + chunks }

/// VP8X with `flags` (0x20 ICC, 0x10 alpha, 0x08 EXIF, 0x04 XMP, 0x02 animation) and a 1×1 canvas.
private func vp8x(_ flags: UInt8) -> [UInt8] { riffChunk("VP8X", [flags, 0, 0, 0, 0, 0, 0, 0, 0, 0]) }

private let vp8 = riffChunk("VP8 ", [0x30, 0x01, 0x00, 0x9D, 0x01, 0x2A, 1, 0, 1, 0, 0x11])
private let alph = riffChunk("ALPH", [0, 0xFF])
private let anim = riffChunk("ANIM", [0, 0, 0, 0, 0, 0])
private let anmf = riffChunk("ANMF", Array(repeating: 0, count: 16) + alph + vp8)

/// Walks `data` as a PNG and checks every chunk's CRC independently of the disarmer.
private func chunkTypesWithValidCRCs(_ data: [UInt8]) -> [String]? {
    guard data.starts(with: pngSignature) else { return nil }
    var i = 8
    var types: [String] = []
    while i + 12 <= data.count {
        let length = Int(data[i..<i + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        guard i + 12 + length <= data.count else { return nil }
        let body = Array(data[i + 4..<i + 8 + length])
        let stored = data[i + 8 + length..<i + 12 + length].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard stored == crc(body) else { return nil }
        types.append(String(decoding: body[0..<4], as: UTF8.self))
        i += 12 + length
    }
    return i == data.count ? types : nil
}

// MARK: - SVG samples

private let cleanSVG = """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
    <svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="10" height="10">
    <!-- a comment with <script> inside is only a comment -->
    <defs><linearGradient id="g"><stop offset="0" stop-color='#f00'/></linearGradient></defs>
    <rect width="10" height="10" fill="url(#g)" title="a > b"/>
    <use xlink:href="#g"/><use href = ' #g '/>
    <image href="data:image/png;base64,iVBORw0KGgo=" width="1" height="1"/>
    <text x="1" y="2">1 &lt; 2 &amp; <tspan>on</tspan></text>
    <style><![CDATA[ rect { fill: red } ]]></style>
    </svg>

    """

/// Attacks: input, what strip mode must leave, and the names `removed` must list.
private let svgAttacks: [(String, String, [String])] = [
    ("<svg><script>alert(1)</script><rect/></svg>", "<svg><rect/></svg>", ["script"]),
    (
        "<svg><script type=\"text/javascript\"><![CDATA[ if (a < b) alert(1) ]]></script><g/></svg>",
        "<svg><g/></svg>", ["script"]
    ),
    ("<svg><script href=\"http://evil.example/x.js\"/><g/></svg>", "<svg><g/></svg>", ["script"]),
    ("<svg onload=\"alert(1)\" width=\"1\"><g/></svg>", "<svg width=\"1\"><g/></svg>", ["onload"]),
    (
        "<svg><SCRIPT>alert(1)</SCRIPT><svg:Script>alert(2)</svg:Script><rect OnClick = 'x()' /></svg>",
        "<svg><rect /></svg>", ["script", "onclick"]
    ),
    ("<svg\n  onload\n=\n\"alert(1)\"\n\t>x</svg>", "<svg\n\t>x</svg>", ["onload"]),
    ("<svg/onload=alert(1)>x</svg>", "<svg>x</svg>", ["onload"]),
    ("<svg o&#110;load=\"alert(1)\">x</svg>", "<svg>x</svg>", ["onload"]),
    (
        "<svg><a xlink:href=\"javascript:alert(1)\"><text>x</text></a></svg>",
        "<svg><a><text>x</text></a></svg>", ["javascript-href"]
    ),
    ("<svg><a href=\"&#106;avascript:alert(1)\">x</a></svg>", "<svg><a>x</a></svg>", ["javascript-href"]),
    ("<svg><a href=\"&#x6A;ava&#x09;script&colon;alert(1)\">x</a></svg>", "<svg><a>x</a></svg>", ["javascript-href"]),
    ("<svg><a HREF=' JaVaScRiPt:alert(1)'>x</a></svg>", "<svg><a>x</a></svg>", ["javascript-href"]),
    ("<svg><a href=javascript:alert(1)>x</a></svg>", "<svg><a>x</a></svg>", ["javascript-href"]),
    (
        "<svg><image href=\"http://evil.example/track.png\"/><use xlink:href='https://evil.example/a.svg#x'/></svg>",
        "<svg><image/><use/></svg>", ["external-href"]
    ),
    ("<svg><image href=\"data:image/svg+xml;base64,PHN2Zz4=\"/></svg>", "<svg><image/></svg>", ["external-href"]),
    (
        "<svg><foreignObject width=\"1\"><body xmlns=\"http://www.w3.org/1999/xhtml\"><iframe src=\"x\"/></body>"
            + "</foreignObject><g/></svg>",
        "<svg><g/></svg>", ["foreignObject"]
    ),
    (
        "<?xml version=\"1.0\"?>\n<!DOCTYPE svg [ <!ENTITY lol \"lol\"> <!ENTITY lol2 \"&lol;&lol;\"> ]>\n<svg>x</svg>",
        "<?xml version=\"1.0\"?>\n\n<svg>x</svg>", ["entity"]
    ),
    (
        "<!DOCTYPE svg [ <!ENTITY xxe SYSTEM \"file:///etc/passwd\"> ]><svg>x</svg>", "<svg>x</svg>", ["entity"]
    ),
    ("<!ENTITY x \"y\"><svg>x</svg>", "<svg>x</svg>", ["entity"]),
    (
        "<svg><a><set attributeName=\"href\" to=\"javascript:alert(1)\"/><text>x</text></a></svg>",
        "<svg><a><text>x</text></a></svg>", ["animation"]
    ),
    (
        "<svg><animate attributeName=\"xlink:href\" values=\"javascript:alert(1)\"><g/></animate>y</svg>",
        "<svg>y</svg>", ["animation"]
    ),
    (
        "<?xml-stylesheet type=\"text/xsl\" href=\"http://evil.example/x.xsl\"?><svg>x</svg>", "<svg>x</svg>",
        ["xml-stylesheet"]
    ),
    (
        "<svg><script><script>nested</script>still script</script><g/></svg>", "<svg><g/></svg>", ["script"]
    ),
    (
        "<svg><h:iframe xmlns:h=\"http://www.w3.org/1999/xhtml\" src=\"javascript:alert(1)\"/><h:meta "
            + "http-equiv=\"refresh\" content=\"0;url=javascript:alert(1)\"></h:meta>x</svg>",
        "<svg>x</svg>", ["iframe", "meta"]
    ),
    (
        "<svg xml:base=\"javascript:alert(1)//\"><a href=\"#x\">x</a></svg>", "<svg><a href=\"#x\">x</a></svg>",
        ["xml-base"]
    ),
    ("<?foo ><img src=x onerror=alert(1)>?><svg>x</svg>", "<svg>x</svg>", ["processing-instruction"]),
    (
        "<!DOCTYPE svg PUBLIC \"><img src=x onerror=alert(1)>\" \"x\"><svg>x</svg>", "<svg>x</svg>", ["doctype"]
    ),
]

/// Rewrites that close HTML-parser differentials without removing anything: input, strip-mode output.
private let svgRewrites: [(String, String)] = [
    (
        "<svg><style><![CDATA[ a > b { } <x> ]]></style></svg>",
        "<svg><style><![CDATA[ a > b { } ]]>&lt;<![CDATA[x> ]]></style></svg>"
    ),
    (
        "<svg><![CDATA[><img src=x onerror=alert(1)>]]></svg>",
        "<svg><![CDATA[>]]>&lt;<![CDATA[img src=x onerror=alert(1)>]]></svg>"
    ),
    ("<svg></a title=\"><img src=x onerror=alert(1)>\"></svg  >", "<svg></a></svg>"),
    ("<svg></ a=\"><img src=x onerror=alert(1)>\"></svg>", "<svg></a></svg>"),
]

// MARK: - Tests

@Suite struct DisarmTests {
    /// The `Disarmer` contract: after an error the disarmer stays failed, and every later call throws that first
    /// error again, whether it came from `feed` (bad bytes) or `finish` (a truncated file).
    @Test(arguments: [
        (DisarmKind.jpeg, "GIF89a"), (.png, "GIF89a"), (.gif, "GIF89b0000000"), (.webp, "RIFF\0\0\0\0WAVE"),
        (.svg, "<svg>\u{0}"),
    ])
    func anErrorSticks(kind: DisarmKind, bad: String) throws {
        var out: [UInt8] = []
        let broken = makeDisarmer(for: kind)
        var fed: DisarmError?
        do { try feed(broken, ascii(bad), into: &out) } catch { fed = error }
        let first = try #require(fed, "\(kind): bad bytes were accepted")
        for call in 0..<3 {
            do {
                if call < 2 { try feed(broken, ascii("<svg/>"), into: &out) } else { try broken.finish { _ in } }
                Issue.record("\(kind): call \(call) after the error did not throw")
            } catch {
                #expect(error.description == first.description, "\(kind): call \(call)")
            }
        }
        let truncated = makeDisarmer(for: kind)
        let starts: [DisarmKind: [UInt8]] = [
            .svg: ascii("<svg"), .png: pngSignature, .jpeg: [0xFF, 0xD8], .gif: gifHeader,
            .webp: Array(webp(vp8).dropLast(2)),
        ]
        let start = starts[kind] ?? []
        try feed(truncated, start, into: &out)
        var ended: DisarmError?
        do { try truncated.finish { _ in } } catch { ended = error }
        let endError = try #require(ended, "\(kind): a truncated file finished cleanly")
        do {
            try feed(truncated, [0x00], into: &out)
            Issue.record("\(kind): feed after a failed finish did not throw")
        } catch {
            #expect(error.description == endError.description, "\(kind)")
        }
    }

    @Test func jpegKeepsImageSegmentsAndDropsMetadata() throws {
        let out = try disarmEverySplit(jpeg, .jpeg)
        #expect(out.output == jpegKept)
        #expect(out.removed == ["exif", "gps", "comment"])
    }

    @Test func jpegNamesEveryDroppedSegment() throws {
        let input = soi + app0 + exif(littleEndian: true, gps: true) + xmp + iptc + mpf + icc
            + segment(0xE0, ascii("JFXX\0\u{10}")) + dqt + sof0 + sos + entropy + eoi + ascii("PK\u{3}\u{4}zip")
        let out = try disarmEverySplit(input, .jpeg)
        #expect(out.output == soi + app0 + icc + dqt + sof0 + sos + entropy + eoi)
        #expect(out.removed == ["exif", "gps", "xmp", "iptc", "app2", "app0", "trailing-data"])
    }

    @Test func jpegWithoutGPSAndWithMetadataBetweenScans() throws {
        // Progressive-style: a COM and a DHT between two scans; fill bytes before markers are not copied.
        let input = soi + exif(littleEndian: false, gps: false) + dqt + sof0 + dht + sos + entropy
            + [0xFF, 0xFF] + comment + dht + sos + entropy + [0xFF, 0xFF, 0xFF, 0xD9]
        let out = try disarmEverySplit(input, .jpeg)
        #expect(out.output == soi + dqt + sof0 + dht + sos + entropy + dht + sos + entropy + eoi)
        #expect(out.removed == ["exif", "comment"])
    }

    @Test func jpegStreamsPayloadsWithoutHoldingThem() throws {
        let big = segment(0xC4, Array(repeating: 0x11, count: 60_000))
        let input = soi + big + eoi
        let disarmer = makeDisarmer(for: .jpeg)
        var out: [UInt8] = []
        try feed(disarmer, Array(input[0..<30_000]), into: &out)
        #expect(out == Array(input[0..<30_000]))
    }

    @Test(arguments: [
        ("no SOI", [0x00, 0xD8] + app0 + eoi),
        ("truncated segment", soi + Array(app0.dropLast(3))),
        ("no EOI", soi + dqt + sos + entropy),
        ("length below 2", soi + [0xFF, 0xDB, 0x00, 0x01] + eoi),
        ("second SOI", soi + soi + eoi),
        ("reserved marker", soi + [0xFF, 0x02, 0x00, 0x02] + eoi),
        ("garbage between segments", soi + dqt + [0x00] + eoi),
        ("truncated SOS header", soi + Array(sos.prefix(5))),
        ("DRI not 2 bytes", soi + dqt + segment(0xDD, [0, 4] + shell) + sof0 + sos + entropy + eoi),
        ("SOF longer than its components", soi + dqt + segment(0xC0, [8, 0, 16, 0, 16, 1, 1, 0x11, 0] + shell) + eoi),
        ("SOF shorter than 6", soi + dqt + segment(0xC2, [8, 0, 16]) + eoi),
        ("SOS longer than its components", soi + dqt + sof0 + segment(0xDA, [1, 1, 0, 0, 63, 0] + shell) + eoi),
        ("SOS without its count", soi + dqt + sof0 + segment(0xDA, []) + eoi),
    ] as [(String, [UInt8])])
    func jpegMalformedThrows(name: String, input: [UInt8]) {
        #expect(throws: DisarmError.self, "\(name)") { try disarm(input, .jpeg) }
        #expect(throws: DisarmError.self, "\(name) byte by byte") {
            try disarm(input, .jpeg, cuts: Array(0..<input.count))
        }
    }

    @Test func pngDropsTextAndEXIFChunks() throws {
        let out = try disarmEverySplit(png, .png)
        #expect(out.output == pngKept)
        #expect(out.removed == ["tEXt", "eXIf", "zTXt", "iTXt"])
        #expect(chunkTypesWithValidCRCs(out.output) == ["IHDR", "gAMA", "IDAT", "IEND"])
    }

    @Test func pngDropsDataAfterIEND() throws {
        let out = try disarmEverySplit(png + ascii("<?php system($_GET['c']); ?>"), .png)
        #expect(out.output == pngKept)
        #expect(out.removed.last == "trailing-data")
    }

    @Test func pngStreamsLargeChunks() throws {
        let data = (0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let input = pngSignature + ihdr + chunk("IDAT", data) + iend
        let disarmer = makeDisarmer(for: .png)
        var out: [UInt8] = []
        var fed = 0
        while fed < input.count {
            let piece = Array(input[fed..<min(fed + 4096, input.count)])
            try feed(disarmer, piece, into: &out)
            fed += piece.count
            #expect(fed - out.count <= 12, "held \(fed - out.count) bytes")
        }
        try disarmer.finish { out.append(contentsOf: $0) }
        #expect(out == input)
    }

    @Test(arguments: [
        ("bad signature", [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x00] + ihdr + iend),
        ("bad CRC", pngSignature + ihdr + Array(idat.dropLast()) + [0x00] + iend),
        ("length over 2^31-1", pngSignature + ihdr + [0x80, 0, 0, 0] + ascii("IDAT") + iend),
        ("no IEND", pngSignature + ihdr + idat),
        ("truncated chunk", pngSignature + ihdr + Array(idat.prefix(10))),
        ("first chunk not IHDR", pngSignature + idat + ihdr + iend),
        ("type not letters", pngSignature + ihdr + chunk("ID1T", [1]) + iend),
        ("IEND with data", pngSignature + ihdr + chunk("IEND", [1])),
    ] as [(String, [UInt8])])
    func pngMalformedThrows(name: String, input: [UInt8]) {
        #expect(throws: DisarmError.self, "\(name)") { try disarm(input, .png) }
        #expect(throws: DisarmError.self, "\(name) byte by byte") {
            try disarm(input, .png, cuts: Array(0..<input.count))
        }
    }

    @Test func svgCleanDocumentPassesUnchanged() throws {
        for mode in [SVGMode.strip, .reject] {
            let out = try disarmEverySplit(ascii(cleanSVG), .svg, mode: mode)
            #expect(out.output == ascii(cleanSVG))
            #expect(out.removed == [])
        }
    }

    @Test func svgAttacksAreStripped() throws {
        for (input, expected, removed) in svgAttacks {
            let out = try disarmEverySplit(ascii(input), .svg)
            #expect(String(decoding: out.output, as: UTF8.self) == expected, "\(input)")
            #expect(out.removed == removed, "\(input)")
        }
    }

    @Test func svgAttacksInsideADocumentLeaveTheRestIntact() throws {
        // Every attack body spliced into the clean document before </svg>.
        let clean = ascii(cleanSVG)
        let close = clean.count - ascii("</svg>\n").count
        for (input, expected, _) in svgAttacks where input.hasPrefix("<svg>") && input.hasSuffix("</svg>") {
            let inner = ascii(String(input.dropFirst(5).dropLast(6)))
            let innerKept = ascii(String(expected.dropFirst(5).dropLast(6)))
            let out = try disarm(Array(clean[..<close]) + inner + Array(clean[close...]), .svg)
            #expect(out.output == Array(clean[..<close]) + innerKept + Array(clean[close...]), "\(input)")
        }
    }

    @Test func svgRewritesCloseHTMLParserGaps() throws {
        for mode in [SVGMode.strip, .reject] {
            for (input, expected) in svgRewrites {
                let out = try disarmEverySplit(ascii(input), .svg, mode: mode)
                #expect(String(decoding: out.output, as: UTF8.self) == expected, "\(input)")
                #expect(out.removed == [], "\(input)")
            }
        }
    }

    @Test func svgAttacksAreRejected() {
        for (input, _, removed) in svgAttacks {
            for cuts in [[], Array(0..<input.utf8.count)] {
                do {
                    _ = try disarm(ascii(input), .svg, mode: .reject, cuts: cuts)
                    Issue.record("not rejected: \(input)")
                } catch {
                    #expect(error.isRejection, "\(input)")
                    #expect(error.description.contains(removed[0]), "\(input): \(error)")
                }
            }
        }
    }

    @Test(arguments: [
        ("unterminated tag", "<svg><rect width=\"1\""),
        ("unterminated comment", "<svg><!-- never closed"),
        ("unterminated CDATA", "<svg><![CDATA[ x"),
        ("unterminated script", "<svg><script>alert(1)"),
        ("UTF-16", "\u{FEFF}<svg/>"),
        ("HTML-closable comment", "<svg><!--><script>alert(1)</script>--></svg>"),
        ("HTML-closable comment 2", "<svg><!---><script>alert(1)</script>--></svg>"),
        ("bang comment end", "<svg><!-- x --!><script>alert(1)</script>--></svg>"),
        ("end tag without name", "<svg></ ></svg>"),
    ])
    func svgMalformedThrows(name: String, input: String) {
        var data = ascii(input)
        if name == "UTF-16" { data = [0xFF, 0xFE] + ascii("<svg/>").flatMap { [$0, 0] } }
        #expect(throws: DisarmError.self, "\(name)") { try disarm(data, .svg) }
        #expect(throws: DisarmError.self, "\(name) byte by byte") {
            try disarm(data, .svg, cuts: Array(0..<data.count))
        }
    }

    @Test func svgTagLongerThanTheLimitThrows() throws {
        let long = ascii("<svg width=\"") + Array(repeating: UInt8(ascii: "1"), count: SVGDisarmer.maximumTagLength)
            + ascii("\"/>")
        let cuts = Array(stride(from: 0, to: long.count, by: 1000))
        #expect(throws: DisarmError.self) { try disarm(long, .svg, cuts: cuts) }
        let text = ascii("<svg>") + Array(repeating: UInt8(ascii: "t"), count: 200_000) + ascii("</svg>")
        #expect(try disarm(text, .svg).output == text)
    }

    @Test func removedListIsBounded() throws {
        let input = "<svg>" + (0..<1000).map { "<g on\($0)=\"x\"/>" }.joined() + "</svg>"
        let out = try disarm(ascii(input), .svg)
        #expect(out.removed.count == DisarmLog.limit + 1)
        #expect(out.removed.last == "more")
        let expected = "<svg>" + String(repeating: "<g/>", count: 1000) + "</svg>"
        #expect(String(decoding: out.output, as: UTF8.self) == expected)
    }

    @Test func errorsStickAfterTheFirstOne() {
        let disarmer = makeDisarmer(for: .png)
        var out: [UInt8] = []
        for _ in 0..<2 {
            #expect(throws: DisarmError.self) { try feed(disarmer, [1, 2, 3], into: &out) }
        }
        #expect(throws: DisarmError.self) { try disarmer.finish { _ in } }
    }

    @Test func mutationsNeverTrapAndDoNotDependOnSplits() {
        var rng = SplitMix(seed: 0xD15A_2A11)
        let samples: [(DisarmKind, [UInt8])] = [
            (.jpeg, jpeg), (.png, png), (.svg, ascii(cleanSVG)), (.svg, ascii(svgAttacks.map(\.0).joined())),
            (.gif, gifHeader + gifControl + gifLoop + gifComment + gifImage + [0x3B]),
            (.webp, webp(vp8x(0x3E) + riffChunk("ICCP", iccProfile("sRGB")) + anim + anmf + riffChunk("EXIF", shell))),
        ]
        var outcomes: [String: Int] = [:]
        for round in 0..<3000 {
            let (kind, base) = samples[round % samples.count]
            var input = base
            for _ in 0...rng.below(4) {
                switch rng.below(4) {
                case 0 where !input.isEmpty: input[rng.below(input.count)] = UInt8(truncatingIfNeeded: rng.next())
                case 1: input = Array(input.prefix(rng.below(input.count + 1)))
                case 2: input.insert(UInt8(truncatingIfNeeded: rng.next()), at: rng.below(input.count + 1))
                default: if !input.isEmpty { input.remove(at: rng.below(input.count)) }
                }
            }
            let whole = result(input, kind)
            let cuts = (0..<rng.below(6)).map { _ in rng.below(input.count + 1) }.sorted()
            #expect(result(input, kind, cuts: cuts) == whole, "round \(round)")
            if round % 50 == 0 { #expect(result(input, kind, cuts: Array(0..<input.count)) == whole) }
            outcomes[whole.hasPrefix("ok") ? "ok" : "error", default: 0] += 1
        }
        for kind in DisarmKind.allCases {
            for _ in 0..<200 {
                let garbage = (0..<rng.below(300)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                _ = result(garbage, kind)
            }
        }
        #expect(outcomes["ok", default: 0] > 0 && outcomes["error", default: 0] > 0)
    }
}


// MARK: - Hiding places (issue 53): what each format keeps is an allowlist

@Suite struct DisarmHidingPlaceTests {
    @Test func jpegDropsEveryPlaceAShellHides() throws {
        let fakeICC = segment(
            0xE2, ascii("ICC_PROFILE\0") + [1, 1] + iccProfile(String(decoding: shell, as: UTF8.self)))
        let notICC = segment(0xE2, shell)
        let xmpShell = segment(0xE1, ascii("http://ns.adobe.com/xap/1.0/\0") + shell)
        let thumbnail = segment(0xE0, ascii("JFIF\0") + [1, 1, 0, 0, 1, 0, 1, 0x0A, 0x01] + shell + [0, 0])
        let adobeTail = segment(0xEE, ascii("Adobe") + [0, 100, 0, 0, 0, 0, 1] + shell)
        let extensionSegment = segment(0xF7, shell)
        let input = soi + thumbnail + notICC + fakeICC + xmpShell + segment(0xE5, shell) + adobeTail + dqt + sof0
            + segment(0xFE, shell) + extensionSegment + dht + sos + entropy + eoi + shell
        let out = try disarmEverySplit(input, .jpeg)
        #expect(out.output == soi + app0 + adobe + dqt + sof0 + dht + sos + entropy + eoi)
        #expect(!carriesShell(out.output))
        #expect(out.removed == ["jfif-thumbnail", "app2", "icc", "xmp", "app5", "comment", "jpg-extension",
                                "trailing-data"])
    }

    @Test func jpegKeepsAWellFormedICCProfileAcrossSegments() throws {
        let profile = iccProfile("Display P3", padding: 300)
        let pieces = [Array(profile[0..<100]), Array(profile[100..<250]), Array(profile[250...])]
        let segments = pieces.enumerated().map { k, piece in
            segment(0xE2, ascii("ICC_PROFILE\0") + [UInt8(k + 1), 3] + piece)
        }
        let split = segments.flatMap { $0 }
        let whole = segment(0xE2, ascii("ICC_PROFILE\0") + [1, 1] + profile)
        let out = try disarmEverySplit(soi + app0 + split + dqt + sof0 + sos + entropy + eoi, .jpeg)
        #expect(out.output == soi + app0 + whole + dqt + sof0 + sos + entropy + eoi)
        #expect(out.removed == [])
        // Out of sequence, incomplete at the scan, after the scan: dropped.
        for input in [
            soi + segments[0] + segments[2] + dqt + sos + entropy + eoi,
            soi + segments[0] + segments[1] + dqt + sos + entropy + eoi,
            soi + dqt + sos + entropy + [0xFF, 0xFF] + whole + sos + entropy + eoi,
        ] {
            let dropped = try disarm(input, .jpeg)
            #expect(dropped.removed == ["icc"])
            #expect(!dropped.output.contains(0xE2))
        }
    }

    @Test func jpegRewritesAProfileOverOneSegment() throws {
        let profile = iccProfile("big", padding: 70_000)
        let per = JPEGDisarmer.profileBytesPerSegment
        let input = soi + segment(0xE2, ascii("ICC_PROFILE\0") + [1, 2] + Array(profile[0..<40_000]))
            + segment(0xE2, ascii("ICC_PROFILE\0") + [2, 2] + Array(profile[40_000...])) + dqt + sos + entropy + eoi
        let expected = soi + segment(0xE2, ascii("ICC_PROFILE\0") + [1, 2] + Array(profile[0..<per]))
            + segment(0xE2, ascii("ICC_PROFILE\0") + [2, 2] + Array(profile[per...])) + dqt + sos + entropy + eoi
        let out = try disarm(input, .jpeg)
        #expect(out.output == expected)
        #expect(try disarm(input, .jpeg, cuts: Array(stride(from: 0, to: input.count, by: 997))) == out)
        let tooBig = iccProfile("huge", padding: ICCProfile.maximumSize)
        var oversized = soi
        var at = 0
        var k: UInt8 = 1
        while at < tooBig.count {
            let end = min(at + 60_000, tooBig.count)
            oversized += segment(0xE2, ascii("ICC_PROFILE\0") + [k, 18] + Array(tooBig[at..<end]))
            at = end
            k += 1
        }
        #expect(try disarm(oversized + dqt + sos + entropy + eoi, .jpeg).output == soi + dqt + sos + entropy + eoi)
    }

    @Test func iccProfileTest() {
        func accepts(_ p: [UInt8]) -> Bool { p.withUnsafeBytes { ICCProfile.isAcceptable($0) } }
        #expect(accepts(iccProfile("sRGB")))
        #expect(!accepts(iccProfile("<?php system($_GET['c']); ?>")))
        #expect(!accepts(iccProfile("<script>alert(1)</script>")))
        // Server-side markup of the other platforms, as deny-embedded-markup refuses it.
        #expect(!accepts(iccProfile("<% Response.Write(Request(\"c\")) %>")))
        #expect(!accepts(iccProfile("<cfexecute name=\"c:\\cmd.exe\">")))
        #expect(!accepts(iccProfile("<!--#exec cmd=\"id\" -->")))
        #expect(!accepts(iccProfile("<jsp:scriptlet>Runtime.getRuntime()</jsp:scriptlet>")))
        var wrongSize = iccProfile("sRGB")
        wrongSize[3] &+= 1
        #expect(!accepts(wrongSize))
        var noSignature = iccProfile("sRGB")
        noSignature[36] = 0x41
        #expect(!accepts(noSignature))
        var tagOutside = iccProfile("sRGB")
        tagOutside[143] = 200
        #expect(!accepts(tagOutside))
        #expect(!accepts(Array(iccProfile("sRGB").prefix(100))))
    }

    @Test func pngKeepsOnlyRenderingChunks() throws {
        let profile = iccpChunk(iccProfile("sRGB"))
        let srgb = chunk("sRGB", [0])
        let phys = chunk("pHYs", be32(2835) + be32(2835) + [1])
        let trns = chunk("tRNS", [0, 0, 0, 0, 0, 0])
        let apng = chunk("acTL", be32(1) + be32(0)) + chunk("fcTL", Array(repeating: 0, count: 26))
        let input = pngSignature + ihdr + profile + srgb + chunk("prVt", shell) + chunk("tEXt", ascii("c\0") + shell)
            + chunk("tIME", [7, 0xEA, 12, 7, 20, 0, 0]) + chunk("gAMA", be32(45455) + shell) + phys + trns + apng
            + idat + chunk("zzZz", shell) + chunk("fdAT", be32(1) + [1, 2]) + iend + shell
        let out = try disarmEverySplit(input, .png)
        #expect(out.output == pngSignature + ihdr + profile + srgb + phys + trns + apng + idat
            + chunk("fdAT", be32(1) + [1, 2]) + iend)
        #expect(!carriesShell(out.output))
        #expect(out.removed == ["prVt", "tEXt", "tIME", "gAMA", "zzZz", "trailing-data"])
        #expect(chunkTypesWithValidCRCs(out.output) != nil)
    }

    @Test func pngDropsAProfileWithMarkupOrThatIsNotOne() throws {
        for bad in [
            iccpChunk(iccProfile("<?php system($_GET['c']); ?>")), iccpChunk(shell),
            chunk("iCCP", ascii("ICC\0") + [0] + shell), chunk("iCCP", shell),
        ] {
            let out = try disarmEverySplit(pngSignature + ihdr + bad + idat + iend, .png)
            #expect(out.output == pngSignature + ihdr + idat + iend)
            #expect(out.removed == ["iCCP"])
        }
        // A second profile, or one after the image data, is dropped too.
        let good = iccpChunk(iccProfile("sRGB"))
        let out = try disarm(pngSignature + ihdr + good + good + idat + good + iend, .png)
        #expect(out.output == pngSignature + ihdr + good + idat + iend)
    }

    @Test func gifKeepsImagesControlAndLooping() throws {
        let input = gifHeader + gifComment + gifLoop + gifXMP + gifControl + gifPlainText + gifImage
            + [0x21, 0x99] + subBlocks(shell) + gifControl + gifImage + [0x3B] + shell
        let out = try disarmEverySplit(input, .gif)
        #expect(out.output == gifHeader + gifLoop + gifControl + gifImage + gifControl + gifImage + [0x3B])
        #expect(!carriesShell(out.output))
        #expect(out.removed == ["comment", "application", "plain-text", "extension", "trailing-data"])
    }

    @Test func gifDropsNonStandardControlAndLoopingExtensions() throws {
        let longControl: [UInt8] = [0x21, 0xF9] + subBlocks([1, 10, 0, 0] + shell)
        let controlWithMore: [UInt8] = [0x21, 0xF9, 4, 1, 10, 0, 0] + subBlocks(shell)
        let loopWithMore: [UInt8] = [0x21, 0xFF, 11] + ascii("NETSCAPE2.0") + [3, 1, 0, 0] + subBlocks(shell)
        let loopOther: [UInt8] = [0x21, 0xFF, 11] + ascii("ANIMEXTS1.0") + subBlocks([2] + shell)
        let appShort: [UInt8] = [0x21, 0xFF] + subBlocks(shell)
        let input = gifHeader + longControl + controlWithMore + loopWithMore + loopOther + appShort + gifImage + [0x3B]
        let out = try disarmEverySplit(input, .gif)
        #expect(out.output == gifHeader + gifImage + [0x3B])
        #expect(out.removed == ["graphic-control", "application"])
    }

    @Test(arguments: [
        ("bad signature", ascii("GIF88a") + Array(gifHeader.dropFirst(6)) + [0x3B]),
        ("no trailer", gifHeader + gifImage),
        ("bad block", gifHeader + [0x00, 0x3B]),
        ("truncated table", Array(gifHeader.prefix(15))),
        ("truncated sub-block", gifHeader + Array(gifComment.prefix(10))),
    ] as [(String, [UInt8])])
    func gifMalformedThrows(name: String, input: [UInt8]) {
        #expect(throws: DisarmError.self, "\(name)") { try disarm(input, .gif) }
        #expect(throws: DisarmError.self, "\(name) byte by byte") {
            try disarm(input, .gif, cuts: Array(0..<input.count))
        }
    }

    @Test func webpKeepsImageAnimationAndICCAndFixesTheSizeAndFlags() throws {
        let profile = riffChunk("ICCP", iccProfile("sRGB"))
        let input = webp(vp8x(0x3E) + profile + anim + riffChunk("EXIF", shell) + anmf + riffChunk("XMP ", shell)
            + riffChunk("pHp ", shell + [1]) + anmf) + shell
        let out = try disarmEverySplit(input, .webp)
        #expect(out.output == webp(vp8x(0x32) + profile + anim + anmf + anmf))
        #expect(!carriesShell(out.output))
        #expect(out.removed == ["exif", "xmp", "unknown-chunk", "trailing-data"])
    }

    @Test func webpKeepsAnOddSizedProfileWithAZeroPad() throws {
        let profile = iccProfile("sRGB1")
        #expect(profile.count % 2 == 1)
        let input = webp(vp8x(0x20) + ascii("ICCP") + le32(profile.count) + profile + [0x7F] + vp8)
        let out = try disarmEverySplit(input, .webp)
        #expect(out.output == webp(vp8x(0x20) + riffChunk("ICCP", profile) + vp8))
        #expect(out.removed == [])
    }

    @Test func webpDropsAProfileWithMarkupAndClearsItsFlag() throws {
        let bad = riffChunk("ICCP", iccProfile("<?php system($_GET['c']); ?>"))
        let out = try disarmEverySplit(webp(vp8x(0x30) + bad + alph + vp8), .webp)
        #expect(out.output == webp(vp8x(0x10) + alph + vp8))
        #expect(out.removed == ["icc"])
        // A simple (lossy) file carries nothing but its bitstream.
        let simple = try disarmEverySplit(
            webp(vp8 + riffChunk("EXIF", shell) + riffChunk("ICCP", iccProfile("x"))), .webp)
        #expect(simple.output == webp(vp8))
        #expect(simple.removed == ["exif", "icc"])
    }

    @Test(arguments: [
        ("not WEBP", ascii("RIFF") + le32(12) + ascii("WAVE") + vp8),
        ("first chunk EXIF", webp(riffChunk("EXIF", shell) + vp8)),
        ("VP8X not 10 bytes", webp(riffChunk("VP8X", [0, 0, 0, 0]) + vp8)),
        ("chunk over the RIFF", Array(webp(vp8x(0) + vp8).dropLast(4))),
        ("RIFF size too small", ascii("RIFF") + le32(4) + ascii("WEBP") + vp8),
        ("frame with another chunk", webp(vp8x(2) + anim + riffChunk("ANMF", Array(repeating: 0, count: 16)
            + riffChunk("EXIF", shell)))),
        ("frame under 16 bytes", webp(vp8x(2) + riffChunk("ANMF", [0, 0]))),
        ("ANIM not 6 bytes", webp(vp8x(2) + riffChunk("ANIM", [0, 0, 0, 0, 0, 0] + shell))),
        ("chunk over its frame", webp(vp8x(2) + ascii("ANMF") + le32(18) + Array(repeating: 0, count: 16) + vp8)),
    ] as [(String, [UInt8])])
    func webpMalformedThrows(name: String, input: [UInt8]) {
        #expect(throws: DisarmError.self, "\(name)") { try disarm(input, .webp) }
        #expect(throws: DisarmError.self, "\(name) byte by byte") {
            try disarm(input, .webp, cuts: Array(0..<input.count))
        }
    }
}

/// Opt-in cross-check with real files: set DISARM_CROSSCHECK_DIR to a folder of .jpg/.png/.gif/.webp/.svg files; each
/// one is disarmed (whole and in 1000-byte pieces, which must agree) into `<name>.disarmed.<ext>` next to it, for an
/// external decoder to open. Checked this way with files made by Pillow (EXIF with a GPS IFD, COM, ICC, progressive,
/// CMYK with Adobe APP14, PNG with tEXt/zTXt/iTXt/eXIf, palette PNG) and cjpeg -restart 1: Pillow decodes every
/// output to the same pixels with no EXIF, comment or text left; djpeg, jpegtran and pngcheck report no errors.
/// Since the allowlists, with Pillow 13's files: JPEG baseline (EXIF, COM, sRGB profile), progressive, CMYK, grey;
/// PNG RGB with iCCP, palette with tRNS, RGBA, APNG; GIF animated (looping, comment), still with transparency,
/// bilevel; WebP lossy (ICCP, EXIF), lossy and lossless with alpha, animated lossless (ICCP) and lossy (XMP):
/// every output decodes to the same pixels of every frame, with the same ICC profile and loop count, and without
/// EXIF, XMP or comment.
@Test(.enabled(if: ProcessInfoLite.environment("DISARM_CROSSCHECK_DIR") != nil))
func disarmRealFilesForCrossCheck() throws {
    guard let dir = ProcessInfoLite.environment("DISARM_CROSSCHECK_DIR") else { return }
    for name in try ProcessInfoLite.list(dir) where !name.contains(".disarmed.") {
        let kind: DisarmKind
        if name.hasSuffix(".jpg") { kind = .jpeg } else if name.hasSuffix(".png") { kind = .png }
        else if name.hasSuffix(".gif") { kind = .gif } else if name.hasSuffix(".webp") { kind = .webp }
        else if name.hasSuffix(".svg") { kind = .svg } else { continue }
        let input = try ProcessInfoLite.read(dir + "/" + name)
        let whole = try disarm(input, kind)
        #expect(try disarm(input, kind, cuts: Array(stride(from: 0, to: input.count, by: 1000))) == whole, "\(name)")
        let ext = String(name.split(separator: ".").last ?? "")
        let stem = String(name.dropLast(ext.count + 1))
        try ProcessInfoLite.write(dir + "/" + stem + ".disarmed." + ext, whole.output)
        print("disarm \(name): \(input.count) -> \(whole.output.count) bytes, removed \(whole.removed)")
    }
}

import Glibc

/// Just enough file and environment access for the opt-in cross-check (the test target has no Foundation).
private enum ProcessInfoLite {
    static func environment(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }

    static func list(_ dir: String) throws -> [String] {
        guard let d = opendir(dir) else { throw CrossCheckError.io(dir) }
        defer { closedir(d) }
        var names: [String] = []
        while let entry = readdir(d) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    static func read(_ path: String) throws -> [UInt8] {
        guard let f = fopen(path, "rb") else { throw CrossCheckError.io(path) }
        defer { fclose(f) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&buffer, 1, buffer.count, f)
            if n <= 0 { break }
            out.append(contentsOf: buffer[0..<n])
        }
        return out
    }

    static func write(_ path: String, _ bytes: [UInt8]) throws {
        guard let f = fopen(path, "wb") else { throw CrossCheckError.io(path) }
        defer { fclose(f) }
        guard fwrite(bytes, 1, bytes.count, f) == bytes.count else { throw CrossCheckError.io(path) }
    }

    enum CrossCheckError: Error { case io(String) }
}
