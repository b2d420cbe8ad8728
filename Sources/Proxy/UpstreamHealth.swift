import Audit

// Upstream health for /upstreams and /metrics: what passive health (UpstreamBalancer) learnt about each server.
//
//   worker thread                                       control loop
//   UpstreamBalancer.pick / report ──► its            GET /upstreams or /metrics
//   [UpstreamServerStats] (this thread only)          ──► each worker: a copy of its stats (with its metrics)
//                                                     merge per server ──► UpstreamHealth(now) ──► JSON / text
//
// Health is not part of /readyz unless a group asks for it (`readiness required;`): one application's outage
// must not take the whole proxy out of a load balancer.

/// Why an attempt on an upstream server failed, for /upstreams.
public struct UpstreamFailure: Sendable, Equatable {
    /// The error kind a client gets for it (`upstream_unreachable`, `upstream_connect_timeout`,
    /// `upstream_tls_failed`, `bad_upstream_response`, `upstream_closed`, `upstream_timeout`), also when the
    /// request then moved on to another server.
    public var reason: String
    /// The cause as the failure line logs it (`connect(fd 13): Connection refused (errno 111)`), when there is one.
    public var error: String?

    /// A failure of kind `reason`.
    public init(_ reason: String, error: String? = nil) {
        self.reason = reason
        self.error = error
    }
}

/// One worker's counts for one upstream server; workers' copies merge into the process's. Times are the loop
/// clock (monotonic nanoseconds, the same clock on every thread); 0 means never.
public struct UpstreamServerStats: Sendable, Equatable {
    /// Requests sent to the server or tried on it: each request counts once per server it went to, so one
    /// retried on the next server after a refused connect counts on both.
    public var requests = 0
    /// Attempts that failed (what passive health counts: refused or timed-out connects, a close, garbage or
    /// silence before the response head).
    public var failures = 0
    /// The latest failure and when it happened.
    public var lastFailure: UpstreamFailure?
    public var lastFailureAt: UInt64 = 0
    /// The latest response head from the server.
    public var lastSuccessAt: UInt64 = 0
    /// When passive health last marked the server down, and until when it is skipped.
    public var downSince: UInt64 = 0
    public var downUntil: UInt64 = 0

    /// No request yet.
    public init() {}

    /// Down while a mark-down is running that no success (in any worker) came after.
    public func isUp(now: UInt64) -> Bool { !(downUntil > now && downSince > lastSuccessAt) }

    /// Adds another worker's counts: sums, the latest failure and success, and the latest mark-down (every
    /// worker marks a server down for the same `fail-timeout`, so the latest ends last).
    public mutating func merge(_ other: UpstreamServerStats) {
        requests += other.requests
        failures += other.failures
        if other.lastFailureAt > lastFailureAt {
            lastFailure = other.lastFailure
            lastFailureAt = other.lastFailureAt
        }
        lastSuccessAt = max(lastSuccessAt, other.lastSuccessAt)
        if other.downUntil > downUntil {
            downSince = other.downSince
            downUntil = other.downUntil
        }
    }

    /// Merges per-group, per-server tables (`[group][server]`) of the same configuration; an empty table takes
    /// `other` whole.
    public static func merge(_ table: inout [[UpstreamServerStats]], _ other: [[UpstreamServerStats]]) {
        guard !table.isEmpty else {
            table = other
            return
        }
        for g in other.indices where table.indices.contains(g) {
            for s in other[g].indices where table[g].indices.contains(s) { table[g][s].merge(other[g][s]) }
        }
    }
}

/// The upstream groups as /upstreams and /metrics report them: configuration and merged counts at one instant.
public struct UpstreamHealth: Sendable, Equatable {
    /// One server of a group.
    public struct Server: Sendable, Equatable {
        /// `host:port`, as configured.
        public var server: String
        /// Not marked down by passive health.
        public var up: Bool
        public var requests: Int
        public var failures: Int
        /// The latest failure and its wall-clock time.
        public var lastFailure: UpstreamFailure?
        public var lastFailureAt: AuditTimestamp?
    }

    /// One group.
    public struct Group: Sendable, Equatable {
        public var name: String
        /// The default group (routes without `upstream NAME;`).
        public var isDefault: Bool
        public var readiness: ProxyConfiguration.UpstreamGroup.Readiness
        public var servers: [Server]
        /// A group is up while one of its servers is.
        public var up: Bool { servers.contains { $0.up } }
    }

    public var groups: [Group] = []

    /// No groups.
    public init() {}

    /// The groups of `config` with the workers' merged `stats` (`[group][server]`; missing entries count as
    /// none). `now` is the loop clock and `wallClock` the wall-clock time at the same instant, to date failures.
    public init(groups config: [ProxyConfiguration.UpstreamGroup], stats: [[UpstreamServerStats]], now: UInt64,
                wallClock: AuditTimestamp) {
        groups = config.enumerated().map { g, group in
            let servers = group.servers.enumerated().map { s, server in
                let counts = stats.indices.contains(g) && stats[g].indices.contains(s)
                    ? stats[g][s] : UpstreamServerStats()
                let at = counts.lastFailure == nil ? nil : AuditTimestamp(
                    millisecondsSinceEpoch: wallClock.millisecondsSinceEpoch
                        - Int64(clamping: (now &- min(now, counts.lastFailureAt)) / 1_000_000))
                return Server(server: server.upstream.authority, up: counts.isUp(now: now), requests: counts.requests,
                              failures: counts.failures, lastFailure: counts.lastFailure, lastFailureAt: at)
            }
            return Group(name: group.name, isDefault: g == 0, readiness: group.readiness, servers: servers)
        }
    }

    /// The /upstreams document: `{"groups":[{"name":…,"default":…,"readiness":…,"up":…,"servers":[{"server":…,
    /// "up":…,"requests":…,"failures":…,"last_failure":null|{"reason":…,"error":…,"at":…}}]}]}`.
    public var json: String {
        let items = groups.map { group in
            let servers = group.servers.map { s in
                var failure = "null"
                if let f = s.lastFailure {
                    failure = "{\"reason\":\(JSONText.quote(f.reason)),\"error\":"
                        + (f.error.map(JSONText.quote) ?? "null")
                        + ",\"at\":" + (s.lastFailureAt.map { JSONText.quote($0.rfc3339) } ?? "null") + "}"
                }
                return "{\"server\":\(JSONText.quote(s.server)),\"up\":\(s.up),\"requests\":\(s.requests),"
                    + "\"failures\":\(s.failures),\"last_failure\":\(failure)}"
            }
            return "{\"name\":\(JSONText.quote(group.name)),\"default\":\(group.isDefault),"
                + "\"readiness\":\"\(group.readiness.rawValue)\",\"up\":\(group.up),"
                + "\"servers\":[\(servers.joined(separator: ","))]}"
        }
        return "{\"groups\":[\(items.joined(separator: ","))]}"
    }
}
