/// What the proxy adds when forwarding a request upstream.
public struct HTTPForwardingContext: Hashable, Sendable {
    /// The client's address as text (`203.0.113.7`, `2001:db8::1`), appended to X-Forwarded-For.
    public var clientAddress: String
    /// The scheme the client used, `http` or `https`, sent as X-Forwarded-Proto.
    public var scheme: String
    /// The id sent as X-Request-Id; keep the client's only if `RequestID.isValid` says so.
    public var requestID: String
    /// A Host to send when the client sent none (HTTP/1.0), since the upstream request is HTTP/1.1.
    public var defaultHost: String?

    /// Creates a forwarding context.
    public init(clientAddress: String, scheme: String, requestID: String, defaultHost: String? = nil) {
        self.clientAddress = clientAddress
        self.scheme = scheme
        self.requestID = requestID
        self.defaultHost = defaultHost
    }
}

/// Writes request heads for the upstream and response heads for the client.
///
/// Both drop hop-by-hop fields (RFC 9110 §7.6.1): Connection, Keep-Alive, Proxy-Connection, TE,
/// Trailer, Upgrade, and every field the Connection header names (except Host, which a client cannot
/// make the proxy drop). Values that the proxy sets itself are never taken from the peer.
public enum HTTPHeadSerializer {
    /// The name used in `Via`.
    public static let viaEntry = "1.1 formwall"

    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
    ]

    /// Fields the request serializer replaces with its own.
    static let replacedInRequests: Set<String> = [
        "content-length", "expect", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-request-id",
        "via",
    ]

    /// Appends `method SP target SP HTTP/1.1`, the forwarded fields, the new framing and the proxy fields.
    ///
    /// `framing` is the body framing the proxy will actually send: `.contentLength(n)`, `.chunked` or
    /// `.none`; the client's Content-Length, Transfer-Encoding and Expect are dropped. X-Forwarded-For
    /// and Via extend the client's values; X-Forwarded-Proto, X-Forwarded-Host (the client's Host) and
    /// X-Request-Id replace them.
    public static func writeRequestHead(
        _ head: HTTPRequestHead,
        framing: BodyFraming,
        context: HTTPForwardingContext,
        into buffer: inout [UInt8]
    ) {
        append(head.method, to: &buffer)
        buffer.append(HTTPSyntax.sp)
        append(head.target, to: &buffer)
        append(" HTTP/1.1\r\n", to: &buffer)

        let dropped = droppedNames(head.headers).union(replacedInRequests)
        for field in head.headers where !dropped.contains(field.name.lowercased()) {
            writeField(field.name, field.value, into: &buffer)
        }
        let host = head.headers.first(named: "host")
        if host == nil, let defaultHost = context.defaultHost {
            writeField("Host", defaultHost, into: &buffer)
        }
        switch framing {
        case .none:
            break
        case .contentLength(let length):
            writeField("Content-Length", String(length), into: &buffer)
        case .chunked:
            writeField("Transfer-Encoding", "chunked", into: &buffer)
        case .closeDelimited:
            preconditionFailure("a request body cannot be close-delimited")
        }
        let forwardedFor = head.headers.values(named: "x-forwarded-for") + [context.clientAddress]
        writeField("X-Forwarded-For", forwardedFor.joined(separator: ", "), into: &buffer)
        writeField("X-Forwarded-Proto", context.scheme, into: &buffer)
        if let host {
            writeField("X-Forwarded-Host", host, into: &buffer)
        }
        writeField("Via", (head.headers.values(named: "via") + [viaEntry]).joined(separator: ", "), into: &buffer)
        writeField("X-Request-Id", context.requestID, into: &buffer)
        append("\r\n", to: &buffer)
    }

    /// Appends `HTTP/1.1 status reason`, the forwarded fields, `Via`, and `Connection: close` if `close`.
    ///
    /// Content-Length and `Transfer-Encoding: chunked` are kept because the body is passed through
    /// unchanged. The caller must pass `close: true` when the client connection will be closed after
    /// this response, including every close-delimited response.
    public static func writeResponseHead(_ head: HTTPResponseHead, close: Bool, into buffer: inout [UInt8]) {
        append("HTTP/1.1 ", to: &buffer)
        HTTPSyntax.appendDecimal(head.status, to: &buffer)
        buffer.append(HTTPSyntax.sp)
        append(head.reason, to: &buffer)
        append("\r\n", to: &buffer)

        var dropped = droppedNames(head.headers)
        dropped.remove("transfer-encoding")
        dropped.insert("via")
        for field in head.headers where !dropped.contains(field.name.lowercased()) {
            writeField(field.name, field.value, into: &buffer)
        }
        writeField("Via", (head.headers.values(named: "via") + [viaEntry]).joined(separator: ", "), into: &buffer)
        if close {
            writeField("Connection", "close", into: &buffer)
        }
        append("\r\n", to: &buffer)
    }

    /// Hop-by-hop names plus those listed in Connection, lowercased; Host is never dropped.
    static func droppedNames(_ headers: HTTPHeaders) -> Set<String> {
        var names = hopByHop.union(headers.connectionTokens)
        names.remove("host")
        return names
    }

    /// Appends `name: value\r\n`; traps on a name or value that would break the framing of the head.
    static func writeField(_ name: String, _ value: String, into buffer: inout [UInt8]) {
        precondition(!name.utf8.isEmpty && name.utf8.allSatisfy(HTTPSyntax.isTokenChar), "invalid field name")
        precondition(value.utf8.allSatisfy(HTTPSyntax.isFieldValueByte), "invalid field value")
        append(name, to: &buffer)
        buffer.append(HTTPSyntax.colon)
        buffer.append(HTTPSyntax.sp)
        append(value, to: &buffer)
        buffer.append(HTTPSyntax.cr)
        buffer.append(HTTPSyntax.lf)
    }

    private static func append(_ text: String, to buffer: inout [UInt8]) {
        buffer.append(contentsOf: text.utf8)
    }
}
