import Multipart

/// `%XX` escapes, as route paths, query strings and the semantic name checks read them.
enum Percent {
    /// Whether `bytes` hold `%` followed by two hex digits.
    static func containsEscape(_ bytes: some Collection<UInt8>) -> Bool {
        var seen = 0   // 1: after '%', 2: after '%' and one hex digit
        for byte in bytes {
            if byte == UInt8(ascii: "%") {
                seen = 1
            } else if seen > 0, ASCII.hexValue(byte) != nil {
                if seen == 2 { return true }
                seen = 2
            } else {
                seen = 0
            }
        }
        return false
    }

    /// Decodes every `%XX` (and `+` as a space when `plusIsSpace`); a malformed escape stays as written.
    static func decode(_ bytes: some Collection<UInt8>, plusIsSpace: Bool) -> [UInt8] {
        let input = Array(bytes)
        var out: [UInt8] = []
        out.reserveCapacity(input.count)
        var i = 0
        while i < input.count {
            let c = input[i]
            if c == UInt8(ascii: "%"), i + 2 < input.count, let high = ASCII.hexValue(input[i + 1]),
               let low = ASCII.hexValue(input[i + 2]) {
                out.append(high << 4 | low)
                i += 3
                continue
            }
            out.append(plusIsSpace && c == UInt8(ascii: "+") ? 0x20 : c)
            i += 1
        }
        return out
    }
}
