/// One broken rule: what, where in the request, which rule, and by how much.
public struct Violation: Sendable, Hashable, CustomStringConvertible {
    /// The kind, with its stable name and HTTP status.
    public var kind: ViolationKind
    /// The part's `name`, nil for request-level violations (method, Content-Type, body size).
    public var part: String?
    /// The 0-based index of the part in the body, nil for request-level violations.
    public var partIndex: Int?
    /// The rule or route that was broken, `file:line`; nil for built-in defaults.
    public var rule: SourceLocation?
    /// A human explanation, e.g. `7.2 MiB > 5 MiB`.
    public var detail: String
    /// The numeric limit that was crossed (bytes or a count), when there is one.
    public var limit: UInt64?
    /// The broken rule's `status`, replacing the kind's; nil for the kind's own.
    public var statusOverride: Int?

    /// Creates a violation.
    public init(kind: ViolationKind, part: String? = nil, partIndex: Int? = nil, rule: SourceLocation? = nil,
                detail: String, limit: UInt64? = nil, statusOverride: Int? = nil) {
        self.kind = kind
        self.part = part
        self.partIndex = partIndex
        self.rule = rule
        self.detail = detail
        self.limit = limit
        self.statusOverride = statusOverride
    }

    /// The HTTP status for this violation.
    public var status: Int { statusOverride ?? kind.status }

    /// `kind part=… rule=file:line: detail`.
    public var description: String {
        var text = kind.name
        if let part { text += " part=\(part)" }
        if let rule { text += " rule=\(rule)" }
        return text + ": " + detail
    }
}
