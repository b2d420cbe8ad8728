import Testing
@testable import Inspect

@Suite struct SniffBytesTests {
    /// The first match of `needle` starting in `from...(to - needle.count)`, by comparing at every offset.
    static func naiveFind(_ hay: [UInt8], _ needle: [UInt8], from: Int, to: Int?) -> Int? {
        let end = min(to ?? hay.count, hay.count)
        guard !needle.isEmpty, from >= 0, end - from >= needle.count else { return nil }
        for i in from...(end - needle.count) where Array(hay[i..<(i + needle.count)]) == needle { return i }
        return nil
    }

    /// `find` (glibc's memmem) agrees with a compare at every offset, for needles
    /// of one to five bytes, in buffers dense with the needle's first byte and near-misses, for every start and
    /// several ends, including ends past the buffer and ranges shorter than the needle.
    @Test func findMatchesAByteByByteSearch() {
        var rng = SystemRandomNumberGenerator()
        let needles: [(StaticString, [UInt8])] = [
            ("\n", Array("\n".utf8)), ("?>", Array("?>".utf8)), ("-->", Array("-->".utf8)),
            ("PK\u{3}\u{4}", [0x50, 0x4B, 0x03, 0x04]), ("%PDF-", Array("%PDF-".utf8)),
        ]
        let alphabet: [UInt8] = Array("?>-PK%DF\n".utf8) + [0x03, 0x04, 0x00, 0x41]
        for _ in 0..<300 {
            let hay = (0..<Int.random(in: 0...40, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
            hay.withUnsafeBytes { raw in
                let bytes = SniffBytes(raw)
                for (needle, needleBytes) in needles {
                    for from in 0...hay.count {
                        for to in [nil, from, from + 1, from + needleBytes.count, hay.count - 1, hay.count + 3] {
                            #expect(bytes.find(needle, from: from, to: to)
                                    == Self.naiveFind(hay, needleBytes, from: from, to: to),
                                    "\(hay) \(needleBytes) from \(from) to \(String(describing: to))")
                        }
                    }
                }
            }
        }
    }
}
