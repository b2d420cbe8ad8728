// Declared-versus-sniffed compatibility: the test behind the policy's `type_mismatch`.
//
//   declared Content-Type ──normalise──▶ lowercase, parameters and whitespace dropped
//                          ──alias────▶ canonical name (image/jpg → image/jpeg …)
//   compatible when, in order:
//     1. the declaration says nothing: empty, application/octet-stream, binary/octet-stream;
//     2. the part is empty;
//     3. canonical declared == sniffed MIME type;
//     4. the sniffed kind accepts the declared type (a less or differently specific name for the
//        same bytes: docx declared application/zip, zip declared docx, mp4 declared video/quicktime);
//     5. the declared type is unknown to the sniffing table (no kind would claim it) and the bytes
//        fit its family: text-like for text, same top-level type for images and media, `+xml` for
//        XML, `+zip` for ZIP, and anything for unrecognised binary.
//   Everything else is a mismatch. In particular a declared type the table *can* recognise (image/png,
//   application/pdf, text/html …) is a mismatch whenever its signature is absent.

extension SniffResult {
    /// Whether the bytes are plausibly what the part's declared Content-Type says.
    ///
    /// `declared` is the raw header value (`Image/JPEG; charset=binary` is fine). A declaration that
    /// carries no information (empty, `application/octet-stream`) is compatible with anything, and an
    /// empty part is compatible with any declaration. Aliases are folded first (`image/jpg`,
    /// `image/pjpeg` ≡ `image/jpeg`; `image/x-png` ≡ `image/png`; `application/x-zip-compressed` ≡
    /// `application/zip`; `text/xml` ≡ `application/xml`; `audio/x-wav` ≡ `audio/wav` …). A sniffed
    /// container accepts a less specific declaration (OOXML/ODF/EPUB/JAR declared `application/zip`)
    /// and a generic ZIP accepts any ZIP-based declaration, since the telling entries may lie beyond the
    /// prefix. Plain text accepts `text/*` (except `text/html`), JSON, YAML, CSV and similar, and the
    /// script types other than PHP; `text/plain` declared for HTML, XML, SVG or any script is a
    /// mismatch. PHP is compatible only with PHP types, so `cat.jpg` holding `<?php` and declared
    /// `image/jpeg` is a mismatch.
    public func isCompatible(withDeclared declared: String) -> Bool {
        let raw = SniffResult.normalise(declared)
        if raw.isEmpty || raw == "application/octet-stream" || raw == "binary/octet-stream" { return true }
        if kind == .empty { return true }
        let type = SniffResult.aliases[raw] ?? raw
        if type == kind.mimeType || SniffResult.accepts(kind, type) { return true }
        let known = SniffKind.allCases.contains { $0.mimeType == type || SniffResult.accepts($0, type) }
        if known { return false }
        switch kind.category {
        case .unknown:
            return kind == .binary
        case .text:
            return SniffResult.isTextLike(type)
        case .image:
            return type.hasPrefix("image/")
        case .media:
            return type.hasPrefix("video/") || type.hasPrefix("audio/")
        case .markup:
            return kind != .html && type.hasSuffix("+xml")
        case .document, .archive, .executable:
            return SniffResult.isZipContainer(kind) && SniffResult.isZipBased(type)
        case .script:
            return false
        }
    }

    /// The media type of a Content-Type value: parameters dropped, whitespace trimmed, ASCII lowercased.
    static func normalise(_ declared: String) -> String {
        var out = [UInt8]()
        out.reserveCapacity(64)
        for b in declared.utf8 {
            if b == 0x3B { break }  // ';'
            if b == 0x20 || b == 0x09 { continue }
            out.append(SniffBytes.lowercased(b))
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Alternative names folded to the canonical MIME type the table reports.
    static let aliases: [String: String] = [
        "image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg", "image/jpe": "image/jpeg",
        "image/x-png": "image/png", "image/apng": "image/png", "image/vnd.mozilla.apng": "image/png",
        "image/x-webp": "image/webp",
        "image/x-bmp": "image/bmp", "image/x-ms-bmp": "image/bmp", "image/ms-bmp": "image/bmp",
        "image/tif": "image/tiff", "image/x-tiff": "image/tiff",
        "image/x-icon": "image/vnd.microsoft.icon", "image/ico": "image/vnd.microsoft.icon",
        "image/icon": "image/vnd.microsoft.icon",
        "application/x-pdf": "application/pdf", "application/acrobat": "application/pdf",
        "application/x-zip-compressed": "application/zip", "application/x-zip": "application/zip",
        "multipart/x-zip": "application/zip",
        "application/x-gzip": "application/gzip", "application/gzip-compressed": "application/gzip",
        "application/x-bzip": "application/x-bzip2", "application/x-zstd": "application/zstd",
        "application/x-rar-compressed": "application/vnd.rar", "application/x-rar": "application/vnd.rar",
        "application/x-ustar": "application/x-tar",
        "audio/x-wav": "audio/wav", "audio/wave": "audio/wav", "audio/vnd.wave": "audio/wav",
        "audio/mp3": "audio/mpeg", "audio/mpeg3": "audio/mpeg", "audio/x-mpeg-3": "audio/mpeg",
        "audio/x-mp3": "audio/mpeg", "audio/mpg": "audio/mpeg",
        "audio/x-flac": "audio/flac", "audio/x-m4a": "audio/mp4", "application/x-ogg": "application/ogg",
        "video/avi": "video/x-msvideo", "video/msvideo": "video/x-msvideo",
        "text/xml": "application/xml",
        "application/x-msdownload": "application/vnd.microsoft.portable-executable",
        "application/x-ms-dos-executable": "application/x-dosexec",
        "application/x-msdos-program": "application/x-dosexec",
        "application/x-executable": "application/x-elf", "application/x-sharedlib": "application/x-elf",
        "application/x-pie-executable": "application/x-elf", "application/x-object": "application/x-elf",
        "application/x-mach-o-executable": "application/x-mach-binary",
        "application/x-java-class": "application/java-vm", "application/x-java-archive": "application/java-archive",
        "application/x-httpd-php": "application/x-php", "text/x-php": "application/x-php",
        "text/php": "application/x-php", "application/php": "application/x-php",
        "application/x-shellscript": "application/x-sh", "text/x-shellscript": "application/x-sh",
        "text/x-sh": "application/x-sh",
        "text/x-script.python": "text/x-python", "application/x-python": "text/x-python",
        "application/x-perl": "text/x-perl", "application/x-ruby": "text/x-ruby",
        "application/javascript": "text/javascript", "application/x-javascript": "text/javascript",
        "application/ecmascript": "text/javascript", "text/ecmascript": "text/javascript",
    ]

    /// Canonical declared types a kind accepts besides its own MIME type.
    static func accepts(_ kind: SniffKind, _ type: String) -> Bool {
        switch kind {
        case .heic: return type == "image/heif" || type == "image/heic-sequence"
        case .heif: return type == "image/heic" || type == "image/heif-sequence"
        case .avif: return type == "image/avif-sequence"
        case .docx:
            return type == "application/zip" || type == "application/msword"
                || type.hasPrefix("application/vnd.openxmlformats-officedocument.wordprocessingml.")
                || type.hasPrefix("application/vnd.ms-word.")
        case .xlsx:
            return type == "application/zip" || type == "application/vnd.ms-excel"
                || type.hasPrefix("application/vnd.openxmlformats-officedocument.spreadsheetml.")
                || type.hasPrefix("application/vnd.ms-excel.")
        case .pptx:
            return type == "application/zip" || type == "application/vnd.ms-powerpoint"
                || type.hasPrefix("application/vnd.openxmlformats-officedocument.presentationml.")
                || type.hasPrefix("application/vnd.ms-powerpoint.")
        case .odt, .ods, .odp, .odg:
            return type == "application/zip" || type == kind.mimeType + "-template"
        case .epub, .jar: return type == "application/zip"
        case .zip: return isZipBased(type)
        case .gzip:
            return type == "application/x-tgz" || type == "application/x-compressed-tar" || type == "application/x-gtar"
        case .tar: return type == "application/x-gtar"
        case .mp4, .quicktime, .m4a, .threeGPP:
            return type == "video/mp4" || type == "audio/mp4" || type == "video/quicktime" || type == "video/x-m4v"
                || type == "video/3gpp" || type == "video/3gpp2" || type == "audio/3gpp" || type == "audio/3gpp2"
        case .webm: return type == "audio/webm" || type == "video/x-matroska" || type == "audio/x-matroska"
        case .matroska: return type == "audio/x-matroska"
        case .ogg: return type == "audio/ogg" || type == "video/ogg" || type == "audio/opus" || type == "audio/vorbis"
        case .html: return type == "application/xhtml+xml"
        case .svg: return type == "application/xml"
        case .pe, .dosExecutable:
            return type == "application/vnd.microsoft.portable-executable" || type == "application/x-dosexec"
        case .text:
            return type == "text/x-python" || type == "text/x-perl" || type == "text/x-ruby"
                || type == "text/javascript" || type == "application/x-sh" || type == "text/x-script"
        default: return false
        }
    }

    /// Kinds that are ZIP archives underneath.
    static func isZipContainer(_ kind: SniffKind) -> Bool {
        switch kind {
        case .zip, .docx, .xlsx, .pptx, .odt, .ods, .odp, .odg, .epub, .jar: return true
        default: return false
        }
    }

    /// Declared types whose files are ZIP archives.
    static func isZipBased(_ type: String) -> Bool {
        type == "application/zip" || type == "application/java-archive" || type == "application/epub+zip"
            || type.hasSuffix("+zip")
            || type.hasPrefix("application/vnd.openxmlformats-officedocument.")
            || type.hasPrefix("application/vnd.oasis.opendocument.")
            || type.hasPrefix("application/vnd.ms-word.") || type.hasPrefix("application/vnd.ms-excel.")
            || type.hasPrefix("application/vnd.ms-powerpoint.")
            || type == "application/vnd.android.package-archive" || type == "application/vnd.ms-xpsdocument"
    }

    /// Declared types that plain UTF-8 text may legitimately be.
    static func isTextLike(_ type: String) -> Bool {
        if type.hasPrefix("text/") { return true }
        if type.hasSuffix("+json") || type.hasSuffix("+yaml") { return true }
        switch type {
        case "application/json", "application/x-ndjson", "application/jsonl", "application/csv",
            "application/x-csv", "application/yaml", "application/x-yaml", "application/toml",
            "application/sql", "application/x-subrip", "application/x-tex", "application/x-latex",
            "application/rtf", "application/x-www-form-urlencoded", "application/x-x509-ca-cert",
            "application/x-pem-file", "application/pgp-keys", "application/pgp-signature":
            return true
        default:
            return false
        }
    }
}
