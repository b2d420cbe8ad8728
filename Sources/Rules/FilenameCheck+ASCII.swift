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
}
