import Multipart
import TestRandom
import Testing

/// `MultipartAnomalies` iterates its set bits; what it yields must be what filtering `allCases` gives: the set's
/// flags in declaration order, each once.
@Suite struct AnomalySetTests {
    @Test func iterationYieldsTheFlagsInDeclarationOrder() {
        var rng = SplitMix64(seed: 0xA40_3A11)
        let all = MultipartAnomaly.allCases
        var sizes = Set<Int>()
        for round in 0..<5_000 {
            var set = MultipartAnomalies()
            // The empty set, the full set, and random subsets of every density.
            let density = round == 0 ? 0 : round == 1 ? 100 : rng.below(101)
            for flag in all where rng.below(100) < density { set.insert(flag) }
            let expected = all.filter { set.contains($0) }
            #expect(Array(set) == expected)
            #expect(set.names == expected.map(\.name))
            #expect(MultipartAnomalies(set).bits == set.bits)
            sizes.insert(expected.count)
        }
        #expect(sizes.contains(0) && sizes.contains(all.count))
    }

    @Test func theLastFlagsBitIsRead() {
        let last = MultipartAnomaly.allCases[MultipartAnomaly.allCases.count - 1]
        var set = MultipartAnomalies()
        set.insert(last)
        #expect(Array(set) == [last])
    }
}
