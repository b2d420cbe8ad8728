import Multipart

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
    /// Fields the proxy adds after its own (`X-Formwall-Modified`): written whatever the peer's Connection
    /// names, so a client cannot suppress them; the caller removes the client's fields of the same names.
    public var added: [HTTPHeaderField] = []
    /// A Content-Type for the upstream in place of the client's (a re-encoded body's): the client's field is
    /// left out and this one written after the forwarded fields, where appending it to the head would put it.
    /// Set here rather than edited into the head, whose field array the request's exchange shares.
    public var contentType: ContentType?

    /// The proxy's own Content-Type for the upstream.
    public enum ContentType: Hashable, Sendable {
        /// A whole value (`application/x-www-form-urlencoded`).
        case value(String)
        /// `MultipartEncoder.contentTypePrefix` and the encoder's boundary bytes (a valid RFC 2046 boundary, which
        /// the encoder checked), written without a String made for the field.
        case multipart(boundary: [UInt8])
    }
    /// Whether the client's X-Forwarded-For values are kept before `clientAddress` (a trusted proxy sent
    /// them); false: X-Forwarded-For is `clientAddress` alone.
    public var keepForwardedFor = true
    /// Whether fields whose names hold a `_` are left out (`--underscore-headers drop`, the default, as nginx
    /// does): PHP, CGI and WSGI servers read `X_Forwarded_For` as `X-Forwarded-For`. When they are kept, those
    /// that read so as a field Formwall sets or drops are still left out.
    public var dropsUnderscoredFields = true

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

    /// Fields the request serializer replaces with its own, or drops: `X-Original-URL` and `X-Rewrite-URL`, which
    /// older Symfony and Zend releases read as the request's path in place of the target Formwall judged.
    static let replacedInRequests: Set<String> = [
        "content-length", "expect", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-request-id",
        "via", "x-original-url", "x-rewrite-url",
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
        withRequestHead(head, framing: framing, context: context) { buffer.append(contentsOf: $0) }
    }

    /// `writeRequestHead` into temporary memory: `body` gets the head's bytes, valid only during the call (the
    /// proxy copies them into its upstream output queue, with no array in between).
    @inline(__always)
    public static func withRequestHead<R>(
        _ head: HTTPRequestHead,
        framing: BodyFraming,
        context: HTTPForwardingContext,
        _ body: (UnsafeRawBufferPointer) -> R
    ) -> R {
        let scan = HeadScan(head.headers)
        // Room for all of it (a field may reappear once more, as X-Forwarded-Host or inside Via and
        // X-Forwarded-For); the writer starts again with more room if this was short.
        var bound = head.method.utf8.count + head.target.utf8.count + scan.fieldBytes * 2 + 256
        bound += context.clientAddress.utf8.count + context.scheme.utf8.count + context.requestID.utf8.count
        bound += context.defaultHost?.utf8.count ?? 0
        switch context.contentType {
        case .value(let value): bound += value.utf8.count
        case .multipart(let boundary): bound += MultipartEncoder.contentTypePrefix.utf8CodeUnitCount + boundary.count
        case nil: break
        }
        for field in context.added { bound += field.name.utf8.count + field.value.utf8.count + 4 }
        return ByteWriter.withBytes(room: bound, { writer in
            fillRequestHead(head, framing: framing, context: context, scan: scan, into: &writer)
        }, body)
    }

    private static func fillRequestHead(
        _ head: HTTPRequestHead,
        framing: BodyFraming,
        context: HTTPForwardingContext,
        scan: HeadScan,
        into out: inout ByteWriter
    ) {
        let headers = head.headers
        out.write(head.method)
        out.write(HTTPSyntax.sp)
        out.write(head.target)
        out.write(" HTTP/1.1\r\n" as StaticString)

        // The first Host field's value, for X-Forwarded-Host; a parser's head has at most one.
        var host: HTTPHeaders.Index?
        // The fields' bytes are copied out in place; no String is made.
        let checked = !headers.parsed
        let replacesContentType = context.contentType != nil
        let dropsUnderscored = context.dropsUnderscoredFields
        headers.forEachField { index, name, value, known in
            let kind = FieldName(known: known, name: name)
            if host == nil && kind.contains(.host) {
                host = index
            }
            if replacesContentType && kind.contains(.contentType) { return }
            if known == .underscored && (dropsUnderscored || FieldName(hyphenating: name).dropsFromRequests) { return }
            if !dropsFromRequest(kind, name, headers, hasConnection: scan.connectionMayName(name, known)) {
                appendField(UnsafeRawBufferPointer(name), UnsafeRawBufferPointer(value), into: &out, checked: checked)
            }
        }
        switch context.contentType {
        case .value(let value):
            writeOwnField("Content-Type", value, into: &out)
        case .multipart(let boundary):
            // Boundary bytes are bchars (MultipartEncoder.init checks them), field-value bytes all.
            out.write("Content-Type: " as StaticString)
            out.write(MultipartEncoder.contentTypePrefix)
            boundary.withUnsafeBytes { out.write($0) }
            out.writeCRLF()
        case nil:
            break
        }
        if host == nil, let defaultHost = context.defaultHost {
            writeOwnField("Host", defaultHost, into: &out)
        }
        switch framing {
        case .none:
            break
        case .contentLength(let length):
            out.write("Content-Length: " as StaticString)
            out.writeDecimal(length)
            out.writeCRLF()
        case .chunked:
            writeOwnField("Transfer-Encoding", "chunked", into: &out, checked: false)
        case .closeDelimited:
            // Unreachable from input: only the response head parser yields close-delimited framing.
            preconditionFailure("a request body cannot be close-delimited")
        }
        out.write("X-Forwarded-For: " as StaticString)
        if context.keepForwardedFor {
            appendValues(of: headers, .xForwardedFor, to: &out)
        }
        appendValue(context.clientAddress, to: &out)
        out.writeCRLF()
        writeOwnField("X-Forwarded-Proto", context.scheme, into: &out)
        if let host {
            out.write("X-Forwarded-Host: " as StaticString)
            headers.withValue(at: host) { value in appendValue(UnsafeRawBufferPointer(value), to: &out, checked: checked) }
            out.writeCRLF()
        }
        appendVia(headers, to: &out)
        writeOwnField("X-Request-Id", context.requestID, into: &out)
        for field in context.added {
            writeField(field.name, field.value, into: &out)
        }
        out.writeCRLF()
    }

    /// Appends `HTTP/1.1 status reason`, the forwarded fields, `Via`, and `Connection: close` if `close`.
    ///
    /// Content-Length and `Transfer-Encoding: chunked` are kept because the body is passed through
    /// unchanged. The caller must pass `close: true` when the client connection will be closed after
    /// this response, including every close-delimited response.
    public static func writeResponseHead(_ head: HTTPResponseHead, close: Bool, into buffer: inout [UInt8]) {
        withResponseHead(head, close: close) { buffer.append(contentsOf: $0) }
    }

    /// `writeResponseHead` into temporary memory: `body` gets the head's bytes, valid only during the call.
    public static func withResponseHead<R>(_ head: HTTPResponseHead, close: Bool,
                                           _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let scan = HeadScan(head.headers)
        let bound = head.reason.utf8.count + scan.fieldBytes * 2 + 128
        return ByteWriter.withBytes(room: bound, { out in
            out.write("HTTP/1.1 " as StaticString)
            out.writeDecimal(head.status)
            out.write(HTTPSyntax.sp)
            out.write(head.reason)
            out.writeCRLF()
            let headers = head.headers
            let checked = !headers.parsed
            headers.forEachField { _, name, value, known in
                let kind = FieldName(known: known, name: name)
                if !dropsFromResponse(kind, name, headers, hasConnection: scan.connectionMayName(name, known)) {
                    appendField(UnsafeRawBufferPointer(name), UnsafeRawBufferPointer(value), into: &out, checked: checked)
                }
            }
            appendVia(headers, to: &out)
            if close {
                writeOwnField("Connection", "close", into: &out, checked: false)
            }
            out.writeCRLF()
        }, body)
    }

    /// Hop-by-hop names plus those listed in Connection, lowercased; Host is never dropped.
    ///
    /// The serializers decide field by field with `FieldName` and `HTTPHeaders.connectionNames(_:)`
    /// instead; this set is the specification they follow.
    static func droppedNames(_ headers: HTTPHeaders) -> Set<String> {
        var names = hopByHop.union(headers.connectionTokens)
        names.remove("host")
        return names
    }

    /// Whether a request field called `name` is left out: `droppedNames(headers)` or `replacedInRequests`
    /// contains `name.lowercased()`. `hasConnection` says whether a Connection field of `headers` may name it
    /// (false: none does; `HeadScan.connectionMayName`).
    static func dropsFromRequest(
        _ kind: FieldName,
        _ name: UnsafeBufferPointer<UInt8>,
        _ headers: HTTPHeaders,
        hasConnection: Bool
    ) -> Bool {
        if kind.contains(.replacedInRequests) {
            return true
        }
        return !kind.contains(.host)
            && (kind.contains(.hopByHop) || (hasConnection && headers.connectionNames(bytes: name)))
    }

    /// Whether a response field called `name` is left out: it is Via, or `droppedNames(headers)` without
    /// Transfer-Encoding contains `name.lowercased()`.
    static func dropsFromResponse(
        _ kind: FieldName,
        _ name: UnsafeBufferPointer<UInt8>,
        _ headers: HTTPHeaders,
        hasConnection: Bool
    ) -> Bool {
        if kind.contains(.via) {
            return true
        }
        return !kind.contains(.transferEncoding) && !kind.contains(.host)
            && (kind.contains(.hopByHop) || (hasConnection && headers.connectionNames(bytes: name)))
    }

    /// Appends `name: value\r\n`; traps on a name or value that would break the framing of the head.
    /// `checked: false` only for fields a head parser produced (`HTTPHeaders.parsed`), whose bytes it checked.
    static func writeField(_ name: String, _ value: String, into buffer: inout [UInt8], checked: Bool = true) {
        let room = name.utf8.count + value.utf8.count + 4
        ByteWriter.withBytes(room: room, { writeField(name, value, into: &$0, checked: checked) }) {
            buffer.append(contentsOf: $0)
        }
    }

    /// `writeField` through a head writer.
    static func writeField(_ name: String, _ value: String, into out: inout ByteWriter, checked: Bool = true) {
        // Both strings' bytes in place (native strings, small ones too): one check and one copy each.
        let written: Bool? = name.utf8.withContiguousStorageIfAvailable { nameBytes in
            value.utf8.withContiguousStorageIfAvailable { valueBytes in
                appendField(UnsafeRawBufferPointer(nameBytes), UnsafeRawBufferPointer(valueBytes), into: &out,
                            checked: checked)
            } != nil
        }
        guard written != true else { return }
        // Bridged strings (never the parsers'): the same through copies.
        Array(name.utf8).withUnsafeBytes { nameBytes in
            Array(value.utf8).withUnsafeBytes { valueBytes in
                appendField(nameBytes, valueBytes, into: &out, checked: checked)
            }
        }
    }

    /// `writeField` for one of the serializer's own names, a token literal: only the value is checked (and not
    /// even that for a literal value, `checked: false`).
    private static func writeOwnField(_ name: StaticString, _ value: String, into out: inout ByteWriter,
                                      checked: Bool = true) {
        out.write(name)
        out.write(HTTPSyntax.colon)
        out.write(HTTPSyntax.sp)
        appendValue(value, to: &out, checked: checked)
        out.writeCRLF()
    }

    /// `writeField` on the bytes of the name and the value.
    static func appendField(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, into out: inout ByteWriter,
                            checked: Bool = true) {
        if checked {
            // Unreachable from input. Fields a parser produced come with `checked: false` (its checks are these).
            // Every other field is Formwall's: names are constants or operator settings validated as tokens at
            // start-up (`modified-header`, `--tls-client-subject-header`); values are constants, generated ids
            // and boundaries, a client's X-Request-Id only when `RequestID.isValid`, addresses formatted by
            // inet_ntop, and certificate subjects through `fieldSafe` (printable ASCII only).
            precondition(!name.isEmpty && HTTPSyntax.allTokenBytes(name), "invalid field name")
            precondition(HTTPSyntax.allFieldValueBytes(value), "invalid field value")
        }
        out.write(name)
        out.write(HTTPSyntax.colon)
        out.write(HTTPSyntax.sp)
        out.write(value)
        out.writeCRLF()
    }

    /// `Via: ` with the peer's Via values and ours, comma-separated, and its CRLF.
    private static func appendVia(_ headers: HTTPHeaders, to out: inout ByteWriter) {
        out.write("Via: " as StaticString)
        appendValues(of: headers, .via, to: &out)
        out.write(viaEntry)
        out.writeCRLF()
    }

    /// Appends the value of every field with this name, each followed by `, `.
    private static func appendValues(of headers: HTTPHeaders, _ kind: KnownField, to out: inout ByteWriter) {
        let checked = !headers.parsed
        for index in headers.indices where headers.known(at: index) == kind {
            headers.withValue(at: index) { value in appendValue(UnsafeRawBufferPointer(value), to: &out, checked: checked) }
            out.write(UInt8(ascii: ","))
            out.write(HTTPSyntax.sp)
        }
    }

    /// Appends a field value; traps on a byte that would break the framing of the head (`checked: false` only for
    /// a parser's value, see `writeField`).
    private static func appendValue(_ value: String, to out: inout ByteWriter, checked: Bool = true) {
        // Unreachable from input: forwarded values passed the parsers' isFieldValueByte check; ours are validated.
        if checked { precondition(isFieldValue(value), "invalid field value") }
        out.write(value)
    }

    /// `appendValue` for a value's bytes.
    private static func appendValue(_ value: UnsafeRawBufferPointer, to out: inout ByteWriter, checked: Bool) {
        // Unreachable from input, as above.
        if checked { precondition(HTTPSyntax.allFieldValueBytes(value), "invalid field value") }
        out.write(value)
    }

    private static func isFieldValue(_ text: String) -> Bool {
        if let result = text.utf8.withContiguousStorageIfAvailable({ HTTPSyntax.allFieldValueBytes(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return text.utf8.allSatisfy(HTTPSyntax.isFieldValueByte)
    }
}

/// One pass over a head's fields before serializing it: whether any Connection field names others, and the
/// bytes of all fields, to reserve the output once.
struct HeadScan {
    var hasConnection = false
    var fieldBytes = 0
    /// The lengths of the Connection fields' elements: bit n for an ASCII element of n bytes (n < 63); bit 63
    /// for a longer one or a value with other bytes. A field whose name's length has no bit is not named there,
    /// which spares comparing every field's name with every element (a browser sends `Connection: keep-alive`).
    var connectionLengths: UInt64 = 0

    init(_ headers: HTTPHeaders) {
        self.fieldBytes = headers.fieldBytes + 4 * headers.count
        self.hasConnection = headers.contains(kind: .connection)
        if self.hasConnection { self.connectionLengths = headers.connectionElementLengths() }
    }

    /// Whether a field of this name (of kind `known`) may be named by a Connection field (then
    /// `connectionNames` decides). A non-ASCII name always may: Unicode lowercasing can change its length (a
    /// KELVIN SIGN is three bytes and lowercases to `k`).
    @inline(__always)
    func connectionMayName(_ name: UnsafeBufferPointer<UInt8>, _ known: KnownField) -> Bool {
        guard hasConnection else { return false }
        if known == .nonASCII || connectionLengths >> 63 != 0 { return true }
        return (connectionLengths >> UInt64(min(name.count, 63))) & 1 != 0
    }
}

/// What a field name is to the serializers, judged on its lowercased form like the `Set<String>` lookups in
/// `HTTPHeadSerializer.droppedNames` and `replacedInRequests`.
struct FieldName: OptionSet {
    let rawValue: UInt8

    static let hopByHop = FieldName(rawValue: 1)
    static let replacedInRequests = FieldName(rawValue: 2)
    static let host = FieldName(rawValue: 4)
    static let via = FieldName(rawValue: 8)
    static let transferEncoding = FieldName(rawValue: 16)
    static let contentType = FieldName(rawValue: 32)

    init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// Classifies a field by its name's kind (`KnownField`, the one table of the names the serializers treat
    /// specially); a non-ASCII name as `init(_:)` does.
    @inline(__always)
    init(_ field: HTTPHeaderField) {
        switch field.known {
        case .nonASCII: self.init(lowercased: field.name.lowercased())
        default: self.init(kind: field.known)
        }
    }

    /// `init(_:)` for a field's name bytes and kind.
    @inline(__always)
    init(known: KnownField, name: UnsafeBufferPointer<UInt8>) {
        switch known {
        case .nonASCII: self.init(lowercased: String(decoding: name, as: UTF8.self).lowercased())
        default: self.init(kind: known)
        }
    }

    /// The classes of an underscored name read as a CGI-style server reads it, with `-` for each `_`.
    init(hyphenating name: UnsafeBufferPointer<UInt8>) {
        self.init(kind: KnownField(hyphenating: name))
    }

    /// A field the request serializer never forwards: hop-by-hop (Host aside) or replaced.
    var dropsFromRequests: Bool { contains(.replacedInRequests) || (contains(.hopByHop) && !contains(.host)) }

    /// Classifies a name: ASCII names by their kind, others through `lowercased()` and the sets.
    init(_ name: String) {
        let kind = KnownField(name)
        self = kind == .nonASCII ? FieldName(lowercased: name.lowercased()) : FieldName(kind: kind)
    }

    /// The classes of an ASCII name of this kind.
    @inline(__always)
    private init(kind: KnownField) {
        switch kind {
        case .te, .trailer, .upgrade, .connection, .keepAlive, .proxyConnection: self = .hopByHop
        case .via: self = [.replacedInRequests, .via]
        case .host: self = .host
        case .expect, .xRequestID, .contentLength, .xForwardedFor, .xForwardedHost, .xForwardedProto, .xOriginalURL,
             .xRewriteURL:
            self = .replacedInRequests
        case .contentType: self = .contentType
        case .transferEncoding: self = [.hopByHop, .transferEncoding]
        case .other, .nonASCII, .underscored, .accept, .contentEncoding, .xHTTPMethodOverride, .xHTTPMethod,
             .xMethodOverride:
            self = []
        }
    }

    private init(lowercased name: String) {
        var kind: FieldName = []
        if HTTPHeadSerializer.hopByHop.contains(name) {
            kind.insert(.hopByHop)
        }
        if HTTPHeadSerializer.replacedInRequests.contains(name) {
            kind.insert(.replacedInRequests)
        }
        if name == "host" {
            kind.insert(.host)
        }
        if name == "via" {
            kind.insert(.via)
        }
        if name == "transfer-encoding" {
            kind.insert(.transferEncoding)
        }
        if name == "content-type" {
            kind.insert(.contentType)
        }
        self = kind
    }
}
