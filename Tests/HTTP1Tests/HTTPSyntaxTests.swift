import CLinux
import Multipart
import Testing
import TestRandom

@testable import HTTP1

/// The byte classes against the grammar, for every byte value: the token test is two bit masks, so a wrong bit
/// would let a byte into (or keep one out of) every field name and method.
@Suite struct HTTPSyntaxTests {
    /// RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" /
    /// "|" / "~" / DIGIT / ALPHA.
    @Test func tokenCharactersAreExactlyTheGrammars() {
        let punctuation = Set("!#$%&'*+-.^_`|~".utf8)
        for value in 0...255 {
            let byte = UInt8(value)
            let alpha = (0x41...0x5A).contains(value) || (0x61...0x7A).contains(value)
            let digit = (0x30...0x39).contains(value)
            let expected = alpha || digit || punctuation.contains(byte)
            #expect(HTTPSyntax.isTokenChar(byte) == expected, "byte \(value)")
        }
    }

    /// The shim's tchar table (`cl_tchar_span`, which finds the end of a field name, and `cl_lower_tchar_span`)
    /// against the same grammar:
    /// every byte value at every position of runs of 0 to 9 bytes (its loop takes four bytes at a time, then the
    /// rest one by one), the others being tchars.
    @Test func shimsTokenSpanStopsAtExactlyTheNonTokenBytes() {
        #expect(cl_tchar_span(nil, 0) == 0)
        for value in 0...255 {
            let byte = UInt8(value)
            for length in 1...9 {
                for position in 0..<length {
                    var run = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    run[position] = byte
                    let span = run.withUnsafeBytes { cl_tchar_span($0.baseAddress, $0.count) }
                    #expect(span == (HTTPSyntax.isTokenChar(byte) ? length : position), "byte \(value) at \(position) of \(length)")
                    // The same without the uppercase letters (the encoder's plain media types).
                    let lower = run.withUnsafeBytes { cl_lower_tchar_span($0.baseAddress, $0.count) }
                    let lowerToken = HTTPSyntax.isTokenChar(byte) && !(0x41...0x5A).contains(value)
                    #expect(lower == (lowerToken ? length : position), "byte \(value) at \(position) of \(length)")
                }
            }
        }
    }

    /// `containsUnderscore` (eight bytes at a time) against a byte search: every byte value at every position of
    /// names of 1 to 20 bytes, and names holding none.
    @Test func underscoreSearchAgreesWithTheByteSearch() {
        for length in 0...20 {
            let plain = [UInt8](repeating: UInt8(ascii: "a"), count: length)
            #expect(!plain.withUnsafeBytes(HTTPSyntax.containsUnderscore))
            for position in 0..<length {
                for value in [0x5E, 0x5F, 0x60, 0x00, 0xDF, 0x7F, 0x2D] as [UInt8] {
                    var name = plain
                    name[position] = value
                    #expect(name.withUnsafeBytes(HTTPSyntax.containsUnderscore) == (value == 0x5F),
                            "byte \(value) at \(position) of \(length)")
                }
            }
        }
    }

    /// Field values: HT, SP, VCHAR and obs-text; request targets: visible ASCII but `#`.
    @Test func valueAndTargetBytes() {
        for value in 0...255 {
            let byte = UInt8(value)
            #expect(HTTPSyntax.isFieldValueByte(byte) == (value == 0x09 || (value >= 0x20 && value != 0x7F)))
            #expect(HTTPSyntax.isTargetByte(byte) == (value > 0x20 && value < 0x7F && value != 0x23))
            #expect(HTTPSyntax.isVisible(byte) == (value > 0x20 && value < 0x7F))
        }
    }

    /// The index-loop helpers agree with the standard library's algorithms on every slice of a sample.
    @Test func byteLoopsAgreeWithTheStandardLibrary() {
        // With a two-byte sequence and a stray byte, so that slices both are and are not UTF-8.
        let sample = Array("GET /a%20b HTTP/1.1 x\u{7F}y\t".utf8) + [0xC3, 0xA9, 0xFF, 0x61]
        sample.withUnsafeBytes { raw in
            for start in 0...raw.count {
                for end in start...raw.count {
                    let slice = raw[start..<end]
                    #expect(HTTPSyntax.allBytes(slice, are: HTTPSyntax.isTargetByte)
                            == slice.allSatisfy(HTTPSyntax.isTargetByte))
                    #expect(HTTPSyntax.firstIndex(of: HTTPSyntax.sp, in: slice) == slice.firstIndex(of: HTTPSyntax.sp))
                    #expect(UTF8Check.isValid(slice) == (String(validating: Array(slice), as: UTF8.self) != nil))
                }
            }
        }
    }

    /// The word-at-a-time lowercasing changes exactly the bytes A-Z of each of the eight positions, for every
    /// byte value in every position.
    @Test func wordLowercasingIsBytewise() {
        for value in 0...255 {
            for position in 0..<8 {
                let word = UInt64(value) << (8 * position) | 0x4161_7A5A_405B_60FF & ~(0xFF << (8 * position))
                var expected: UInt64 = 0
                for index in 0..<8 {
                    expected |= UInt64(HTTPSyntax.lowercased(UInt8(truncatingIfNeeded: word >> (8 * index)))) << (8 * index)
                }
                #expect(HTTPSyntax.lowercased(word: word) == expected, "byte \(value) at \(position)")
            }
        }
    }

    /// Case-insensitive equality of buffers (eight bytes at a time from eight on) against the byte-by-byte
    /// definition: random pairs of every length up to 40, equal up to case or differing in one byte, over bytes
    /// near the letters' edges and non-ASCII ones.
    @Test func bufferEqualityMatchesTheBytewiseDefinition() {
        var random = SplitMix64(seed: 0x5EED_CA5E)
        let alphabet: [UInt8] = [0x40, 0x41, 0x5A, 0x5B, 0x60, 0x61, 0x7A, 0x7B, 0x2D, 0x30, 0xC1, 0xE1, 0xFA, 0x00]
        for _ in 0..<20_000 {
            let count = Int(random.next() % 41)
            let left = (0..<count).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }
            var right = left.map { random.next() % 2 == 0 ? HTTPSyntax.lowercased($0) : $0 }
            if count > 0, random.next() % 2 == 0 {
                right[Int(random.next() % UInt64(count))] = alphabet[Int(random.next() % UInt64(alphabet.count))]
            }
            let expected = left.count == right.count
                && zip(left, right).allSatisfy { HTTPSyntax.lowercased($0) == HTTPSyntax.lowercased($1) }
            let got = left.withUnsafeBufferPointer { l in right.withUnsafeBufferPointer { HTTPSyntax.equalsIgnoringCase(l, $0) } }
            #expect(got == expected, "\(left) vs \(right)")
        }
    }

    /// The word test for a control byte or DEL, for every byte value in every position of a word whose other
    /// bytes are allowed; and the whole-buffer check against the byte-by-byte one for random buffers of every
    /// length up to 40 over bytes at the classes' edges.
    @Test func fieldValueBytesEightAtATime() {
        for value in 0...255 {
            for position in 0..<8 {
                let word = UInt64(value) << (8 * position) | 0x2021_7E80_FF41_2020 & ~(0xFF << (8 * position))
                let expected = value < 0x20 || value == 0x7F
                #expect(HTTPSyntax.hasControlOrDelete(word) == expected, "byte \(value) at \(position)")
            }
        }
        var random = SplitMix64(seed: 0xF1E1D)
        let alphabet: [UInt8] = [0x00, 0x08, 0x09, 0x0A, 0x1F, 0x20, 0x21, 0x7E, 0x7F, 0x80, 0xFF, 0x61, 0x41]
        for _ in 0..<20_000 {
            let count = Int(random.next() % 41)
            // Mostly allowed bytes, so that buffers long enough to take the word path often pass it.
            let bytes = (0..<count).map { _ in
                random.next() % 8 == 0 ? alphabet[Int(random.next() % UInt64(alphabet.count))] : UInt8(0x61)
            }
            let got = bytes.withUnsafeBytes { HTTPSyntax.allFieldValueBytes($0) }
            #expect(got == bytes.allSatisfy(HTTPSyntax.isFieldValueByte), "\(bytes)")
            // Whether all is ASCII comes from the same pass; it is only read for valid values.
            let both = bytes.withUnsafeBytes { HTTPSyntax.fieldValueBytes($0) }
            #expect(both.valid == got, "\(bytes)")
            if both.valid { #expect(both.ascii == bytes.allSatisfy { $0 < 0x80 }, "\(bytes)") }
        }
    }

    /// The first CR or LF, eight bytes at a time, against a byte loop: random buffers of every length up to 40
    /// over bytes around CR and LF (and their borrow neighbours), from every start.
    @Test func firstLineEndMatchesAByteLoop() {
        var random = SplitMix64(seed: 0x0D0A)
        let alphabet: [UInt8] = [0x0D, 0x0A, 0x0B, 0x0C, 0x0E, 0x09, 0x00, 0x01, 0x8D, 0x8A, 0x41, 0x20]
        for _ in 0..<5_000 {
            let count = Int(random.next() % 41)
            let bytes = (0..<count).map { _ in
                random.next() % 6 == 0 ? alphabet[Int(random.next() % UInt64(alphabet.count))] : UInt8(0x61)
            }
            bytes.withUnsafeBytes { raw in
                for start in 0...count {
                    let expected = bytes[start...].firstIndex { $0 == 0x0D || $0 == 0x0A } ?? count
                    #expect(HTTPSyntax.firstLineEnd(raw, from: start) == expected, "\(bytes) from \(start)")
                }
            }
        }
    }

    /// The serializer's checks on a field's bytes agree with byte-by-byte definitions: every name that is
    /// all token characters, every byte string that is all ASCII, at every length and with the odd byte anywhere.
    @Test func tokenAndASCIIChecksMatchAByteLoop() {
        var random = SplitMix64(seed: 0x70CE)
        let tokenSet = Set(Array("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8))
        for _ in 0..<5_000 {
            let count = Int(random.next() % 41)
            let bytes = (0..<count).map { _ in
                random.next() % 8 == 0 ? UInt8(truncatingIfNeeded: random.next()) : UInt8(0x61 + random.next() % 26)
            }
            bytes.withUnsafeBytes { raw in
                #expect(HTTPSyntax.allTokenBytes(raw) == bytes.allSatisfy(tokenSet.contains), "\(bytes)")
                #expect(HTTPSyntax.isASCII(raw) == bytes.allSatisfy { $0 < 0x80 }, "\(bytes)")
            }
        }
    }
}
