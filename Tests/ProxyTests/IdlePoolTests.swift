import TestRandom
import Testing
@testable import Proxy

// The idle upstream pool: oldest first, expiry after the idle timeout, and the surplus the load did not need in a
// window of one idle timeout closed half at a time.

private final class Conn: PooledConnection {
    let group: Int
    let server: Int
    let id: Int
    init(_ id: Int, group: Int = 0, server: Int = 0) {
        self.id = id
        self.group = group
        self.server = server
    }
}

private let second: UInt64 = 1_000_000_000

@Suite struct IdlePoolTests {
    @Test func reusesTheOldestConnectionFirst() {
        var pool = IdlePool<Conn>()
        for i in 0..<4 { pool.put(Conn(i), now: UInt64(i)) }
        do { let got = pool.take(group: 0, server: 0); #expect(got?.id == 0) }
        do { let got = pool.take(group: 0, server: 0); #expect(got?.id == 1) }
        pool.put(Conn(9), now: 10)
        #expect(pool.connections.map(\.id) == [2, 3, 9])
        do { let got = pool.take(group: 0, server: 0); #expect(got?.id == 2) }
    }

    @Test func takesOnlyAConnectionToTheServerAsked() {
        var pool = IdlePool<Conn>()
        pool.put(Conn(0, group: 0, server: 1), now: 0)
        pool.put(Conn(1, group: 1, server: 0), now: 1)
        pool.put(Conn(2, group: 0, server: 0), now: 2)
        pool.put(Conn(3, group: 0, server: 1), now: 3)
        do { let got = pool.take(group: 0, server: 0); #expect(got?.id == 2) }
        do { let got = pool.take(group: 0, server: 0); #expect(got == nil) }
        do { let got = pool.take(group: 0, server: 1); #expect(got?.id == 0) }
        do { let got = pool.take(group: 1, server: 0); #expect(got?.id == 1) }
        do { let got = pool.take(group: 2, server: 0); #expect(got == nil) }
        #expect(pool.connections.map(\.id) == [3])
    }

    @Test func removesAConnectionTheUpstreamClosed() {
        var pool = IdlePool<Conn>()
        let conns = (0..<3).map { Conn($0) }
        for c in conns { pool.put(c, now: 0) }
        do { let got = pool.remove(conns[1]); #expect(got) }
        do { let got = pool.remove(conns[1]); #expect(!got) }
        #expect(pool.connections.map(\.id) == [0, 2])
    }

    @Test func expiresConnectionsIdleLongerThanTheLimit() {
        var pool = IdlePool<Conn>()
        pool.put(Conn(0), now: 0)
        pool.put(Conn(1), now: 1 * second)
        pool.put(Conn(2), now: 2 * second)
        // At 2.5 s with a 1.5 s limit, only the connection idle since 0 is past it (the one since 1 s is at it);
        // 0.1 s later that one is too.
        let closed = pool.sweep(now: 2 * second + second / 2, idleLimit: 3 * second / 2)
        #expect(closed.map(\.id) == [0])
        let later = pool.sweep(now: 2 * second + 6 * second / 10, idleLimit: 3 * second / 2)
        #expect(later.map(\.id) == [1])
        #expect(pool.connections.map(\.id) == [2])
    }

    /// A connection used about once per idle timeout is never surplus: each window takes it once.
    @Test func keepsAConnectionTheLoadUsesOncePerTimeout() {
        var pool = IdlePool<Conn>()
        let limit = 3 * second / 2
        let c = Conn(0)
        pool.put(c, now: 0)
        var now: UInt64 = 0
        for step in 1...40 {
            now = UInt64(step) * limit / 4   // a sweep every quarter of the timeout, as the worker runs them
            let closed = pool.sweep(now: now, idleLimit: limit)
            #expect(closed.isEmpty, "swept at step \(step)")
            if step % 4 == 2 {   // one request per timeout, between sweeps
                do { let got = pool.take(group: 0, server: 0); #expect(got === c) }
                pool.put(c, now: now + 1)
            }
        }
        #expect(pool.count == 1)
    }

    /// After a burst, a light load that needs one connection at a time uses them all in turn (so none expires);
    /// the surplus rule halves the pool once per window until it is what the load needs.
    @Test func shrinksToWhatTheLoadNeedsAfterABurst() {
        var pool = IdlePool<Conn>()
        let limit = 3 * second / 2
        for i in 0..<64 { pool.put(Conn(i), now: 0) }
        var sizes: [Int] = []
        var now: UInt64 = 0
        for step in 1...40 {
            // 100 requests per quarter timeout, one at a time.
            for r in 0..<100 {
                let t = now + UInt64(r) * (limit / 400)
                guard let c = pool.take(group: 0, server: 0) else { Issue.record("no idle connection"); return }
                pool.put(c, now: t + 1)
            }
            now = UInt64(step) * limit / 4
            _ = pool.sweep(now: now, idleLimit: limit)
            if step % 4 == 1 && step > 1 { sizes.append(pool.count) }   // each window ends at such a sweep
        }
        // Halved once per window (64 -> 32 -> 16 -> 8 -> 4 -> 2 -> 1), never below the one the load needs.
        #expect(sizes.prefix(6) == [32, 16, 8, 4, 2, 1])
        #expect(sizes.allSatisfy { $0 >= 1 })
        #expect(pool.count == 1)
    }

    /// Property: against a model (a list in arrival order), over random puts, takes, removals and sweeps, the
    /// pool takes the model's oldest matching connection, and a sweep closes only a prefix of the oldest, never
    /// a connection idle for less than the limit unless the window saw that many idle throughout.
    @Test func agreesWithAModelOverRandomOperations() {
        var rng = SplitMix64(seed: 0x5eed_1d1e)
        for _ in 0..<200 {
            var pool = IdlePool<Conn>()
            var model: [(conn: Conn, since: UInt64)] = []
            var now: UInt64 = 0
            var next = 0
            var windowLow = Int.max
            var windowStart: UInt64?
            let limit = UInt64(rng.below(4) + 1) * second / 4
            for _ in 0..<300 {
                now += UInt64(rng.below(200)) * 1_000_000
                switch rng.below(10) {
                case 0...3:
                    let c = Conn(next, group: rng.below(2), server: rng.below(2))
                    next += 1
                    pool.put(c, now: now)
                    model.append((c, now))
                case 4...6:
                    let g = rng.below(2), s = rng.below(2)
                    let want = model.firstIndex { $0.conn.group == g && $0.conn.server == s }
                    let got = pool.take(group: g, server: s)
                    #expect(got === want.map { model[$0].conn })
                    if let want { model.remove(at: want) }
                    windowLow = min(windowLow, model.count)
                case 7:
                    guard !model.isEmpty else { continue }
                    let i = rng.below(model.count)
                    do { let got = pool.remove(model[i].conn); #expect(got) }
                    model.remove(at: i)
                    windowLow = min(windowLow, model.count)
                default:
                    let closed = pool.sweep(now: now, idleLimit: limit)
                    // A prefix of the oldest.
                    #expect(closed.map(\.id) == model.prefix(closed.count).map(\.conn.id))
                    let expired = model.prefix { now - $0.since > limit }.count
                    #expect(closed.count >= expired)
                    let windowEnded = windowStart.map { now - $0 >= limit } ?? (limit == 0)
                    if closed.count > expired {
                        // Only at the end of a window, and at most half (rounded up) of what stayed idle in it.
                        #expect(windowEnded)
                        let low = min(windowLow, model.count)
                        #expect(closed.count - expired <= (max(0, low - expired) + 1) / 2)
                    }
                    model.removeFirst(closed.count)
                    if windowStart == nil || windowEnded {
                        windowStart = now
                        windowLow = model.count
                    } else {
                        windowLow = min(windowLow, model.count)
                    }
                }
                #expect(pool.connections.map(\.id) == model.map(\.conn.id))
            }
        }
    }
}
