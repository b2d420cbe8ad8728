import Multipart

/// A media type or a wildcard pattern over media types: `image/png`, `image/*`, `*/*`.
///
/// Matching is case-insensitive and ignores parameters (`image/PNG; charset=x` matches `image/png`).
public struct MediaTypePattern: Sendable, Hashable, CustomStringConvertible {
    /// The lowercased type, or `*`.
    public let type: String
    /// The lowercased subtype, or `*`.
    public let subtype: String
    /// `type/subtype`, built once.
    private let text: String

    /// Parses `type/subtype`, `type/*` or `*/*`; nil for anything else (parameters, `*/png`, bad characters).
    public init?(_ text: String) {
        let parts = text.lowercased().split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let (type, subtype) = (String(parts[0]), String(parts[1]))
        func plain(_ part: String) -> Bool { Self.isToken(part) && !part.contains("*") }
        guard type == "*" ? subtype == "*" : plain(type), subtype == "*" || plain(subtype) else { return nil }
        self.type = type
        self.subtype = subtype
        self.text = "\(type)/\(subtype)"
    }

    /// The pattern as written in a rule file, lowercased.
    public var description: String { text }

    /// Whether `mediaType` (a Content-Type value, parameters allowed) matches this pattern.
    public func matches(_ mediaType: String) -> Bool {
        guard let essence = Self.essence(of: mediaType) else { return false }
        return matches(essence: essence)
    }

    func matches(essence: (type: String, subtype: String)) -> Bool {
        (type == "*" || type == essence.type) && (subtype == "*" || subtype == essence.subtype)
    }

    /// The lowercased `type/subtype` of a Content-Type value without parameters; nil when malformed.
    ///
    /// Read byte by byte: what precedes the first `;`, spaces and tabs trimmed, must be two RFC 9110 tokens
    /// around one `/`. Only ASCII letters are lowercased, so no Unicode case mapping can turn a non-ASCII
    /// character into a token character (the Kelvin sign is not `k` here).
    public static func essence(of mediaType: String) -> (type: String, subtype: String)? {
        var text = mediaType
        return text.withUTF8 { essence(bytes: $0) }
    }

    static func essence(bytes b: UnsafeBufferPointer<UInt8>) -> (type: String, subtype: String)? {
        guard let (start, slash, end, _) = essenceBounds(b) else { return nil }
        return (lowercased(b, start, slash), lowercased(b, slash + 1, end))
    }

    /// Where the essence lies: its first byte, its `/` and the end, and whether it has an uppercase letter; nil when
    /// it is not two tokens around one `/` (spaces and tabs around them, then the end or a `;`). One pass.
    private static func essenceBounds(_ b: UnsafeBufferPointer<UInt8>)
    -> (start: Int, slash: Int, end: Int, upper: Bool)? {
        var i = 0
        var upper = false
        while i < b.count, b[i] == 0x20 || b[i] == 0x09 { i += 1 }
        let start = i
        while i < b.count, ASCII.isTChar(b[i]) {
            upper = upper || (b[i] >= UInt8(ascii: "A") && b[i] <= UInt8(ascii: "Z"))
            i += 1
        }
        guard i > start, i < b.count, b[i] == UInt8(ascii: "/") else { return nil }
        let slash = i
        i += 1
        while i < b.count, ASCII.isTChar(b[i]) {
            upper = upper || (b[i] >= UInt8(ascii: "A") && b[i] <= UInt8(ascii: "Z"))
            i += 1
        }
        guard i > slash + 1 else { return nil }
        let end = i
        while i < b.count, b[i] == 0x20 || b[i] == 0x09 { i += 1 }
        guard i == b.count || b[i] == UInt8(ascii: ";") else { return nil }
        return (start, slash, end, upper)
    }

    /// The essence as one string, `type/subtype` lowercased; nil when malformed. A type that is its own essence
    /// (no parameter, no surrounding space, lowercase: what browsers send) is returned as it is, not rebuilt.
    /// A common essence with parameters or capitals (`multipart/form-data; boundary=...`) is one of `commonEssences`,
    /// not a new string.
    public static func essenceText(of mediaType: String) -> String? {
        var text = mediaType
        return text.withUTF8 { b -> String? in
            guard let (start, _, end, upper) = essenceBounds(b) else { return nil }
            if !upper, start == 0, end == b.count { return mediaType }
            return commonEssence(b, start, end) ?? lowercased(b, start, end)
        }
    }

    /// Essences requests name with parameters or in capitals. Over 15 bytes a String is allocated; one of these
    /// literals is not (the request's `multipart/form-data; boundary=...` cost an allocation per request).
    static let commonEssences: [String] = [
        "multipart/form-data", "application/x-www-form-urlencoded", "application/json", "application/octet-stream",
        "text/plain", "text/html",
    ]
    /// `commonEssences` as the literals they are looked up by, in the same order (`MediaTypeEssenceTests` checks
    /// the two lists agree).
    static let commonEssenceLiterals: [StaticString] = [
        "multipart/form-data", "application/x-www-form-urlencoded", "application/json", "application/octet-stream",
        "text/plain", "text/html",
    ]

    /// The entry of `commonEssences` that `b[from..<to]` spells in any case, if any.
    static func commonEssence(_ b: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> String? {
        ASCII.index(of: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: b[from..<to])),
                    amongLowercase: commonEssenceLiterals)
            .map { commonEssences[$0] }
    }

    /// `b[from..<to]` with ASCII letters lowercased, as a String.
    private static func lowercased(_ b: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> String {
        String(unsafeUninitializedCapacity: to - from) { out in
            var i = 0
            while i < to - from {
                out[i] = ASCII.lowercased(b[from + i])
                i += 1
            }
            return to - from
        }
    }

    /// Whether any of `patterns` matches `mediaType`.
    public static func any(_ patterns: [MediaTypePattern], match mediaType: String) -> Bool {
        // A type spelled as a pattern is matched by it (the usual sniffed or declared type against its own name).
        if patterns.contains(where: { $0.text == mediaType }) { return true }
        // One reading of the type, which builds nothing when it is its own essence (see `essenceText`).
        guard let essence = essenceText(of: mediaType) else { return false }
        return patterns.contains { $0.matches(essenceText: essence) }
    }

    /// Whether the pattern matches an essence given as one lowercase string (`essenceText`): a string compare.
    func matches(essenceText essence: String) -> Bool {
        if type == "*" { return true }
        if subtype == "*" {
            // `image/*`: the essence starts with `image/`.
            let prefix = text.utf8.dropLast()
            return essence.utf8.count > prefix.count && essence.utf8.starts(with: prefix)
        }
        return essence == text
    }

    /// RFC 9110 `token`.
    static func isToken(_ text: String) -> Bool { !text.isEmpty && text.utf8.allSatisfy(ASCII.isTChar) }
}

extension Substring {
    func trimmingASCIISpaces() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}
