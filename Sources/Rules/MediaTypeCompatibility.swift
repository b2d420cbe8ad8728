/// When a declared part Content-Type and a sniffed type count as agreeing.
///
/// Magic bytes cannot tell every type apart, so a few families are compatible:
///
/// | sniffed | agrees with declared |
/// |---|---|
/// | the same type, after aliases (`image/jpg` = `image/jpeg`, `image/x-png` = `image/png`, …) | yes |
/// | `application/octet-stream` (sniffer does not know) | anything |
/// | `text/plain` | any `text/*`, `application/json`, `application/xml`, `*+json`, `*+xml` |
/// | `application/xml`, `text/xml` | any `*+xml` (`image/svg+xml`) |
/// | `application/zip` | `*+zip`, OOXML and OpenDocument types, `application/java-archive` |
///
/// A declared `application/octet-stream`, or no declared type, never mismatches. An empty part is never
/// compared: it has no sniffed type (`PolicyEvaluator.partSniffed` ignores the sniffer's `application/x-empty`).
public enum MediaTypeCompatibility {
    static let aliases: [String: String] = [
        "image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg", "image/x-png": "image/png",
        "image/x-ms-bmp": "image/bmp", "image/x-bmp": "image/bmp", "application/x-pdf": "application/pdf",
        "application/x-zip-compressed": "application/zip", "application/x-zip": "application/zip",
        "text/xml": "application/xml", "application/x-gzip": "application/gzip",
        "audio/mp3": "audio/mpeg", "image/x-icon": "image/vnd.microsoft.icon",
    ]

    /// The lowercased essence with aliases resolved; nil when malformed.
    public static func canonical(_ mediaType: String) -> String? {
        guard let text = MediaTypePattern.essenceText(of: mediaType) else { return nil }
        return aliases[text] ?? text
    }

    /// Whether a declared type says nothing (`application/octet-stream`, empty or malformed).
    public static func isGeneric(_ mediaType: String) -> Bool { specific(mediaType) == nil }

    /// `canonical(mediaType)`, or nil when the type says nothing (`isGeneric`): read once for both questions.
    static func specific(_ mediaType: String) -> String? {
        // What a browser declares for a file it has no type for: answered before the essence is read.
        if mediaType == "application/octet-stream" { return nil }
        guard let canonical = canonical(mediaType), canonical != "application/octet-stream" else { return nil }
        return canonical
    }

    /// Whether `declared` and `sniffed` agree (see the table above).
    public static func compatible(declared: String, sniffed: String) -> Bool {
        // The usual answers first, before any essence is read (two strings and a lookup each): the sniffer did not
        // know the type, or the client declared the sniffer's own spelling. Both answer true below too.
        if sniffed == "application/octet-stream" || declared == sniffed { return true }
        guard let declared = specific(declared) else { return true }
        guard let sniffed = canonical(sniffed), sniffed != "application/octet-stream" else { return true }
        if declared == sniffed { return true }
        switch sniffed {
        case "text/plain":
            return declared.hasPrefix("text/") || declared == "application/json" || declared == "application/xml"
                || declared.hasSuffix("+json") || declared.hasSuffix("+xml")
        case "application/xml":
            return declared.hasSuffix("+xml")
        case "application/zip":
            return declared.hasSuffix("+zip") || declared.hasPrefix("application/vnd.openxmlformats-officedocument.")
                || declared.hasPrefix("application/vnd.oasis.opendocument.") || declared == "application/java-archive"
        default:
            return false
        }
    }
}
