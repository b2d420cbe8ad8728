// A worker's idle upstream connections: which one a request reuses, and which ones the periodic sweep closes.
// Pure bookkeeping (no descriptors): the worker closes what `take`, `sweep` and `removeAll` hand back.
//
//   put ──► [ oldest … newest ] ──► take: the oldest one for the server
//                 │
//   sweep ────────┴──► idle past the timeout; once per idle timeout, half of the surplus (the fewest idle
//                      in that window: connections the load never needed in as long as one may stay idle)
//
// Oldest first spreads requests over every pooled connection, and so over the upstream's workers or threads,
// which the kernel gave those connections when it accepted them. Newest first (nginx's order) sent a worker's
// requests to the few connections freed last; behind an upstream with two threads, one thread served 1.23×
// the other's requests and the two-worker p99 was 1.26× HAProxy's, against 0.98× oldest first
// (docs/performance.md, twenty-fourth session). Newest first let an unneeded connection expire by itself;
// oldest first keeps every connection in use, so the sweep closes what the load has not needed for an idle
// timeout instead. A connection used once per timeout or more often stays, as it did newest first.

/// What the pool needs to know of a connection.
protocol PooledConnection: AnyObject {
    /// The upstream group and server the connection goes to.
    var group: Int { get }
    var server: Int { get }
}

/// Idle connections, oldest first, with the fewest there were since the last sweep.
struct IdlePool<Connection: PooledConnection> {
    private struct Entry {
        let connection: Connection
        /// When it became idle (`EventLoop.now()` nanoseconds).
        let since: UInt64
    }

    /// Oldest first: `put` appends, so `since` never decreases along the list.
    private var entries: [Entry] = []
    /// The fewest idle connections since `windowStart`: that many were never needed in the window.
    private var lowWater = 0
    /// When the current surplus window began (nil until the first sweep).
    private var windowStart: UInt64?

    init() {}

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }
    /// The idle connections, oldest first.
    var connections: [Connection] { entries.map(\.connection) }

    /// Parks `connection`, idle since `now`, as the newest. The caller keeps the pool within its bound.
    mutating func put(_ connection: Connection, now: UInt64) {
        entries.append(Entry(connection: connection, since: max(now, entries.last?.since ?? 0)))
    }

    /// Takes the oldest idle connection to `server` of `group`, or nil when there is none.
    mutating func take(group: Int, server: Int) -> Connection? {
        guard let i = entries.firstIndex(where: { $0.connection.group == group && $0.connection.server == server })
        else { return nil }
        let connection = entries.remove(at: i).connection
        lowWater = min(lowWater, entries.count)
        return connection
    }

    /// Forgets `connection` (the upstream closed it); false when it was not here.
    @discardableResult
    mutating func remove(_ connection: Connection) -> Bool {
        guard let i = entries.firstIndex(where: { $0.connection === connection }) else { return false }
        entries.remove(at: i)
        lowWater = min(lowWater, entries.count)
        return true
    }

    /// Removes and returns, oldest first, the connections to close at a sweep at `now`: those idle longer than
    /// `idleLimit` nanoseconds, and, once a window of `idleLimit` has passed, half (rounded up) of those the load
    /// did not need in it (the fewest idle in the window, less the expired ones), which starts the next window.
    mutating func sweep(now: UInt64, idleLimit: UInt64) -> [Connection] {
        let expired = entries.prefix { now >= $0.since && now - $0.since > idleLimit }.count
        var close = expired
        let start = windowStart ?? now
        if now >= start && now - start >= idleLimit {
            close += (max(0, min(lowWater, entries.count) - expired) + 1) / 2
            windowStart = now
            lowWater = entries.count - close
        } else {
            if windowStart == nil { windowStart = now; lowWater = entries.count }
            lowWater = min(lowWater, entries.count - close)
        }
        let closed = entries.prefix(close).map(\.connection)
        entries.removeFirst(close)
        return closed
    }

    /// Removes and returns every idle connection (drain, shutdown).
    mutating func removeAll() -> [Connection] {
        let all = entries.map(\.connection)
        entries.removeAll()
        lowWater = 0
        return all
    }
}
