import Foundation
import Testing
@testable import Inspect

/// Samples written by a second, independent implementation: Python's standard library (zipfile,
/// tarfile, gzip, wave). Deterministic: fixed timestamps, no randomness. Runs when `/usr/bin/python3`
/// exists; the in-code samples in `SniffSamples.swift` cover every kind regardless.
@Suite struct SnifferToolSampleTests {
    static let python = "/usr/bin/python3"

    static let script = #"""
        import gzip, io, sys, tarfile, wave, zipfile
        def z(entries, compression=zipfile.ZIP_DEFLATED):
            b = io.BytesIO()
            with zipfile.ZipFile(b, "w") as f:
                for name, data, stored in entries:
                    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
                    info.compress_type = zipfile.ZIP_STORED if stored else compression
                    f.writestr(info, data)
            return b.getvalue()
        def t(fmt):
            b = io.BytesIO()
            with tarfile.open(fileobj=b, mode="w", format=fmt) as f:
                data = b"hello from tarfile\n"
                info = tarfile.TarInfo("dir/hello.txt"); info.size = len(data); info.mtime = 1600000000
                f.addfile(info, io.BytesIO(data))
            return b.getvalue()
        def w():
            b = io.BytesIO()
            with wave.open(b, "wb") as f:
                f.setnchannels(2); f.setsampwidth(2); f.setframerate(44100); f.writeframes(b"\x00\x01" * 400)
            return b.getvalue()
        ct = b'<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>'
        out = {
            "zip": z([("a.txt", b"alpha " * 50, False), ("b.txt", b"beta", False)]),
            "docx": z([("[Content_Types].xml", ct, False), ("_rels/.rels", b"<Relationships/>", False),
                       ("word/document.xml", b"<w:document/>" * 40, False)]),
            "xlsx": z([("[Content_Types].xml", ct, False), ("xl/workbook.xml", b"<workbook/>", False)]),
            "pptx": z([("[Content_Types].xml", ct * 30, False), ("ppt/presentation.xml", b"<p/>", False)]),
            "odt": z([("mimetype", b"application/vnd.oasis.opendocument.text", True),
                      ("content.xml", b"<office:document-content/>", False)]),
            "epub": z([("mimetype", b"application/epub+zip", True), ("META-INF/container.xml", b"<c/>", False)]),
            "tar": t(tarfile.USTAR_FORMAT),
            "tar-gnu": t(tarfile.GNU_FORMAT),
            "tar-pax": t(tarfile.PAX_FORMAT),
            "gzip": gzip.compress(b"plain text inside gzip\n" * 20, mtime=0),
            "tar-gz": gzip.compress(t(tarfile.USTAR_FORMAT), mtime=0),
            "wav": w(),
        }
        for name, data in out.items():
            sys.stdout.write(name + " " + data.hex() + "\n")
        """#

    static let expected: [String: (SniffKind, SniffKind?)] = [
        "zip": (.zip, nil), "docx": (.docx, nil), "xlsx": (.xlsx, nil), "pptx": (.pptx, nil), "odt": (.odt, nil),
        "epub": (.epub, nil), "tar": (.tar, nil), "tar-gnu": (.tar, nil), "tar-pax": (.tar, nil),
        "gzip": (.gzip, .text), "tar-gz": (.gzip, .tar), "wav": (.wav, nil),
    ]

    static func generate() throws -> [String: [UInt8]] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments = ["-I", "-c", script]
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { return [:] }
        var out: [String: [UInt8]] = [:]
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2 else { continue }
            let hex = Array(parts[1].utf8)
            var bytes = [UInt8]()
            var i = 0
            while i + 1 < hex.count {
                bytes.append(UInt8(String(decoding: hex[i...i + 1], as: UTF8.self), radix: 16) ?? 0)
                i += 2
            }
            out[String(parts[0])] = bytes
        }
        return out
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: python)))
    func pythonMadeFilesSniffCorrectly() throws {
        let files = try Self.generate()
        #expect(Set(files.keys) == Set(Self.expected.keys))
        for (name, bytes) in files.sorted(by: { $0.key < $1.key }) {
            guard let (kind, inner) = Self.expected[name] else { continue }
            let whole = Sniffer.sniff(bytes)
            #expect(whole.kind == kind, "\(name): \(whole)")
            if let inner { #expect(whole.inner == inner, "\(name): \(whole)") }
            var s = Sniffer()
            for b in bytes.prefix(5000) { s.feed([b]) }
            #expect(s.finish() == whole, "\(name) byte by byte")
            for split in stride(from: 0, through: min(600, bytes.count), by: 1) {
                #expect(sniffChunked(bytes, splits: [split]) == whole, "\(name) split at \(split)")
            }
        }
    }
}
