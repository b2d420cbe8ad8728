import CLinux
import Testing

/// `cl_equals_lower` must agree with a byte-by-byte reference (A-Z lowercased in the text, every other byte as it
/// is) for every length across the eight-byte steps, with the bytes around A-Z and their high-bit twins (0xC1 has
/// the low seven bits of "A" but is no letter), in every position.
@Suite struct EqualsLowerTests {
    private static func reference(_ text: [UInt8], _ lower: [UInt8]) -> Bool {
        text.count == lower.count && zip(text, lower).allSatisfy { (t, l) in
            (t >= 0x41 && t <= 0x5A ? t | 0x20 : t) == l
        }
    }

    @Test func agreesWithTheByteByByteReference() {
        let edges: [UInt8] = [0x40, 0x41, 0x5A, 0x5B, 0x60, 0x61, 0x7A, 0x7B, 0xC1, 0xDA, 0xE1, 0x00, 0x7F, 0xFF, 0x2D]
        var state: UInt64 = 0x5EED
        func next() -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(state >> 33)
        }
        var agreed = 0
        for length in 0...33 {
            for _ in 0..<400 {
                let text = (0..<length).map { _ in edges[next() % edges.count] }
                // The lowercase side: often the reference lowercasing of the text (so that they match), with one
                // byte changed at times.
                var lower = text.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
                if length > 0 && next() % 2 == 0 { lower[next() % length] = edges[next() % edges.count] }
                let ours = text.withUnsafeBytes { t in
                    lower.withUnsafeBytes { l in cl_equals_lower(t.baseAddress, l.baseAddress, length) != 0 }
                }
                #expect(ours == Self.reference(text, lower), "\(text) vs \(lower)")
                if ours { agreed += 1 }
            }
        }
        #expect(agreed > 1000, "too few matching pairs to exercise the equal case")
    }
}
