/// SplitMix64 (Steele, Lea and Flood, 2014): a small deterministic generator, so that random, mutation and
/// property tests replay identically from their seed. One copy for every test module.
public struct SplitMix64: RandomNumberGenerator {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A value in `0..<n` (0 when `n` is not positive).
    public mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }
}

/// The shorter name some suites use.
public typealias SplitMix = SplitMix64
