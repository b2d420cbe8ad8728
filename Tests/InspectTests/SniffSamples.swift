import CZlib
import Inspect

// Minimal but structurally valid files, generated here rather than downloaded. Each builder writes
// the format's real header fields (CRCs, checksums, sizes, offsets) so the samples are genuine
// instances of their type, not just the magic bytes.

/// One sniffing-table row: a generated file and what it must sniff as.
struct Sample: Sendable, CustomStringConvertible {
    let name: String
    let bytes: [UInt8]
    let kind: SniffKind
    var interpreter: String? = nil
    var inner: SniffKind? = nil
    var description: String { name }
}

// MARK: - Byte helpers

extension Array where Element == UInt8 {
    mutating func ascii(_ s: String) { append(contentsOf: Array(s.utf8)) }
    mutating func le16(_ v: Int) { append(UInt8(v & 0xFF)); append(UInt8(v >> 8 & 0xFF)) }
    mutating func le32(_ v: Int) { le16(v & 0xFFFF); le16(v >> 16 & 0xFFFF) }
    mutating func be16(_ v: Int) { append(UInt8(v >> 8 & 0xFF)); append(UInt8(v & 0xFF)) }
    mutating func be32(_ v: Int) { be16(v >> 16 & 0xFFFF); be16(v & 0xFFFF) }
    mutating func zeros(_ n: Int) { append(contentsOf: [UInt8](repeating: 0, count: n)) }
    mutating func pad(to n: Int) { if count < n { zeros(n - count) } }
}

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

enum Zlib {
    static func crc(_ data: [UInt8]) -> Int {
        Int(data.withUnsafeBufferPointer { crc32(0, $0.baseAddress, UInt32($0.count)) })
    }

    /// Deflate with zlib: windowBits 15 zlib, 31 gzip, -15 raw.
    static func deflate(_ data: [UInt8], windowBits: Int32) -> [UInt8] {
        var strm = z_stream()
        precondition(czlib_deflate_init2(&strm, 9, windowBits) == Z_OK)
        defer { deflateEnd(&strm) }
        var out = [UInt8](repeating: 0, count: data.count + 1024)
        var input = data
        let produced = input.withUnsafeMutableBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in
                strm.next_in = src.baseAddress
                strm.avail_in = UInt32(src.count)
                strm.next_out = dst.baseAddress
                strm.avail_out = UInt32(dst.count)
                precondition(CZlib.deflate(&strm, Z_FINISH) == Z_STREAM_END)
                return dst.count - Int(strm.avail_out)
            }
        }
        return Array(out[0..<produced])
    }
}

// MARK: - Builders

enum Build {
    static func pngChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        var out = [UInt8]()
        out.be32(data.count)
        let typed = bytes(type) + data
        out += typed
        out.be32(Zlib.crc(typed))
        return out
    }

    /// A 1x1 RGBA PNG with correct chunk CRCs and a zlib IDAT; `text` adds a tEXt chunk.
    static func png(text: String? = nil) -> [UInt8] {
        var out: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        var ihdr = [UInt8]()
        ihdr.be32(1)
        ihdr.be32(1)
        ihdr += [8, 6, 0, 0, 0]
        out += pngChunk("IHDR", ihdr)
        if let text { out += pngChunk("tEXt", bytes("Comment") + [0] + bytes(text)) }
        out += pngChunk("IDAT", Zlib.deflate([0, 0xFF, 0x00, 0x00, 0xFF], windowBits: 15))
        out += pngChunk("IEND", [])
        return out
    }

    /// JFIF APP0, a COM segment, then EOI.
    static func jpeg(comment: String = "formwall") -> [UInt8] {
        var out: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10]
        out.ascii("JFIF\u{0}")
        out += [1, 1, 0, 0, 1, 0, 1, 0, 0]
        out += [0xFF, 0xFE]
        out.be16(comment.utf8.count + 2)
        out.ascii(comment)
        out += [0xFF, 0xD9]
        return out
    }

    /// A 1x1 GIF with a two-colour global table.
    static func gif(_ version: String = "89a") -> [UInt8] {
        var out = bytes("GIF" + version)
        out.le16(1)
        out.le16(1)
        out += [0x80, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF]
        out += [0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3B]
        return out
    }

    static func riff(_ form: String, _ chunks: [(String, [UInt8])]) -> [UInt8] {
        var body = bytes(form)
        for (id, data) in chunks {
            body.ascii(id)
            body.le32(data.count)
            body += data
            if data.count % 2 == 1 { body.append(0) }
        }
        var out = bytes("RIFF")
        out.le32(body.count)
        return out + body
    }

    /// A lossless WebP container with a VP8L 1x1 header.
    static func webp() -> [UInt8] {
        riff("WEBP", [("VP8L", [0x2F, 0x00, 0x00, 0x00, 0x10, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xFE, 0x07, 0x00])])
    }

    /// 16-bit mono 8 kHz PCM WAV with four samples.
    static func wav() -> [UInt8] {
        var fmt = [UInt8]()
        fmt.le16(1)
        fmt.le16(1)
        fmt.le32(8000)
        fmt.le32(16000)
        fmt.le16(2)
        fmt.le16(16)
        return riff("WAVE", [("fmt ", fmt), ("data", [0, 0, 0xFF, 0x7F, 0, 0x80, 0, 0])])
    }

    static func avi() -> [UInt8] {
        var avih = [UInt8]()
        avih.zeros(56)
        return riff("AVI ", [("LIST", bytes("hdrl") + bytes("avih") + [56, 0, 0, 0] + avih)])
    }

    /// BITMAPINFOHEADER of 1x1 at 24 bits; also used inside the ICO.
    static func dib(height: Int = 1) -> [UInt8] {
        var out = [UInt8]()
        out.le32(40)
        out.le32(1)
        out.le32(height)
        out.le16(1)
        out.le16(24)
        out.zeros(24)
        return out
    }

    static func bmp() -> [UInt8] {
        var out = bytes("BM")
        out.le32(14 + 40 + 4)
        out.le32(0)
        out.le32(54)
        return out + dib() + [0, 0, 0xFF, 0]
    }

    static func tiff(bigEndian: Bool) -> [UInt8] {
        var out = bigEndian ? bytes("MM") + [0, 42, 0, 0, 0, 8] : bytes("II") + [42, 0, 8, 0, 0, 0]
        // One IFD entry (ImageWidth = 1), then no next IFD.
        out += bigEndian ? [0, 1, 1, 0, 0, 3, 0, 0, 0, 1, 0, 1, 0, 0] : [1, 0, 0, 1, 3, 0, 1, 0, 0, 0, 1, 0, 0, 0]
        out.zeros(4)
        return out
    }

    static func ico() -> [UInt8] {
        let image = dib(height: 2) + [0, 0, 0xFF, 0] + [0, 0, 0, 0]
        var out: [UInt8] = [0, 0, 1, 0, 1, 0]
        out += [1, 1, 0, 0]
        out.le16(1)
        out.le16(24)
        out.le32(image.count)
        out.le32(22)
        return out + image
    }

    /// An ISO BMFF file: `ftyp` with the given brands, then a `free` and an empty `mdat`.
    static func isoBMFF(major: String, compatible: [String]) -> [UInt8] {
        var out = [UInt8]()
        out.be32(16 + 4 * compatible.count)
        out.ascii("ftyp" + major)
        out.be32(0)
        for brand in compatible { out.ascii(brand) }
        out.be32(8)
        out.ascii("free")
        out.be32(8)
        out.ascii("mdat")
        return out
    }

    /// QuickTime without `ftyp`: a `moov` atom holding an `mvhd`.
    static func bareMoov() -> [UInt8] {
        var out = [UInt8]()
        out.be32(8 + 108)
        out.ascii("moov")
        out.be32(108)
        out.ascii("mvhd")
        out.zeros(100)
        return out
    }

    static func pdf() -> [UInt8] {
        var out = bytes("%PDF-1.4\n%\u{E2}\u{E3}\u{CF}\u{D3}\n")
        let objects = [
            "1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n",
            "2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n",
            "3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 72 72] >>\nendobj\n",
        ]
        var offsets = [Int]()
        for o in objects {
            offsets.append(out.count)
            out.ascii(o)
        }
        let xref = out.count
        out.ascii("xref\n0 4\n0000000000 65535 f \n")
        for o in offsets { out.ascii(String(repeating: "0", count: 10 - String(o).count) + "\(o) 00000 n \n") }
        out.ascii("trailer\n<< /Size 4 /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n")
        return out
    }

    /// A ZIP built by hand: local headers, central directory, end record. `deflate` compresses
    /// entries other than `mimetype` with raw deflate; `descriptor` uses data descriptors.
    static func zip(_ entries: [(String, [UInt8])], deflate: Bool = true, descriptor: Bool = false) -> [UInt8] {
        var out = [UInt8]()
        var central = [UInt8]()
        for (name, data) in entries {
            let stored = !deflate || name == "mimetype"
            let payload = stored ? data : Zlib.deflate(data, windowBits: -15)
            let method = stored ? 0 : 8
            let flags = descriptor && !stored ? 0x08 : 0
            let crc = Zlib.crc(data)
            let offset = out.count
            out.ascii("PK\u{3}\u{4}")
            out.le16(20)
            out.le16(flags)
            out.le16(method)
            out.le16(0)
            out.le16(0x21)
            out.le32(flags != 0 ? 0 : crc)
            out.le32(flags != 0 ? 0 : payload.count)
            out.le32(flags != 0 ? 0 : data.count)
            out.le16(name.utf8.count)
            out.le16(0)
            out.ascii(name)
            out += payload
            if flags != 0 {
                out.ascii("PK\u{7}\u{8}")
                out.le32(crc)
                out.le32(payload.count)
                out.le32(data.count)
            }
            central.ascii("PK\u{1}\u{2}")
            central.le16(20)
            central.le16(20)
            central.le16(flags)
            central.le16(method)
            central.le16(0)
            central.le16(0x21)
            central.le32(crc)
            central.le32(payload.count)
            central.le32(data.count)
            central.le16(name.utf8.count)
            central.zeros(12)
            central.le32(offset)
            central.ascii(name)
        }
        let cdOffset = out.count
        out += central
        out.ascii("PK\u{5}\u{6}")
        out.zeros(4)
        out.le16(entries.count)
        out.le16(entries.count)
        out.le32(central.count)
        out.le32(cdOffset)
        out.le16(0)
        return out
    }

    static let contentTypes = bytes(
        """
        <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
        <Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">\
        <Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>\
        <Default Extension="xml" ContentType="application/xml"/></Types>
        """)

    static func ooxml(_ dir: String, _ part: String, descriptor: Bool = false) -> [UInt8] {
        zip([
            ("[Content_Types].xml", contentTypes),
            ("_rels/.rels", bytes("<?xml version=\"1.0\"?><Relationships/>")),
            ("\(dir)/\(part)", bytes("<?xml version=\"1.0\"?><doc>hello</doc>")),
        ], descriptor: descriptor)
    }

    static func odf(_ mime: String) -> [UInt8] {
        zip([
            ("mimetype", bytes(mime)),
            ("content.xml", bytes("<?xml version=\"1.0\"?><office:document-content/>")),
            ("META-INF/manifest.xml", bytes("<?xml version=\"1.0\"?><manifest:manifest/>")),
        ])
    }

    /// A tar archive with one file: ustar header with octal fields and a correct checksum.
    static func tar(name: String = "hello.txt", content: [UInt8] = bytes("hello\n"), gnu: Bool = false) -> [UInt8] {
        func octal(_ v: Int, _ width: Int) -> [UInt8] {
            let digits = String(v, radix: 8)
            return bytes(String(repeating: "0", count: width - 1 - digits.count) + digits) + [0]
        }
        var h = bytes(name)
        h.pad(to: 100)
        h += octal(0o644, 8) + octal(0, 8) + octal(0, 8) + octal(content.count, 12) + octal(1_700_000_000, 12)
        h += bytes("        ")  // checksum placeholder
        h.append(0x30)  // regular file
        h.pad(to: 257)
        h += gnu ? bytes("ustar  \u{0}") : bytes("ustar\u{0}00")
        h += bytes("root")
        h.pad(to: 512)
        let sum = h.reduce(0) { $0 + Int($1) }
        let check = String(sum, radix: 8)
        let field = bytes(String(repeating: "0", count: 6 - check.count) + check) + [0, 0x20]
        h.replaceSubrange(148..<156, with: field)
        var out = h + content
        out.pad(to: 512 + (content.count + 511) / 512 * 512)
        out.zeros(1024)
        return out
    }

    static func ebml(docType: String) -> [UInt8] {
        var header: [UInt8] = [0x42, 0x86, 0x81, 0x01, 0x42, 0xF7, 0x81, 0x01, 0x42, 0xF2, 0x81, 0x04]
        header += [0x42, 0xF3, 0x81, 0x08, 0x42, 0x82, UInt8(0x80 | docType.utf8.count)] + bytes(docType)
        header += [0x42, 0x87, 0x81, 0x04, 0x42, 0x85, 0x81, 0x02]
        var out: [UInt8] = [0x1A, 0x45, 0xDF, 0xA3, UInt8(0x80 | header.count)] + header
        out += [0x18, 0x53, 0x80, 0x67, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]  // Segment, unknown size
        return out
    }

    /// An MPEG audio layer III frame of silence: header then zeros to the frame length.
    static func mp3Frame(_ second: UInt8, _ third: UInt8) -> [UInt8] {
        [0xFF, second, third, 0xC4] + [UInt8](repeating: 0, count: 413)
    }

    static func id3(then body: [UInt8]) -> [UInt8] {
        var frame = bytes("TIT2")
        frame.be32(6)
        frame += [0, 0, 3] + bytes("Song")
        var out = bytes("ID3") + [4, 0, 0]
        let n = frame.count
        out += [UInt8(n >> 21 & 0x7F), UInt8(n >> 14 & 0x7F), UInt8(n >> 7 & 0x7F), UInt8(n & 0x7F)]
        return out + frame + body
    }

    static func flac() -> [UInt8] {
        var out = bytes("fLaC") + [0x80, 0, 0, 34]
        out += [0x10, 0x00, 0x10, 0x00, 0, 0, 0, 0, 0, 0, 0x0A, 0xC4, 0x40, 0xF0, 0, 0, 0, 0]
        out.zeros(16)  // MD5
        return out
    }

    static func ogg() -> [UInt8] {
        let packet: [UInt8] = [1] + bytes("vorbis")
            + [0, 0, 0, 0, 1, 0x44, 0xAC, 0, 0, 0, 0, 0, 0, 0, 0xEE, 0x02, 0, 0, 0, 0, 0xB8, 1]
        var out = bytes("OggS") + [0, 2]
        out.zeros(8)  // granule
        out.le32(0x1234)  // serial
        out.le32(0)  // sequence
        out.le32(0)  // CRC (not checked by sniffing)
        out += [1, UInt8(packet.count)]
        return out + packet
    }

    /// ELF64 little-endian executable header.
    static func elf() -> [UInt8] {
        var out: [UInt8] = [0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0]
        out.zeros(8)
        out.le16(2)  // ET_EXEC
        out.le16(0x3E)  // x86-64
        out.le32(1)
        out.zeros(8 + 8 + 8)  // entry, phoff, shoff
        out.le32(0)
        out.le16(64)
        out.le16(56)
        out.le16(0)
        out.le16(64)
        out.le16(0)
        out.le16(0)
        return out
    }

    /// DOS header with `e_lfanew` = 0x80, a stub, then `PE\0\0` and a COFF header for x86-64.
    static func pe(lfanew: Int = 0x80, signature: Bool = true) -> [UInt8] {
        var out = bytes("MZ") + [0x90, 0, 3, 0, 0, 0, 4, 0, 0, 0, 0xFF, 0xFF, 0, 0, 0xB8, 0]
        out.pad(to: 0x3C)
        out.le32(lfanew)
        out.ascii("\u{0E}\u{1F}This program cannot be run in DOS mode.\r\r\n$")
        out.pad(to: lfanew)
        if signature {
            out += bytes("PE") + [0, 0]
            out.le16(0x8664)
            out.le16(0)
            out.zeros(12)
            out.le16(0)
            out.le16(0x22)
        }
        return out
    }

    static func machO64() -> [UInt8] {
        var out: [UInt8] = [0xCF, 0xFA, 0xED, 0xFE]
        out.le32(0x0100_000C)  // arm64
        out.le32(0)
        out.le32(2)  // MH_EXECUTE
        out.zeros(16)
        return out
    }

    static func machOFat(_ magic: UInt32 = 0xCAFE_BABE) -> [UInt8] {
        var out = [UInt8]()
        out.be32(Int(magic))
        out.be32(2)
        for cpu in [0x0100_0007, 0x0100_000C] {
            out.be32(cpu)
            out.be32(3)
            if magic == 0xCAFE_BABF { out.zeros(4) }
            out.be32(0x4000)
            if magic == 0xCAFE_BABF { out.zeros(4) }
            out.be32(0x1000)
            out.be32(14)
            if magic == 0xCAFE_BABF { out.zeros(4) }
        }
        return out
    }

    /// Class file version 52 (Java 8), an empty-ish constant pool.
    static func javaClass() -> [UInt8] {
        var out: [UInt8] = [0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 52, 0, 3]
        out += [7, 0, 2, 1, 0, 5] + bytes("Hello")
        out += [0, 0x21, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        return out
    }

    static func wasm() -> [UInt8] {
        [0x00, 0x61, 0x73, 0x6D, 0x01, 0x00, 0x00, 0x00, 0x01, 0x04, 0x01, 0x60, 0x00, 0x00]
    }
}

// MARK: - The table

enum Samples {
    static let tarFile = Build.tar()

    static let all: [Sample] = [
        Sample(name: "png", bytes: Build.png(), kind: .png),
        Sample(name: "jpeg", bytes: Build.jpeg(), kind: .jpeg),
        Sample(name: "gif87a", bytes: Build.gif("87a"), kind: .gif),
        Sample(name: "gif89a", bytes: Build.gif(), kind: .gif),
        Sample(name: "webp", bytes: Build.webp(), kind: .webp),
        Sample(name: "bmp", bytes: Build.bmp(), kind: .bmp),
        Sample(name: "tiff-le", bytes: Build.tiff(bigEndian: false), kind: .tiff),
        Sample(name: "tiff-be", bytes: Build.tiff(bigEndian: true), kind: .tiff),
        Sample(name: "ico", bytes: Build.ico(), kind: .ico),
        Sample(name: "heic", bytes: Build.isoBMFF(major: "heic", compatible: ["mif1", "heic"]), kind: .heic),
        Sample(name: "heic-mif1", bytes: Build.isoBMFF(major: "mif1", compatible: ["mif1", "heic"]), kind: .heic),
        Sample(name: "heif", bytes: Build.isoBMFF(major: "mif1", compatible: ["mif1"]), kind: .heif),
        Sample(name: "avif", bytes: Build.isoBMFF(major: "avif", compatible: ["avif", "mif1", "miaf"]), kind: .avif),
        Sample(name: "avif-mif1", bytes: Build.isoBMFF(major: "mif1", compatible: ["mif1", "avif"]), kind: .avif),

        Sample(name: "pdf", bytes: Build.pdf(), kind: .pdf),
        Sample(name: "pdf-after-junk", bytes: bytes("\u{0}\u{1}junk\n") + Build.pdf(), kind: .pdf),
        Sample(name: "zip", bytes: Build.zip([("hello.txt", bytes("hello\n")), ("b.bin", [0, 1, 2])]), kind: .zip),
        Sample(name: "zip-stored", bytes: Build.zip([("a.txt", bytes("a"))], deflate: false), kind: .zip),
        Sample(name: "zip-empty", bytes: Build.zip([]), kind: .zip),
        Sample(name: "docx", bytes: Build.ooxml("word", "document.xml"), kind: .docx),
        Sample(name: "docx-descriptor", bytes: Build.ooxml("word", "document.xml", descriptor: true), kind: .docx),
        Sample(name: "xlsx", bytes: Build.ooxml("xl", "workbook.xml"), kind: .xlsx),
        Sample(name: "pptx", bytes: Build.ooxml("ppt", "presentation.xml"), kind: .pptx),
        Sample(name: "odt", bytes: Build.odf("application/vnd.oasis.opendocument.text"), kind: .odt),
        Sample(name: "ods", bytes: Build.odf("application/vnd.oasis.opendocument.spreadsheet"), kind: .ods),
        Sample(name: "odp", bytes: Build.odf("application/vnd.oasis.opendocument.presentation"), kind: .odp),
        Sample(name: "odg", bytes: Build.odf("application/vnd.oasis.opendocument.graphics"), kind: .odg),
        Sample(name: "odt-template-is-zip", bytes: Build.odf("application/vnd.oasis.opendocument.text-template"),
            kind: .zip),
        Sample(name: "epub", bytes: Build.odf("application/epub+zip"), kind: .epub),
        Sample(name: "jar", bytes: Build.zip([("META-INF/MANIFEST.MF", bytes("Manifest-Version: 1.0\r\n"))]),
            kind: .jar),
        Sample(name: "gzip-text", bytes: Zlib.deflate(bytes("hello gzip\n"), windowBits: 31), kind: .gzip,
            inner: .text),
        Sample(name: "tar-gz", bytes: Zlib.deflate(tarFile, windowBits: 31), kind: .gzip, inner: .tar),
        Sample(name: "7z", bytes: [0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C, 0, 4] + [UInt8](repeating: 0, count: 24),
            kind: .sevenZip),
        Sample(name: "rar4", bytes: bytes("Rar!\u{1A}\u{7}\u{0}") + [0xCF, 0x90, 0x73, 0, 0, 0x0D, 0, 0, 0, 0, 0, 0, 0],
            kind: .rar4),
        Sample(name: "rar5", bytes: bytes("Rar!\u{1A}\u{7}\u{1}\u{0}") + [0x33, 0x92, 0xB5, 0xE5, 0x0A, 0x01, 0x05],
            kind: .rar5),
        Sample(name: "tar", bytes: tarFile, kind: .tar),
        Sample(name: "tar-gnu", bytes: Build.tar(gnu: true), kind: .tar),
        Sample(name: "bzip2", bytes: bytes("BZh91AY&SY") + [0x4E, 0xEC, 0xE8, 0x36, 0, 0, 0x02, 0x51], kind: .bzip2),
        Sample(name: "xz", bytes: [0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00, 0x00, 0x04, 0xE6, 0xD6, 0xB4, 0x46], kind: .xz),
        Sample(name: "zstd", bytes: [0x28, 0xB5, 0x2F, 0xFD, 0x24, 0x05, 0x29, 0x00, 0x00, 0x68, 0x65, 0x6C],
            kind: .zstd),

        Sample(name: "mp4", bytes: Build.isoBMFF(major: "isom", compatible: ["isom", "iso2", "avc1", "mp41"]),
            kind: .mp4),
        Sample(name: "mp4-mp42", bytes: Build.isoBMFF(major: "mp42", compatible: ["mp42", "isom"]), kind: .mp4),
        Sample(name: "mov", bytes: Build.isoBMFF(major: "qt  ", compatible: ["qt  "]), kind: .quicktime),
        Sample(name: "mov-bare-moov", bytes: Build.bareMoov(), kind: .quicktime),
        Sample(name: "m4a", bytes: Build.isoBMFF(major: "M4A ", compatible: ["M4A ", "mp42", "isom"]), kind: .m4a),
        Sample(name: "3gp", bytes: Build.isoBMFF(major: "3gp4", compatible: ["isom", "3gp4"]), kind: .threeGPP),
        Sample(name: "webm", bytes: Build.ebml(docType: "webm"), kind: .webm),
        Sample(name: "mkv", bytes: Build.ebml(docType: "matroska"), kind: .matroska),
        Sample(name: "mp3-id3", bytes: Build.id3(then: Build.mp3Frame(0xFB, 0x90)), kind: .mp3),
        Sample(name: "mp3-fffb", bytes: Build.mp3Frame(0xFB, 0x90), kind: .mp3),
        Sample(name: "mp3-fff3", bytes: Build.mp3Frame(0xF3, 0x84), kind: .mp3),
        Sample(name: "mp3-fff2", bytes: Build.mp3Frame(0xF2, 0x84), kind: .mp3),
        Sample(name: "wav", bytes: Build.wav(), kind: .wav),
        Sample(name: "avi", bytes: Build.avi(), kind: .avi),
        Sample(name: "ogg", bytes: Build.ogg(), kind: .ogg),
        Sample(name: "flac", bytes: Build.flac(), kind: .flac),
        Sample(name: "flac-id3", bytes: Build.id3(then: Build.flac()), kind: .flac),

        Sample(name: "html-doctype", bytes: bytes("<!DOCTYPE html>\n<html><body>hi</body></html>\n"), kind: .html),
        Sample(name: "html-bom-space-upper", bytes: bytes("\u{FEFF} \r\n\t<HTML lang=en><p>x"), kind: .html),
        Sample(name: "html-script", bytes: bytes("<script>alert(1)</script>"), kind: .html),
        Sample(name: "html-head", bytes: bytes("<head><title>t</title></head>"), kind: .html),
        Sample(name: "html-iframe", bytes: bytes("\n<iframe src=//evil.example/>"), kind: .html),
        Sample(name: "html-body", bytes: bytes("<BODY onload=alert(1)>"), kind: .html),
        Sample(name: "html-comment", bytes: bytes("<!-- generated -->\n<div>x</div>"), kind: .html),
        Sample(name: "xhtml", bytes: bytes("<?xml version=\"1.0\"?>\n<html xmlns=\"http://www.w3.org/1999/xhtml\"/>"),
            kind: .html),
        Sample(name: "svg", bytes: bytes("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\"/>"),
            kind: .svg),
        Sample(name: "svg-prolog", bytes: bytes("""
            <?xml version="1.0" encoding="UTF-8" standalone="no"?>
            <!-- Created with an editor -->
            <!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
            <svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>
            """), kind: .svg),
        Sample(name: "svg-internal-subset", bytes: bytes("""
            <?xml version="1.0"?><!DOCTYPE x [ <!ENTITY a "b"> ]><svg:svg xmlns:svg="http://www.w3.org/2000/svg"/>
            """), kind: .svg),
        Sample(name: "xml", bytes: bytes("<?xml version=\"1.0\"?>\n<note><to>you</to></note>\n"), kind: .xml),
        Sample(name: "xml-bom", bytes: bytes("\u{FEFF}<?xml version=\"1.0\"?><rss version=\"2.0\"/>"), kind: .xml),

        Sample(name: "elf", bytes: Build.elf(), kind: .elf),
        Sample(name: "pe", bytes: Build.pe(), kind: .pe),
        Sample(name: "pe-far-header", bytes: Build.pe(lfanew: 0x200), kind: .pe),
        Sample(name: "mz-only", bytes: Build.pe(lfanew: 0x40, signature: false), kind: .dosExecutable),
        Sample(name: "mach-o-64", bytes: Build.machO64(), kind: .machO),
        Sample(name: "mach-o-32-be", bytes: [0xFE, 0xED, 0xFA, 0xCE, 0, 0, 0, 18, 0, 0, 0, 0, 0, 0, 0, 2],
            kind: .machO),
        Sample(name: "mach-o-fat", bytes: Build.machOFat(), kind: .machO),
        Sample(name: "mach-o-fat64", bytes: Build.machOFat(0xCAFE_BABF), kind: .machO),
        Sample(name: "java-class", bytes: Build.javaClass(), kind: .javaClass),
        Sample(name: "wasm", bytes: Build.wasm(), kind: .wasm),

        Sample(name: "sh", bytes: bytes("#!/bin/sh\necho hello\n"), kind: .shellScript, interpreter: "sh"),
        Sample(name: "bash-space", bytes: bytes("#! /usr/local/bin/bash -e\nls\n"), kind: .shellScript,
            interpreter: "bash"),
        Sample(name: "env-python3", bytes: bytes("#!/usr/bin/env python3\nprint(1)\n"), kind: .python,
            interpreter: "python3"),
        Sample(name: "env-S-perl", bytes: bytes("#!/usr/bin/env -S LC_ALL=C perl -w\nprint 1;\n"), kind: .perl,
            interpreter: "perl"),
        Sample(name: "node", bytes: bytes("#!/usr/bin/node\nconsole.log(1)\n"), kind: .javascript, interpreter: "node"),
        Sample(name: "ruby", bytes: bytes("#!/usr/bin/ruby3.2\nputs 1\n"), kind: .ruby, interpreter: "ruby3.2"),
        Sample(name: "awk", bytes: bytes("#!/usr/bin/awk -f\n{print}\n"), kind: .script, interpreter: "awk"),
        Sample(name: "php", bytes: bytes("<?php echo 'hi'; ?>\n"), kind: .php),
        Sample(name: "php-upper-late", bytes: bytes(String(repeating: "text line\n", count: 300) + "<?PHP exit;"),
            kind: .php),
        Sample(name: "php-short-echo", bytes: bytes("<?=`$_GET[0]`?>"), kind: .php),
        Sample(name: "php-shebang", bytes: bytes("#!/usr/bin/php\n<?php echo 1;\n"), kind: .php, interpreter: "php"),

        Sample(name: "text", bytes: bytes("hello, world\n\tsecond line\r\n"), kind: .text),
        Sample(name: "text-utf8", bytes: bytes("h\u{E9}llo \u{2014} \u{FC}n\u{EF}code \u{2713} \u{1F600}\n"),
            kind: .text),
        Sample(name: "json", bytes: bytes("{\"a\": [1, 2, 3]}\n"), kind: .text),
        Sample(name: "csv", bytes: bytes("a,b\n1,2\n"), kind: .text),
        Sample(name: "text-starting-mz",
            bytes: bytes("MZ is a two-letter abbreviation used in many different contexts, not only executables."),
            kind: .text),
        Sample(name: "binary-nul", bytes: bytes("abc\u{0}def"), kind: .binary),
        Sample(name: "binary-escape", bytes: bytes("abc\u{1B}[31mred"), kind: .binary),
        Sample(name: "binary-bad-utf8", bytes: [0x61, 0xC0, 0xAF, 0x62], kind: .binary),
        Sample(name: "binary-surrogate", bytes: [0xED, 0xA0, 0x80], kind: .binary),
        Sample(name: "binary-truncated-utf8", bytes: [0x61, 0xE2, 0x82], kind: .binary),
        Sample(name: "empty", bytes: [], kind: .empty),
    ]
}
