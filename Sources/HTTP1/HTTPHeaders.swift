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
    /// An ASCII name holding a `_`: never a known name, but PHP, CGI and WSGI servers read `X_Original_URL` as
    /// `X-Original-URL` (both become `HTTP_X_ORIGINAL_URL`), so the serializer drops such fields by default.
    case underscored
    case accept, connection, contentEncoding, contentLength, contentType, expect, host, keepAlive
    case proxyConnection, te, trailer, transferEncoding, upgrade, via, xForwardedFor, xForwardedHost
    case xForwardedProto, xRequestID
    /// Fields that make some backends read another method (`X-HTTP-Method-Override`: Symfony, Rack, Express's
    /// method-override) or another path (`X-Original-URL`, `X-Rewrite-URL`: older Symfony and Zend releases).
    case xHTTPMethodOverride, xHTTPMethod, xMethodOverride, xOriginalURL, xRewriteURL

    /// Whether the kind stands for one name (every kind but `other`, `nonASCII` and `underscored`, whose names
    /// are compared in full).
    var isOneName: Bool {
        switch self {
        case .other, .nonASCII, .underscored: false
        default: true
        }
    }

    /// The kind of a name as a CGI-style server reads it, each `_` a `-` (`X_Original_URL` is `X-Original-URL`).
    init(hyphenating name: some Collection<UInt8>) {
        self = Array(name.map { $0 == UInt8(ascii: "_") ? UInt8(ascii: "-") : $0 }).withUnsafeBufferPointer {
            KnownField(bytes: $0)
        }
    }

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
        self.init(name, isToken: false)
    }

    /// The kind of a name a head parser found to be a token (tchars only, so ASCII: never `nonASCII`). Out of line:
    /// inlined, it grew the parser's field loop past what the optimiser inlines into the head parsers.
    @inline(never)
    init(tokenBytes name: UnsafeBufferPointer<UInt8>) {
        self.init(name, isToken: true)
    }

    @inline(__always)
    private init(_ name: UnsafeBufferPointer<UInt8>, isToken: Bool) {
        // The first byte turns most candidates of the right length away before the whole name is compared.
        let first = name.isEmpty ? 0 : HTTPSyntax.lowercased(name[0])
        func named(_ literal: StaticString) -> Bool {
            first == literal.utf8Start[0] && HTTPSyntax.equalsIgnoringCase(name, lowercase: literal)
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
        case 13 where named("x-http-method"): self = .xHTTPMethod
        case 13 where named("x-rewrite-url"): self = .xRewriteURL
        case 14 where named("x-original-url"): self = .xOriginalURL
        case 14 where named("content-length"): self = .contentLength
        case 15 where named("x-forwarded-for"): self = .xForwardedFor
        case 16 where named("content-encoding"): self = .contentEncoding
        case 16 where named("proxy-connection"): self = .proxyConnection
        case 16 where named("x-forwarded-host"): self = .xForwardedHost
        case 17 where named("transfer-encoding"): self = .transferEncoding
        case 17 where named("x-forwarded-proto"): self = .xForwardedProto
        case 17 where named("x-method-override"): self = .xMethodOverride
        case 22 where named("x-http-method-override"): self = .xHTTPMethodOverride
        default:
            if !isToken && !HTTPSyntax.isASCII(UnsafeRawBufferPointer(name)) {
                self = .nonASCII
            } else {
                self = HTTPSyntax.containsUnderscore(UnsafeRawBufferPointer(name)) ? .underscored : .other
            }
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
        case .other, .nonASCII, .underscored: return nil
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
        case .xHTTPMethodOverride: canonical = "X-HTTP-Method-Override"
        case .xHTTPMethod: canonical = "X-HTTP-Method"
        case .xMethodOverride: canonical = "X-Method-Override"
        case .xOriginalURL: canonical = "X-Original-URL"
        case .xRewriteURL: canonical = "X-Rewrite-URL"
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
        case .other, .nonASCII, .underscored: nil
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
        case .xHTTPMethodOverride: lowercase ? "x-http-method-override" : "X-HTTP-Method-Override"
        case .xHTTPMethod: lowercase ? "x-http-method" : "X-HTTP-Method"
        case .xMethodOverride: lowercase ? "x-method-override" : "X-Method-Override"
        case .xOriginalURL: lowercase ? "x-original-url" : "X-Original-URL"
        case .xRewriteURL: lowercase ? "x-rewrite-url" : "X-Rewrite-URL"
        }
    }

    /// Whether a field whose name has kind `known` and bytes `nameBytes` is called `name` (ASCII
    /// case-insensitively), `self` being `name`'s kind. Equal names have equal kinds (ASCII case folding leaves
    /// other bytes alone, so an ASCII name never equals a non-ASCII one): a known kind decides alone; `other` and
    /// `nonASCII` names are then compared in full.
    @inline(__always)
    func matches(known: KnownField, nameBytes: UnsafeBufferPointer<UInt8>, named name: String) -> Bool {
        guard known == self else { return false }
        switch self {
        case .other, .nonASCII, .underscored:
            var name = name
            return name.withUTF8 { HTTPSyntax.equalsIgnoringCase(nameBytes, $0) }
        default:
            return true
        }
    }
}

/// The ordered header fields of a head, with case-insensitive lookup.
///
/// Order and name case are preserved exactly as received, so a head can be forwarded faithfully.
///
/// The fields are kept as bytes: every name and value back to back in one array, and one `Entry` per field
/// saying where its name and value lie and what kind of name it is. A parser appends a line's bytes and an
/// entry, and makes no String; the serializers copy the bytes out as they are. `HTTPHeaderField` values (with
/// their Strings) are made only when asked for: by the collection's subscript, `fields`, and the lookups that
/// return Strings.
public struct HTTPHeaders: Hashable, Sendable, RandomAccessCollection, ExpressibleByDictionaryLiteral {
    /// Where one field's name and value lie in `bytes`, and its name's kind.
    package struct Entry: Sendable {
        var nameStart: Int
        var nameCount: Int
        var valueStart: Int
        var valueCount: Int
        var known: KnownField
    }

    /// The arrays of a head's fields, emptied for reuse: `takeStorage()` gives them out once a head is done
    /// with, and a parser's `adoptStorage` parses the next head into them without allocating.
    public struct Storage: Sendable {
        package var bytes: [UInt8]
        package var entries: [Entry]

        /// Empty arrays without capacity.
        public init() {
            bytes = []
            entries = []
        }

        package init(bytes: [UInt8], entries: [Entry]) {
            self.bytes = bytes
            self.entries = entries
        }

        /// Whether neither array has room (a parser holding this needs a recycled pair).
        var isUnallocated: Bool { bytes.capacity == 0 && entries.capacity == 0 }

        /// How many fields are held.
        var count: Int { entries.count }

        /// Empties both arrays, keeping their capacity.
        mutating func removeAll() {
            bytes.removeAll(keepingCapacity: true)
            entries.removeAll(keepingCapacity: true)
        }

        /// Appends a field a head parser checked: `line`'s bytes up to the end of the value, one copy, and an entry
        /// for the name (from the line's start) and the value (`value`, a range of `line`) with the name's kind.
        /// The first field reserves room for 16 fields and 1 KiB, a head's usual size (browsers send 10 to 20
        /// fields): growing from empty would allocate again and again.
        @inline(__always)
        mutating func appendParsed(line: UnsafeRawBufferPointer, nameCount: Int, value: Range<Int>, known: KnownField) {
            if entries.capacity == 0 { entries.reserveCapacity(16) }
            if bytes.capacity == 0 { bytes.reserveCapacity(1024) }
            let start = bytes.count
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: line[..<value.upperBound]))
            entries.append(Entry(nameStart: start, nameCount: nameCount, valueStart: start + value.lowerBound,
                                 valueCount: value.count, known: known))
        }

        /// A recycled pair becomes the arrays of storage holding none (a parser's, after a head took them).
        mutating func adopt(_ storage: Storage) {
            guard isUnallocated, storage.bytes.isEmpty, storage.entries.isEmpty else { return }
            self = storage
        }
    }

    /// The names and values of the fields, back to back (a removed field's bytes stay, unreferenced).
    private(set) var bytes: [UInt8]
    /// The fields in order.
    private(set) var entries: [Entry]
    /// Whether every field passed a head parser's checks (a token name, field-value bytes): set only by the
    /// parsers and cleared by `append`, so the serializers re-check the bytes of every other field before
    /// writing it, and skip that for these. Not part of equality.
    private(set) var parsed = false

    /// Creates headers from fields in order.
    public init(_ fields: [HTTPHeaderField] = []) {
        bytes = []
        entries = []
        for field in fields { append(field) }
    }

    /// Creates headers from a parser's arrays, taking them and leaving `storage` empty without capacity (so the
    /// parser, reset for the next head, does not copy arrays it still shared).
    init(taking storage: inout Storage) {
        bytes = []
        entries = []
        swap(&bytes, &storage.bytes)
        swap(&entries, &storage.entries)
        parsed = true
    }

    /// Equal when the fields are, in order: the same name and value bytes (whether they were parsed, and where
    /// their bytes lie, does not matter).
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        guard lhs.entries.count == rhs.entries.count else { return false }
        return lhs.bytes.withUnsafeBytes { left in
            rhs.bytes.withUnsafeBytes { right in
                lhs.entries.indices.allSatisfy { index in
                    let a = lhs.entries[index]
                    let b = rhs.entries[index]
                    return HTTPSyntax.equalBytes(slice(left, a.nameStart, a.nameCount),
                                                 slice(right, b.nameStart, b.nameCount))
                        && HTTPSyntax.equalBytes(slice(left, a.valueStart, a.valueCount),
                                                 slice(right, b.valueStart, b.valueCount))
                }
            }
        }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(entries.count)
        bytes.withUnsafeBytes { raw in
            for entry in entries {
                hasher.combine(bytes: UnsafeRawBufferPointer(Self.slice(raw, entry.nameStart, entry.nameCount)))
                hasher.combine(0 as UInt8)
                hasher.combine(bytes: UnsafeRawBufferPointer(Self.slice(raw, entry.valueStart, entry.valueCount)))
                hasher.combine(1 as UInt8)
            }
        }
    }

    /// Takes the fields' arrays out, leaving the headers empty, so that they can be emptied in place (capacity
    /// kept) and handed to a later head's parser (`adoptStorage`), which then parses into them without
    /// allocating. Call it on the last copy of the headers: arrays still shared elsewhere would be copied.
    public mutating func takeStorage() -> Storage {
        var taken = Storage()
        swap(&taken.bytes, &bytes)
        swap(&taken.entries, &entries)
        return taken
    }

    /// Creates headers from `["Name": "value", ...]` in literal order; repeated names are kept.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements.map { HTTPHeaderField(name: $0.0, value: $0.1) })
    }

    /// The index of the first field.
    public var startIndex: Int { entries.startIndex }
    /// One past the index of the last field.
    public var endIndex: Int { entries.endIndex }
    /// The field at `position`, its name and value made into Strings.
    public subscript(position: Int) -> HTTPHeaderField {
        let entry = entries[position]
        return bytes.withUnsafeBytes { raw in
            let name = Self.slice(raw, entry.nameStart, entry.nameCount)
            return HTTPHeaderField(name: entry.known.literalName(name) ?? String(decoding: name, as: UTF8.self),
                                   value: String(decoding: Self.slice(raw, entry.valueStart, entry.valueCount),
                                                 as: UTF8.self),
                                   known: entry.known)
        }
    }

    /// The fields in order, as `HTTPHeaderField` values (made on each call).
    public var fields: [HTTPHeaderField] { indices.map { self[$0] } }

    /// The kind of the field at `index`'s name.
    @inline(__always) package func known(at index: Int) -> KnownField { entries[index].known }

    /// The value of the field at `index`, as a String.
    package func value(at index: Int) -> String {
        withValue(at: index) { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with every field in order: its index, the bytes of its name and value, and its name's kind.
    @inline(__always)
    package func forEachField(
        _ body: (_ index: Int, _ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>,
                 _ known: KnownField) -> Void
    ) {
        bytes.withUnsafeBytes { raw in
            for index in entries.indices {
                let entry = entries[index]
                body(index, Self.slice(raw, entry.nameStart, entry.nameCount),
                     Self.slice(raw, entry.valueStart, entry.valueCount), entry.known)
            }
        }
    }

    /// The bytes of every field's name and value (a removed field's are not counted).
    var fieldBytes: Int {
        // Index loops here and below: the generic algorithms with closures allocate in a debug build.
        var total = 0
        for index in entries.indices { total += entries[index].nameCount + entries[index].valueCount }
        return total
    }

    /// Every method-override field (`X-HTTP-Method-Override`, `X-HTTP-Method`, `X-Method-Override`, or one of them
    /// spelled with `_`) as its name and value, in order; empty, and nothing allocated, for a request without one.
    public var methodOverrides: [(name: String, value: String)] {
        var found: [(name: String, value: String)] = []
        for index in entries.indices {
            switch entries[index].known {
            case .xHTTPMethodOverride, .xHTTPMethod, .xMethodOverride:
                found.append((self[index].name, value(at: index)))
            case .underscored:
                // `X_HTTP_Method_Override` is the same field to PHP and CGI servers.
                let name = self[index].name
                switch KnownField(hyphenating: name.utf8) {
                case .xHTTPMethodOverride, .xHTTPMethod, .xMethodOverride: found.append((name, value(at: index)))
                default: break
                }
            default: break
            }
        }
        return found
    }

    /// Whether a field of a known kind is present.
    package func contains(kind: KnownField) -> Bool {
        for index in entries.indices where entries[index].known == kind { return true }
        return false
    }

    /// Calls `body` with the value bytes of the field at `index`.
    @inline(__always)
    package func withValue<R>(at index: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        let entry = entries[index]
        return bytes.withUnsafeBytes { raw in body(Self.slice(raw, entry.valueStart, entry.valueCount)) }
    }

    /// The bytes of `count` bytes at `start` of `raw`, typed.
    @inline(__always)
    static func slice(_ raw: UnsafeRawBufferPointer, _ start: Int, _ count: Int) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: raw.assumingMemoryBound(to: UInt8.self)[start..<start + count])
    }

    /// Appends a field at the end.
    public mutating func append(name: String, value: String) {
        append(HTTPHeaderField(name: name, value: value))
    }

    private mutating func append(_ field: HTTPHeaderField) {
        let nameStart = bytes.count
        bytes.append(contentsOf: field.name.utf8)
        let valueStart = bytes.count
        bytes.append(contentsOf: field.value.utf8)
        entries.append(Entry(nameStart: nameStart, nameCount: valueStart - nameStart, valueStart: valueStart,
                             valueCount: bytes.count - valueStart, known: field.known))
        parsed = false
    }

    /// Whether the field `entry` is called `name`, `kind` being `name`'s kind (`KnownField.matches`).
    @inline(__always)
    private func matches(_ entry: Entry, _ kind: KnownField, named name: String) -> Bool {
        // Most fields differ in kind: they are turned away before their bytes are reached.
        guard entry.known == kind else { return false }
        return bytes.withUnsafeBytes { raw in
            kind.matches(known: entry.known, nameBytes: Self.slice(raw, entry.nameStart, entry.nameCount), named: name)
        }
    }

    /// The index of the first field called `name` (of kind `kind`): a known kind by its kind alone
    /// (`firstIndex(_:)`), any other name compared in one borrow of the bytes.
    private func firstIndex(_ kind: KnownField, named name: String) -> Int? {
        guard !kind.isOneName else { return firstIndex(kind) }
        var name = name
        return name.withUTF8 { wanted in
            bytes.withUnsafeBytes { raw in
                for index in entries.indices where entries[index].known == kind {
                    let entry = entries[index]
                    if HTTPSyntax.equalsIgnoringCase(Self.slice(raw, entry.nameStart, entry.nameCount), wanted) {
                        return index
                    }
                }
                return nil
            }
        }
    }

    /// Removes every field with this name (case-insensitive).
    public mutating func removeAll(named name: String) {
        let kind = KnownField(name)
        // Only a match mutates: the entries are often shared with a copy of the head, and removing nothing from a
        // shared array would still copy it. The search borrows the bytes once (per field, as `matches` does, it
        // retained and released them for every field of the same kind).
        guard let first = firstIndex(kind, named: name) else { return }
        var kept = first
        for index in (first + 1)..<entries.count where !matches(entries[index], kind, named: name) {
            entries[kept] = entries[index]
            kept += 1
        }
        entries.removeSubrange(kept...)
    }

    /// The index of the first field of a known name, or nil (`other` and `nonASCII` find nothing): for reading
    /// its value's bytes (`withValue(at:)`) without making a String.
    package func firstIndex(_ kind: KnownField) -> Int? {
        switch kind {
        case .other, .nonASCII, .underscored: return nil
        // A known kind is the name: the bytes need not be read.
        default: return entries.indices.first { entries[$0].known == kind }
        }
    }

    /// The value of the first field of a known name (`.contentType`...), or nil: `first(named:)` without
    /// classifying the name first. `other` and `nonASCII` stand for no one name, and find nothing.
    package func first(_ kind: KnownField) -> String? {
        firstIndex(kind).map { value(at: $0) }
    }

    /// The values of every field of a known name, in order (`values(named:)` by kind, as `first(_:)`).
    package func values(_ kind: KnownField) -> [String] {
        switch kind {
        case .other, .nonASCII, .underscored: return []
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
        for index in entries.indices where matches(entries[index], kind, named: name) {
            return value(at: index)
        }
        return nil
    }

    /// `values(named:)` with the name's kind already found.
    private func values(_ kind: KnownField, named name: String) -> [String] {
        var values: [String] = []
        for index in entries.indices where matches(entries[index], kind, named: name) {
            values.append(value(at: index))
        }
        return values
    }

    /// Whether a field with this name (case-insensitive) is present.
    public func contains(named name: String) -> Bool {
        let kind = KnownField(name)
        for index in entries.indices where matches(entries[index], kind, named: name) { return true }
        return false
    }

    /// The lowercased, non-empty tokens of every Connection field (`close`, `keep-alive`, field names...).
    public var connectionTokens: [String] {
        self.values(.connection).flatMap { value in
            HTTPSyntax.listElements(value).filter { !$0.isEmpty }.map { $0.lowercased() }
        }
    }

    /// Whether `connectionTokens` contains `token.lowercased()`, found without building the array.
    func connectionNames(_ token: some StringProtocol) -> Bool {
        for index in entries.indices where entries[index].known == .connection {
            let found = HTTPSyntax.firstListElement(value(at: index)) { element in
                !element.isEmpty && HTTPSyntax.equalsLowercased(element, token)
            }
            if found {
                return true
            }
        }
        return false
    }

    /// `connectionNames` for a name given as bytes (a field of these headers): an ASCII name (any field a parser
    /// took) is compared with each ASCII Connection value's elements in place, and with any other value's through
    /// Strings (whose Unicode lowercasing `equalsLowercased` follows); a non-ASCII name goes through Strings.
    func connectionNames(bytes name: UnsafeBufferPointer<UInt8>) -> Bool {
        guard HTTPSyntax.isASCII(UnsafeRawBufferPointer(name)) else {
            return connectionNames(String(decoding: name, as: UTF8.self))
        }
        return bytes.withUnsafeBytes { raw in
            for entry in entries where entry.known == .connection {
                let value = UnsafeRawBufferPointer(Self.slice(raw, entry.valueStart, entry.valueCount))
                let named = HTTPSyntax.isASCII(value)
                    ? HTTPSyntax.anyListElement(value) { !$0.isEmpty && HTTPSyntax.equalsIgnoringCase($0, name) }
                    : HTTPSyntax.firstListElement(String(decoding: value, as: UTF8.self)) { element in
                        !element.isEmpty && HTTPSyntax.equalsLowercased(element, String(decoding: name, as: UTF8.self))
                    }
                if named { return true }
            }
            return false
        }
    }

    /// The lengths of the Connection fields' elements, as `HeadScan.connectionLengths` keeps them.
    func connectionElementLengths() -> UInt64 {
        var lengths: UInt64 = 0
        bytes.withUnsafeBytes { raw in
            for entry in entries where entry.known == .connection {
                let value = UnsafeRawBufferPointer(Self.slice(raw, entry.valueStart, entry.valueCount))
                guard HTTPSyntax.isASCII(value) else {
                    lengths |= 1 << 63
                    continue
                }
                _ = HTTPSyntax.anyListElement(value) { element in
                    lengths |= 1 << UInt64(Swift.min(element.count, 63))
                    return false
                }
            }
        }
        return lengths
    }

}
