/// Parsing and formatting of byte sizes as written in rule files (`512`, `64KiB`, `10MiB`, `1GiB`).
public enum ByteSize {
    /// The largest size a rule may name: 1 TiB.
    public static let maximum: UInt64 = 1 << 40

    private static let units: [(suffix: String, shift: UInt64)] = [("GiB", 30), ("MiB", 20), ("KiB", 10), ("B", 0)]

    /// Parses `digits[unit]` with unit `B`, `KiB`, `MiB` or `GiB` (none means bytes).
    ///
    /// Returns nil for anything else: signs, fractions, decimal units (`MB` is ambiguous), overflow,
    /// or a value above `maximum`.
    public static func parse(_ text: String) -> UInt64? {
        var digits = Substring(text)
        var shift: UInt64 = 0
        for unit in units where digits.hasSuffix(unit.suffix) {
            digits = digits.dropLast(unit.suffix.count)
            shift = unit.shift
            break
        }
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              let value = UInt64(digits) else { return nil }
        let (scaled, overflow) = value.multipliedReportingOverflow(by: 1 << shift)
        guard !overflow, scaled <= maximum else { return nil }
        return scaled
    }

    /// A short human form: `512 B`, `5 MiB`, `7.2 MiB`.
    ///
    /// Exact multiples print without a fraction; everything else gets one decimal.
    public static func format(_ bytes: UInt64) -> String {
        for unit in units where unit.shift > 0 && bytes >= 1 << unit.shift {
            let size: UInt64 = 1 << unit.shift
            if bytes % size == 0 { return "\(bytes / size) \(unit.suffix)" }
            // (bytes * 10 + size / 2) / size, without overflowing for a client's Content-Length near 2^64.
            let tenths = bytes / size * 10 + (bytes % size * 10 + size / 2) / size
            return "\(tenths / 10).\(tenths % 10) \(unit.suffix)"
        }
        return "\(bytes) B"
    }

    /// `seen > limit` for a detail string, falling back to exact bytes when both would print alike.
    static func exceeds(_ seen: UInt64, _ limit: UInt64) -> String {
        let (a, b) = (format(seen), format(limit))
        let rounded = a.split(separator: " ").first.map { $0.hasSuffix(".0") ? String($0.dropLast(2)) : String($0) }
        let sameLooking = a == b || (rounded.map { $0 + " " + (a.split(separator: " ").last ?? "") } == b)
        return sameLooking ? "\(seen) B > \(limit) B" : "\(a) > \(b)"
    }
}
