import Audit
import Reactor
import Testing
@testable import Proxy

// Upstream health for /upstreams and /metrics (counted by the balancer, merged over workers, rendered), and the
// readiness decision: only groups with `readiness required` have an upstream check.

private func group(_ name: String, ports: [Int], readiness: ProxyConfiguration.UpstreamGroup.Readiness = .optional,
                   failTimeout: Double = 10) throws -> ProxyConfiguration.UpstreamGroup {
    let servers = try ports.map { port in
        ProxyConfiguration.UpstreamGroup.Server(
            .init(address: try SocketAddress.resolve("127.0.0.1:\(port)"), authority: "127.0.0.1:\(port)"))
    }
    var g = ProxyConfiguration.UpstreamGroup(name: name, servers: servers)
    g.readiness = readiness
    g.failTimeout = failTimeout
    return g
}

private let refused = UpstreamFailure("upstream_unreachable", error: "connect(fd 9): Connection refused (errno 111)")
private let second: UInt64 = 1_000_000_000

@Suite struct UpstreamHealthTests {
    @Test func theBalancerCountsPicksFailuresAndTheLatestFailure() throws {
        var b = UpstreamBalancer(group: try group("app", ports: [9000, 9001]))
        for _ in 0..<4 { _ = b.pick(excluding: [], now: 0) }
        #expect(b.stats.map(\.requests) == [2, 2])
        // A pick that finds every server tried counts nowhere.
        do { let v = b.pick(excluding: [0, 1], now: 0); #expect(v == nil) }
        #expect(b.stats.map(\.requests) == [2, 2])
        do { let v = b.report(0, failure: UpstreamFailure("upstream_closed"), now: 5); #expect(v) }
        _ = b.report(0, failure: refused, now: 7)
        _ = b.report(1, failure: nil, now: 8)
        #expect(b.stats[0].failures == 2 && b.stats[0].lastFailure == refused && b.stats[0].lastFailureAt == 7)
        #expect(b.stats[0].downSince == 7 && b.stats[0].downUntil == 7 + 10 * second)
        #expect(!b.stats[0].isUp(now: 8) && b.stats[0].isUp(now: 7 + 10 * second))
        #expect(b.stats[1].failures == 0 && b.stats[1].lastSuccessAt == 8 && b.stats[1].isUp(now: 8))
        // A response head clears the mark at once.
        _ = b.report(0, failure: nil, now: 9)
        #expect(b.stats[0].isUp(now: 9) && b.stats[0].failures == 2 && b.stats[0].lastFailure == refused)
    }

    /// Workers keep their own state: the merged one sums the counts, keeps the latest failure, and calls a
    /// server down while a mark-down runs that no worker's success came after.
    @Test func mergingWorkersKeepsTheLatestEvidence() {
        var a = UpstreamServerStats()
        a.requests = 3
        a.failures = 1
        a.lastFailure = UpstreamFailure("upstream_timeout")
        a.lastFailureAt = 2 * second
        a.downSince = 2 * second
        a.downUntil = 12 * second
        var b = UpstreamServerStats()
        b.requests = 5
        b.failures = 2
        b.lastFailure = refused
        b.lastFailureAt = 1 * second
        b.lastSuccessAt = 1 * second
        var merged = a
        merged.merge(b)
        #expect(merged.requests == 8 && merged.failures == 3)
        #expect(merged.lastFailure == UpstreamFailure("upstream_timeout") && merged.lastFailureAt == 2 * second)
        #expect(!merged.isUp(now: 3 * second))
        // The other order gives the same.
        var reversed = b
        reversed.merge(a)
        #expect(reversed == merged)
        let ab = merged
        // Another worker's later success: up again, though the first worker still skips the server.
        var c = UpstreamServerStats()
        c.lastSuccessAt = 3 * second
        merged.merge(c)
        #expect(merged.isUp(now: 4 * second))
        // Tables merge per group and server; an empty table (the first copy) takes the other whole.
        var table: [[UpstreamServerStats]] = []
        UpstreamServerStats.merge(&table, [[a], [b, c]])
        UpstreamServerStats.merge(&table, [[b], [a, c]])
        #expect(table.map { $0.map(\.requests) } == [[8], [8, 0]])
        var metrics = RequestMetrics()
        metrics.upstreamServers = [[a]]
        var other = RequestMetrics()
        other.upstreamServers = [[b]]
        metrics.merge(other)
        #expect(metrics.upstreamServers == [[ab]])
    }

    @Test func theReportDatesFailuresAndRendersJSONAndPrometheusText() throws {
        let groups = [try group("app", ports: [9000]), try group("media", ports: [9001, 9002], readiness: .required)]
        var dead = UpstreamServerStats()
        dead.requests = 3
        dead.failures = 3
        dead.lastFailure = refused
        dead.lastFailureAt = 98 * second
        dead.downSince = 98 * second
        dead.downUntil = 108 * second
        var live = UpstreamServerStats()
        live.requests = 4
        live.lastSuccessAt = 99 * second
        let health = UpstreamHealth(groups: groups, stats: [[live], [dead]], now: 100 * second,
                                    wallClock: AuditTimestamp(millisecondsSinceEpoch: 10_000))
        #expect(health.groups.map(\.up) == [true, true])
        #expect(health.groups[1].servers.map(\.up) == [false, true])
        #expect(health.groups[1].servers[0].lastFailureAt == AuditTimestamp(millisecondsSinceEpoch: 8_000))
        #expect(health.json == """
            {"groups":[{"name":"app","default":true,"readiness":"optional","up":true,"servers":[\
            {"server":"127.0.0.1:9000","up":true,"requests":4,"failures":0,"last_failure":null}]},\
            {"name":"media","default":false,"readiness":"required","up":true,"servers":[\
            {"server":"127.0.0.1:9001","up":false,"requests":3,"failures":3,"last_failure":{\
            "reason":"upstream_unreachable","error":"connect(fd 9): Connection refused (errno 111)",\
            "at":"1970-01-01T00:00:08.000Z"}},\
            {"server":"127.0.0.1:9002","up":true,"requests":0,"failures":0,"last_failure":null}]}]}
            """)
        var p = PrometheusText()
        p.upstreamHealth(health)
        let samples = p.text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(samples == [
            #"formwall_upstream_server_up{group="app",server="127.0.0.1:9000"} 1"#,
            #"formwall_upstream_server_up{group="media",server="127.0.0.1:9001"} 0"#,
            #"formwall_upstream_server_up{group="media",server="127.0.0.1:9002"} 1"#,
            #"formwall_upstream_server_requests_total{group="app",server="127.0.0.1:9000"} 4"#,
            #"formwall_upstream_server_requests_total{group="media",server="127.0.0.1:9001"} 3"#,
            #"formwall_upstream_server_requests_total{group="media",server="127.0.0.1:9002"} 0"#,
            #"formwall_upstream_server_failures_total{group="app",server="127.0.0.1:9000"} 0"#,
            #"formwall_upstream_server_failures_total{group="media",server="127.0.0.1:9001"} 3"#,
            #"formwall_upstream_server_failures_total{group="media",server="127.0.0.1:9002"} 0"#,
            #"formwall_upstream_group_up{group="app"} 1"#,
            #"formwall_upstream_group_up{group="media"} 1"#,
        ])
        #expect(p.text.contains("# TYPE formwall_upstream_server_up gauge\n"))
        #expect(p.text.contains("# TYPE formwall_upstream_server_requests_total counter\n"))
        #expect(p.text.contains("# TYPE formwall_upstream_server_failures_total counter\n"))
        #expect(p.text.contains("# TYPE formwall_upstream_group_up gauge\n"))
        // Every server of a group down: the group is down.
        var both = dead
        both.lastFailure = nil
        let down = UpstreamHealth(groups: [groups[0]], stats: [[both]], now: 100 * second,
                                  wallClock: AuditTimestamp(millisecondsSinceEpoch: 10_000))
        #expect(down.groups[0].up == false && down.groups[0].servers[0].lastFailureAt == nil)
        // The snapshot renders the families with the rest of /metrics.
        var snapshot = MetricsSnapshot()
        snapshot.upstreams = health
        #expect(snapshot.prometheusText().contains(#"formwall_upstream_group_up{group="media"} 1"#))
        #expect(!MetricsSnapshot().prometheusText().contains("formwall_upstream_server_up"))
    }

    @Test func onlyGroupsThatRequireItHaveAReadinessCheck() throws {
        let app = try group("app", ports: [9000])
        let media = try group("media", ports: [9001, 9002])
        // The default: no upstream check at all, whatever the servers did.
        #expect(ReadinessProbe.upstreamChecks([app, media], results: [["refused"], ["refused", "refused"]]).isEmpty)
        let report = ReadinessReport(checks: [.init(name: "accepting", ok: true)]
            + ReadinessProbe.upstreamChecks([app, media], results: [[nil], [nil, nil]]))
        #expect(report.ready)
        // Opted in: down while no server accepts; named `upstream` for the default group, `upstream:NAME` else.
        var required = media
        required.readiness = .required
        var defaultRequired = app
        defaultRequired.readiness = .required
        let checks = ReadinessProbe.upstreamChecks([defaultRequired, required],
                                                   results: [[""], ["a: refused", "b: timed out"]])
        #expect(checks == [
            .init(name: "upstream", ok: true),
            .init(name: "upstream:media", ok: false,
                  error: "127.0.0.1:9001: a: refused; 127.0.0.1:9002: b: timed out"),
        ])
        // One server of the group accepting is enough.
        let one = ReadinessProbe.upstreamChecks([app, required], results: [[nil], ["refused", ""]])
        #expect(one == [.init(name: "upstream:media", ok: true, error: "127.0.0.1:9001: refused")])
        #expect(!ReadinessReport(checks: checks).ready && ReadinessReport(checks: one).ready)
    }

    @Test func upstreamsIsAnAdminRoute() {
        #expect(AdminRoute.route(method: "GET", target: "/upstreams") == .upstreams)
        #expect(AdminRoute.route(method: "GET", target: "/upstreams?x") == .upstreams)
        #expect(AdminRoute.route(method: "HEAD", target: "/upstreams") == .methodNotAllowed)
    }
}
