/// Request-level limits of a route. Unset limits come from the main context or the defaults.
public struct RouteLimits: Sendable, Hashable {
    /// The default `body-max`: 1 MiB (as nginx's `client_max_body_size`).
    public static let defaultBodyMax: UInt64 = 1 << 20
    /// The default `parts-max`.
    public static let defaultPartsMax = 100
    /// The default `files-max`.
    public static let defaultFilesMax = 20
    /// The default `fields-max`.
    public static let defaultFieldsMax = 100

    /// The largest body, in bytes, counted as received (after de-chunking).
    public var bodyMax: UInt64 = defaultBodyMax
    /// The most parts (fields and files together).
    public var partsMax: Int = defaultPartsMax
    /// The most parts with a filename.
    public var filesMax: Int = defaultFilesMax
    /// The most parts without a filename.
    public var fieldsMax: Int = defaultFieldsMax

    /// The defaults.
    public init() {}
}

/// How a route's path is compared with the request's normalised path (docs/rules.md, *Routes*).
public enum RouteMatch: Sendable, Hashable {
    /// `route /api { }`: a segment-aware prefix; the longest wins.
    case prefix
    /// `route = /api/login { }`: the whole path, nothing below it.
    case exact
    /// `route /users/*/avatar { }`: the whole path, `*` standing for exactly one segment.
    case pattern
}

/// A `host` argument: a host name (lowercase, no port) or `*.` and a domain for exactly one more label.
public struct HostPattern: Sendable, Hashable, CustomStringConvertible {
    /// The name, lowercase, without its `*.` for a wildcard.
    public let name: String
    /// Whether it was written `*.name`.
    public let isWildcard: Bool

    /// Parses a `host` argument; nil when it is not a host name, an IP literal or `*.` and a name.
    public init?(_ text: String) {
        var rest = Substring(text.lowercased())
        isWildcard = rest.hasPrefix("*.")
        if isWildcard { rest = rest.dropFirst(2) }
        if rest.hasSuffix(".") { rest = rest.dropLast() }
        let isIPv6 = !isWildcard && rest.hasPrefix("[") && rest.hasSuffix("]") && rest.count > 2
            && rest.dropFirst().dropLast().allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
        let labels = rest.split(separator: ".", omittingEmptySubsequences: false)
        let isName = !labels.contains(where: \.isEmpty)
            && rest.allSatisfy { ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "-" || $0 == "." }
        guard !rest.isEmpty, isIPv6 || isName else { return nil }
        name = String(rest)
    }

    /// Whether a normalised request host (see `normalize(host:)`) matches.
    public func matches(_ host: String) -> Bool {
        guard isWildcard else { return host == name }
        guard host.hasSuffix("." + name) else { return false }
        return !host.dropLast(name.count + 1).contains(".")
    }

    /// The pattern as written, lowercase.
    public var description: String { (isWildcard ? "*." : "") + name }

    /// A Host field value for matching: lowercase, without the port and a trailing dot; nil when empty.
    public static func normalize(host: String) -> String? {
        var value = Substring(host.lowercased()).trimmingWhitespace()
        if value.hasPrefix("[") {
            if let close = value.firstIndex(of: "]") { value = value[...close] }
        } else if let colon = value.firstIndex(of: ":") {
            value = value[..<colon]
        }
        if value.hasSuffix(".") { value = value.dropLast() }
        return value.isEmpty ? nil : String(value)
    }
}

/// `require-header NAME ["regex"];`: a request field that must be present and, with a regex, match.
public struct HeaderCondition: Sendable, Hashable {
    /// The field name as written.
    public let name: String
    /// The expression every value of the field must contain a match of; nil: presence only.
    public let pattern: FieldPattern?
}

extension Substring {
    func trimmingWhitespace() -> Substring {
        var value = self
        while let first = value.first, first == " " || first == "\t" { value = value.dropFirst() }
        while let last = value.last, last == " " || last == "\t" { value = value.dropLast() }
        return value
    }
}

/// What a path (prefix, exact path or pattern) accepts: methods, body types, limits and part rules.
public struct Route: Sendable, Hashable {
    /// The content types a route accepts when it sets no `content-types`.
    public static let defaultContentTypes: [MediaTypePattern] = [
        MediaTypePattern("multipart/form-data")!, MediaTypePattern("application/x-www-form-urlencoded")!,
    ]

    /// The default `modified-header`.
    public static let defaultModifiedHeader = "X-Formwall-Modified"

    /// The normalised path (`/`, `/api/avatar`, `/users/*/avatar`; no trailing slash except for `/`): a
    /// prefix, an exact path or a pattern, as `match` says.
    public var prefix: String
    /// How `prefix` is compared with the request path.
    public var match: RouteMatch
    /// The Hosts it applies to (`host`); nil: every Host.
    public var hosts: [HostPattern]?
    /// Fields the request must carry (`require-header`), in file order.
    public var requiredHeaders: [HeaderCondition]
    /// Where the route is written; nil for the implicit fallback route.
    public var location: SourceLocation?
    /// Allowed methods, nil for any (`methods`).
    public var methods: [String]?
    /// Allowed request Content-Types (`content-types`).
    public var contentTypes: [MediaTypePattern]
    /// Body size and count limits.
    public var limits: RouteLimits
    /// The route's own `mode`; nil: the policy's.
    public var mode: PolicyMode?
    /// What happens to a part no rule names (`unknown`), unless `unknownFields` / `unknownFiles` say otherwise.
    public var unknown: UnknownAction
    /// What happens to a field no rule names (`unknown-fields`); nil: `unknown`.
    public var unknownFields: UnknownAction?
    /// What happens to a file no rule names (`unknown-files`); nil: `unknown`.
    public var unknownFiles: UnknownAction?
    /// Anomaly actions: the route's `anomaly` overrides over the global ones over the defaults.
    public var anomalies: AnomalyActions
    /// Named field rules, in file order.
    public var fields: [PartRule]
    /// Named file rules, in file order.
    public var files: [PartRule]
    /// `field *`, the rule for fields no named rule matches.
    public var otherFields: PartRule?
    /// `file *`, the rule for files no named rule matches.
    public var otherFiles: PartRule?
    /// Filename handling for files without a rule (`unknown allow`); rules carry their own.
    public var filename: FilenameHandling
    /// Filename problems tolerated for files without a rule.
    public var allowedFilenameProblems: Set<FilenameProblem>
    /// Whether type mismatches are tolerated for files without a rule.
    public var allowTypeMismatch: Bool
    /// How the re-encoded body goes upstream (`upstream-body`); nil: the proxy's `--upstream-body`.
    public var upstreamBody: UpstreamBodyMode?
    /// The field that tells the upstream which parts were stripped or quarantined (`modified-header`); nil: off.
    /// Sent only with `upstream-body spool`, the one mode whose head is written after the body.
    public var modifiedHeader: String?
    /// Whether form bodies are re-encoded (`reencode`); `.off` forwards urlencoded bodies byte for byte.
    public var reencode: ReencodeMode
    /// Whether a CORS preflight passes whatever `methods` says (`preflight`).
    public var preflight: PreflightMode
    /// Most stacked content codings decoded (`encodings-max`, default 1: `gzip`, not `gzip, gzip`; 0 refuses
    /// every encoded form body).
    public var encodingsMax: Int
    /// Largest expansion of a compressed body, decoded over compressed bytes (`compression-ratio-max`, default
    /// 100); compressed input is counted up to the next block end (1, 2, 4, 8, 16 KiB, then every 16 KiB).
    public var compressionRatioMax: Int
    /// A Content-Encoding that cannot be decoded (`unknown-encoding`, default reject).
    public var unknownEncoding: UnknownEncodingMode
    /// Archive limits for file parts without a rule, and the defaults of this route's file rules.
    public var archive = ArchiveSettings()
    /// Name and filename character lists and restricted filename patterns for parts without a rule, and the
    /// defaults of this route's rules.
    public var nameChecks = NameChecks()
    /// The charsets a part's Content-Type (`part-charset`) and a `_charset_` field (`charset-field`) may name
    /// (`part-charsets`, default `PartCharsets.default`).
    public var charsets = PartCharsets.default
    /// The upstream group this route's requests go to (`upstream NAME;`, declared in the main configuration
    /// file); nil: the default upstream. Where it is written, for a diagnostic when no such group exists.
    public var upstream: UpstreamName?

    /// Creates a route with every default.
    public init(prefix: String, location: SourceLocation?) {
        self.prefix = prefix
        self.location = location
        match = .prefix
        hosts = nil
        requiredHeaders = []
        methods = nil
        contentTypes = Self.defaultContentTypes
        limits = RouteLimits()
        mode = nil
        unknown = .reject
        unknownFields = nil
        unknownFiles = nil
        anomalies = AnomalyActions()
        fields = []
        files = []
        otherFields = nil
        otherFiles = nil
        filename = .reject
        allowedFilenameProblems = []
        allowTypeMismatch = false
        upstreamBody = nil
        modifiedHeader = Self.defaultModifiedHeader
        preflight = .pass
        reencode = .on
        upstream = nil
        encodingsMax = 1
        compressionRatioMax = 100
        unknownEncoding = .reject
    }

    /// The rule for a part: the named rule of the part's kind, else the kind's wildcard rule.
    ///
    /// A part with a filename is a file; without, a field. A name that only a rule of the other
    /// kind claims gets no rule, not even the wildcard (it is an unknown part): a file posted under
    /// a field's name must not slip through `file *`.
    public func rule(forPart name: String?, isFile: Bool) -> PartRule? {
        let (named, other) = isFile ? (files, fields) : (fields, files)
        if let name {
            if let rule = named.first(where: { $0.name == name }) { return rule }
            if other.contains(where: { $0.name == name }) { return nil }
        }
        return isFile ? otherFiles : otherFields
    }

    /// What happens to an unknown part of this kind: `unknown-files` / `unknown-fields`, else `unknown`.
    public func unknownAction(isFile: Bool) -> UnknownAction { (isFile ? unknownFiles : unknownFields) ?? unknown }

    /// The rules with `required`.
    public var requiredRules: [PartRule] { (fields + files).filter(\.required) }
}

/// The name of an upstream group as a route writes it (`upstream app;`), with where it was written.
public struct UpstreamName: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public let location: SourceLocation?

    public init(_ name: String, at location: SourceLocation?) {
        self.name = name
        self.location = location
    }

    /// Letters, digits, `-`, `_` and `.`, starting with a letter; at most 64 characters.
    public static func isValid(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, text.utf8.count <= 64,
              ("a"..."z").contains(first) || ("A"..."Z").contains(first)
        else { return false }
        return text.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)
        }
    }

    public var description: String { name }
}
