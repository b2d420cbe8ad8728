/// One worker's view of an upstream group: which server takes the next request, how many requests each has in
/// flight, and passive health (a server that failed `maxFails` requests in a row is skipped for `failTimeout`).
///
/// Pure and per worker, like nginx's upstream state without a shared zone: two workers may each send one request
/// to a server the other already marked down. Times are the loop clock in nanoseconds.
struct UpstreamBalancer {
    let group: ProxyConfiguration.UpstreamGroup
    /// Requests in flight per server (least-conn).
    private(set) var active: [Int]
    /// Consecutive failures per server.
    private(set) var fails: [Int]
    /// Per server: requests, failures, the latest failure, and `downUntil` (skipped until then; 0: up), which is
    /// what /upstreams and /metrics report.
    private(set) var stats: [UpstreamServerStats]
    /// Smooth weighted round-robin state (nginx's algorithm: add each weight, take the largest, subtract the total).
    private var current: [Int]

    init(group: ProxyConfiguration.UpstreamGroup) {
        self.group = group
        let n = group.servers.count
        active = Array(repeating: 0, count: n)
        fails = Array(repeating: 0, count: n)
        stats = Array(repeating: UpstreamServerStats(), count: n)
        current = Array(repeating: 0, count: n)
    }

    /// The server for the next attempt of a request that already tried `tried`; nil when every server was tried.
    /// Servers that are down are skipped unless every untried server is down: then they are tried anyway, so a
    /// group whose servers all failed once still serves when they come back. The pick counts as a request to
    /// that server.
    mutating func pick(excluding tried: [Int], now: UInt64) -> Int? {
        guard let server = choose(excluding: tried, now: now) else { return nil }
        stats[server].requests += 1
        return server
    }

    private mutating func choose(excluding tried: [Int], now: UInt64) -> Int? {
        // One server (the usual group): the only candidate whether it is marked down or not, as below, and the
        // round-robin weights cancel out. No candidate arrays are built for it.
        if group.servers.count == 1 { return tried.contains(0) ? nil : 0 }
        let untried = group.servers.indices.filter { !tried.contains($0) }
        guard !untried.isEmpty else { return nil }
        let up = untried.filter { stats[$0].downUntil <= now }
        var candidates = up.isEmpty ? untried : up
        if group.balance == .leastConnections, candidates.count > 1 {
            // Fewest in flight relative to weight: a/wa < b/wb  ⇔  a·wb < b·wa.
            let weights = group.servers.map(\.weight)
            var best = candidates[0]
            for i in candidates where active[i] * weights[best] < active[best] * weights[i] { best = i }
            candidates = candidates.filter { [active] in active[$0] * weights[best] == active[best] * weights[$0] }
        }
        return roundRobin(candidates)
    }

    private mutating func roundRobin(_ candidates: [Int]) -> Int {
        var total = 0
        var best = candidates[0]
        for i in candidates {
            let w = group.servers[i].weight
            current[i] += w
            total += w
            if current[i] > current[best] { best = i }
        }
        current[best] -= total
        return best
    }

    /// A request started on `server` (least-conn counts it until `finished`).
    mutating func started(_ server: Int) {
        guard active.indices.contains(server) else { return }
        active[server] += 1
    }

    mutating func finished(_ server: Int) {
        guard active.indices.contains(server) else { return }
        active[server] = max(0, active[server] - 1)
    }

    /// What a request learnt about `server`: nil for a response head, else the failure. A success clears its
    /// failures; the `maxFails`-th failure in a row marks it down for `failTimeout` seconds. Returns true when
    /// this report marked it down.
    mutating func report(_ server: Int, failure: UpstreamFailure?, now: UInt64) -> Bool {
        guard fails.indices.contains(server) else { return false }
        guard let failure else {
            fails[server] = 0
            stats[server].downUntil = 0
            stats[server].lastSuccessAt = now
            return false
        }
        stats[server].failures += 1
        stats[server].lastFailure = failure
        stats[server].lastFailureAt = now
        fails[server] += 1
        guard group.maxFails > 0, fails[server] >= group.maxFails else { return false }
        fails[server] = 0
        stats[server].downSince = now
        stats[server].downUntil = now &+ UInt64(max(0, min(group.failTimeout, 86_400)) * 1e9)
        return true
    }

    func isDown(_ server: Int, now: UInt64) -> Bool { stats.indices.contains(server) && stats[server].downUntil > now }
}
