/// Byte classes from RFC 9110 and RFC 9112, shared by the parsers and serializers.
enum HTTPSyntax {
    static let cr = UInt8(ascii: "\r")
    static let lf = UInt8(ascii: "\n")
    static let sp = UInt8(ascii: " ")
    static let ht = UInt8(ascii: "\t")
    static let colon = UInt8(ascii: ":")

    /// `tchar` (RFC 9110 §5.6.2): the bytes of a token such as a method or field name.
    static func isTokenChar(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// SP or HT (`OWS` / `BWS` bytes).
    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == sp || byte == ht
    }

    /// A byte allowed inside a field value: HT, SP, VCHAR or obs-text. Excludes NUL, other controls and DEL.
    static func isFieldValueByte(_ byte: UInt8) -> Bool {
        byte == ht || (byte >= 0x20 && byte != 0x7F)
    }

    /// A byte allowed in a request-target: visible ASCII only.
    static func isTargetByte(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F
    }

    /// The value of a hex digit, or nil.
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// ASCII lowercase of one byte.
    static func lowercased(_ byte: UInt8) -> UInt8 {
        (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) ? byte | 0x20 : byte
    }

    /// ASCII case-insensitive equality, the comparison HTTP uses for field names and tokens.
    static func equalsIgnoringCase(_ lhs: some StringProtocol, _ rhs: some StringProtocol) -> Bool {
        let left = lhs.utf8
        let right = rhs.utf8
        guard left.count == right.count else {
            return false
        }
        return zip(left, right).allSatisfy { lowercased($0) == lowercased($1) }
    }

    /// Splits a comma-separated list value into OWS-trimmed elements, keeping empty ones.
    static func listElements(_ value: String) -> [Substring] {
        value.split(separator: ",", omittingEmptySubsequences: false).map { trimmed($0) }
    }

    /// Removes leading and trailing SP / HT.
    static func trimmed(_ value: Substring) -> Substring {
        var result = value
        while let first = result.utf8.first, isWhitespace(first) {
            result = result.dropFirst()
        }
        while let last = result.utf8.last, isWhitespace(last) {
            result = result.dropLast()
        }
        return result
    }

    /// Appends the decimal form of a non-negative integer.
    static func appendDecimal(_ value: some BinaryInteger, to buffer: inout [UInt8]) {
        buffer.append(contentsOf: String(value).utf8)
    }
}
