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
    public static func essence(of mediaType: String) -> (type: String, subtype: String)? {
        let head = mediaType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let trimmed = head.trimmingASCIISpaces().lowercased()
        let parts = trimmed.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, isToken(String(parts[0])), isToken(String(parts[1])) else { return nil }
        return (String(parts[0]), String(parts[1]))
    }

    /// Whether any of `patterns` matches `mediaType`.
    public static func any(_ patterns: [MediaTypePattern], match mediaType: String) -> Bool {
        guard let essence = essence(of: mediaType) else { return false }
        return patterns.contains { $0.matches(essence: essence) }
    }

    /// RFC 9110 `token`.
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }
}

extension Substring {
    func trimmingASCIISpaces() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}
