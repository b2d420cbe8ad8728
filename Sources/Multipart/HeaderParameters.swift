import CLinux
/// Parsing of `value; name=value; name="quoted"` header fields (Content-Type, Content-Disposition).
///
/// The parser is deliberately tolerant of what real clients send and reports every tolerance as an
/// anomaly flag, so the policy decides and the canonical re-encoding removes the ambiguity:
///
/// * quoted-strings with `\"` and `\\` escapes (`backslash-escape`); any other backslash is kept
///   literally, because old IE sends `C:\path\file.txt` unescaped;
/// * unquoted values running to the next `;` (iOS sends `name=username; filename=photo.bmp`),
///   trailing whitespace trimmed; inner whitespace, a leading `'` or a stray quote is `invalid-quoting`;
/// * whitespace around `=`; parameters not separated by `;` (`missing-semicolon`);
/// * parameter names are case-insensitive and returned lowercased.
public struct HeaderParameters: Sendable, Equatable {
    /// One `name=value` pair.
    public struct Parameter: Sendable, Equatable {
        /// The lowercased parameter name.
        public var name: [UInt8]
        /// The unquoted, unescaped value.
        public var value: [UInt8]
        /// Whether the value was a quoted-string.
        public var quoted: Bool
        /// Whether whitespace surrounded the `=`.
        public var spaceAroundEquals: Bool
    }

    /// The leading value (`form-data`, `multipart/form-data`), lowercased, surrounding whitespace removed.
    public var value: [UInt8]
    /// The parameters in order of appearance, duplicates included.
    public var parameters: [Parameter]
    /// Tolerances applied while parsing.
    public var anomalies: MultipartAnomalies

    /// The first parameter called `name` (lowercase ASCII).
    public func first(_ name: StaticString) -> Parameter? {
        parameters.first { ASCII.equals($0.name, name) }
    }

    /// How many parameters are called `name` (lowercase ASCII).
    public func count(_ name: StaticString) -> Int {
        parameters.reduce(0) { $0 + (ASCII.equals($1.name, name) ? 1 : 0) }
    }

    /// Parses a header field value.
    public static func parse(_ bytes: some Collection<UInt8>) -> HeaderParameters {
        if let result = bytes.withContiguousStorageIfAvailable({ parse(raw: UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return Array(bytes).withUnsafeBytes { parse(raw: $0) }
    }

    /// `scan(raw:_:)` over any byte collection (contiguous ones in place).
    static func scan(
        _ bytes: some Collection<UInt8>, _ body: (Parameter) -> Void
    ) -> (value: [UInt8], anomalies: MultipartAnomalies) {
        if let result = bytes.withContiguousStorageIfAvailable({ scan(raw: UnsafeRawBufferPointer($0), body) }) {
            return result
        }
        return Array(bytes).withUnsafeBytes { scan(raw: $0, body) }
    }

    /// Parses a header field value held in contiguous memory, without copying it first.
    static func parse(raw b: UnsafeRawBufferPointer) -> HeaderParameters {
        var params: [Parameter] = []
        let (value, anomalies) = scan(raw: b) { parameter in
            // Room for the usual few (name and filename, boundary and charset) at once, not at 1 and 2.
            if params.isEmpty { params.reserveCapacity(4) }
            params.append(parameter)
        }
        return HeaderParameters(value: value, parameters: params, anomalies: anomalies)
    }

    /// `parse(raw:)` without the list: `body` gets each parameter in order (its arrays may be kept), and the
    /// leading value and the anomalies are returned. For callers that look at each parameter once.
    static func scan(
        raw b: UnsafeRawBufferPointer, _ body: (Parameter) -> Void
    ) -> (value: [UInt8], anomalies: MultipartAnomalies) {
        var i = 0
        var anomalies = MultipartAnomalies()
        let n = b.count
        @inline(__always) func skipOWS() { while i < n, b[i] == ASCII.space || b[i] == ASCII.tab { i += 1 } }

        skipOWS()
        let valueStart = i
        while i < n, b[i] != ASCII.semicolon { i += 1 }
        var valueEnd = i
        while valueEnd > valueStart, b[valueEnd - 1] == ASCII.space || b[valueEnd - 1] == ASCII.tab { valueEnd -= 1 }
        let value = ASCII.lowercasedShared(b[valueStart..<valueEnd])

        while i < n {
            // Separator: one `;`, possibly more (empty parameters are skipped).
            if b[i] == ASCII.semicolon {
                i += 1
                skipOWS()
                continue
            }
            // Parameter name.
            let nameStart = i
            while i < n, b[i] != ASCII.equals, b[i] != ASCII.semicolon, b[i] != ASCII.space, b[i] != ASCII.tab {
                i += 1
            }
            let name = ASCII.lowercasedShared(b[nameStart..<i])
            var spaced = false
            if i < n, b[i] == ASCII.space || b[i] == ASCII.tab { spaced = true; skipOWS() }
            guard i < n, b[i] == ASCII.equals else {
                // A bare word: either a missing `=` or two parameters without `;`.
                if !name.isEmpty { anomalies.insert(.invalidQuoting) }
                body(Parameter(name: name, value: [], quoted: false, spaceAroundEquals: spaced))
                if i < n, b[i] != ASCII.semicolon { anomalies.insert(.missingSemicolon) }
                continue
            }
            i += 1
            if i < n, b[i] == ASCII.space || b[i] == ASCII.tab { spaced = true; skipOWS() }
            var val: [UInt8] = []
            var quoted = false
            if i < n, b[i] == ASCII.quote {
                quoted = true
                i += 1
                // One allocation for the value: it is at most as long as the rest of the field.
                var end = i
                var escapes = false
                while end < n, b[end] != ASCII.quote {
                    if b[end] == ASCII.backslash { escapes = true; end += 2 } else { end += 1 }
                }
                var closed = false
                if !escapes && end < n {
                    // No backslash before the closing quote (the usual case): the value is copied at once.
                    val = Array(UnsafeRawBufferPointer(rebasing: b[i..<end]))
                    i = end
                } else {
                    val.reserveCapacity(min(end, n) - i)
                }
                while i < n {
                    let c = b[i]
                    if c == ASCII.quote { closed = true; i += 1; break }
                    if c == ASCII.backslash, i + 1 < n, b[i + 1] == ASCII.quote || b[i + 1] == ASCII.backslash {
                        anomalies.insert(.backslashEscape)
                        val.append(b[i + 1])
                        i += 2
                        continue
                    }
                    val.append(c)
                    i += 1
                }
                if !closed { anomalies.insert(.invalidQuoting) }
                skipOWS()
                if i < n, b[i] != ASCII.semicolon {
                    // Junk after the closing quote (`name="a"b`) or a missing `;`.
                    if b[i] == ASCII.quote { anomalies.insert(.invalidQuoting) } else { anomalies.insert(.missingSemicolon) }
                }
            } else {
                let start = i
                while i < n, b[i] != ASCII.semicolon { i += 1 }
                var end = i
                while end > start, b[end - 1] == ASCII.space || b[end - 1] == ASCII.tab { end -= 1 }
                val = Array(UnsafeRawBufferPointer(rebasing: b[start..<end]))
                if val.first == ASCII.apostrophe || val.contains(ASCII.quote)
                    || val.contains(ASCII.space) || val.contains(ASCII.tab) {
                    anomalies.insert(.invalidQuoting)
                }
            }
            body(Parameter(name: name, value: val, quoted: quoted, spaceAroundEquals: spaced))
        }
        return (value, anomalies)
    }
}

/// ASCII constants and helpers shared by the header parsers (and, within the package, by Rules' `%XX` reading).
package enum ASCII {
    static let tab: UInt8 = 0x09
    static let lf: UInt8 = 0x0A
    static let cr: UInt8 = 0x0D
    static let space: UInt8 = 0x20
    static let quote: UInt8 = 0x22
    static let percent: UInt8 = 0x25
    static let apostrophe: UInt8 = 0x27
    static let hyphen: UInt8 = 0x2D
    static let colon: UInt8 = 0x3A
    static let semicolon: UInt8 = 0x3B
    static let equals: UInt8 = 0x3D
    static let backslash: UInt8 = 0x5C

    /// RFC 9110 tchar (also Rules' media-type tokens).
    /// One bit per byte value, bytes 0–63 in `tcharLow` and 64–127 in `tcharHigh`: ALPHA, DIGIT and
    /// ``!#$%&'*+-.^_`|~``. A shift and a test instead of the range and list comparisons (some 17 instructions
    /// a byte in a loop); `ASCIITests` checks the masks against that list for all 256 bytes.
    @inline(__always) package static func isTChar(_ c: UInt8) -> Bool {
        c < 64 ? (tcharLow >> UInt64(c)) & 1 == 1 : c < 128 && (tcharHigh >> UInt64(c &- 64)) & 1 == 1
    }
    static let tcharLow: UInt64 = 0x03ff_6cfa_0000_0000
    static let tcharHigh: UInt64 = 0x57ff_ffff_c7ff_fffe
    /// Whether `bytes` holds a control byte (below 0x20, a tab only if `tabIsControl`, or DEL) and whether it
    /// holds a byte of 0x80 or above. One pass without branches, which the compiler turns into vector code.
    static func controlAndHighBytes(_ bytes: UnsafeRawBufferPointer, tabIsControl: Bool = false)
        -> (control: Bool, high: Bool) {
        var control: UInt8 = 0
        var high: UInt8 = 0
        let tab: UInt8 = tabIsControl ? 0xFF : ASCII.tab
        for byte in bytes {
            control |= ((byte < 0x20 && byte != tab) || byte == 0x7F) ? 1 : 0
            high |= byte
        }
        return (control != 0, high >= 0x80)
    }

    /// Whether `bytes` start with the lowercase ASCII `literal`, ignoring ASCII case.
    package static func hasPrefix(_ bytes: UnsafeBufferPointer<UInt8>, lowercase literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard bytes.count >= count else { return false }
        let expected = literal.utf8Start
        var index = 0
        while index < count {
            guard lowercased(bytes[index]) == expected[index] else { return false }
            index &+= 1
        }
        return true
    }

    /// ASCII-lowercases a byte sequence.
    static func lowercased(_ s: some Collection<UInt8>) -> [UInt8] {
        s.map(lowercased)
    }

    /// One byte ASCII-lowercased (also Rules' media types).
    @inline(__always) package static func lowercased(_ c: UInt8) -> UInt8 { c >= 0x41 && c <= 0x5A ? c | 0x20 : c }

    /// `lowercased(s)`, but the usual parameter names and media types come from one shared array each instead
    /// of a new allocation (part headers are parsed for every part of every request).
    static func lowercasedShared(_ s: Slice<UnsafeRawBufferPointer>) -> [UInt8] {
        if let found = index(of: UnsafeRawBufferPointer(rebasing: s), amongLowercase: sharedNames) {
            return sharedLowercase[found]
        }
        return lowercased(s)
    }

    /// The names `lowercasedShared` hands out shared arrays for.
    static let sharedNames: [StaticString] = [
        "name", "filename", "filename*", "boundary", "charset", "form-data", "multipart/form-data", "text/plain",
        "application/octet-stream",
    ]
    /// The arrays `lowercasedShared` hands out, in the order of `sharedNames`.
    static let sharedLowercase: [[UInt8]] = sharedNames.map {
        Array(UnsafeBufferPointer(start: $0.utf8Start, count: $0.utf8CodeUnitCount))
    }

    /// The index of the entry of `literals` (lowercase ASCII) that `bytes` spells in any case, if any: lengths
    /// first, then one comparison eight bytes at a time. The literals are plain values, so going through them
    /// retains nothing (a list of arrays retained and released every entry compared).
    package static func index(of bytes: UnsafeRawBufferPointer, amongLowercase literals: [StaticString]) -> Int? {
        guard let base = bytes.baseAddress else { return nil }
        for index in literals.indices where literals[index].utf8CodeUnitCount == bytes.count {
            if cl_equals_lower(base, literals[index].utf8Start, bytes.count) != 0 { return index }
        }
        return nil
    }

    /// Byte equality with an ASCII literal.
    static func equals(_ s: [UInt8], _ literal: StaticString) -> Bool {
        guard s.count == literal.utf8CodeUnitCount else { return false }
        var index = 0
        while index < s.count, s[index] == literal.utf8Start[index] { index += 1 }
        return index == s.count
    }

    /// Case-insensitive comparison against a lowercase ASCII literal, of bytes in place: eight at a time.
    static func equalsLower(_ s: Slice<UnsafeRawBufferPointer>, _ lower: StaticString) -> Bool {
        guard s.count == lower.utf8CodeUnitCount else { return false }
        guard let base = s.base.baseAddress else { return s.isEmpty }
        return cl_equals_lower(base + s.startIndex, lower.utf8Start, s.count) != 0
    }

    /// Case-insensitive comparison against a lowercase ASCII literal.
    static func equalsLower(_ s: some Collection<UInt8>, _ lower: StaticString) -> Bool {
        let literal = UnsafeBufferPointer(start: lower.utf8Start, count: lower.utf8CodeUnitCount)
        guard s.count == literal.count else { return false }
        var index = 0
        for byte in s {
            guard lowercased(byte) == literal[index] else { return false }
            index += 1
        }
        return true
    }

    /// The value of one hex digit, or nil.
    package static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }
}
