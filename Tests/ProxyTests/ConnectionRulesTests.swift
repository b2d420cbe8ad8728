import Testing
@testable import Proxy

// The pure decisions the connection classes take: when an upstream connection may be pooled again, and when
// a request body is too slow. Each is a table over every combination of its inputs.

@Suite struct UpstreamReuseTests {
    @Test func onlyACleanKeepAliveExchangeIsPooled() {
        for bits in 0..<64 {
            let keepAlive = bits & 1 != 0, fullySent = bits & 2 != 0, unread = bits & 4 != 0
            let readEnded = bits & 8 != 0, writeFailed = bits & 16 != 0, draining = bits & 32 != 0
            let allowed = UpstreamReuse.allowed(
                responseKeepAlive: keepAlive, requestFullySent: fullySent, unreadResponseBytes: unread ? 3 : 0,
                readEnded: readEnded, writeFailed: writeFailed, draining: draining)
            // Exactly one combination of the six may reuse the connection.
            #expect(allowed == (bits == 0b000011), "combination \(bits)")
        }
    }
}

@Suite struct BodyRateTests {
    @Test(arguments: [
        // bytes, seconds of reading, min rate, grace, too slow?
        (UInt64(10), 1.0, 1024, 10.0, false),        // inside the grace period
        (UInt64(100), 12.0, 1024, 10.0, true),       // 8 B/s after the grace period
        (UInt64(12_288), 12.0, 1024, 10.0, false),   // exactly 1 KiB/s
        (UInt64(12_287), 12.0, 1024, 10.0, true),    // one byte short of it
        (UInt64(0), 100.0, 0, 10.0, false),          // turned off
        (UInt64(0), 0.0, 1024, 0.0, false),          // no reading time yet
    ])
    func minimumRate(bytes: UInt64, seconds: Double, minRate: Int, grace: Double, expected: Bool) {
        let nanos = UInt64(seconds * 1e9)
        #expect(BodyRate.tooSlow(bytes: bytes, readingNanos: nanos, minRate: minRate, grace: grace) == expected)
    }
}
