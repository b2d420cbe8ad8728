/// A parsed and validated request head.
public struct HTTPRequestHead: Hashable, Sendable {
    /// The method token, case preserved (`GET`, `POST`...).
    public var method: String
    /// The request-target exactly as sent (origin-form, absolute-form, authority-form or `*`).
    public var target: String
    /// HTTP/1.0 or HTTP/1.1.
    public var version: HTTPVersion
    /// The header fields in order, names in their original case.
    public var headers: HTTPHeaders
    /// How the request body is delimited: `.none`, `.contentLength` or `.chunked`, never `.closeDelimited`.
    public var framing: BodyFraming
    /// Whether the client connection may carry another request after this one.
    public var keepAlive: Bool
    /// Whether the client sent `Expect: 100-continue` on HTTP/1.1 and waits for a 100 before its body.
    public var expectsContinue: Bool

    /// Creates a head; the parser is the usual source, this is for tests and synthesized requests.
    public init(
        method: String,
        target: String,
        version: HTTPVersion = .http1_1,
        headers: HTTPHeaders,
        framing: BodyFraming = .none,
        keepAlive: Bool = true,
        expectsContinue: Bool = false
    ) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.framing = framing
        self.keepAlive = keepAlive
        self.expectsContinue = expectsContinue
    }

    /// The value of the first field with this name (case-insensitive), or nil.
    public func header(named name: String) -> String? {
        self.headers.first(named: name)
    }

    /// The value of the first field of a known name (`.contentType`...), or nil.
    package func header(_ kind: KnownField) -> String? {
        self.headers.first(kind)
    }
}
