import Multipart

/// A media type or a wildcard pattern over media types: `image/png`, `image/*`, `*/*`.
///
/// Matching is case-insensitive and ignores parameters (`image/PNG; charset=x` matches `image/png`).
public struct MediaTypePattern: Sendable, Hashable, CustomStringConvertible {
    /// The lowercased type, or `*`.
    public let type: String
    /// The lowercased subtype, or `*`.
    public let subtype: String

    /// Parses `type/subtype`, `type/*` or `*/*`; nil for anything else (parameters, `*/png`, bad characters).
    public init?(_ text: String) {
        let parts = text.lowercased().split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let (type, subtype) = (String(parts[0]), String(parts[1]))
        func plain(_ part: String) -> Bool { Self.isToken(part) && !part.contains("*") }
        guard type == "*" ? subtype == "*" : plain(type), subtype == "*" || plain(subtype) else { return nil }
        self.type = type
        self.subtype = subtype
    }

    /// The pattern as written in a rule file, lowercased.
    public var description: String { "\(type)/\(subtype)" }

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
        guard let (start, slash, end) = essenceBounds(b) else { return nil }
        return (lowercased(b, start, slash), lowercased(b, slash + 1, end))
    }

    /// Where the essence lies: its first byte, its `/` and the end; nil when it is not two tokens around one `/`.
    private static func essenceBounds(_ b: UnsafeBufferPointer<UInt8>) -> (start: Int, slash: Int, end: Int)? {
        var end = 0
        while end < b.count, b[end] != UInt8(ascii: ";") { end += 1 }
        var start = 0
        while start < end, b[start] == 0x20 || b[start] == 0x09 { start += 1 }
        while end > start, b[end - 1] == 0x20 || b[end - 1] == 0x09 { end -= 1 }
        var slash = start
        while slash < end, b[slash] != UInt8(ascii: "/") { slash += 1 }
        guard slash < end, isToken(b, start, slash), isToken(b, slash + 1, end) else { return nil }
        return (start, slash, end)
    }

    /// The essence as one string, `type/subtype` lowercased; nil when malformed. A type that is its own essence
    /// (no parameter, no surrounding space, lowercase: what browsers send) is returned as it is, not rebuilt.
    public static func essenceText(of mediaType: String) -> String? {
        var text = mediaType
        return text.withUTF8 { b -> String? in
            guard let (start, _, end) = essenceBounds(b) else { return nil }
            var upper = false
            for i in start..<end where b[i] >= UInt8(ascii: "A") && b[i] <= UInt8(ascii: "Z") { upper = true }
            if !upper, start == 0, end == b.count { return mediaType }
            return lowercased(b, start, end)
        }
    }

    /// Whether `b[from..<to]` is a token (plain loops: this runs for every part a policy judges).
    private static func isToken(_ b: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> Bool {
        guard from < to else { return false }
        var i = from
        while i < to {
            guard ASCII.isTChar(b[i]) else { return false }
            i += 1
        }
        return true
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
        // Compared in place, byte by byte: no String is built for the essence.
        var text = mediaType
        return text.withUTF8 { b in
            guard let (start, slash, end) = essenceBounds(b) else { return false }
            return patterns.contains { $0.matches(type: b[start..<slash], subtype: b[(slash + 1)..<end]) }
        }
    }

    /// `matches(essence:)` for an essence's bytes as sent (any ASCII case).
    private func matches(type t: Slice<UnsafeBufferPointer<UInt8>>,
                         subtype s: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        func same(_ lower: String, _ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
            guard lower.utf8.count == bytes.count else { return false }
            var text = lower
            return text.withUTF8 { expected in
                var k = 0
                while k < expected.count, expected[k] == ASCII.lowercased(bytes[bytes.startIndex &+ k]) { k &+= 1 }
                return k == expected.count
            }
        }
        return (type == "*" || same(type, t)) && (subtype == "*" || same(subtype, s))
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
