/// Text taken from the wire (paths, part names, filenames, field values), kept as raw bytes.
///
/// The bytes may be invalid UTF-8; the JSON writer replaces each invalid sequence by U+FFFD.
/// String literals convert implicitly, which keeps tests and constant values readable.
public struct AuditText: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The bytes as received.
    public var bytes: [UInt8]

    /// Wraps raw bytes.
    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// Wraps the UTF-8 of `string`.
    public init(_ string: String) { self.bytes = Array(string.utf8) }

    /// Wraps the UTF-8 of a literal.
    public init(stringLiteral value: String) { self.init(value) }

    /// The bytes decoded as UTF-8 with invalid sequences replaced.
    public var description: String { String(decoding: bytes, as: UTF8.self) }
}

/// One line of the audit log: what Formwall saw and decided for one request.
///
/// The JSON schema is documented in `docs/operations.md` and rendered by `render(into:)`.
public struct AuditRecord: Sendable {
    /// What happened to the request as a whole.
    public enum Decision: String, Sendable, CaseIterable {
        /// Forwarded unchanged.
        case allow
        /// Forwarded with parts stripped, quarantined or sanitised.
        case modified
        /// Refused.
        case reject
        /// Would have been refused or modified, but the route is in monitor mode.
        case monitor
        /// Formwall or the upstream failed before a response started (502, 503, 504, 500 without a violation).
        case error
        /// Cut short after the response started (the upstream closed or timed out mid-response), or the client
        /// went away (status 499 when nothing was sent).
        case aborted
    }

    /// Whether a part carried a filename.
    public enum PartKind: String, Sendable {
        /// A plain form field (no `filename` parameter).
        case field
        /// A file upload.
        case file
    }

    /// One multipart part as Formwall saw it.
    public struct Part: Sendable {
        /// Zero-based position in the body.
        public var index: Int
        /// The `name` parameter.
        public var name: AuditText
        /// Field or file.
        public var kind: PartKind
        /// The `filename` parameter as sent, if any.
        public var filename: AuditText?
        /// The part's Content-Type header, if any.
        public var declaredType: String?
        /// The type detected from the content, if sniffed.
        public var sniffedType: String?
        /// Body bytes of the part.
        public var size: Int
        /// Lowercase hex SHA-256 of the content (files only).
        public var sha256: String?
        /// What was done: `pass`, `strip`, `quarantine`, `sanitise`, `reject`, ...
        public var action: String
        /// The quarantine item id when `action` stored the part.
        public var quarantineID: String?
        /// What `disarm` removed from this file (`exif`, `gps`, `tEXt`, `script`…); nil when it was not disarmed.
        public var disarmed: [String]?

        /// Creates a part entry.
        public init(
            index: Int, name: AuditText, kind: PartKind, filename: AuditText? = nil,
            declaredType: String? = nil, sniffedType: String? = nil, size: Int, sha256: String? = nil,
            action: String, quarantineID: String? = nil, disarmed: [String]? = nil
        ) {
            self.disarmed = disarmed
            self.index = index
            self.name = name
            self.kind = kind
            self.filename = filename
            self.declaredType = declaredType
            self.sniffedType = sniffedType
            self.size = size
            self.sha256 = sha256
            self.action = action
            self.quarantineID = quarantineID
        }
    }

    /// One rule violation.
    public struct Violation: Sendable {
        /// The violation kind, e.g. `file_too_large`.
        public var kind: String
        /// The index of the offending part, or nil for request-level violations.
        public var part: Int?
        /// The rule's location as `file:line`, if it came from a rule file.
        public var rule: String?
        /// Human detail, e.g. `7.2 MiB > 5 MiB`.
        public var detail: String
        /// What the rule decided: `reject`, `strip`, `quarantine`, `log` or `sanitize`.
        public var outcome: String
        /// False in monitor mode: the outcome was recorded, not carried out.
        public var enforced: Bool

        /// Creates a violation entry.
        public init(kind: String, part: Int? = nil, rule: String? = nil, detail: String, outcome: String = "reject",
                    enforced: Bool = true) {
            self.kind = kind
            self.part = part
            self.rule = rule
            self.detail = detail
            self.outcome = outcome
            self.enforced = enforced
        }
    }

    /// An opt-in logged form field value.
    public struct Field: Sendable {
        /// The field name.
        public var name: AuditText
        /// The value, cut to at most `AuditRecord.fieldValueLimit` bytes.
        public var value: AuditText
        /// Whether `value` was cut.
        public var truncated: Bool

        /// Creates a field entry, truncating `value` to `AuditRecord.fieldValueLimit` bytes at a
        /// UTF-8 character boundary.
        public init(name: AuditText, value: AuditText) {
            self.name = name
            let limit = AuditRecord.fieldValueLimit
            if value.bytes.count <= limit {
                self.value = value
                self.truncated = false
            } else {
                var cut = limit
                // Do not split a multi-byte character: back up over continuation bytes.
                while cut > 0 && value.bytes[cut] & 0xC0 == 0x80 && limit - cut < 3 { cut -= 1 }
                self.value = AuditText(bytes: Array(value.bytes[..<cut]))
                self.truncated = true
            }
        }
    }

    /// Logged field values are cut to this many bytes (at a character boundary).
    public static let fieldValueLimit = 256

    /// When the request finished.
    public var timestamp: AuditTimestamp
    /// The request id (also sent upstream and in error pages).
    public var requestID: String
    /// The client address (`ip:port`, or the trusted forwarded address).
    public var client: String
    /// The HTTP method.
    public var method: String
    /// The request target's path as received.
    public var path: AuditText
    /// The matched route name, or nil when no route matched.
    public var route: String?
    /// The overall decision.
    public var decision: Decision
    /// The HTTP status sent to the client.
    public var status: Int
    /// The kind of the deciding violation, or nil.
    public var reason: String?
    /// Monitor mode: the status enforce mode would have answered with (nil when it would have forwarded).
    public var wouldStatus: Int?
    /// Body bytes received from the client.
    public var bytesIn: Int
    /// Body bytes sent upstream.
    public var bytesUpstream: Int
    /// Total time in milliseconds.
    public var durationMs: Double
    /// Milliseconds from the request's start until its body was received whole from the client; nil when it
    /// never was (refused or cut mid-body, an early answer).
    public var clientBodyMs: Double?
    /// Milliseconds from the first dial to the end of the upstream's part (its response's last byte, or the
    /// failure), every attempt included; nil if never contacted.
    public var upstreamMs: Double?
    /// Milliseconds the answering attempt took to connect (nginx's `$upstream_connect_time`); nil when it never
    /// connected.
    public var upstreamConnectMs: Double?
    /// Milliseconds from the answering attempt's start to the response head (`$upstream_header_time`); nil
    /// without a head.
    public var upstreamHeaderMs: Double?
    /// Milliseconds from the answering attempt's start to the response's last byte, or the failure
    /// (`$upstream_response_time`); nil if never contacted.
    public var upstreamResponseMs: Double?
    /// The client connection's TLS facts; nil for plain HTTP.
    public var tls: TLSInfo?
    /// The upstream server (`host:port`) that answered, or that was tried last when none did; nil if none was
    /// contacted.
    public var upstream: String?
    /// The parts seen, in order.
    public var parts: [Part]
    /// The violations found.
    public var violations: [Violation]
    /// Parser anomaly flag names (e.g. `lf_only_line_endings`).
    public var anomalies: [String]
    /// Logged field values, nil unless the route opts in (the key is then omitted).
    public var fields: [Field]?
    /// A malformed-request or upstream failure description, or nil.
    public var error: String?

    /// Creates a record; collections default to empty.
    public init(
        timestamp: AuditTimestamp, requestID: String, client: String, tls: TLSInfo? = nil, method: String,
        path: AuditText,
        route: String?, decision: Decision, status: Int, reason: String? = nil, wouldStatus: Int? = nil,
        bytesIn: Int = 0, bytesUpstream: Int = 0, durationMs: Double = 0, clientBodyMs: Double? = nil,
        upstreamMs: Double? = nil, upstreamConnectMs: Double? = nil, upstreamHeaderMs: Double? = nil,
        upstreamResponseMs: Double? = nil, upstream: String? = nil, parts: [Part] = [], violations: [Violation] = [],
        anomalies: [String] = [], fields: [Field]? = nil, error: String? = nil
    ) {
        self.timestamp = timestamp
        self.requestID = requestID
        self.client = client
        self.tls = tls
        self.method = method
        self.path = path
        self.route = route
        self.decision = decision
        self.status = status
        self.reason = reason
        self.wouldStatus = wouldStatus
        self.bytesIn = bytesIn
        self.bytesUpstream = bytesUpstream
        self.durationMs = durationMs
        self.clientBodyMs = clientBodyMs
        self.upstreamMs = upstreamMs
        self.upstreamConnectMs = upstreamConnectMs
        self.upstreamHeaderMs = upstreamHeaderMs
        self.upstreamResponseMs = upstreamResponseMs
        self.upstream = upstream
        self.parts = parts
        self.violations = violations
        self.anomalies = anomalies
        self.fields = fields
        self.error = error
    }
}

/// What the audit record says about a TLS client connection.
public struct TLSInfo: Sendable, Hashable {
    public var version: String
    public var cipher: String
    /// The server name the client sent (SNI).
    public var serverName: String?
    /// The verified client certificate's subject (RFC 2253), with client certificates on.
    public var clientSubject: String?
    public init(version: String, cipher: String, serverName: String?, clientSubject: String?) {
        self.version = version
        self.cipher = cipher
        self.serverName = serverName
        self.clientSubject = clientSubject
    }
}
