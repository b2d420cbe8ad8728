import Glibc

/// A UTC instant with millisecond precision, rendered as RFC 3339 (`2026-11-29T12:01:02.345Z`).
public struct AuditTimestamp: Sendable, Hashable, Comparable {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public var millisecondsSinceEpoch: Int64

    /// Wraps a count of milliseconds since the Unix epoch.
    public init(millisecondsSinceEpoch: Int64) {
        self.millisecondsSinceEpoch = millisecondsSinceEpoch
    }

    /// The current wall-clock time (`clock_gettime(CLOCK_REALTIME)`).
    public static func now() -> AuditTimestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return AuditTimestamp(millisecondsSinceEpoch: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }

    /// Orders instants.
    public static func < (a: AuditTimestamp, b: AuditTimestamp) -> Bool {
        a.millisecondsSinceEpoch < b.millisecondsSinceEpoch
    }

    /// The RFC 3339 form, always 24 ASCII bytes.
    public var rfc3339: String {
        var out = [UInt8]()
        out.reserveCapacity(24)
        appendRFC3339(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the 24-byte RFC 3339 form to `out`.
    public func appendRFC3339(to out: inout [UInt8]) {
        let ms = millisecondsSinceEpoch
        var seconds = time_t(ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        let millis = Int(ms - Int64(seconds) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ v: Int32) {
            out.append(UInt8(ascii: "0") &+ UInt8(v / 10 % 10))
            out.append(UInt8(ascii: "0") &+ UInt8(v % 10))
        }
        let year = Int(parts.tm_year) + 1900
        out.append(UInt8(ascii: "0") &+ UInt8(year / 1000 % 10))
        out.append(UInt8(ascii: "0") &+ UInt8(year / 100 % 10))
        out.append(UInt8(ascii: "0") &+ UInt8(year / 10 % 10))
        out.append(UInt8(ascii: "0") &+ UInt8(year % 10))
        out.append(UInt8(ascii: "-"))
        two(parts.tm_mon + 1)
        out.append(UInt8(ascii: "-"))
        two(parts.tm_mday)
        out.append(UInt8(ascii: "T"))
        two(parts.tm_hour)
        out.append(UInt8(ascii: ":"))
        two(parts.tm_min)
        out.append(UInt8(ascii: ":"))
        two(parts.tm_sec)
        out.append(UInt8(ascii: "."))
        out.append(UInt8(ascii: "0") &+ UInt8(millis / 100))
        out.append(UInt8(ascii: "0") &+ UInt8(millis / 10 % 10))
        out.append(UInt8(ascii: "0") &+ UInt8(millis % 10))
        out.append(UInt8(ascii: "Z"))
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fff…](Z|±HH:MM)`; nil when malformed.
    public init?(rfc3339 text: String) {
        let b = Array(text.utf8)
        guard b.count >= 20 else { return nil }
        func num(_ start: Int, _ len: Int) -> Int? {
            var v = 0
            for i in start..<start + len {
                guard b[i] >= 0x30 && b[i] <= 0x39 else { return nil }
                v = v * 10 + Int(b[i] - 0x30)
            }
            return v
        }
        guard let year = num(0, 4), b[4] == UInt8(ascii: "-"), let month = num(5, 2), b[7] == UInt8(ascii: "-"),
              let day = num(8, 2), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"),
              let hour = num(11, 2), b[13] == UInt8(ascii: ":"), let minute = num(14, 2),
              b[16] == UInt8(ascii: ":"), let second = num(17, 2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var i = 19
        var millis = 0
        if b[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 100
            let start = i
            while i < b.count, b[i] >= 0x30 && b[i] <= 0x39 {
                millis += Int(b[i] - 0x30) * scale
                scale /= 10
                i += 1
            }
            guard i > start else { return nil }
        }
        guard i < b.count else { return nil }
        var offsetSeconds = 0
        if b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z") {
            i += 1
        } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            guard i + 6 == b.count, let oh = num(i + 1, 2), b[i + 3] == UInt8(ascii: ":"), let om = num(i + 4, 2)
            else { return nil }
            offsetSeconds = (oh * 3600 + om * 60) * (b[i] == UInt8(ascii: "+") ? 1 : -1)
            i += 6
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let seconds = Int64(timegm(&parts)) - Int64(offsetSeconds)
        self.init(millisecondsSinceEpoch: seconds * 1000 + Int64(millis))
    }
}
