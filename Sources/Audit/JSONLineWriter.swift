// A hand-written JSON writer for audit lines.
//
//   AuditRecord ──render──▶ JSONLineWriter.bytes ──one write(2)──▶ log file
//
// JSONEncoder is too slow for tens of thousands of records a second, so the audit line is
// built byte by byte into one reusable buffer. The writer does not check structure (a key
// must precede each object member); the record renderer is its main caller and is tested.

/// Builds one JSON document into a byte buffer, escaping strings and repairing invalid UTF-8.
///
/// Strings are escaped per RFC 8259: `"` and `\` are backslash-escaped, every control
/// character (U+0000–U+001F and U+007F) becomes `\u00XX`, and each maximal invalid UTF-8
/// subsequence becomes U+FFFD, matching `String(decoding:as: UTF8.self)`.
public struct JSONLineWriter {
    /// The bytes written so far.
    public private(set) var bytes: [UInt8]
    private var needsComma = false

    /// Creates an empty writer with `capacity` bytes reserved.
    public init(capacity: Int = 1024) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Empties the buffer, keeping its capacity, so one writer can render many lines.
    public mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        needsComma = false
    }

    // MARK: Structure

    /// Writes `{`.
    public mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    /// Writes `}`.
    public mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    /// Writes `[`.
    public mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        needsComma = false
    }

    /// Writes `]`.
    public mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// Writes an object member name and the colon; the next value call writes its value.
    ///
    /// `name` must be plain ASCII without characters that need escaping (it is a schema constant).
    public mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    /// Ends the document with `\n`, making it one JSON-lines record.
    public mutating func endLine() {
        bytes.append(UInt8(ascii: "\n"))
        needsComma = false
    }

    // MARK: Values

    /// Writes `null`.
    public mutating func null() {
        separate()
        appendASCII("null")
        needsComma = true
    }

    /// Writes `true` or `false`.
    public mutating func bool(_ value: Bool) {
        separate()
        appendASCII(value ? "true" : "false")
        needsComma = true
    }

    /// Writes a decimal integer.
    public mutating func int(_ value: Int) {
        separate()
        appendDecimal(value)
        needsComma = true
    }

    /// Writes `value` or `null` when it is nil.
    public mutating func int(_ value: Int?) {
        if let value { int(value) } else { null() }
    }

    /// Writes a duration with at most three decimals (`12`, `12.5`, `0.125`); non-finite or
    /// absurdly large values become `null`.
    public mutating func milliseconds(_ value: Double) {
        guard value.isFinite, abs(value) < 9e12 else { return null() }
        separate()
        let thousandths = Int((value * 1000).rounded())
        if thousandths < 0 { bytes.append(UInt8(ascii: "-")) }
        let magnitude = Int(thousandths.magnitude)
        appendDecimal(magnitude / 1000)
        var frac = magnitude % 1000
        if frac != 0 {
            bytes.append(UInt8(ascii: "."))
            var digits = 3
            while frac % 10 == 0 { frac /= 10; digits -= 1 }
            var scale = 1
            for _ in 1..<digits { scale *= 10 }
            while scale > 0 {
                bytes.append(UInt8(ascii: "0") &+ UInt8(frac / scale % 10))
                scale /= 10
            }
        }
        needsComma = true
    }

    /// Writes `value` (see `milliseconds(_:)`) or `null` when it is nil.
    public mutating func milliseconds(_ value: Double?) {
        if let value { milliseconds(value) } else { null() }
    }

    /// Writes a string value.
    public mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { string(utf8: UnsafeRawBufferPointer($0)) }
    }

    /// Writes `value` as a string, or `null` when it is nil.
    public mutating func string(_ value: String?) {
        if let value { string(value) } else { null() }
    }

    /// Writes raw bytes as a string value; invalid UTF-8 is replaced by U+FFFD.
    public mutating func string(bytes value: [UInt8]) {
        value.withUnsafeBytes { string(utf8: $0) }
    }

    /// Writes raw bytes as a string value; invalid UTF-8 is replaced by U+FFFD.
    public mutating func string(utf8 value: UnsafeRawBufferPointer) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        JSONLineWriter.appendEscaped(value, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    // MARK: Escaping

    /// Appends the escaped contents of `input` (without quotes) to `out`.
    static func appendEscaped(_ input: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        let n = input.count
        var i = 0
        var runStart = 0
        while i < n {
            let b = input[i]
            if b >= 0x20 && b < 0x7F {
                if b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") {
                    if i > runStart { out.append(contentsOf: input[runStart..<i]) }
                    out.append(UInt8(ascii: "\\"))
                    out.append(b)
                    runStart = i + 1
                }
                i += 1
                continue
            }
            if b < 0x80 {
                // C0 controls and DEL.
                if i > runStart { out.append(contentsOf: input[runStart..<i]) }
                appendUnicodeEscape(b, to: &out)
                i += 1
                runStart = i
                continue
            }
            let (count, complete) = scan(input, at: i)
            if complete {
                i += count
            } else {
                if i > runStart { out.append(contentsOf: input[runStart..<i]) }
                out.append(contentsOf: [0xEF, 0xBF, 0xBD])
                i += count
                runStart = i
            }
        }
        if n > runStart { out.append(contentsOf: input[runStart..<n]) }
    }

    private static func appendUnicodeEscape(_ b: UInt8, to out: inout [UInt8]) {
        let hex: StaticString = "0123456789abcdef"
        out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
        hex.withUTF8Buffer { digits in
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
    }

    /// The sequence length announced by lead byte `lead` and the allowed range of the byte after
    /// it; nil when `lead` can never start a sequence (Unicode Table 3-7).
    @inline(__always)
    private static func leadInfo(_ lead: UInt8) -> (length: Int, low: UInt8, high: UInt8)? {
        switch lead {
        case 0xC2...0xDF: return (2, 0x80, 0xBF)
        case 0xE0: return (3, 0xA0, 0xBF)
        case 0xE1...0xEC, 0xEE...0xEF: return (3, 0x80, 0xBF)
        case 0xED: return (3, 0x80, 0x9F)
        case 0xF0: return (4, 0x90, 0xBF)
        case 0xF1...0xF3: return (4, 0x80, 0xBF)
        case 0xF4: return (4, 0x80, 0x8F)
        default: return nil
        }
    }

    /// Scans the multi-byte sequence at `i`. When it is well formed returns its length and `true`;
    /// otherwise returns the length of its maximal invalid subpart (the lead plus the continuation
    /// bytes that were still acceptable, at least 1), which is replaced by one U+FFFD.
    @inline(__always)
    private static func scan(_ s: UnsafeRawBufferPointer, at i: Int) -> (count: Int, complete: Bool) {
        guard let info = leadInfo(s[i]) else { return (1, false) }
        var j = i + 1
        var low = info.low, high = info.high
        while j < i + info.length {
            guard j < s.count, s[j] >= low, s[j] <= high else { return (j - i, false) }
            low = 0x80
            high = 0xBF
            j += 1
        }
        return (info.length, true)
    }

    // MARK: Helpers

    @inline(__always)
    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    private mutating func appendASCII(_ s: StaticString) {
        s.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    private mutating func appendDecimal(_ value: Int) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var scratch: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes, enough for 20 digits
        withUnsafeMutableBytes(of: &scratch) { buf in
            var start = buf.count
            repeat {
                start -= 1
                buf[start] = UInt8(ascii: "0") &+ UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: buf[start...])
        }
    }
}
