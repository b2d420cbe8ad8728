// Small pure decisions of the connection machine, each tested as a table (Tests/ProxyTests).

/// When an upstream connection may go back to the pool after an exchange. Pure, so it is tested as a table.
enum UpstreamReuse {
    /// True only if the response allows it, the whole request went up, the response ended exactly at the end
    /// of what was read, neither direction failed, and the worker is not draining.
    static func allowed(responseKeepAlive: Bool, requestFullySent: Bool, unreadResponseBytes: Int,
                        readEnded: Bool, writeFailed: Bool, draining: Bool) -> Bool {
        responseKeepAlive && requestFullySent && unreadResponseBytes == 0 && !readEnded && !writeFailed && !draining
    }
}

/// The minimum request-body rate (slow-loris on the body).
enum BodyRate {
    /// Whether `bytes` received over `readingNanos` of wanting to read is below `minRate` bytes per second,
    /// once `grace` seconds of reading have passed. A `minRate` of 0 turns the check off.
    static func tooSlow(bytes: UInt64, readingNanos: UInt64, minRate: Int, grace: Double) -> Bool {
        guard minRate > 0, Double(readingNanos) >= grace * 1e9, readingNanos > 0 else { return false }
        let rate = Double(bytes) / (Double(readingNanos) / 1e9)
        return rate < Double(minRate)
    }
}
