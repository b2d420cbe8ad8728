/// Parsing and formatting of byte sizes as written in rule files (`512`, `64KiB`, `10m`, `1GiB`, `1TiB`).
public enum ByteSize {
    /// The largest size a rule may name: 1 TiB.
    public static let maximum: UInt64 = 1 << 40

    private static let units: [(suffix: String, shift: UInt64)] = [
        ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10), ("B", 0),
    ]

    /// Accepted units, lowercased, longest first: binary multiples only, nginx's single letters included.
    private static let parseUnits: [(suffix: String, shift: UInt64)] = [
        ("tib", 40), ("gib", 30), ("mib", 20), ("kib", 10), ("t", 40), ("g", 30), ("m", 20), ("k", 10), ("b", 0),
    ]

    /// The accepted units, for diagnostics.
    static let unitsDescription = "B, k/KiB, m/MiB, g/GiB or t/TiB (binary, any case)"

    /// Parses `digits[unit]`; units are binary and case-insensitive: `B`, `k`/`KiB`, `m`/`MiB`, `g`/`GiB`,
    /// `t`/`TiB` (nginx's `10m` is 10 MiB). None means bytes.
    ///
    /// Returns nil for anything else: signs, fractions, decimal-looking units (`MB`, `kb`: some read them as
    /// powers of 10), overflow, or a value above `maximum` (1 TiB, which itself is accepted).
    public static func parse(_ text: String) -> UInt64? {
        var digits = Substring(text)
        var shift: UInt64 = 0
        let lowered = text.lowercased()
        for unit in parseUnits where lowered.hasSuffix(unit.suffix) {
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
