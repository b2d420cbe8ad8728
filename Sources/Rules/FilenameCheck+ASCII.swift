// ASCII fast paths of the filename checks' string helpers. A filename is nearly always ASCII; read byte by byte,
// the helpers give the same answers as their Character-by-Character forms (`FilenameCheckASCIITests` compares
// the two on every ASCII byte and on seeded random names) at a fraction of the cost. Each returns nil for a name
// that is not all ASCII, which then takes the general form.
import Multipart

extension FilenameCheck {
    /// Whitespace as `Character.isWhitespace` reads it within ASCII: HT, LF, VT, FF, CR and space.
    @inline(__always) static func isASCIIWhitespace(_ byte: UInt8) -> Bool {
        (byte >= 0x09 && byte <= 0x0D) || byte == 0x20
    }

    /// The bytes as a String, ASCII letters lowercased.
    static func asciiLowercased(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> String {
        String(unsafeUninitializedCapacity: bytes.count) { out in
            var at = 0
            for byte in bytes {
                out[at] = ASCII.lowercased(byte)
                at += 1
            }
            return at
        }
    }

    /// `extensions(of:)` for an ASCII name; nil for any other. The first segment is the stem and never an
    /// extension (the general form keeps an empty stem's segment, which trims to nothing and is skipped).
    static func asciiExtensions(of name: String) -> [String]? {
        let result = name.utf8.withContiguousStorageIfAvailable { bytes -> [String]? in
            guard bytes.allSatisfy({ $0 < 0x80 }) else { return nil }
            var end = 0
            while end < bytes.count, bytes[end] != UInt8(ascii: ":"), bytes[end] != UInt8(ascii: ";") { end += 1 }
            var found: [String] = []
            var segmentStart = -1   // the stem is skipped
            for index in 0...end where index == end || bytes[index] == UInt8(ascii: ".") {
                if segmentStart >= 0 {
                    var start = segmentStart
                    var stop = index
                    while start < stop, isASCIIWhitespace(bytes[start]) { start += 1 }
                    while stop > start, isASCIIWhitespace(bytes[stop - 1]) { stop -= 1 }
                    if start < stop { found.append(asciiLowercased(bytes[start..<stop])) }
                }
                segmentStart = index + 1
            }
            return found
        }
        return result ?? nil
    }

    /// `restrictedKey(of:)` for an ASCII name: `.some(nil)` when it has no key, nil when the name is not ASCII.
    static func asciiRestrictedKey(of filename: String) -> String?? {
        let result = filename.utf8.withContiguousStorageIfAvailable { bytes -> String?? in
            guard bytes.allSatisfy({ $0 < 0x80 }) else { return nil }
            var start = bytes.count
            while start > 0, bytes[start - 1] != UInt8(ascii: "/"), bytes[start - 1] != UInt8(ascii: "\\") {
                start -= 1
            }
            var stop = start
            while stop < bytes.count, bytes[stop] != UInt8(ascii: ":") { stop += 1 }
            while stop > start, bytes[stop - 1] == UInt8(ascii: ".") || bytes[stop - 1] == UInt8(ascii: " ") {
                stop -= 1
            }
            return .some(stop > start ? asciiLowercased(bytes[start..<stop]) : nil)
        }
        return result ?? nil
    }

    /// `isReserved` for an ASCII base name; nil when it is not ASCII.
    static func asciiIsReserved(_ base: String) -> Bool? {
        let result = base.utf8.withContiguousStorageIfAvailable { bytes -> Bool? in
            guard bytes.allSatisfy({ $0 < 0x80 }) else { return nil }
            var stop = 0
            while stop < bytes.count, bytes[stop] != UInt8(ascii: ".") { stop += 1 }
            var start = 0
            while start < stop, bytes[start] == UInt8(ascii: " ") || bytes[start] == UInt8(ascii: "\t") { start += 1 }
            while stop > start, bytes[stop - 1] == UInt8(ascii: " ") || bytes[stop - 1] == UInt8(ascii: "\t") {
                stop -= 1
            }
            // The reserved stems (`con`, `com1`, ...) have three or four letters.
            guard stop - start == 3 || stop - start == 4 else { return false }
            return reservedStems.contains(asciiLowercased(bytes[start..<stop]))
        }
        return result ?? nil
    }

    /// `problems(in:)` for an ASCII name without a `/` or `\\` (nearly every name a browser sends), in one pass
    /// over the bytes and with no String built unless a word table matches; nil for any other name, which takes
    /// `problemsOfAnyName`. `FilenameCheckASCIITests` compares the two on seeded random names.
    static func asciiProblems(of bytes: UnsafeBufferPointer<UInt8>, restricted: [FilenamePattern],
                              extensionAllowed: (String) -> Bool) -> [FilenameProblem]? {
        let count = bytes.count
        guard count > 0 else { return [] }
        var control = false
        var cut = count   // the first `:` or `;`: where extensions end
        var colon = count   // the first `:`: where the restricted key ends
        for index in 0..<count {
            let byte = bytes[index]
            if byte >= 0x80 || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "\\") { return nil }
            if byte < 0x20 || byte == 0x7F { control = true }
            if byte == UInt8(ascii: ":") {
                if colon == count { colon = index }
                if cut == count { cut = index }
            } else if byte == UInt8(ascii: ";"), cut == count {
                cut = index
            }
        }
        var found: [FilenameProblem] = []
        if count >= 2 && bytes.allSatisfy({ $0 == UInt8(ascii: ".") }) { found.append(.dotDot) }
        if control { found.append(.controlCharacters) }
        if let last = bytes.last, last == UInt8(ascii: ".") || last == UInt8(ascii: " ") {
            found.append(.trailingDotsSpaces)
        }
        if count > maximumLength { found.append(.tooLong) }
        if asciiHasDangerousExtension(bytes, end: cut, extensionAllowed: extensionAllowed) {
            found.append(.dangerousExtension)
        }
        if asciiIsReservedStem(bytes) { found.append(.reservedName) }
        if asciiIsRestricted(bytes, end: colon, patterns: restricted) { found.append(.restrictedName) }
        return found
    }

    /// Whether an extension before `end` (each `.`-separated segment after the stem, trimmed of whitespace) is a
    /// dangerous one that `extensionAllowed` does not exempt.
    private static func asciiHasDangerousExtension(_ bytes: UnsafeBufferPointer<UInt8>, end: Int,
                                                   extensionAllowed: (String) -> Bool) -> Bool {
        var segmentStart = -1   // the stem is skipped
        for index in 0...end where index == end || bytes[index] == UInt8(ascii: ".") {
            defer { segmentStart = index + 1 }
            guard segmentStart >= 0 else { continue }
            var start = segmentStart
            var stop = index
            while start < stop, isASCIIWhitespace(bytes[start]) { start += 1 }
            while stop > start, isASCIIWhitespace(bytes[stop - 1]) { stop -= 1 }
            guard start < stop, dangerousTable.contains(caseless: bytes[start..<stop]),
                  !extensionAllowed(asciiLowercased(bytes[start..<stop])) else { continue }
            return true
        }
        return false
    }

    /// `asciiIsReserved` over bytes: the stem before the first `.`, trimmed of spaces and tabs.
    private static func asciiIsReservedStem(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var stop = 0
        while stop < bytes.count, bytes[stop] != UInt8(ascii: ".") { stop += 1 }
        var start = 0
        while start < stop, bytes[start] == UInt8(ascii: " ") || bytes[start] == UInt8(ascii: "\t") { start += 1 }
        while stop > start, bytes[stop - 1] == UInt8(ascii: " ") || bytes[stop - 1] == UInt8(ascii: "\t") { stop -= 1 }
        return reservedTable.contains(caseless: bytes[start..<stop])
    }

    /// `restriction(of:patterns:) != nil` over bytes with no separator: the key is the name before `end` (its
    /// first `:`) without trailing dots and spaces.
    private static func asciiIsRestricted(_ bytes: UnsafeBufferPointer<UInt8>, end: Int,
                                          patterns: [FilenamePattern]) -> Bool {
        var stop = end
        while stop > 0, bytes[stop - 1] == UInt8(ascii: ".") || bytes[stop - 1] == UInt8(ascii: " ") { stop -= 1 }
        guard stop > 0 else { return false }
        let key = bytes[0..<stop]
        if restrictedTable.contains(caseless: key) || key.first == UInt8(ascii: ".") { return true }
        if asciiStarts(key, with: sessionPrefix) { return true }
        guard !patterns.isEmpty else { return false }
        let lowered = asciiLowercased(key)
        return patterns.contains { $0.matches(lowercased: lowered) }
    }

    /// Whether `bytes`, ASCII-lowercased, start with `prefix` (lowercase).
    private static func asciiStarts(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, with prefix: String) -> Bool {
        var index = bytes.startIndex
        for byte in prefix.utf8 {
            guard index < bytes.endIndex, ASCII.lowercased(bytes[index]) == byte else { return false }
            index += 1
        }
        return true
    }

    private static let dangerousTable = ASCIIWordTable(dangerousExtensions)
    private static let reservedTable = ASCIIWordTable(reservedStems)
    private static let restrictedTable = ASCIIWordTable(restrictedNames)
}

/// A fixed set of lowercase ASCII words, looked up by bytes in any ASCII case without building a String or
/// hashing one: 64 buckets chosen by length and first and last byte, each holding its words as length-prefixed
/// bytes.
struct ASCIIWordTable: Sendable {
    private let buckets: [[UInt8]]

    init(_ words: some Sequence<String>) {
        var buckets = [[UInt8]](repeating: [], count: 64)
        for word in words {
            let bytes = Array(word.utf8)
            precondition(!bytes.isEmpty && bytes.count < 256
                         && bytes.allSatisfy { $0 < 0x80 && ASCII.lowercased($0) == $0 },
                         "ASCIIWordTable holds short lowercase ASCII words")
            let bucket = Self.bucket(count: bytes.count, first: bytes[0], last: bytes[bytes.count - 1])
            buckets[bucket] += [UInt8(bytes.count)] + bytes
        }
        self.buckets = buckets
    }

    @inline(__always)
    private static func bucket(count: Int, first: UInt8, last: UInt8) -> Int {
        (count &* 7 &+ Int(first) &* 3 &+ Int(last)) & 63
    }

    /// Whether `bytes`, ASCII-lowercased, is one of the words.
    func contains(caseless bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        let count = bytes.count
        guard count > 0, count < 256, let first = bytes.first, let last = bytes.last else { return false }
        let entries = buckets[Self.bucket(count: count, first: ASCII.lowercased(first), last: ASCII.lowercased(last))]
        var at = 0
        while at < entries.count {
            let length = Int(entries[at])
            if length == count {
                var k = 0
                while k < count, entries[at + 1 + k] == ASCII.lowercased(bytes[bytes.startIndex + k]) { k += 1 }
                if k == count { return true }
            }
            at += 1 + length
        }
        return false
    }
}

