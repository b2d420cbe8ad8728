import Glibc

/// The process's open-file limit (RLIMIT_NOFILE). A shell's soft limit is often 1,024 while the hard limit is far
/// higher: a proxy holding a client and an upstream descriptor per connection would run out at about 500
/// connections. `raise(toAtLeast:)` lifts the soft limit towards what is needed, never above the hard limit and
/// never lowering it, as Go's runtime and nginx's `worker_rlimit_nofile` do.
public enum DescriptorLimit {
    /// The soft limit after `raise`, and the hard limit.
    public struct Outcome: Equatable, Sendable {
        public var now: UInt64
        public var hard: UInt64
        /// Whether the soft limit now allows `needed` descriptors.
        public func allows(_ needed: UInt64) -> Bool { now >= needed }
    }

    /// The soft and hard limits, nil if they cannot be read.
    static func current() -> (soft: UInt64, hard: UInt64)? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }

    /// Raises the soft limit to `needed`, or to the hard limit when that is lower; a soft limit already at
    /// least `needed` is left as it is. Nil if the limits cannot be read.
    public static func raise(toAtLeast needed: UInt64) -> Outcome? {
        guard let (soft, hard) = current() else { return nil }
        let target = Swift.min(needed, hard)
        guard target > soft else { return Outcome(now: soft, hard: hard) }
        var limit = rlimit(rlim_cur: rlim_t(target), rlim_max: rlim_t(hard))
        guard setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
            return Outcome(now: soft, hard: hard)
        }
        return Outcome(now: target, hard: hard)
    }
}
