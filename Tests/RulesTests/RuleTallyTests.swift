import TestRandom
import Testing
@testable import Rules

/// `RuleTally` (the first rule in place, the rest in a list) against a dictionary, on seeded random sequences.
@Suite struct RuleTallyTests {
    @Test func countsAsADictionaryDoes() {
        let boxes = (0..<6).map { _ in Shared(0) }
        var generator = SplitMix64(seed: 0x7A11_E5)
        for _ in 0..<500 {
            var tally = RuleTally()
            var reference: [ObjectIdentifier: Int] = [:]
            for _ in 0..<Int.random(in: 0...20, using: &generator) {
                let rule = ObjectIdentifier(boxes[Int.random(in: 0..<boxes.count, using: &generator)])
                if Bool.random(using: &generator) {
                    reference[rule, default: 0] += 1
                    #expect(tally.increment(rule) == reference[rule])
                } else {
                    tally.insert(rule)
                    reference[rule] = max(reference[rule] ?? 0, 1)
                }
                for box in boxes {
                    #expect(tally.contains(ObjectIdentifier(box)) == (reference[ObjectIdentifier(box)] != nil))
                }
            }
        }
    }
}
