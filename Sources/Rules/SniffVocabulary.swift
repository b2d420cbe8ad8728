/// The sniffer's vocabulary as the rule language sees it (`categories`, `labels`).
///
/// Rules does not depend on Inspect, so the names are listed here; a ProxyTests test checks they equal
/// `SniffCategory.allCases.map(\.name)` and `SniffKind.allCases.map(\.label)`.
public enum SniffVocabulary {
    /// Every `SniffCategory` name.
    public static let categories: [String] = [
        "image", "document", "archive", "media", "markup", "executable", "script", "text", "unknown",
    ]

    /// Every `SniffKind` label.
    public static let labels: [String] = [
        "png", "jpeg", "gif", "webp", "bmp", "tiff", "ico", "heic", "heif", "avif",
        "pdf", "docx", "xlsx", "pptx", "odt", "ods", "odp", "odg", "epub",
        "zip", "gzip", "bzip2", "xz", "zstd", "7z", "rar4", "rar5", "tar",
        "mp4", "m4a", "mov", "3gp", "webm", "mkv", "mp3", "wav", "avi", "ogg", "flac",
        "html", "svg", "xml",
        "elf", "pe", "mz", "mach-o", "java-class", "jar", "wasm",
        "php", "shell-script", "python", "perl", "ruby", "javascript", "script",
        "text", "empty", "binary",
    ]
}

/// What the sniffer found in a part's first bytes, as the evaluator needs it (`partSniffed`).
public struct SniffedContent: Sendable, Hashable {
    /// The sniffed MIME type (`image/png`); checked against `types` and the declared type.
    public var mimeType: String
    /// The sniffer's label (`png`), nil when the caller does not know it (then `labels` fails closed).
    public var label: String?
    /// The sniffer's category name (`image`), nil when unknown (then `categories` fails closed).
    public var category: String?
    /// When the content also carries markup a browser or interpreter acts on (an HTML tag in an image,
    /// PHP behind a GIF header): a short description of it, for `deny-embedded-markup`; nil when clean.
    public var embeddedMarkup: String?

    /// Creates the facts; only `mimeType` is required.
    public init(mimeType: String, label: String? = nil, category: String? = nil, embeddedMarkup: String? = nil) {
        self.mimeType = mimeType
        self.label = label
        self.category = category
        self.embeddedMarkup = embeddedMarkup
    }
}
