/// One header field line: a name in its original case and an OWS-trimmed value.
public struct HTTPHeaderField: Hashable, Sendable {
    /// The field name as received (a token; compare case-insensitively).
    public var name: String {
        didSet { known = KnownField(name) }
    }
    /// The field value without leading and trailing whitespace.
    public var value: String
    /// Which of the names Formwall looks up this one is (ASCII case-insensitively), found once when the field
    /// is made, so that lookups compare one byte instead of the name.
    private(set) var known: KnownField

    /// Creates a field.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
        self.known = KnownField(name)
    }

    /// A parser's field, whose name's kind it found from the bytes.
    init(name: String, value: String, known: KnownField) {
        self.name = name
        self.value = value
        self.known = known
    }
}

/// The field names the parsers, serializers and proxy look up, recognised ASCII case-insensitively. `other` is
/// any other ASCII name; `nonASCII` a name with other bytes (never a token: lookups compare such names in full).
/// A name equals a known name ignoring ASCII case exactly when its kind is that name's, which is what lets
/// `HTTPHeaders` compare kinds instead of names.
package enum KnownField: UInt8, Sendable {
    case other, nonASCII
    case accept, connection, contentEncoding, contentLength, contentType, expect, host, keepAlive
    case proxyConnection, te, trailer, transferEncoding, upgrade, via, xForwardedFor, xForwardedHost
    case xForwardedProto, xRequestID

    /// The kind of a name held as a String.
    init(_ name: String) {
        if let kind = name.utf8.withContiguousStorageIfAvailable({ KnownField(bytes: $0) }) {
            self = kind
        } else {
            self = Array(name.utf8).withUnsafeBufferPointer { KnownField(bytes: $0) }
        }
    }

    /// The kind of a name's bytes: its length picks the candidates, one case-insensitive comparison decides.
    init(bytes name: UnsafeBufferPointer<UInt8>) {
        func named(_ literal: StaticString) -> Bool {
            HTTPSyntax.equalsIgnoringCase(name, UnsafeBufferPointer(start: literal.utf8Start,
                                                                    count: literal.utf8CodeUnitCount))
        }
        switch name.count {
        case 2 where named("te"): self = .te
        case 3 where named("via"): self = .via
        case 4 where named("host"): self = .host
        case 6 where named("accept"): self = .accept
        case 6 where named("expect"): self = .expect
        case 7 where named("trailer"): self = .trailer
        case 7 where named("upgrade"): self = .upgrade
        case 10 where named("connection"): self = .connection
        case 10 where named("keep-alive"): self = .keepAlive
        case 12 where named("content-type"): self = .contentType
        case 12 where named("x-request-id"): self = .xRequestID
        case 14 where named("content-length"): self = .contentLength
        case 15 where named("x-forwarded-for"): self = .xForwardedFor
        case 16 where named("content-encoding"): self = .contentEncoding
        case 16 where named("proxy-connection"): self = .proxyConnection
        case 16 where named("x-forwarded-host"): self = .xForwardedHost
        case 17 where named("transfer-encoding"): self = .transferEncoding
        case 17 where named("x-forwarded-proto"): self = .xForwardedProto
        default: self = HTTPSyntax.isASCII(UnsafeRawBufferPointer(name)) ? .other : .nonASCII
        }
    }

    /// The name as a String when `bytes` (a name of this kind) is in one of its usual spellings, `Content-Type`
    /// or `content-type`: a literal, which costs nothing to make, where `String(decoding:)` would check and copy
    /// the bytes. Nil for any other spelling (`CONTENT-TYPE`, which keeps its bytes through `String(decoding:)`),
    /// and for `other` and `nonASCII` names.
    func literalName(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        // The kind matched the bytes ignoring case: a `memcmp` with the canonical spelling (a StaticString, its
        // bytes in place) or no uppercase letter decides which literal they are.
        let canonical: StaticString
        switch self {
        case .other, .nonASCII: return nil
        case .accept: canonical = "Accept"
        case .connection: canonical = "Connection"
        case .contentEncoding: canonical = "Content-Encoding"
        case .contentLength: canonical = "Content-Length"
        case .contentType: canonical = "Content-Type"
        case .expect: canonical = "Expect"
        case .host: canonical = "Host"
        case .keepAlive: canonical = "Keep-Alive"
        case .proxyConnection: canonical = "Proxy-Connection"
        case .te: canonical = "TE"
        case .trailer: canonical = "Trailer"
        case .transferEncoding: canonical = "Transfer-Encoding"
        case .upgrade: canonical = "Upgrade"
        case .via: canonical = "Via"
        case .xForwardedFor: canonical = "X-Forwarded-For"
        case .xForwardedHost: canonical = "X-Forwarded-Host"
        case .xForwardedProto: canonical = "X-Forwarded-Proto"
        case .xRequestID: canonical = "X-Request-Id"
        }
        let spelled = UnsafeBufferPointer(start: canonical.utf8Start, count: canonical.utf8CodeUnitCount)
        if HTTPSyntax.equalBytes(spelled, bytes) { return literal(lowercase: false) }
        if HTTPSyntax.hasNoUppercase(knownName: bytes) { return literal(lowercase: true) }
        return nil
    }

    /// The canonical or lowercase spelling of a known name, as a String literal (a tuple of Strings would be
    /// released on the way out); nil for `other` and `nonASCII`.
    private func literal(lowercase: Bool) -> String? {
        switch self {
        case .other, .nonASCII: nil
        case .accept: lowercase ? "accept" : "Accept"
        case .connection: lowercase ? "connection" : "Connection"
        case .contentEncoding: lowercase ? "content-encoding" : "Content-Encoding"
        case .contentLength: lowercase ? "content-length" : "Content-Length"
        case .contentType: lowercase ? "content-type" : "Content-Type"
        case .expect: lowercase ? "expect" : "Expect"
        case .host: lowercase ? "host" : "Host"
        case .keepAlive: lowercase ? "keep-alive" : "Keep-Alive"
        case .proxyConnection: lowercase ? "proxy-connection" : "Proxy-Connection"
        case .te: lowercase ? "te" : "TE"
        case .trailer: lowercase ? "trailer" : "Trailer"
        case .transferEncoding: lowercase ? "transfer-encoding" : "Transfer-Encoding"
        case .upgrade: lowercase ? "upgrade" : "Upgrade"
        case .via: lowercase ? "via" : "Via"
        case .xForwardedFor: lowercase ? "x-forwarded-for" : "X-Forwarded-For"
        case .xForwardedHost: lowercase ? "x-forwarded-host" : "X-Forwarded-Host"
        case .xForwardedProto: lowercase ? "x-forwarded-proto" : "X-Forwarded-Proto"
        case .xRequestID: lowercase ? "x-request-id" : "X-Request-Id"
        }
    }

    /// Whether `field` is called `name` (ASCII case-insensitively), `self` being `name`'s kind. Equal names have
    /// equal kinds (ASCII case folding leaves other bytes alone, so an ASCII name never equals a non-ASCII one):
    /// a known kind decides alone; `other` and `nonASCII` names are then compared in full.
    @inline(__always)
    func matches(_ field: HTTPHeaderField, named name: String) -> Bool {
        switch self {
        case .other, .nonASCII: return field.known == self && HTTPSyntax.equalsIgnoringCase(field.name, name)
        default: return field.known == self
        }
    }
}

/// The ordered header fields of a head, with case-insensitive lookup.
///
/// Order and name case are preserved exactly as received, so a head can be forwarded faithfully.
public struct HTTPHeaders: Hashable, Sendable, RandomAccessCollection, ExpressibleByDictionaryLiteral {
    /// The fields in order.
    public private(set) var fields: [HTTPHeaderField]
    /// Whether every field passed a head parser's checks (a token name, field-value bytes): set only by the
    /// parsers and cleared by `append`, so the serializers re-check the bytes of every other field before
    /// writing it, and skip that for these. Not part of equality.
    private(set) var parsed = false

    /// Creates headers from fields in order.
    public init(_ fields: [HTTPHeaderField] = []) {
        self.fields = fields
    }

    /// Creates headers from a parser's field list, taking its array and leaving `fields` empty without storage
    /// (so the parser, reset for the next head, does not copy an array it still shared).
    init(taking fields: inout [HTTPHeaderField]) {
        self.fields = []
        swap(&self.fields, &fields)
        self.parsed = true
    }

    /// Equal when the fields are, in order (whether they were parsed does not matter).
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool { lhs.fields == rhs.fields }

    public func hash(into hasher: inout Hasher) { hasher.combine(fields) }

    /// Takes the fields' array out, leaving the headers empty, so that it can be emptied in place (capacity
    /// kept) and handed to a later head's parser (`adoptStorage`), which then parses into it without
    /// allocating. Call it on the last copy of the headers: an array still shared elsewhere would be copied.
    public mutating func takeStorage() -> [HTTPHeaderField] {
        var taken: [HTTPHeaderField] = []
        swap(&taken, &self.fields)
        return taken
    }

    /// Creates headers from `["Name": "value", ...]` in literal order; repeated names are kept.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.fields = elements.map { HTTPHeaderField(name: $0.0, value: $0.1) }
    }

    /// The index of the first field.
    public var startIndex: Int { self.fields.startIndex }
    /// One past the index of the last field.
    public var endIndex: Int { self.fields.endIndex }
    /// The field at `position`.
    public subscript(position: Int) -> HTTPHeaderField { self.fields[position] }

    /// Appends a field at the end.
    public mutating func append(name: String, value: String) {
        self.fields.append(HTTPHeaderField(name: name, value: value))
        self.parsed = false
    }

    /// Removes every field with this name (case-insensitive).
    public mutating func removeAll(named name: String) {
        // Only a match mutates: the fields are often shared with a copy of the head, and removing nothing from a
        // shared array would still copy it. One pass: the kept fields after the first match slide down.
        let kind = KnownField(name)
        guard let first = self.fields.firstIndex(where: { kind.matches($0, named: name) }) else {
            return
        }
        var kept = first
        for index in (first + 1)..<self.fields.count {
            guard !kind.matches(self.fields[index], named: name) else { continue }
            self.fields[kept] = self.fields[index]
            kept += 1
        }
        self.fields.removeSubrange(kept...)
    }

    /// The value of the first field of a known name (`.contentType`...), or nil: `first(named:)` without
    /// classifying the name first. `other` and `nonASCII` stand for no one name, and find nothing.
    package func first(_ kind: KnownField) -> String? {
        switch kind {
        case .other, .nonASCII: return nil
        // A known kind is matched by kind alone (`KnownField.matches`): the name is not read.
        default: return first(kind, named: "")
        }
    }

    /// The values of every field of a known name, in order (`values(named:)` by kind, as `first(_:)`).
    package func values(_ kind: KnownField) -> [String] {
        switch kind {
        case .other, .nonASCII: return []
        default: return values(kind, named: "")
        }
    }

    /// The value of the first field with this name (case-insensitive), or nil.
    public func first(named name: String) -> String? {
        first(KnownField(name), named: name)
    }

    /// The values of every field with this name (case-insensitive), in order.
    public func values(named name: String) -> [String] {
        values(KnownField(name), named: name)
    }

    /// `first(named:)` with the name's kind already found.
    private func first(_ kind: KnownField, named name: String) -> String? {
        // Index loops read the fields in place: `for field in` would copy each (a retain and a release per string).
        for index in self.fields.indices where kind.matches(self.fields[index], named: name) {
            return self.fields[index].value
        }
        return nil
    }

    /// `values(named:)` with the name's kind already found.
    private func values(_ kind: KnownField, named name: String) -> [String] {
        var values: [String] = []
        for index in self.fields.indices where kind.matches(self.fields[index], named: name) {
            values.append(self.fields[index].value)
        }
        return values
    }

    /// Whether a field with this name (case-insensitive) is present.
    public func contains(named name: String) -> Bool {
        let kind = KnownField(name)
        for index in self.fields.indices where kind.matches(self.fields[index], named: name) {
            return true
        }
        return false
    }

    /// The lowercased, non-empty tokens of every Connection field (`close`, `keep-alive`, field names...).
    public var connectionTokens: [String] {
        self.values(named: "connection").flatMap { value in
            HTTPSyntax.listElements(value).filter { !$0.isEmpty }.map { $0.lowercased() }
        }
    }

    /// Whether `connectionTokens` contains `token.lowercased()`, found without building the array.
    func connectionNames(_ token: some StringProtocol) -> Bool {
        for index in self.fields.indices where self.fields[index].known == .connection {
            let found = HTTPSyntax.firstListElement(self.fields[index].value) { element in
                !element.isEmpty && HTTPSyntax.equalsLowercased(element, token)
            }
            if found {
                return true
            }
        }
        return false
    }
}
