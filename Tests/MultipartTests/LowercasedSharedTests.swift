import Testing

@testable import Multipart
import TestRandom

/// `ASCII.lowercasedShared` must equal `ASCII.lowercased` for every input, and hand out the shared array (no new
/// storage) for exactly the names in `sharedLowercase`, in any case.
@Suite struct LowercasedSharedTests {
    private static func shared(_ text: [UInt8]) -> [UInt8] {
        text.withUnsafeBytes { ASCII.lowercasedShared($0[...]) }
    }

    @Test func listedNamesInAnyCaseGetTheSharedArray() {
        var rng = SplitMix64(seed: 7)
        for entry in ASCII.sharedLowercase {
            for _ in 0..<20 {
                let mixed = entry.map { rng.below(2) == 0 && $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }
                let result = Self.shared(mixed)
                #expect(result == entry)
                let same = result.withUnsafeBufferPointer { r in entry.withUnsafeBufferPointer { $0.baseAddress == r.baseAddress } }
                #expect(same, "\(String(decoding: mixed, as: UTF8.self)) did not get the shared array")
            }
        }
    }

    @Test func everyInputLowercasesAsTheReference() {
        var rng = SplitMix64(seed: 11)
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ*-/.".utf8) + [0xC1, 0xDA, 0x40, 0x5B]
        for _ in 0..<5_000 {
            var text: [UInt8]
            if rng.below(3) == 0 {
                // A listed name with one byte changed: same length, so the switch's case is tried and must refuse.
                text = ASCII.sharedLowercase[rng.below(ASCII.sharedLowercase.count)]
                text[rng.below(text.count)] = alphabet[rng.below(alphabet.count)]
            } else {
                text = (0..<rng.below(26)).map { _ in alphabet[rng.below(alphabet.count)] }
            }
            #expect(Self.shared(text) == ASCII.lowercased(text), "\(text)")
        }
    }
}
