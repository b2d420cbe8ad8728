import CLinux
import Multipart

/// Byte classes from RFC 9110 and RFC 9112, shared by the parsers and serializers.
enum HTTPSyntax {
    static let cr = UInt8(ascii: "\r")
    static let lf = UInt8(ascii: "\n")
    static let sp = UInt8(ascii: " ")
    static let ht = UInt8(ascii: "\t")
    static let colon = UInt8(ascii: ":")

    /// Whether every byte of `bytes` is in a class. An index loop: the generic algorithms over slices
    /// (`allSatisfy`, `firstIndex`) allocate per element in unoptimized builds, which the allocation-count tests
    /// measure.
    @inline(__always)
    static func allBytes(_ bytes: Slice<UnsafeRawBufferPointer>, are isMember: (UInt8) -> Bool) -> Bool {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            guard isMember(bytes.base[index]) else { return false }
            index += 1
        }
        return true
    }

    /// The index of the first `byte` in `bytes`, or nil.
    static func firstIndex(of byte: UInt8, in bytes: Slice<UnsafeRawBufferPointer>) -> Int? {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes.base[index] == byte { return index }
            index += 1
        }
        return nil
    }

    /// A String of head bytes (already checked by the caller), decoded through the standard library's
    /// contiguous fast path: no intermediate array in any build.
    static func string(_ bytes: Slice<UnsafeRawBufferPointer>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes).assumingMemoryBound(to: UInt8.self), as: UTF8.self)
    }

    /// `tchar` (RFC 9110 §5.6.2): the bytes of a token such as a method or field name.
    /// One bit per byte value: ALPHA, DIGIT and ``!#$%&'*+-.^_`|~`` (bytes 0–63 in `tokenLow`, 64–127 in
    /// `tokenHigh`). `HTTPSyntaxTests` checks the masks against the grammar for all 256 bytes.
    @inline(__always) static func isTokenChar(_ byte: UInt8) -> Bool {
        byte < 64 ? (tokenLow >> UInt64(byte)) & 1 == 1 : byte < 128 && (tokenHigh >> UInt64(byte - 64)) & 1 == 1
    }
    static let tokenLow: UInt64 = 0x03ff_6cfa_0000_0000
    static let tokenHigh: UInt64 = 0x57ff_ffff_c7ff_fffe

    /// SP or HT (`OWS` / `BWS` bytes).
    @inline(__always) static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == sp || byte == ht
    }

    /// A byte allowed inside a field value: HT, SP, VCHAR or obs-text. Excludes NUL, other controls and DEL.
    @inline(__always) static func isFieldValueByte(_ byte: UInt8) -> Bool {
        byte == ht || (byte >= 0x20 && byte != 0x7F)
    }

    /// Whether every byte is a field-value byte (`isFieldValueByte`).
    static func allFieldValueBytes(_ bytes: UnsafeRawBufferPointer) -> Bool {
        fieldValueBytes(bytes).valid
    }

    /// Whether every byte is a field-value byte (`isFieldValueByte`), and whether every byte is ASCII: eight
    /// bytes at a time, the last word overlapping the one before it (or, under eight bytes, padded with spaces);
    /// a word holding a byte below 0x20 or a DEL is checked byte by byte (it may be a tab, which is allowed).
    static func fieldValueBytes(_ bytes: UnsafeRawBufferPointer) -> (valid: Bool, ascii: Bool) {
        let count = bytes.count
        guard count > 0, let base = bytes.baseAddress else { return (true, true) }
        var high: UInt64 = 0
        func check(_ word: UInt64, at index: Int, count: Int) -> Bool {
            high |= word
            guard hasControlOrDelete(word) else { return true }
            for offset in index..<(index &+ count) where !isFieldValueByte(bytes[offset]) {
                return false
            }
            return true
        }
        guard count >= 8 else {
            var word: UInt64 = 0x2020_2020_2020_2020
            withUnsafeMutableBytes(of: &word) { $0.copyMemory(from: bytes) }
            return (check(word, at: 0, count: count), word & highBits == 0)
        }
        var index = 0
        while index &+ 8 <= count {
            guard check((base + index).loadUnaligned(as: UInt64.self), at: index, count: 8) else { return (false, false) }
            index &+= 8
        }
        if index < count {
            guard check((base + (count &- 8)).loadUnaligned(as: UInt64.self), at: count &- 8, count: 8) else {
                return (false, false)
            }
        }
        return (true, high & highBits == 0)
    }

    /// Whether any byte is `_`: eight bytes at a time (`zeroByteMarks` of the word with the underscores cleared),
    /// the last word overlapping the one before it; under eight bytes, padded with zeros.
    static func containsUnderscore(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let count = bytes.count
        guard count > 0, let base = bytes.baseAddress else { return false }
        let underscores: UInt64 = 0x5F5F_5F5F_5F5F_5F5F
        guard count >= 8 else {
            var word: UInt64 = 0
            withUnsafeMutableBytes(of: &word) { $0.copyMemory(from: bytes) }
            // The padding's zero bytes are not underscores: only the first `count` bytes' marks count.
            return zeroByteMarks(word ^ underscores) & ((1 << (UInt64(count) &* 8)) &- 1) != 0
        }
        var index = 0
        while index &+ 8 <= count {
            if zeroByteMarks((base + index).loadUnaligned(as: UInt64.self) ^ underscores) != 0 { return true }
            index &+= 8
        }
        return index < count
            && zeroByteMarks((base + (count &- 8)).loadUnaligned(as: UInt64.self) ^ underscores) != 0
    }

    /// Whether every byte is a token character (`isTokenChar`), as a forwarded field name must be.
    static func allTokenBytes(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let count = bytes.count
        let start = base.assumingMemoryBound(to: UInt8.self)
        for index in 0..<count where !isTokenChar(start[index]) {
            return false
        }
        return true
    }

    /// Whether every byte is below 0x80: eight bytes at a time.
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let count = bytes.count
        var index = 0
        if let base = bytes.baseAddress {
            while index &+ 8 <= count {
                if (base + index).loadUnaligned(as: UInt64.self) & highBits != 0 { return false }
                index &+= 8
            }
        }
        while index < count {
            guard bytes[index] < 0x80 else { return false }
            index &+= 1
        }
        return true
    }

    /// The index of the first CR or LF at or after `start`, or `input.count`: eight bytes at a time
    /// (`zeroByteMarks` of the word with each of the two bytes cleared where it occurs).
    static func firstLineEnd(_ input: UnsafeRawBufferPointer, from start: Int) -> Int {
        let count = input.count
        var index = start
        if let base = input.baseAddress {
            while index &+ 8 <= count {
                let word = UInt64(littleEndian: (base + index).loadUnaligned(as: UInt64.self))
                let marks = zeroByteMarks(word ^ 0x0D0D_0D0D_0D0D_0D0D) | zeroByteMarks(word ^ 0x0A0A_0A0A_0A0A_0A0A)
                if marks != 0 { return index &+ marks.trailingZeroBitCount >> 3 }
                index &+= 8
            }
        }
        while index < count, input[index] != cr, input[index] != lf {
            index &+= 1
        }
        return index
    }

    /// Whether one of the eight bytes of `word` is below 0x20 or is 0x7F: subtracting 0x20 from every byte
    /// borrows into the high bit of a byte below 0x20 (its own high bit clear), as in `zeroByteMarks`; DEL is a
    /// zero byte of `word ^ 0x7F..`. Exact as to whether such a byte exists (a borrow can only start at one).
    static func hasControlOrDelete(_ word: UInt64) -> Bool {
        let control = (word &- 0x2020_2020_2020_2020) & ~word & highBits
        return control | zeroByteMarks(word ^ 0x7F7F_7F7F_7F7F_7F7F) != 0
    }

    /// The high bit of every byte of `word` that is zero, and possibly of bytes above one (a borrow from
    /// subtracting 0x01 runs upward): none at all exactly when no byte is zero, and the lowest mark (the first
    /// byte in memory, little-endian) is always a true zero.
    @inline(__always) static func zeroByteMarks(_ word: UInt64) -> UInt64 {
        (word &- 0x0101_0101_0101_0101) & ~word & highBits
    }

    /// The high bit of each of a word's eight bytes.
    static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// A byte allowed in a request-target: visible ASCII but `#` (no target form carries a fragment).
    @inline(__always) static func isTargetByte(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "#")
    }

    /// Visible ASCII (`VCHAR`, RFC 5234).
    @inline(__always) static func isVisible(_ byte: UInt8) -> Bool {
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

    /// `equalsIgnoringCase` for two Strings, on their contiguous UTF-8 storage when they have it.
    static func equalsIgnoringCase(_ lhs: String, _ rhs: String) -> Bool {
        guard lhs.utf8.count == rhs.utf8.count else {
            return false
        }
        let fast = lhs.utf8.withContiguousStorageIfAvailable { left in
            rhs.utf8.withContiguousStorageIfAvailable { right in
                equalsIgnoringCase(left, right)
            }
        }
        if let fast, let result = fast {
            return result
        }
        return zip(lhs.utf8, rhs.utf8).allSatisfy { lowercased($0) == lowercased($1) }
    }

    /// ASCII case-insensitive equality of a String with a lowercase ASCII literal, without allocating.
    static func equalsIgnoringCase(_ text: String, lowercase literal: StaticString) -> Bool {
        let other = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        guard text.utf8.count == other.count else {
            return false
        }
        if let result = text.utf8.withContiguousStorageIfAvailable({ equalsIgnoringCase($0, other) }) {
            return result
        }
        return zip(text.utf8, other).allSatisfy { lowercased($0) == $1 }
    }

    /// Whether a known field name (ASCII letters and hyphens only) has no uppercase letter: among letters and
    /// hyphens, exactly the uppercase letters have their 0x20 bit clear, so one AND over the bytes tells.
    static func hasNoUppercase(knownName bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var all: UInt8 = 0xFF
        for byte in bytes { all &= byte }
        return all & 0x20 != 0
    }

    /// Byte equality of two buffers.
    static func equalBytes(_ lhs: UnsafeBufferPointer<UInt8>, _ rhs: UnsafeBufferPointer<UInt8>) -> Bool {
        guard lhs.count == rhs.count else { return false }
        guard let left = lhs.baseAddress, let right = rhs.baseAddress else { return true }
        return memcmp(left, right, lhs.count) == 0
    }

    /// ASCII case-insensitive equality of two byte buffers of any length: eight bytes at a time (`lowercased(word:)`),
    /// the last word overlapping the one before it; byte by byte below eight.
    static func equalsIgnoringCase(_ lhs: UnsafeBufferPointer<UInt8>, _ rhs: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = lhs.count
        guard count == rhs.count else {
            return false
        }
        guard count >= 8, let left = lhs.baseAddress, let right = rhs.baseAddress else {
            for index in 0..<count where lowercased(lhs[index]) != lowercased(rhs[index]) {
                return false
            }
            return true
        }
        @inline(__always) func wordsMatch(at offset: Int) -> Bool {
            let a = UnsafeRawPointer(left + offset).loadUnaligned(as: UInt64.self)
            let b = UnsafeRawPointer(right + offset).loadUnaligned(as: UInt64.self)
            return a == b || lowercased(word: a) == lowercased(word: b)
        }
        var offset = 0
        while offset &+ 8 <= count {
            guard wordsMatch(at: offset) else { return false }
            offset &+= 8
        }
        return offset == count || wordsMatch(at: count &- 8)
    }

    /// `lowercased` applied to each of the eight bytes of `word` at once: a byte in A-Z gains 0x20, every other
    /// byte, non-ASCII included, is unchanged (the C shim's `cl_lower_word`, which Multipart's comparisons use too).
    @inline(__always) static func lowercased(word: UInt64) -> UInt64 { cl_lower_word(word) }

    /// Whether every byte of `text` is ASCII.
    static func isASCII(_ text: some StringProtocol) -> Bool {
        if let result = text.utf8.withContiguousStorageIfAvailable({ bytes in bytes.allSatisfy { $0 < 0x80 } }) {
            return result
        }
        return text.utf8.allSatisfy { $0 < 0x80 }
    }

    /// Whether two names or tokens are equal once lowercased, exactly as `lhs.lowercased() == rhs.lowercased()`.
    ///
    /// ASCII text compares byte by byte; anything else takes the Unicode path (`lowercased()` and canonical
    /// equivalence), so that a KELVIN SIGN still equals `k`.
    static func equalsLowercased(_ lhs: some StringProtocol, _ rhs: some StringProtocol) -> Bool {
        if isASCII(lhs) && isASCII(rhs) {
            return equalsIgnoringCase(lhs, rhs)
        }
        return lhs.lowercased() == rhs.lowercased()
    }

    /// Calls `body` with each element `listElements(value)` would return, in order, until `body` returns true.
    ///
    /// Returns whether `body` returned true. An ASCII value is split in place without allocating; any other
    /// value goes through `listElements`, whose Character-based split and trim it must match.
    static func firstListElement(_ value: String, where body: (Substring) -> Bool) -> Bool {
        guard isASCII(value) else {
            return listElements(value).contains(where: body)
        }
        let utf8 = value.utf8
        var start = utf8.startIndex
        while true {
            var end = start
            while end != utf8.endIndex, utf8[end] != UInt8(ascii: ",") {
                end = utf8.index(after: end)
            }
            if body(trimmed(value[start..<end])) {
                return true
            }
            guard end != utf8.endIndex else {
                return false
            }
            start = utf8.index(after: end)
        }
    }

    /// `firstListElement` over the bytes of an ASCII value: calls `body` with each comma-separated element, OWS
    /// trimmed (empty ones too), in order, until it returns true; returns whether it did.
    static func anyListElement(_ value: UnsafeRawBufferPointer, where body: (UnsafeBufferPointer<UInt8>) -> Bool) -> Bool {
        let bytes = value.assumingMemoryBound(to: UInt8.self)
        var start = 0
        while true {
            var end = start
            while end < bytes.count, bytes[end] != UInt8(ascii: ",") { end += 1 }
            var first = start
            var last = end
            while first < last, isWhitespace(bytes[first]) { first += 1 }
            while last > first, isWhitespace(bytes[last - 1]) { last -= 1 }
            if body(UnsafeBufferPointer(rebasing: bytes[first..<last])) { return true }
            guard end < bytes.count else { return false }
            start = end + 1
        }
    }

    /// ASCII case-insensitive equality of bytes with a lowercase literal.
    @inline(__always)
    static func equalsIgnoringCase(_ bytes: UnsafeBufferPointer<UInt8>, lowercase literal: StaticString) -> Bool {
        bytes.count == literal.utf8CodeUnitCount
            && equalsIgnoringCase(bytes, UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
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
        guard value >= 0, let magnitude = UInt64(exactly: value) else {
            buffer.append(contentsOf: String(value).utf8)
            return
        }
        appendDecimal(magnitude, to: &buffer)
    }

    /// Appends the decimal form of an unsigned 64-bit integer, without going through a String.
    static func appendDecimal(_ value: UInt64, to buffer: inout [UInt8]) {
        ByteWriter.withBytes(room: 20, { $0.writeDecimal(value) }) { buffer.append(contentsOf: $0) }
    }
}
