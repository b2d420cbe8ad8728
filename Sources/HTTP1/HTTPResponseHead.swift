/// A parsed and validated upstream response head.
public struct HTTPResponseHead: Hashable, Sendable {
    /// HTTP/1.0 or HTTP/1.1.
    public var version: HTTPVersion
    /// The status code, 100 through 599.
    public var status: Int
    /// The reason phrase (possibly empty); informational only.
    public var reason: String
    /// The header fields in order, names in their original case.
    public var headers: HTTPHeaders
    /// How the body is delimited, given the request method and the status (RFC 9112 §6.3).
    public var framing: BodyFraming
    /// Whether the upstream connection may carry another request after this response.
    public var keepAlive: Bool

    /// Creates a head; the parser is the usual source, this is for tests and synthesized responses.
    public init(
        version: HTTPVersion = .http1_1,
        status: Int,
        reason: String,
        headers: HTTPHeaders,
        framing: BodyFraming,
        keepAlive: Bool = true
    ) {
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers
        self.framing = framing
        self.keepAlive = keepAlive
    }

    /// Whether this is an interim 1xx response; the final response follows on the same connection.
    public var isInformational: Bool {
        (100..<200).contains(self.status)
    }

    /// The value of the first field with this name (case-insensitive), or nil.
    public func header(named name: String) -> String? {
        self.headers.first(named: name)
    }
}
