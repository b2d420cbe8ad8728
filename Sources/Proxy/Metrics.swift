import Audit
import Quarantine

// Metrics for the admin listener's /metrics, derived from the audit record of each request, so metrics and the
// audit log agree by construction.
//
//   worker thread (one per loop)                          control loop (main thread)
//   .requestEnded(record) ──► worker.metrics.record()     GET /metrics
//   plain counters, this thread only                      ──execute──► each worker: copy its RequestMetrics
//                                                         ◄──execute── the copy, back to the control loop
//                                                         merge all copies + gauges ──► MetricsSnapshot ──► text
//
// Nothing on the request path takes a lock or touches an atomic for metrics: a scrape costs each worker one copy
// of its counters between two events.

/// Per-request counters owned by one worker and touched only on its loop thread; merged on scrape.
public struct RequestMetrics: Sendable, Equatable {
    /// The labels of `formwall_requests_total`.
    public struct RequestKey: Hashable, Sendable, Comparable {
        /// The matched route, or "" when no route matched (the audit record's `route` is null).
        public var route: String
        /// The audit decision (`allow`, `reject`, ...).
        public var decision: String
        /// The status sent to the client.
        public var status: Int

        /// Creates a key.
        public init(route: String, decision: String, status: Int) {
            self.route = route
            self.decision = decision
            self.status = status
        }

        public static func < (a: RequestKey, b: RequestKey) -> Bool {
            (a.route, a.decision, a.status) < (b.route, b.decision, b.status)
        }
    }

    /// Requests by route, decision and status.
    public var requests: [RequestKey: Int] = [:]
    /// Body bytes received from clients (audit `bytes_in`).
    public var clientBytes = 0
    /// Body bytes sent upstream (audit `bytes_upstream`).
    public var upstreamBytes = 0
    /// Multipart (or urlencoded) parts seen.
    public var parts = 0
    /// Parts with a filename.
    public var files = 0
    /// Violations by kind.
    public var violations: [String: Int] = [:]
    /// Parser anomaly flags by name.
    public var anomalies: [String: Int] = [:]
    /// Parts whose audit action is `quarantine`.
    public var quarantineItems = 0
    /// Their sizes.
    public var quarantineBytes = 0
    /// Requests that involved the upstream and ended with decision `error`, by upstream server (`host:port`).
    public var upstreamErrors: [String: Int] = [:]
    /// TLS handshakes completed on client connections.
    public var tlsHandshakes = 0
    /// TLS handshakes that failed, by reason (`plain_http`, `handshake_failed`, `client_certificate`, `timeout`,
    /// `protocol_error`).
    public var tlsHandshakeFailures: [String: Int] = [:]
    /// What the connection limit (`--max-connections`) did: idle connections closed to admit new ones, and
    /// times accepting paused because every connection was busy.
    public struct ConnectionLimit: Sendable, Equatable {
        public var closedIdle = 0
        public var paused = 0
    }
    public var connectionLimit = ConnectionLimit()
    /// Event-log lines left out by the rate limit (at most one line per key per second per worker), by `msg`.
    public var logSuppressed: [String: Int] = [:]
    /// Whole-request durations, seconds.
    public var requestDuration = Histogram(bounds: Histogram.durationBounds)
    /// Time waiting for the upstream, seconds, for requests that contacted it.
    public var upstreamDuration = Histogram(bounds: Histogram.durationBounds)
    /// Passive health counts per upstream group and server (`[group][server]`): not from the audit record but
    /// from the worker's balancers, copied in with the rest on a scrape.
    public var upstreamServers: [[UpstreamServerStats]] = []
    /// The split of the upstream's time (audit `upstream_connect_ms`, `upstream_header_ms`,
    /// `upstream_response_ms`) and the client's body time (`client_body_ms`), seconds, each for the records that
    /// have it: a slow application shows in `header`, a slow client in `clientBody`.
    public struct Timing: Sendable, Equatable {
        public var connect = Histogram(bounds: Histogram.durationBounds)
        public var header = Histogram(bounds: Histogram.durationBounds)
        public var response = Histogram(bounds: Histogram.durationBounds)
        public var clientBody = Histogram(bounds: Histogram.durationBounds)

        /// Observes a record's times.
        mutating func record(_ r: AuditRecord) {
            if let ms = r.upstreamConnectMs { connect.observe(ms / 1000) }
            if let ms = r.upstreamHeaderMs { header.observe(ms / 1000) }
            if let ms = r.upstreamResponseMs { response.observe(ms / 1000) }
            if let ms = r.clientBodyMs { clientBody.observe(ms / 1000) }
        }

        /// Adds another worker's histograms.
        mutating func merge(_ other: Timing) {
            connect.merge(other.connect)
            header.merge(other.header)
            response.merge(other.response)
            clientBody.merge(other.clientBody)
        }
    }
    public var timing = Timing()

    /// Empty counters.
    public init() {}

    /// Counts one finished request.
    public mutating func record(_ r: AuditRecord) {
        requests[RequestKey(route: r.route ?? "", decision: r.decision.rawValue, status: r.status), default: 0] += 1
        clientBytes += r.bytesIn
        upstreamBytes += r.bytesUpstream
        parts += r.parts.count
        for part in r.parts {
            if part.filename != nil { files += 1 }
            if part.action == "quarantine" {
                quarantineItems += 1
                quarantineBytes += part.size
            }
        }
        for v in r.violations { violations[v.kind, default: 0] += 1 }
        for a in r.anomalies { anomalies[a, default: 0] += 1 }
        // The record names the server it went to whenever it contacted one (`upstream`, with `upstream_ms`).
        if r.decision == .error, let server = r.upstream { upstreamErrors[server, default: 0] += 1 }
        requestDuration.observe(r.durationMs / 1000)
        if let ms = r.upstreamMs { upstreamDuration.observe(ms / 1000) }
        timing.record(r)
    }

    /// Adds `other`'s counts to these (another worker's share).
    public mutating func merge(_ other: RequestMetrics) {
        requests.merge(other.requests, uniquingKeysWith: +)
        clientBytes += other.clientBytes
        upstreamBytes += other.upstreamBytes
        parts += other.parts
        files += other.files
        violations.merge(other.violations, uniquingKeysWith: +)
        anomalies.merge(other.anomalies, uniquingKeysWith: +)
        quarantineItems += other.quarantineItems
        quarantineBytes += other.quarantineBytes
        upstreamErrors.merge(other.upstreamErrors, uniquingKeysWith: +)
        tlsHandshakes += other.tlsHandshakes
        tlsHandshakeFailures.merge(other.tlsHandshakeFailures, uniquingKeysWith: +)
        connectionLimit.closedIdle += other.connectionLimit.closedIdle
        connectionLimit.paused += other.connectionLimit.paused
        logSuppressed.merge(other.logSuppressed, uniquingKeysWith: +)
        requestDuration.merge(other.requestDuration)
        upstreamDuration.merge(other.upstreamDuration)
        UpstreamServerStats.merge(&upstreamServers, other.upstreamServers)
        timing.merge(other.timing)
    }
}

/// A fixed-bucket histogram. Buckets hold their own counts; rendering makes them cumulative.
public struct Histogram: Sendable, Equatable {
    /// Default bounds for durations in seconds: 5 ms to 60 s.
    public static let durationBounds: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

    /// Upper bounds (`le`), ascending; the implicit last bucket is `+Inf`.
    public let bounds: [Double]
    /// Observations per bucket (not cumulative); `bounds.count + 1` entries, the last for `+Inf`.
    public private(set) var counts: [Int]
    /// Sum of all observed values.
    public private(set) var sum: Double = 0
    /// Number of observations.
    public private(set) var count = 0

    /// An empty histogram with the given ascending upper bounds.
    public init(bounds: [Double]) {
        self.bounds = bounds
        counts = Array(repeating: 0, count: bounds.count + 1)
    }

    /// Counts `value` in the first bucket whose bound is at least `value`.
    public mutating func observe(_ value: Double) {
        var i = 0
        while i < bounds.count && value > bounds[i] { i += 1 }
        counts[i] += 1
        sum += value
        count += 1
    }

    /// Adds another histogram with the same bounds.
    /// Every histogram of a kind shares its static bounds (`durationBounds`), so the bucket counts line up.
    public mutating func merge(_ other: Histogram) {
        for i in counts.indices where i < other.counts.count { counts[i] += other.counts[i] }
        sum += other.sum
        count += other.count
    }

    /// `(le, cumulative count)` per bucket, ending with `(+Inf, count)`.
    public var cumulative: [(le: Double, count: Int)] {
        var running = 0
        return counts.indices.map { i in
            running += counts[i]
            return (i < bounds.count ? bounds[i] : .infinity, running)
        }
    }
}

/// Everything /metrics reports: the merged per-request counters plus process-wide values.
public struct MetricsSnapshot: Sendable {
    /// All workers' request counters, merged.
    public var requests = RequestMetrics()
    /// Client connections open now.
    public var activeConnections = 0
    /// Client connections the process keeps open at most: workers × `--max-connections`.
    public var connectionCapacity = 0
    /// SIGHUP rule reloads that succeeded.
    public var ruleReloadsOK = 0
    /// SIGHUP rule reloads that failed (the previous policy stayed).
    public var ruleReloadsFailed = 0
    /// Times the supervisor restarted the proxy process before this one.
    public var supervisorRestarts = 0
    /// The upstream groups and their servers' health.
    public var upstreams = UpstreamHealth()
    /// How full the quarantine store is; nil without one.
    public var quarantine: QuarantineUsage?

    /// An empty snapshot.
    public init() {}
}
