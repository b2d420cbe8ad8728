import CZlib
import Testing
@testable import Inspect
import TestRandom
import TestZlib

// ArchiveInspector: real ZIP, tar, gzip and tar.gz samples built here (a tiny ZIP writer, a tar writer, zlib),
// fed whole, byte by byte and split at every offset (the finding never depends on the split); a 200 MB zip bomb
// streamed in compressed pieces; garbage and mutated archives never trap.

// MARK: writers


private func gzip(_ data: [UInt8]) -> [UInt8] { deflateBytes(data, windowBits: 31) }

private func crc(_ data: [UInt8]) -> UInt32 {
    data.withUnsafeBytes { UInt32(crc32(0, $0.baseAddress?.assumingMemoryBound(to: Bytef.self), uInt($0.count))) }
}

private extension Array where Element == UInt8 {
    mutating func u16(_ v: UInt16) { append(UInt8(v & 0xFF)); append(UInt8(v >> 8)) }
    mutating func u32(_ v: UInt32) { u16(UInt16(v & 0xFFFF)); u16(UInt16(v >> 16)) }
    mutating func text(_ s: String) { append(contentsOf: Array(s.utf8)) }
}

/// One member for the test ZIP writer, with knobs to lie.
private struct ZipMember {
    var name: String
    var data: [UInt8]
    var method: UInt16 = 8
    var flags: UInt16 = 0
    /// Sizes and CRC in a data descriptor after the data (flag bit 3).
    var descriptor = false
    var descriptorSignature = true
    /// What the central directory says instead of the truth.
    var centralName: String?
    var centralSize: UInt32?
    var centralOffset: UInt32?
    var inCentral = true
    /// The central directory's "version made by" (high byte: host, 3 = Unix) and external attributes.
    var madeBy: UInt16 = 20
    var external: UInt32 = 0
    /// The central directory's extra field.
    var centralExtra: [UInt8] = []

    init(_ name: String, _ data: [UInt8], method: UInt16 = 8) {
        self.name = name
        self.data = data
        self.method = method
    }

    init(_ name: String, _ text: String, method: UInt16 = 8) { self.init(name, Array(text.utf8), method: method) }
}

/// A minimal ZIP writer: local headers, stored or raw-deflated data, optional descriptors, central directory, end.
private func makeZip(_ members: [ZipMember]) -> [UInt8] {
    var out: [UInt8] = []
    var central: [UInt8] = []
    var count: UInt16 = 0
    for m in members {
        let offset = UInt32(out.count)
        let packed = m.method == 8 ? deflateBytes(m.data, windowBits: -15) : m.data
        let sum = crc(m.data)
        let flags = m.flags | (m.descriptor ? 0x0008 : 0)
        out.u32(0x0403_4B50); out.u16(20); out.u16(flags); out.u16(m.method); out.u16(0); out.u16(0)
        out.u32(m.descriptor ? 0 : sum)
        out.u32(m.descriptor ? 0 : UInt32(packed.count)); out.u32(m.descriptor ? 0 : UInt32(m.data.count))
        out.u16(UInt16(m.name.utf8.count)); out.u16(0); out.text(m.name)
        out.append(contentsOf: packed)
        if m.descriptor {
            if m.descriptorSignature { out.u32(0x0807_4B50) }
            out.u32(sum); out.u32(UInt32(packed.count)); out.u32(UInt32(m.data.count))
        }
        guard m.inCentral else { continue }
        let name = m.centralName ?? m.name
        central.u32(0x0201_4B50); central.u16(m.madeBy); central.u16(20); central.u16(flags); central.u16(m.method)
        central.u16(0); central.u16(0); central.u32(sum); central.u32(UInt32(packed.count))
        central.u32(m.centralSize ?? UInt32(m.data.count))
        central.u16(UInt16(name.utf8.count)); central.u16(UInt16(m.centralExtra.count)); central.u16(0)
        central.u16(0); central.u16(0)
        central.u32(m.external); central.u32(m.centralOffset ?? offset); central.text(name)
        central.append(contentsOf: m.centralExtra)
        count += 1
    }
    let centralOffset = UInt32(out.count)
    out.append(contentsOf: central)
    out.u32(0x0605_4B50); out.u16(0); out.u16(0); out.u16(count); out.u16(count)
    out.u32(UInt32(central.count)); out.u32(centralOffset); out.u16(0)
    return out
}

/// One tar member: a regular file unless `type` says otherwise.
private struct TarMember {
    var name: String
    var data: [UInt8] = []
    var type: UInt8 = UInt8(ascii: "0")
    var link = ""
}

private func tarHeader(name: [UInt8], size: Int, type: UInt8, link: String) -> [UInt8] {
    var h = [UInt8](repeating: 0, count: 512)
    func put(_ bytes: [UInt8], _ at: Int, _ max: Int) { for (k, b) in bytes.prefix(max).enumerated() { h[at + k] = b } }
    func octal(_ v: Int, _ at: Int, _ width: Int) {
        let s = String(v, radix: 8)
        put(Array((String(repeating: "0", count: max(0, width - 1 - s.count)) + s).utf8), at, width - 1)
    }
    put(name, 0, 100)
    octal(0o644, 100, 8); octal(0, 108, 8); octal(0, 116, 8); octal(size, 124, 12); octal(0, 136, 12)
    h[156] = type
    put(Array(link.utf8), 157, 100)
    put(Array("ustar\0".utf8), 257, 6); put(Array("00".utf8), 263, 2)
    for k in 148..<156 { h[k] = 0x20 }
    let sum = h.reduce(0) { $0 + Int($1) }
    octal(sum, 148, 7)
    h[155] = 0x20
    return h
}

private func makeTar(_ members: [TarMember], end: Bool = true) -> [UInt8] {
    var out: [UInt8] = []
    func block(_ data: [UInt8]) {
        out.append(contentsOf: data)
        out.append(contentsOf: [UInt8](repeating: 0, count: (512 - data.count % 512) % 512))
    }
    for m in members {
        var name = Array(m.name.utf8)
        if name.count > 99 {
            out.append(contentsOf: tarHeader(name: Array("././@LongLink".utf8), size: name.count + 1,
                                             type: UInt8(ascii: "L"), link: ""))
            block(name + [0])
            name = Array(name.prefix(99))
        }
        out.append(contentsOf: tarHeader(name: name, size: m.data.count, type: m.type, link: m.link))
        block(m.data)
    }
    if end { out.append(contentsOf: [UInt8](repeating: 0, count: 1024)) }
    return out
}

private let elf: [UInt8] = [0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0] + [UInt8](repeating: 0, count: 120)

private func text(_ n: Int, seed: UInt32 = 7) -> [UInt8] {
    var x = seed
    return (0..<n).map { _ in
        x = x &* 1_103_515_245 &+ 12345
        return UInt8(ascii: "a") + UInt8((x >> 16) % 26)
    }
}

private let docxLike = makeZip([
    ZipMember("[Content_Types].xml", "<?xml version=\"1.0\"?><Types>" + String(repeating: "<Default/>", count: 20)),
    ZipMember("_rels/.rels", "<?xml version=\"1.0\"?><Relationships/>"),
    ZipMember("word/document.xml", text(3000)),
    ZipMember("word/media/image1.png", [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + text(200), method: 0),
    ZipMember("word/", [], method: 0),
])

// MARK: driving

private func run(_ bytes: [UInt8], _ format: ArchiveInspector.Format, _ limits: ArchiveLimits,
                 cuts: [Int], members: ArchiveMemberChecks = .init()) -> ArchiveFinding? {
    let inspector = ArchiveInspector(format: format, limits: limits, members: members)
    var start = 0
    for cut in cuts + [bytes.count] where cut >= start {
        if let finding = bytes[start..<cut].withUnsafeBytes({ inspector.feed($0) }) { return finding }
        start = cut
    }
    return inspector.finish()
}

/// Inspects `bytes` whole and byte by byte (and split at every offset when `everySplit`), expecting the same
/// finding each way; returns it.
private func inspect(_ bytes: [UInt8], _ format: ArchiveInspector.Format = .zip, limits: ArchiveLimits = .init(),
                     members: ArchiveMemberChecks = .init(),
                     everySplit: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) -> ArchiveFinding? {
    let whole = run(bytes, format, limits, cuts: [], members: members)
    let single = run(bytes, format, limits, cuts: Array(0..<bytes.count), members: members)
    #expect(single == whole, "byte by byte", sourceLocation: sourceLocation)
    if everySplit && bytes.count <= 20_000 {
        for cut in 0...bytes.count {
            let split = run(bytes, format, limits, cuts: [cut], members: members)
            if split != whole {
                Issue.record("split at \(cut): \(String(describing: split)) vs \(String(describing: whole))",
                             sourceLocation: sourceLocation)
                break
            }
        }
    }
    return whole
}

// MARK: tests

@Suite("ArchiveInspector")
struct ArchiveInspectorTests {
    @Test func formatSniffing() {
        #expect(docxLike.withUnsafeBytes { ArchiveInspector.format(sniffing: $0) } == .zip)
        #expect(gzip(text(10)).withUnsafeBytes { ArchiveInspector.format(sniffing: $0) } == .gzip)
        #expect(makeTar([TarMember(name: "a")]).withUnsafeBytes { ArchiveInspector.format(sniffing: $0) } == .tar)
        #expect(makeZip([]).withUnsafeBytes { ArchiveInspector.format(sniffing: $0) } == .zip)
        #expect(text(600).withUnsafeBytes { ArchiveInspector.format(sniffing: $0) } == nil)
    }

    @Test func docxLikePasses() {
        #expect(inspect(docxLike) == nil)
        let inspector = ArchiveInspector(format: .zip, limits: ArchiveLimits())
        _ = inspector.feed(docxLike)
        #expect(inspector.finish() == nil)
        #expect(inspector.summary.entries == 5)
        #expect(inspector.summary.names.first == "[Content_Types].xml")
        #expect(inspector.summary.totalUncompressed > 3000)
        #expect(inspector.summary.depthReached == 1)
    }

    @Test func emptyZipPasses() {
        #expect(inspect(makeZip([])) == nil)
    }

    @Test func zipBombIsRatio() {
        // One entry: 200 MB of zeros, deflated in pieces; the inspector gets the compressed bytes in pieces too.
        let size = 200 * 1024 * 1024
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        var packed: [UInt8] = []
        var stream = z_stream()
        #expect(czlib_deflate_init2(&stream, 9, -15) == Z_OK)
        var sum: uLong = 0
        var piece = [UInt8](repeating: 0, count: 64 * 1024)
        for k in 0..<(size >> 20) {
            zeros.withUnsafeBytes { src in
                sum = crc32(sum, src.baseAddress?.assumingMemoryBound(to: Bytef.self), uInt(src.count))
                stream.next_in = UnsafeMutablePointer(mutating: src.baseAddress?.assumingMemoryBound(to: Bytef.self))
                stream.avail_in = uInt(src.count)
                repeat {
                    let produced: Int = piece.withUnsafeMutableBytes { dst in
                        stream.next_out = dst.baseAddress?.assumingMemoryBound(to: Bytef.self)
                        stream.avail_out = uInt(dst.count)
                        _ = deflate(&stream, k == (size >> 20) - 1 ? Z_FINISH : Z_NO_FLUSH)
                        return dst.count - Int(stream.avail_out)
                    }
                    packed.append(contentsOf: piece[..<produced])
                } while stream.avail_out == 0
            }
        }
        deflateEnd(&stream)
        #expect(packed.count < size / 500)
        var zip: [UInt8] = []
        zip.u32(0x0403_4B50); zip.u16(20); zip.u16(0); zip.u16(8); zip.u16(0); zip.u16(0)
        zip.u32(UInt32(sum)); zip.u32(UInt32(packed.count)); zip.u32(UInt32(size))
        zip.u16(9); zip.u16(0); zip.text("zeros.bin")
        let inspector = ArchiveInspector(format: .zip, limits: ArchiveLimits())
        var finding = inspector.feed(zip)
        var at = 0
        while finding == nil && at < packed.count {
            let end = min(at + 4096, packed.count)
            finding = packed[at..<end].withUnsafeBytes { inspector.feed($0) }
            at = end
        }
        #expect(finding?.problem == .ratio)
        #expect(finding?.entry == "zeros.bin")
        // With the ratio allowed, the same bomb is stopped by totalMax.
        var lenient = ArchiveLimits()
        lenient.ratioMax = 1_000_000
        lenient.totalMax = 50 << 20
        let second = ArchiveInspector(format: .zip, limits: lenient)
        finding = second.feed(zip)
        at = 0
        while finding == nil && at < packed.count {
            let end = min(at + 4096, packed.count)
            finding = packed[at..<end].withUnsafeBytes { second.feed($0) }
            at = end
        }
        #expect(finding?.problem == .tooLarge)
        #expect(second.summary.totalUncompressed == 50 << 20)
    }

    @Test func smallCompressibleEntriesPassRatio() {
        // 64 KiB of spaces inflate far more than 100x but stay under ratioFloor.
        let spaces = [UInt8](repeating: 0x20, count: 65536)
        #expect(inspect(makeZip([ZipMember("a.txt", spaces)]), everySplit: false) == nil)
        var strict = ArchiveLimits()
        strict.ratioFloor = 0
        #expect(inspect(makeZip([ZipMember("a.txt", [UInt8](repeating: 0x20, count: 65536))]), limits: strict,
                        everySplit: false)?.problem == .ratio)
    }

    @Test func tooManyEntries() {
        var limits = ArchiveLimits()
        limits.entriesMax = 10
        let members = (0..<11).map { ZipMember("f\($0).txt", "x") }
        let finding = inspect(makeZip(members), limits: limits)
        #expect(finding?.problem == .tooManyEntries)
        #expect(finding?.entry == "f10.txt")
        #expect(inspect(makeZip(Array(members.prefix(10))), limits: limits) == nil)
    }

    @Test(arguments: ["../../etc/passwd", "C:\\x", "/abs", "a/../../b", "a\\..\\..\\b", "\\\\server\\share\\x",
                      "c:/windows/x", "a/.. /b"])
    func zipSlipIsTraversal(name: String) {
        let finding = inspect(makeZip([ZipMember("ok.txt", "fine"), ZipMember(name, "evil")]))
        #expect(finding?.problem == .traversal)
        #expect(finding?.entry == name)
    }

    @Test(arguments: ["shell.php.jpg", "SHELL.PHP", "run.exe.", "x.Bat ", "lib/a.so", "a.tar.js"])
    func forbiddenExtension(name: String) {
        #expect(inspect(makeZip([ZipMember(name, "x")]))?.problem == .forbiddenMember)
    }

    @Test func allowedNamesPass() {
        #expect(inspect(makeZip([ZipMember("photo.jpg", "x"), ZipMember("..hidden/a.txt", "y"),
                                 ZipMember("a..b.txt", "z"), ZipMember("php/readme.md", "w")])) == nil)
    }

    @Test func executableMember() {
        let zip = makeZip([ZipMember("readme.txt", "hi"), ZipMember("bin/tool", elf)])
        let finding = inspect(zip)
        #expect(finding?.problem == .executableMember)
        #expect(finding?.entry == "bin/tool")
        var limits = ArchiveLimits()
        limits.allowExecutables = true
        #expect(inspect(zip, limits: limits) == nil)
        #expect(inspect(makeZip([ZipMember("run", "#!/bin/sh\nrm -rf /\n")]))?.problem == .executableMember)
        let machO: [UInt8] = [0xCF, 0xFA, 0xED, 0xFE, 7, 0, 0, 1]
        #expect(inspect(makeZip([ZipMember("a.bin", machO)]))?.problem == .executableMember)
        #expect(inspect(makeZip([ZipMember("A.class", [0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 52])])) == nil)
        #expect(inspect(makeZip([ZipMember("setup", [0x4D, 0x5A] + text(300))]))?.problem == .executableMember)
    }

    @Test func encryptedMember() {
        var member = ZipMember("secret.txt", "data", method: 0)
        member.flags = 1
        let zip = makeZip([member])
        #expect(inspect(zip)?.problem == .encrypted)
        var limits = ArchiveLimits()
        limits.allowEncrypted = true
        #expect(inspect(zip, limits: limits) == nil)
    }

    @Test func nestedArchives() {
        let inner = makeZip([ZipMember("deep.txt", "x")])
        let middle = makeZip([ZipMember("inner.zip", inner)])
        let outer = makeZip([ZipMember("middle.zip", middle)])
        let finding = inspect(outer)
        #expect(finding?.problem == .tooDeep)
        #expect(finding?.entry == "middle.zip!/inner.zip")
        #expect(inspect(middle) == nil)
        var limits = ArchiveLimits()
        limits.depthMax = 3
        #expect(inspect(outer, limits: limits, everySplit: false) == nil)
        limits.depthMax = 1
        #expect(inspect(middle, limits: limits)?.problem == .tooDeep)
        // Findings inside a nested archive name the path through it.
        let evil = makeZip([ZipMember("docs.zip", makeZip([ZipMember("../x", "y")]))])
        #expect(inspect(evil)?.entry == "docs.zip!/../x")
        #expect(inspect(evil)?.problem == .traversal)
        // Nested entries count against the same budget.
        limits = ArchiveLimits()
        limits.entriesMax = 3
        let many = makeZip([ZipMember("a.zip", makeZip((0..<3).map { ZipMember("n\($0)", "x") }))])
        #expect(inspect(many, limits: limits)?.problem == .tooManyEntries)
        let inspector = ArchiveInspector(format: .zip, limits: ArchiveLimits())
        _ = inspector.feed(middle)
        #expect(inspector.finish() == nil)
        #expect(inspector.summary.depthReached == 2)
        #expect(inspector.summary.names == ["inner.zip", "inner.zip!/deep.txt"])
    }

    @Test func duplicateNames() {
        #expect(inspect(makeZip([ZipMember("a.txt", "1"), ZipMember("a.txt", "2")]))?.problem == .duplicate)
        #expect(inspect(makeZip([ZipMember("dir/A.txt", "1"), ZipMember("dir\\a.TXT", "2")]))?.problem == .duplicate)
        #expect(inspect(makeZip([ZipMember("x/./y.txt", "1"), ZipMember("x//y.txt", "2")]))?.problem == .duplicate)
    }

    @Test func centralDirectoryMismatch() {
        var renamed = ZipMember("b.txt", "hello")
        renamed.centralName = "c.txt"
        #expect(inspect(makeZip([ZipMember("a.txt", "x"), renamed]))?.problem == .centralDirectoryMismatch)
        var resized = ZipMember("b.txt", "hello")
        resized.centralSize = 4
        #expect(inspect(makeZip([resized]))?.problem == .centralDirectoryMismatch)
        var hidden = ZipMember("hidden.txt", "hello")
        hidden.inCentral = false
        #expect(inspect(makeZip([ZipMember("a.txt", "x"), hidden]))?.problem == .centralDirectoryMismatch)
        // Two directory entries pointing into the first entry: an overlapping-file bomb.
        var first = ZipMember("a.txt", text(500))
        first.centralOffset = 0
        var second = ZipMember("b.txt", text(500))
        second.centralOffset = 40
        let finding = inspect(makeZip([first, second]))
        #expect(finding?.problem == .centralDirectoryMismatch)
        #expect(finding?.detail.contains("overlapping") == true)
    }

    @Test func dataDescriptors() {
        var a = ZipMember("word/document.xml", text(5000))
        a.descriptor = true
        var b = ZipMember("b.txt", "short")
        b.descriptor = true
        b.descriptorSignature = false
        #expect(inspect(makeZip([a, b, ZipMember("c.txt", "after")])) == nil)
        var stored = ZipMember("s.txt", "stored", method: 0)
        stored.descriptor = true
        #expect(inspect(makeZip([stored]))?.problem == .malformed)
        // A descriptor that lies about the size.
        var zip = makeZip([a])
        let packed = deflateBytes(a.data, windowBits: -15).count
        let at = 30 + a.name.utf8.count + packed + 12
        zip[at] ^= 1
        #expect(inspect(zip, everySplit: false)?.problem == .malformed)
    }

    @Test func declaredSizesMustMatchTheData() {
        var zip = makeZip([ZipMember("a.txt", text(100))])
        zip[22] ^= 1  // uncompressed size in the local header
        #expect(inspect(zip)?.problem == .malformed)
        zip = makeZip([ZipMember("a.txt", text(100))])
        zip[14] ^= 1  // CRC
        #expect(inspect(zip)?.problem == .malformed)
        #expect(inspect(makeZip([ZipMember("a.txt", text(100), method: 12)]))?.detail == "compression method 12")
    }

    @Test func truncatedArchivesAreMalformedAtFinish() {
        for archive in [docxLike, makeTar([TarMember(name: "a.txt", data: text(700))]),
                        gzip(makeTar([TarMember(name: "a.txt", data: text(700))]))] {
            let format = archive.withUnsafeBytes { ArchiveInspector.format(sniffing: $0) } ?? .zip
            // A tar may end with a single zero block (as GNU tar accepts): cut before it.
            let end = format == .tar ? archive.count - 1024 : archive.count
            for cut in stride(from: 0, to: end, by: 37) {
                let inspector = ArchiveInspector(format: format, limits: ArchiveLimits())
                let early = archive[..<cut].withUnsafeBytes { inspector.feed($0) }
                #expect(early == nil, "cut at \(cut)")
                #expect(inspector.finish()?.problem == .malformed, "cut at \(cut)")
            }
        }
        var trailing = docxLike
        trailing.append(0)
        #expect(inspect(trailing, everySplit: false)?.problem == .malformed)
    }

    @Test func tarChecks() {
        #expect(inspect(makeTar([TarMember(name: "dir/", type: UInt8(ascii: "5")),
                                 TarMember(name: "dir/a.txt", data: text(1000))]), .tar) == nil)
        #expect(inspect(makeTar([TarMember(name: "../evil", data: text(10))]), .tar)?.problem == .traversal)
        #expect(inspect(makeTar([TarMember(name: "link", type: UInt8(ascii: "2"), link: "../../etc/passwd")]),
                        .tar)?.problem == .traversal)
        #expect(inspect(makeTar([TarMember(name: "hard", type: UInt8(ascii: "1"), link: "/etc/shadow")]),
                        .tar)?.problem == .traversal)
        #expect(inspect(makeTar([TarMember(name: "ok", type: UInt8(ascii: "2"), link: "sub/file")]), .tar) == nil)
        #expect(inspect(makeTar([TarMember(name: "a", data: elf)]), .tar)?.problem == .executableMember)
        #expect(inspect(makeTar([TarMember(name: "a"), TarMember(name: "a")]), .tar)?.problem == .duplicate)
        let long = String(repeating: "d/", count: 60) + "x.php"
        #expect(inspect(makeTar([TarMember(name: long, data: text(10))]), .tar)?.problem == .forbiddenMember)
        #expect(inspect(makeTar([TarMember(name: "a")], end: false), .tar)?.problem == .malformed)
        var bad = makeTar([TarMember(name: "a", data: text(10))])
        bad[0] ^= 1
        #expect(inspect(bad, .tar)?.problem == .malformed)
        #expect(inspect(makeTar([TarMember(name: "dev", type: UInt8(ascii: "3"))]), .tar)?.problem == .forbiddenMember)
    }

    @Test func tarGzip() {
        let good = gzip(makeTar([TarMember(name: "a.txt", data: text(3000)),
                                 TarMember(name: "b/c.txt", data: text(9))]))
        #expect(inspect(good, .gzip) == nil)
        #expect(inspect(good, .tarGzip) == nil)
        let slip = gzip(makeTar([TarMember(name: "a.txt", data: text(10)), TarMember(name: "../../x", data: text(9))]))
        #expect(inspect(slip, .gzip)?.problem == .traversal)
        let exe = gzip(makeTar([TarMember(name: "setup.exe", data: text(10))]))
        #expect(inspect(exe, .tarGzip)?.problem == .forbiddenMember)
        let elfInside = gzip(makeTar([TarMember(name: "tool", data: elf)]))
        #expect(inspect(elfInside, .tarGzip)?.problem == .executableMember)
        #expect(inspect(gzip(text(100)), .tarGzip)?.problem == .malformed)
        // A plain .gz: its content is sniffed as one entry; a zip inside is inspected.
        #expect(inspect(gzip(text(1000)), .gzip) == nil)
        #expect(inspect(gzip(elf), .gzip)?.problem == .executableMember)
        #expect(inspect(gzip(makeZip([ZipMember("../a", "x")])), .gzip)?.problem == .traversal)
        // Two gzip members are one stream.
        #expect(inspect(gzip(text(10)) + gzip(text(10)), .gzip) == nil)
        #expect(inspect(gzip(text(10)) + [1, 2, 3], .gzip)?.problem == .malformed)
        // A tar.gz inside a zip.
        #expect(inspect(makeZip([ZipMember("src.tar.gz", slip, method: 0)]))?.entry == "src.tar.gz!/../../x")
    }

    @Test func gzipBomb() {
        let bomb = gzip([UInt8](repeating: 0, count: 20 << 20))
        #expect(inspect(bomb, .gzip, everySplit: false)?.problem == .ratio)
    }

    @Test func garbageNeverTraps() {
        var rng = SplitMix(seed: 0x9E37_79B9_7F4A_7C15)
        func next() -> UInt64 { rng.next() }
        var limits = ArchiveLimits()
        limits.ratioFloor = 0
        for format in [ArchiveInspector.Format.zip, .gzip, .tar, .tarGzip] {
            for _ in 0..<200 {
                let bytes = (0..<Int(next() % 2000)).map { _ in UInt8(truncatingIfNeeded: next()) }
                _ = run(bytes, format, limits, cuts: [Int(next() % UInt64(bytes.count + 1))])
            }
        }
        let inner = makeZip([ZipMember("x.txt", text(300))])
        let samples: [([UInt8], ArchiveInspector.Format)] = [
            (docxLike, .zip),
            (makeZip([ZipMember("n.zip", inner), ZipMember("d", text(100))]), .zip),
            (makeTar([TarMember(name: "a", data: text(600)), TarMember(name: "l", type: 0x32, link: "a")]), .tar),
            (gzip(makeTar([TarMember(name: "a", data: text(600))])), .gzip),
        ]
        var ran = 0
        for (sample, format) in samples {
            for _ in 0..<1000 {
                var bytes = sample
                for _ in 0..<(1 + Int(next() % 4)) {
                    let at = Int(next() % UInt64(bytes.count))
                    switch next() % 4 {
                    case 0: bytes[at] = UInt8(truncatingIfNeeded: next())
                    case 1: bytes[at] ^= 0xFF
                    case 2: bytes.removeSubrange(at..<min(bytes.count, at + Int(next() % 16)))
                    default: bytes.insert(contentsOf: [0xFF, 0xFF, 0xFF, 0xFF], at: at)
                    }
                    if bytes.isEmpty { bytes = [0] }
                }
                _ = run(bytes, format, limits, cuts: [Int(next() % UInt64(bytes.count + 1))])
                ran += 1
            }
        }
        #expect(ran == 4000)
    }

    @Test func mutatedFindingsDoNotDependOnTheSplit() {
        var rng = SplitMix(seed: 0x1234_5678_9ABC_DEF1)
        func next() -> UInt64 { rng.next() }
        let samples: [([UInt8], ArchiveInspector.Format)] = [
            (makeZip([ZipMember("a.txt", text(400)), ZipMember("n.zip", makeZip([ZipMember("b", text(50))]))]), .zip),
            (makeTar([TarMember(name: "a", data: text(600)), TarMember(name: "b/c", data: text(10))]), .tar),
            (gzip(makeTar([TarMember(name: "a", data: text(600))])), .gzip),
        ]
        for (sample, format) in samples {
            for _ in 0..<150 {
                var bytes = sample
                let at = Int(next() % UInt64(bytes.count))
                bytes[at] = UInt8(truncatingIfNeeded: next())
                let whole = run(bytes, format, ArchiveLimits(), cuts: [])
                let single = run(bytes, format, ArchiveLimits(), cuts: Array(0..<bytes.count))
                let cut = Int(next() % UInt64(bytes.count + 1))
                let split = run(bytes, format, ArchiveLimits(), cuts: [cut])
                #expect(single == whole, "mutation at \(at)")
                #expect(split == whole, "mutation at \(at), split at \(cut)")
            }
        }
    }

    @Test func zip64Fields() {
        // One stored entry with ZIP64 sizes in the local and central extra fields, and one deflated entry with a
        // 64-bit data descriptor.
        let data = text(300)
        let packed = deflateBytes(data, windowBits: -15)
        var zip: [UInt8] = []
        var central: [UInt8] = []
        func local(_ name: String, method: UInt16, flags: UInt16, body: [UInt8], sizesInHeader: Bool) {
            let offset = UInt32(zip.count)
            zip.u32(0x0403_4B50); zip.u16(45); zip.u16(flags); zip.u16(method); zip.u16(0); zip.u16(0)
            zip.u32(sizesInHeader ? crc(data) : 0); zip.u32(0xFFFF_FFFF); zip.u32(0xFFFF_FFFF)
            zip.u16(UInt16(name.utf8.count)); zip.u16(20); zip.text(name)
            zip.u16(1); zip.u16(16)
            zip.u32(sizesInHeader ? UInt32(data.count) : 0); zip.u32(0)
            zip.u32(sizesInHeader ? UInt32(body.count) : 0); zip.u32(0)
            zip.append(contentsOf: body)
            if !sizesInHeader {
                zip.u32(0x0807_4B50); zip.u32(crc(data))
                zip.u32(UInt32(body.count)); zip.u32(0); zip.u32(UInt32(data.count)); zip.u32(0)
            }
            central.u32(0x0201_4B50); central.u16(45); central.u16(45); central.u16(flags); central.u16(method)
            central.u16(0); central.u16(0); central.u32(crc(data)); central.u32(0xFFFF_FFFF); central.u32(0xFFFF_FFFF)
            central.u16(UInt16(name.utf8.count)); central.u16(28); central.u16(0); central.u16(0); central.u16(0)
            central.u32(0); central.u32(0xFFFF_FFFF); central.text(name)
            central.u16(1); central.u16(24)
            central.u32(UInt32(data.count)); central.u32(0); central.u32(UInt32(body.count)); central.u32(0)
            central.u32(offset); central.u32(0)
        }
        local("stored.txt", method: 0, flags: 0, body: data, sizesInHeader: true)
        local("deflated.txt", method: 8, flags: 8, body: packed, sizesInHeader: false)
        let centralOffset = UInt64(zip.count)
        zip.append(contentsOf: central)
        let zip64End = UInt64(zip.count)
        zip.u32(0x0606_4B50); zip.u32(44); zip.u32(0); zip.u16(45); zip.u16(45); zip.u32(0); zip.u32(0)
        zip.u32(2); zip.u32(0); zip.u32(2); zip.u32(0)
        zip.u32(UInt32(central.count)); zip.u32(0); zip.u32(UInt32(centralOffset)); zip.u32(0)
        zip.u32(0x0706_4B50); zip.u32(0); zip.u32(UInt32(zip64End)); zip.u32(0); zip.u32(1)
        zip.u32(0x0605_4B50); zip.u16(0xFFFF); zip.u16(0xFFFF); zip.u16(0xFFFF); zip.u16(0xFFFF)
        zip.u32(0xFFFF_FFFF); zip.u32(0xFFFF_FFFF); zip.u16(0)
        #expect(inspect(zip) == nil)
    }

    @Test func wholeArchiveRatio() {
        // Many entries each under the floor, together over it: the whole archive's ratio is judged.
        let members = (0..<40).map { ZipMember("f\($0).txt", [UInt8](repeating: 0x20, count: 60_000)) }
        let finding = inspect(makeZip(members), everySplit: false)
        #expect(finding?.problem == .ratio)
        #expect(finding?.entry == nil)
    }

    @Test func findingIsSticky() {
        let inspector = ArchiveInspector(format: .zip, limits: ArchiveLimits())
        let first = inspector.feed(makeZip([ZipMember("../x", "y")]))
        #expect(first?.problem == .traversal)
        #expect(inspector.feed([1, 2, 3]) == first)
        #expect(inspector.finish() == first)
    }

    // MARK: members judged like uploaded files

    /// A Unix symbolic link member: mode 0o120777 in the high 16 bits of the external attributes, its target as
    /// its content (what Info-ZIP's `zip -y` and Python's zipfile write).
    private static func link(_ name: String, _ target: String, host: UInt16 = 3) -> ZipMember {
        var m = ZipMember(name, target, method: 0)
        m.madeBy = host << 8 | 30
        m.external = 0o120777 << 16
        return m
    }

    @Test(arguments: ["/etc/passwd", "../../../../etc/passwd", "/var/www/html", "a/../../x", "C:\\Windows"])
    func zipSymlinkEscapingIsTraversal(target: String) {
        let finding = inspect(makeZip([ZipMember("ok.txt", "fine"), Self.link("link", target)]))
        #expect(finding?.problem == .traversal, "\(target)")
        #expect(finding?.entry == "link")
        #expect(finding?.detail.hasPrefix("link target escapes") == true)
        // macOS's host number carries the same Unix mode.
        #expect(inspect(makeZip([Self.link("link", target, host: 19)]))?.problem == .traversal)
    }

    @Test func zipSymlinkInsideOrNotALinkPasses() {
        #expect(inspect(makeZip([Self.link("current", "images/a.png")])) == nil)
        // The same content in a regular file (mode 0o100644), or from an MS-DOS host, is not a link.
        var file = Self.link("notes", "/etc/passwd")
        file.external = 0o100644 << 16
        #expect(inspect(makeZip([file])) == nil)
        var dos = Self.link("notes", "/etc/passwd")
        dos.madeBy = 20
        #expect(inspect(makeZip([dos])) == nil)
        // A deflated link is read after inflating; a FIFO is refused like tar's.
        var deflated = Self.link("link", "/etc/passwd")
        deflated.method = 8
        #expect(inspect(makeZip([deflated]))?.problem == .traversal)
        var fifo = ZipMember("pipe", "", method: 0)
        fifo.madeBy = 3 << 8 | 30
        fifo.external = 0o010644 << 16
        #expect(inspect(makeZip([fifo]))?.problem == .forbiddenMember)
    }

    /// An ASi Unix extra field (0x756e: CRC-32, mode, size, uid, gid, link name) gives the mode and the target.
    @Test func asiUnixExtraFieldMakesALink() {
        func asi(mode: UInt16, link: String) -> [UInt8] {
            var body: [UInt8] = [0, 0, 0, 0, UInt8(mode & 0xFF), UInt8(mode >> 8), 0, 0, 0, 0, 0, 0, 0, 0]
            body += Array(link.utf8)
            return [0x6E, 0x75, UInt8(body.count & 0xFF), UInt8(body.count >> 8)] + body
        }
        var member = ZipMember("link", "harmless.txt", method: 0)
        member.centralExtra = asi(mode: 0o120777, link: "/etc/shadow")
        let finding = inspect(makeZip([member]), everySplit: false)
        #expect(finding?.problem == .traversal && finding?.detail == "link target escapes: absolute path")
        member.centralExtra = asi(mode: 0o100644, link: "")
        #expect(inspect(makeZip([member]), everySplit: false) == nil)
        // Without a link name in the field, the content is the target.
        var bare = ZipMember("link", "../../x", method: 0)
        bare.centralExtra = asi(mode: 0o120777, link: "")
        #expect(inspect(makeZip([bare]), everySplit: false)?.problem == .traversal)
    }

    @Test func memberNamesGoThroughTheCallersCheck() {
        let checks = ArchiveMemberChecks(name: { $0.hasSuffix(".php5") || $0.hasPrefix(".") ? "refused \($0)" : nil })
        let finding = inspect(makeZip([ZipMember("a.txt", "x"), ZipMember("dir/shell.php5", "x")]), members: checks)
        #expect(finding?.problem == .forbiddenMember && finding?.detail == "refused shell.php5")
        #expect(inspect(makeZip([ZipMember("sub\\.htaccess", "x")]), members: checks)?.detail == "refused .htaccess")
        // Nested: the inner archive's members are judged too.
        let nested = makeZip([ZipMember("inner.zip", makeZip([ZipMember("shell.php5", "x")]))])
        let inner = inspect(nested, members: checks, everySplit: false)
        #expect(inner?.entry == "inner.zip!/shell.php5")
        // Directories are not judged by name; their files are.
        let directory = makeZip([ZipMember(".git/", [], method: 0), ZipMember("docs/a.txt", "x")])
        #expect(inspect(directory, members: checks) == nil)
    }

    @Test func memberContentIsScannedForMarkup() {
        let scan = ArchiveMemberChecks(markupShortTags: false)
        let pad = String(repeating: "notes ", count: 1000)
        let asp = makeZip([ZipMember("notes.txt", pad + "<% eval request(\"c\") %>" + pad)])
        let finding = inspect(asp, members: scan, everySplit: false)
        #expect(finding?.problem == .forbiddenMember)
        #expect(finding?.detail == "member carries ASP/JSP code (<%) at byte 6000")
        #expect(inspect(asp, everySplit: false) == nil)
        // HTML counts in a text member, not in an XML or HTML one.
        let script = "<script>alert(document.cookie)</script>"
        #expect(inspect(makeZip([ZipMember("readme.txt", pad + script)]), members: scan, everySplit: false)?.problem
            == .forbiddenMember)
        #expect(inspect(docxLike, members: scan) == nil)
        #expect(inspect(makeZip([ZipMember("page.xml", "<?xml version=\"1.0\"?><a>" + script + "</a>")]),
                        members: scan) == nil)
    }
}
