import Testing
@testable import Inspect

@Suite struct SniffCompatibilityTests {
    struct Row: Sendable, CustomStringConvertible {
        let kind: SniffKind
        let declared: String
        let compatible: Bool
        var description: String { "\(kind.label) declared \(declared) → \(compatible)" }
    }

    static let rows: [Row] = [
        // Exact and aliases.
        Row(kind: .jpeg, declared: "image/jpeg", compatible: true),
        Row(kind: .jpeg, declared: "image/jpg", compatible: true),
        Row(kind: .jpeg, declared: "IMAGE/JPG", compatible: true),
        Row(kind: .jpeg, declared: " image/pjpeg ; q=1", compatible: true),
        Row(kind: .png, declared: "image/x-png", compatible: true),
        Row(kind: .png, declared: "image/apng", compatible: true),
        Row(kind: .png, declared: "image/jpeg", compatible: false),
        Row(kind: .gif, declared: "image/png", compatible: false),
        Row(kind: .ico, declared: "image/x-icon", compatible: true),
        Row(kind: .bmp, declared: "image/x-ms-bmp", compatible: true),
        Row(kind: .tiff, declared: "image/tif", compatible: true),
        Row(kind: .tiff, declared: "image/x-canon-cr2", compatible: true),  // unknown image type, TIFF-based raw
        Row(kind: .heic, declared: "image/heif", compatible: true),
        Row(kind: .avif, declared: "image/heic", compatible: false),
        Row(kind: .zip, declared: "application/x-zip-compressed", compatible: true),
        Row(kind: .zip, declared: "application/zip", compatible: true),
        Row(kind: .xml, declared: "text/xml", compatible: true),
        Row(kind: .xml, declared: "application/rss+xml", compatible: true),
        Row(kind: .svg, declared: "image/svg+xml", compatible: true),
        Row(kind: .svg, declared: "text/xml", compatible: true),
        Row(kind: .xml, declared: "image/svg+xml", compatible: false),
        Row(kind: .html, declared: "application/xhtml+xml", compatible: true),
        Row(kind: .mp3, declared: "audio/mp3", compatible: true),
        Row(kind: .wav, declared: "audio/x-wav", compatible: true),
        Row(kind: .mp4, declared: "video/quicktime", compatible: true),
        Row(kind: .quicktime, declared: "video/mp4", compatible: true),
        Row(kind: .mp4, declared: "video/x-flv", compatible: true),  // unknown video type, video bytes
        Row(kind: .mp4, declared: "audio/mpeg", compatible: false),
        Row(kind: .webm, declared: "video/x-matroska", compatible: true),
        Row(kind: .matroska, declared: "video/webm", compatible: false),
        Row(kind: .ogg, declared: "audio/ogg", compatible: true),
        Row(kind: .pe, declared: "application/x-msdownload", compatible: true),
        Row(kind: .elf, declared: "application/x-executable", compatible: true),
        Row(kind: .rar5, declared: "application/x-rar-compressed", compatible: true),
        Row(kind: .gzip, declared: "application/x-gzip", compatible: true),
        Row(kind: .gzip, declared: "application/x-compressed-tar", compatible: true),
        Row(kind: .tar, declared: "application/gzip", compatible: false),

        // Containers: a less specific declaration, and a generic ZIP declared as a ZIP-based type.
        Row(kind: .docx, declared: "application/zip", compatible: true),
        Row(kind: .docx, declared: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            compatible: true),
        Row(kind: .docx, declared: "application/vnd.ms-word.document.macroEnabled.12", compatible: true),
        Row(kind: .docx, declared: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            compatible: false),
        Row(kind: .xlsx, declared: "application/vnd.ms-excel", compatible: true),
        Row(kind: .odt, declared: "application/vnd.oasis.opendocument.text-template", compatible: true),
        Row(kind: .odt, declared: "application/vnd.oasis.opendocument.spreadsheet", compatible: false),
        Row(kind: .zip, declared: "application/vnd.openxmlformats-officedocument.presentationml.presentation",
            compatible: true),
        Row(kind: .zip, declared: "application/epub+zip", compatible: true),
        Row(kind: .zip, declared: "application/vnd.android.package-archive", compatible: true),
        Row(kind: .zip, declared: "application/pdf", compatible: false),
        Row(kind: .jar, declared: "application/x-java-archive", compatible: true),

        // Declarations that say nothing, and the empty part.
        Row(kind: .php, declared: "application/octet-stream", compatible: true),
        Row(kind: .elf, declared: "", compatible: true),
        Row(kind: .empty, declared: "image/png", compatible: true),

        // Text.
        Row(kind: .text, declared: "text/plain", compatible: true),
        Row(kind: .text, declared: "text/csv", compatible: true),
        Row(kind: .text, declared: "application/json", compatible: true),
        Row(kind: .text, declared: "application/ld+json", compatible: true),
        Row(kind: .text, declared: "text/markdown; charset=UTF-8", compatible: true),
        Row(kind: .text, declared: "text/x-python", compatible: true),
        Row(kind: .text, declared: "application/javascript", compatible: true),
        Row(kind: .text, declared: "text/html", compatible: false),
        Row(kind: .text, declared: "application/xml", compatible: false),
        Row(kind: .text, declared: "application/x-php", compatible: false),
        Row(kind: .text, declared: "image/png", compatible: false),
        Row(kind: .text, declared: "application/x-unknown-binary-format", compatible: false),
        Row(kind: .html, declared: "text/plain", compatible: false),
        Row(kind: .shellScript, declared: "text/plain", compatible: false),
        Row(kind: .shellScript, declared: "text/x-shellscript", compatible: true),
        Row(kind: .python, declared: "text/x-script.python", compatible: true),
        Row(kind: .javascript, declared: "application/javascript", compatible: true),

        // Scripts disguised.
        Row(kind: .php, declared: "image/jpeg", compatible: false),
        Row(kind: .php, declared: "text/plain", compatible: false),
        Row(kind: .php, declared: "text/x-php", compatible: true),

        // Unrecognised binary: compatible only with declarations the table could not have recognised.
        Row(kind: .binary, declared: "application/x-foo", compatible: true),
        Row(kind: .binary, declared: "application/vnd.ms-cab-compressed", compatible: true),
        Row(kind: .binary, declared: "image/png", compatible: false),
        Row(kind: .binary, declared: "audio/ogg", compatible: false),
        Row(kind: .binary, declared: "text/plain", compatible: false),
        Row(kind: .png, declared: "application/x-foo", compatible: false),
    ]

    @Test(arguments: rows)
    func table(_ row: Row) {
        #expect(SniffResult(kind: row.kind).isCompatible(withDeclared: row.declared) == row.compatible)
    }

    @Test func everyKindIsCompatibleWithItsOwnTypeAndOctetStream() {
        for kind in SniffKind.allCases {
            let r = SniffResult(kind: kind)
            #expect(r.isCompatible(withDeclared: kind.mimeType), "\(kind)")
            #expect(r.isCompatible(withDeclared: kind.mimeType.uppercased() + "; charset=binary"), "\(kind)")
            #expect(r.isCompatible(withDeclared: "application/octet-stream"), "\(kind)")
        }
    }

    @Test func aliasesPointAtReportedTypes() {
        let reported = Set(SniffKind.allCases.map(\.mimeType))
        for (alias, canonical) in SniffResult.aliases {
            #expect(reported.contains(canonical), "\(alias) → \(canonical) is not a reported type")
            #expect(!reported.contains(alias), "\(alias) is itself reported")
        }
    }

    @Test func normalisation() {
        #expect(SniffResult.normalise(" Image/JPEG ; charset=binary") == "image/jpeg")
        #expect(SniffResult.normalise("") == "")
        #expect(SniffResult.normalise("text/plain;") == "text/plain")
    }

    @Test func sniffedSamplesAgreeWithTheirOwnDeclarations() {
        for sample in Samples.all {
            let r = Sniffer.sniff(sample.bytes)
            #expect(r.isCompatible(withDeclared: sample.kind.mimeType), "\(sample.name)")
        }
    }
}
