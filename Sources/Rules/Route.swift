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

/// What a path prefix accepts: methods, body types, limits and part rules.
public struct Route: Sendable, Hashable {
    /// The content types a route accepts when it sets no `content-types`.
    public static let defaultContentTypes: [MediaTypePattern] = [
        MediaTypePattern("multipart/form-data")!, MediaTypePattern("application/x-www-form-urlencoded")!,
    ]

    /// The default `modified-header`.
    public static let defaultModifiedHeader = "X-Formwall-Modified"

    /// The normalised path prefix (`/`, `/api/avatar`; no trailing slash except for `/`).
    public var prefix: String
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

    /// Creates a route with every default.
    public init(prefix: String, location: SourceLocation?) {
        self.prefix = prefix
        self.location = location
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
