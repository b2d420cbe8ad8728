import Multipart

/// A `field` or `file` rule of a route, with every inherited setting resolved.
public struct PartRule: Sendable, Hashable {
    /// Whether a rule is about fields (parts without a filename) or files (parts with one).
    public enum Kind: String, Sendable, Hashable {
        /// `field name { … }`: a part without a `filename` parameter, or a urlencoded field.
        case field
        /// `file name { … }`: a part with a `filename` parameter.
        case file
    }

    /// The default `max` of a field rule: 64 KiB.
    public static let defaultFieldMax: UInt64 = 64 << 10

    /// Field or file.
    public var kind: Kind
    /// The part name, nil for the wildcard rule (`field *`, `file *`).
    public var name: String?
    /// Where the rule is written.
    public var location: SourceLocation
    /// The size limit of the part's data; fields default to 64 KiB, files to none (`body-max` bounds them).
    public var max: UInt64?
    /// The smallest part data allowed (`min`; `not-empty` is `min 1`), nil for none. A "no file chosen"
    /// part (empty filename, no data) is not a file and has no floor: `required` is for insisting on one.
    public var min: UInt64?
    /// Whether the request must contain this part (never true for wildcards).
    public var required: Bool
    /// A regular expression the field value must contain a match for (`pattern`), fields only.
    public var pattern: FieldPattern?
    /// How many parts may carry this name; 1 unless `repeat` says otherwise.
    public var repeatLimit: Int
    /// Allowed media types of a file, empty for any (`types`).
    public var types: [MediaTypePattern] {
        didSet {
            namesExecutable = PolicyEvaluator.executableEssences.contains { essence in
                types.contains { $0.matches(essence: essence) }
            }
        }
    }
    /// Whether `types` names an executable's sniffed type, which lets an archive in the part hold executables:
    /// worked out when `types` is set, not for every file part.
    public private(set) var namesExecutable = false
    /// Allowed sniffed categories (`categories image document`), empty for any.
    public var categories: [String]
    /// Allowed sniffed labels (`labels png jpeg`), empty for any.
    public var labels: [String]
    /// Whether a file whose content also carries HTML, script or server-side markup (PHP, ASP, JSP, ColdFusion,
    /// SSI) anywhere in it is refused (`deny-embedded-markup`).
    public var denyEmbeddedMarkup: Bool
    /// Whether `<?` followed by whitespace counts as PHP too (`deny-embedded-markup php-short-tags;`).
    public var phpShortTags = false
    /// Allowed filename suffixes, lowercased with the dot, empty for any (`extensions`).
    public var extensions: [String]
    /// What happens when the part breaks this rule.
    public var action: RuleAction
    /// The status a violation of this rule answers with (`status`, 400–499); nil: the kind's own.
    public var status: Int?
    /// How filename problems are handled (inherited from the route unless set).
    public var filename: FilenameHandling
    /// Filename problems tolerated (`allow-filename`, route's and rule's together).
    public var allowedFilenameProblems: Set<FilenameProblem>
    /// Whether a declared type contradicting the sniffed type is tolerated (`allow-type-mismatch`).
    public var allowTypeMismatch: Bool
    /// What an archive in this part may hold (`archive-*` directives; defaults from the route).
    public var archive = ArchiveSettings()
    /// Name and filename character lists and restricted filename patterns (defaults from the route).
    public var nameChecks = NameChecks()
    /// `disarm [strip|reject];`: JPEG, PNG, GIF and WebP files are rewritten with only what rendering needs, SVG
    /// files without active content (scripts and the like stripped, or refused with `reject`); nil: forwarded as
    /// they are.
    public var disarm: DisarmMode?

    /// Creates a rule with the defaults of a rule that sets nothing.
    public init(kind: Kind, name: String?, location: SourceLocation) {
        self.kind = kind
        self.name = name
        self.location = location
        max = kind == .field ? Self.defaultFieldMax : nil
        min = nil
        required = false
        pattern = nil
        repeatLimit = 1
        types = []
        categories = []
        labels = []
        denyEmbeddedMarkup = false
        extensions = []
        action = .reject
        status = nil
        filename = .reject
        allowedFilenameProblems = []
        allowTypeMismatch = false
    }

    /// Whether the rule judges the sniffed content (`types`, `categories`, `labels`, `deny-embedded-markup`).
    public var judgesSniffedContent: Bool {
        !types.isEmpty || !categories.isEmpty || !labels.isEmpty || denyEmbeddedMarkup
    }

    /// Whether `filename` ends in one of `extensions` (case-insensitive); true when `extensions` is empty.
    @inline(__always)
    public func allowsExtension(of filename: String) -> Bool { Self.allows(extensions, filename) }

    /// `allowsExtension(of:)` of a rule with these `extensions`: a static function, so that a caller holding the
    /// rule in its box passes the one list (calling the method copied the whole rule first).
    static func allows(_ extensions: [String], _ filename: String) -> Bool {
        guard !extensions.isEmpty else { return true }
        // An ASCII name: its last bytes against each (lowercase, ASCII) extension, with no String built. Suffixes of
        // bytes and of Characters agree here, as an extension starts with `.`, which joins no other character.
        var name = filename
        let ascii = name.withUTF8 { bytes -> Bool? in
            guard bytes.allSatisfy({ $0 < 0x80 }) else { return nil }
            return extensions.contains { ext in
                var suffix = ext
                return suffix.withUTF8 { e in
                    guard bytes.count > e.count, e.allSatisfy({ $0 < 0x80 }) else { return false }
                    let start = bytes.count - e.count
                    var k = 0
                    while k < e.count, ASCII.lowercased(bytes[start + k]) == e[k] { k += 1 }
                    return k == e.count
                }
            }
        }
        if let ascii { return ascii }
        return allowsByCharacters(extensions, filename)
    }

    /// `allowsExtension(of:)` Character by Character, for any name: the reference its ASCII path is tested against.
    func allowsExtensionByCharacters(of filename: String) -> Bool { Self.allowsByCharacters(extensions, filename) }

    private static func allowsByCharacters(_ extensions: [String], _ filename: String) -> Bool {
        guard !extensions.isEmpty else { return true }
        let lowered = filename.lowercased()
        return extensions.contains { lowered.hasSuffix($0) && lowered.count > $0.count }
    }
}

/// A field value pattern: a regular expression checked when the policy loads.
///
/// `Regex` is not `Sendable`, so the policy keeps the source text and each evaluator compiles
/// it once, on first use. A value matches when the expression matches anywhere in it (write
/// `^…$` for a whole-value match; `$` does not match before a trailing newline).
public struct FieldPattern: Sendable, Hashable, CustomStringConvertible {
    /// The expression as written.
    public let source: String

    /// Validates `source`; throws the `Regex` syntax error.
    public init(_ source: String) throws {
        _ = try Regex(source)
        self.source = source
    }

    /// The expression as written.
    public var description: String { source }

    /// Compiles the expression (it compiled once already, at load time).
    public func compile() -> Regex<AnyRegexOutput> {
        do {
            return try Regex(source)
        } catch {
            // Unreachable from requests: rule-file patterns are compiled once by the checker when the rules load.
            preconditionFailure("pattern validated at load time failed to compile: \(error)")
        }
    }
}

/// How `disarm` treats active content in SVG files (what JPEG, PNG, GIF and WebP do not need is always removed).
public enum DisarmMode: String, Sendable, Hashable, CaseIterable {
    /// The sniffed types `disarm` rewrites (the proxy's `FormStage.disarmKind` maps each to its disarmer); any
    /// other type passes unchanged.
    public static let rewrittenTypes = ["image/jpeg", "image/png", "image/gif", "image/webp", "image/svg+xml"]
    /// The sniffed image types `disarm` passes unchanged (named when a rule's `image/*` lets them through).
    public static let unchangedImageTypes = [
        "image/bmp", "image/tiff", "image/vnd.microsoft.icon", "image/heic", "image/heif", "image/avif",
    ]

    /// Cut scripts, event handlers and external references out; pass the rest.
    case strip
    /// Refuse an SVG that has any (violation `disarm_failed`).
    case reject
}
