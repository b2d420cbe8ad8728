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
            var found: [String] = []
            _ = firstASCIIExtension(bytes) { found.append(asciiLowercased($0)); return false }
            return found
        }
        return result ?? nil
    }

    /// `restrictedKey(of:)` for an ASCII name: `.some(nil)` when it has no key, nil when the name is not ASCII.
    static func asciiRestrictedKey(of filename: String) -> String?? {
        let result = filename.utf8.withContiguousStorageIfAvailable { bytes -> String?? in
            guard bytes.allSatisfy({ $0 < 0x80 }) else { return nil }
            let key = asciiRestrictedKeyRange(bytes)
            return .some(key.isEmpty ? nil : asciiLowercased(bytes[key]))
        }
        return result ?? nil
    }

    /// `isReserved` for an ASCII base name; nil when it is not ASCII.
    static func asciiIsReserved(_ base: String) -> Bool? {
        let result = base.utf8.withContiguousStorageIfAvailable { bytes -> Bool? in
            bytes.allSatisfy({ $0 < 0x80 }) ? asciiStemIsReserved(bytes) : nil
        }
        return result ?? nil
    }

    /// `problems(in:)` for an ASCII name without a `/` or `\` (nearly every name a browser sends), over its bytes
    /// and with no String built unless a word table matches; nil for any other name, which takes
    /// `problemsOfAnyName`. `FilenameCheckASCIITests` compares the two on seeded random names.
    static func asciiProblems(of bytes: UnsafeBufferPointer<UInt8>, restricted: [FilenamePattern],
                              extensionAllowed: (String) -> Bool) -> [FilenameProblem]? {
        guard !bytes.isEmpty else { return [] }
        var control = false
        for byte in bytes {
            if byte >= 0x80 || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "\\") { return nil }
            if byte < 0x20 || byte == 0x7F { control = true }
        }
        var found: [FilenameProblem] = []
        if bytes.count >= 2 && bytes.allSatisfy({ $0 == UInt8(ascii: ".") }) { found.append(.dotDot) }
        if control { found.append(.controlCharacters) }
        if let last = bytes.last, last == UInt8(ascii: ".") || last == UInt8(ascii: " ") {
            found.append(.trailingDotsSpaces)
        }
        if bytes.count > maximumLength { found.append(.tooLong) }
        if firstASCIIExtension(bytes, where: {
            dangerousTable.contains(caseless: $0) && !extensionAllowed(asciiLowercased($0))
        }) {
            found.append(.dangerousExtension)
        }
        if asciiStemIsReserved(bytes) { found.append(.reservedName) }
        if asciiIsRestricted(bytes[asciiRestrictedKeyRange(bytes)], patterns: restricted) {
            found.append(.restrictedName)
        }
        return found
    }

    /// Whether `test` holds for one of an ASCII name's extensions (`extensions(of:)`: each `.`- or `;`-separated
    /// segment after the stem and before the first `:`, trimmed of whitespace, not empty), tried in order.
    private static func firstASCIIExtension(_ bytes: UnsafeBufferPointer<UInt8>,
                                            where test: (Slice<UnsafeBufferPointer<UInt8>>) -> Bool) -> Bool {
        var end = 0
        while end < bytes.count, bytes[end] != UInt8(ascii: ":") { end += 1 }
        var segmentStart = -1   // the stem is skipped
        for index in 0...end
        where index == end || bytes[index] == UInt8(ascii: ".") || bytes[index] == UInt8(ascii: ";") {
            defer { segmentStart = index + 1 }
            guard segmentStart >= 0 else { continue }
            var start = segmentStart
            var stop = index
            while start < stop, isASCIIWhitespace(bytes[start]) { start += 1 }
            while stop > start, isASCIIWhitespace(bytes[stop - 1]) { stop -= 1 }
            if start < stop, test(bytes[start..<stop]) { return true }
        }
        return false
    }

    /// Where an ASCII name's restricted-name key lies (`restrictedKey(of:)`, before lowercasing): after the last
    /// `/` or `\`, up to the next `:`, without trailing dots and spaces; empty when nothing is left.
    private static func asciiRestrictedKeyRange(_ bytes: UnsafeBufferPointer<UInt8>) -> Range<Int> {
        var start = bytes.count
        while start > 0, bytes[start - 1] != UInt8(ascii: "/"), bytes[start - 1] != UInt8(ascii: "\\") { start -= 1 }
        var stop = start
        while stop < bytes.count, bytes[stop] != UInt8(ascii: ":") { stop += 1 }
        while stop > start, bytes[stop - 1] == UInt8(ascii: ".") || bytes[stop - 1] == UInt8(ascii: " ") { stop -= 1 }
        return start..<stop
    }

    /// Whether an ASCII base name's stem (before the first `.`, trimmed of spaces and tabs) is a Windows device
    /// name.
    private static func asciiStemIsReserved(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var stop = 0
        while stop < bytes.count, bytes[stop] != UInt8(ascii: ".") { stop += 1 }
        var start = 0
        while start < stop, bytes[start] == UInt8(ascii: " ") || bytes[start] == UInt8(ascii: "\t") { start += 1 }
        while stop > start, bytes[stop - 1] == UInt8(ascii: " ") || bytes[stop - 1] == UInt8(ascii: "\t") { stop -= 1 }
        return reservedTable.contains(caseless: bytes[start..<stop])
    }

    /// `restriction(of:patterns:) != nil` for a restricted-name key's bytes (`asciiRestrictedKeyRange`).
    private static func asciiIsRestricted(_ key: Slice<UnsafeBufferPointer<UInt8>>,
                                          patterns: [FilenamePattern]) -> Bool {
        guard let first = key.first else { return false }
        if first == UInt8(ascii: ".") || restrictedTable.contains(caseless: key) { return true }
        var index = key.startIndex
        var prefix = true
        for byte in sessionPrefix.utf8 {
            guard index < key.endIndex, ASCII.lowercased(key[index]) == byte else { prefix = false; break }
            index += 1
        }
        if prefix { return true }
        guard !patterns.isEmpty else { return false }
        let lowered = asciiLowercased(key)
        return patterns.contains { $0.matches(lowercased: lowered) }
    }

    static let dangerousTable = ASCIIWordTable(dangerousExtensions)
    static let reservedTable = ASCIIWordTable(reservedStems)
    static let restrictedTable = ASCIIWordTable(restrictedNames)
}

/// A fixed set of lowercase ASCII words, looked up by bytes in any ASCII case without building a String or
/// hashing one: 64 buckets chosen by length and first and last byte, each holding its words as length-prefixed
/// bytes.
///
/// The buckets lie back to back in one allocation that is never freed: the tables are constants that live as long
/// as the process (the three above; a test makes one more). A struct of pointers is read from the globals every
/// worker shares without a reference count: the array of arrays it replaced had a bucket retained and released on
/// every filename, by every worker, a write to one cache line from each core (bench/proxy/sharing.py,
/// docs/performance.md, "Workers that write no shared memory").
struct ASCIIWordTable: @unchecked Sendable {   // immutable after init; its memory is never written again or freed
    /// Every bucket's entries, back to back: `bytes[bounds[b]..<bounds[b + 1]]` is bucket `b`.
    private let bytes: UnsafeBufferPointer<UInt8>
    private let bounds: UnsafeBufferPointer<Int>
    /// How many words the table holds: a word that is not lowercase ASCII of 1 to 255 bytes is left out (an ASCII
    /// name could not be it in any case, or its length would not fit the prefix). `FilenameCheckASCIITests` checks
    /// that every built-in list is held whole.
    let count: Int

    init(_ words: some Sequence<String>) {
        var buckets = [[UInt8]](repeating: [], count: 64)
        var count = 0
        for word in words {
            let bytes = Array(word.utf8)
            guard let first = bytes.first, let last = bytes.last, bytes.count < 256,
                  bytes.allSatisfy({ $0 < 0x80 && ASCII.lowercased($0) == $0 }) else { continue }
            buckets[Self.bucket(count: bytes.count, first: first, last: last)] += [UInt8(bytes.count)] + bytes
            count += 1
        }
        let flat = buckets.flatMap { $0 }
        let bytes = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(flat.count, 1))
        _ = bytes.initialize(from: flat)
        let bounds = UnsafeMutableBufferPointer<Int>.allocate(capacity: buckets.count + 1)
        var at = 0
        for (index, bucket) in buckets.enumerated() {
            bounds[index] = at
            at += bucket.count
        }
        bounds[buckets.count] = at
        self.bytes = UnsafeBufferPointer(bytes)
        self.bounds = UnsafeBufferPointer(bounds)
        self.count = count
    }

    @inline(__always)
    private static func bucket(count: Int, first: UInt8, last: UInt8) -> Int {
        (count &* 7 &+ Int(first) &* 3 &+ Int(last)) & 63
    }

    /// Whether `bytes`, ASCII-lowercased, is one of the words.
    func contains(caseless candidate: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        let count = candidate.count
        guard count > 0, count < 256, let first = candidate.first, let last = candidate.last else { return false }
        let bucket = Self.bucket(count: count, first: ASCII.lowercased(first), last: ASCII.lowercased(last))
        var at = bounds[bucket]
        let end = bounds[bucket + 1]
        while at < end {
            let length = Int(bytes[at])
            if length == count {
                var k = 0
                while k < count, bytes[at + 1 + k] == ASCII.lowercased(candidate[candidate.startIndex + k]) { k += 1 }
                if k == count { return true }
            }
            at += 1 + length
        }
        return false
    }
}
