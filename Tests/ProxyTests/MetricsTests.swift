import Audit
import Foundation
import Glibc
import Inspect
import Quarantine
import Testing
import Rules
@testable import Proxy

// The pure half of /metrics: counting audit records, merging the workers' copies, rendering the text format.

private func record(route: String? = "/upload", decision: AuditRecord.Decision = .allow, status: Int = 200,
                    bytesIn: Int = 0, bytesUpstream: Int = 0, durationMs: Double = 1, upstreamMs: Double? = nil,
                    parts: [AuditRecord.Part] = [], violations: [String] = [],
                    anomalies: [String] = []) -> AuditRecord {
    AuditRecord(timestamp: AuditTimestamp(millisecondsSinceEpoch: 0), requestID: "r", client: "c", method: "POST",
                path: "/upload", route: route, decision: decision, status: status, bytesIn: bytesIn,
                bytesUpstream: bytesUpstream, durationMs: durationMs, upstreamMs: upstreamMs,
                upstream: upstreamMs == nil ? nil : "app:8000", parts: parts,
                violations: violations.map { AuditRecord.Violation(kind: $0, detail: "") }, anomalies: anomalies)
}

@Suite struct MetricsTests {
    @Test func countsOneRecordLikeTheAuditLogSaysIt() {
        var m = RequestMetrics()
        let parts = [
            AuditRecord.Part(index: 0, name: "a", kind: .field, size: 3, action: "pass"),
            AuditRecord.Part(index: 1, name: "f", kind: .file, filename: "x.exe", size: 70, action: "quarantine"),
            AuditRecord.Part(index: 2, name: "g", kind: .file, filename: "y.png", size: 9, action: "pass"),
        ]
        m.record(record(decision: .modified, bytesIn: 120, bytesUpstream: 50, durationMs: 30, upstreamMs: 20,
                        parts: parts, violations: ["file_type", "file_type", "too_many_files"],
                        anomalies: ["lf_only_line_endings"]))
        #expect(m.requests == [.init(route: "/upload", decision: "modified", status: 200): 1])
        #expect(m.clientBytes == 120 && m.upstreamBytes == 50)
        #expect(m.parts == 3 && m.files == 2)
        #expect(m.quarantineItems == 1 && m.quarantineBytes == 70)
        #expect(m.violations == ["file_type": 2, "too_many_files": 1])
        #expect(m.anomalies == ["lf_only_line_endings": 1])
        #expect(m.upstreamErrors.isEmpty)
        #expect(m.requestDuration.count == 1 && m.requestDuration.sum == 0.03)
        #expect(m.upstreamDuration.count == 1)
    }

    @Test func upstreamErrorsNeedDecisionErrorAndTheUpstream() {
        var m = RequestMetrics()
        m.record(record(route: nil, decision: .error, status: 502, upstreamMs: 3))
        m.record(record(decision: .error, status: 500))  // never reached the upstream
        m.record(record(decision: .reject, status: 413, upstreamMs: 1))
        #expect(m.upstreamErrors == ["app:8000": 1])
        #expect(m.requests[.init(route: "", decision: "error", status: 502)] == 1)
        #expect(m.upstreamDuration.count == 2)
    }

    @Test func mergingEqualsCountingInOnePlace() {
        let records = (0..<50).map { i in
            record(route: i % 3 == 0 ? nil : "/r\(i % 2)", decision: i % 4 == 0 ? .reject : .allow,
                   status: i % 4 == 0 ? 413 : 200, bytesIn: i, bytesUpstream: i / 2, durationMs: Double(i * 7),
                   upstreamMs: i % 5 == 0 ? nil : Double(i),
                   parts: [AuditRecord.Part(index: 0, name: "p", kind: .file, filename: "f", size: i, action: "pass")],
                   violations: i % 4 == 0 ? ["file_too_large"] : [], anomalies: i % 6 == 0 ? ["bare_cr"] : [])
        }
        var one = RequestMetrics()
        for r in records { one.record(r) }
        var workers = [RequestMetrics(), RequestMetrics(), RequestMetrics()]
        for (i, r) in records.enumerated() { workers[i % 3].record(r) }
        for (i, w) in workers.indices.enumerated() {
            workers[w].connectionLimit.closedIdle = i + 1
            workers[w].connectionLimit.paused = 10 * i
        }
        var merged = RequestMetrics()
        for w in workers { merged.merge(w) }
        #expect(merged.connectionLimit == .init(closedIdle: 6, paused: 30))
        // Sums of doubles may differ in the last bits with the order of addition; everything else is exact.
        #expect(abs(merged.requestDuration.sum - one.requestDuration.sum) < 1e-9)
        #expect(abs(merged.upstreamDuration.sum - one.upstreamDuration.sum) < 1e-9)
        #expect(merged.requestDuration.counts == one.requestDuration.counts)
        #expect(merged.upstreamDuration.counts == one.upstreamDuration.counts)
        #expect(merged.requests == one.requests && merged.violations == one.violations)
        #expect(merged.anomalies == one.anomalies && merged.upstreamErrors == one.upstreamErrors)
        #expect(merged.clientBytes == one.clientBytes && merged.upstreamBytes == one.upstreamBytes)
        #expect(merged.parts == one.parts && merged.files == one.files)
        #expect(merged.requests.values.reduce(0, +) == 50)
    }

    @Test func histogramBucketsAreInclusiveAndCumulative() {
        var h = Histogram(bounds: [0.1, 1])
        for v in [0.05, 0.1, 0.5, 1, 2, 3] { h.observe(v) }
        #expect(h.counts == [2, 2, 2])
        let c = h.cumulative
        #expect(c.map(\.count) == [2, 4, 6])
        #expect(c.last?.le == .infinity)
        #expect(h.count == 6 && h.sum == 6.65)
    }

    @Test func labelValuesAndHelpAreEscaped() {
        #expect(PrometheusText.escapeLabel("a\\b\"c\nd") == "a\\\\b\\\"c\\nd")
        #expect(PrometheusText.escapeHelp("x\\y\n\"z\"") == "x\\\\y\\n\"z\"")
        var p = PrometheusText()
        p.sample("m", labels: [("route", "/a\"b\\")], 2)
        #expect(p.text == "m{route=\"/a\\\"b\\\\\"} 2\n")
    }

    @Test func numbersFormatTheWayPrometheusReadsThem() {
        #expect(PrometheusText.format(3) == "3")
        #expect(PrometheusText.format(0.005) == "0.005")
        #expect(PrometheusText.format(.infinity) == "+Inf")
        #expect(PrometheusText.format(-.infinity) == "-Inf")
        #expect(PrometheusText.format(.nan) == "NaN")
        #expect(PrometheusText.format(2.5) == "2.5")
    }

    @Test func histogramRendersBucketsSumAndCount() {
        var h = Histogram(bounds: [0.5, 1])
        h.observe(0.25)
        h.observe(0.75)
        h.observe(4)
        var p = PrometheusText()
        p.histogram("d", h)
        #expect(p.text == """
        d_bucket{le="0.5"} 1
        d_bucket{le="1"} 2
        d_bucket{le="+Inf"} 3
        d_sum 5
        d_count 3

        """)
    }

    @Test func snapshotHasHelpTypeAndSortedSamples() {
        var s = MetricsSnapshot()
        s.requests.record(record(route: "/b", status: 200))
        s.requests.record(record(route: "/a", decision: .reject, status: 403, violations: ["k\"x"]))
        s.activeConnections = 4
        s.connectionCapacity = 8192
        s.ruleReloadsOK = 2
        s.supervisorRestarts = 1
        s.requests.connectionLimit.closedIdle = 5
        let text = s.prometheusText()
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.first == "# HELP formwall_requests_total Requests finished, by route, decision and status.")
        #expect(lines[1] == "# TYPE formwall_requests_total counter")
        #expect(lines[2] == #"formwall_requests_total{route="/a",decision="reject",status="403"} 1"#)
        #expect(lines[3] == #"formwall_requests_total{route="/b",decision="allow",status="200"} 1"#)
        #expect(lines.contains(#"formwall_violations_total{kind="k\"x"} 1"#))
        #expect(lines.contains("formwall_active_connections 4"))
        #expect(lines.contains("formwall_max_connections 8192"))
        #expect(lines.contains("# TYPE formwall_active_connections gauge"))
        #expect(lines.contains("# TYPE formwall_request_duration_seconds histogram"))
        #expect(lines.contains(#"formwall_request_duration_seconds_bucket{le="+Inf"} 2"#))
        #expect(lines.contains("formwall_request_duration_seconds_count 2"))
        #expect(lines.contains(#"formwall_rule_reloads_total{result="ok"} 2"#))
        #expect(lines.contains(#"formwall_rule_reloads_total{result="failed"} 0"#))
        #expect(lines.contains("formwall_supervisor_restarts_total 1"))
        #expect(lines.contains(#"formwall_connection_limit_total{action="closed_idle"} 5"#))
        #expect(lines.contains(#"formwall_connection_limit_total{action="paused"} 0"#))
        // Every family is announced exactly once, HELP before TYPE, before its samples.
        let types = lines.filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
        #expect(Set(types).count == types.count && types.count == 24)
        #expect(text.hasSuffix("\n"))
    }

    @Test func adminRoutes() {
        #expect(AdminRoute.route(method: "GET", target: "/metrics") == .metrics)
        #expect(AdminRoute.route(method: "GET", target: "/metrics?x=1") == .metrics)
        #expect(AdminRoute.route(method: "GET", target: "/healthz") == .healthz)
        #expect(AdminRoute.route(method: "GET", target: "/readyz") == .readyz)
        #expect(AdminRoute.route(method: "GET", target: "/rules") == .rules)
        #expect(AdminRoute.route(method: "GET", target: "/metrics/") == .notFound)
        #expect(AdminRoute.route(method: "GET", target: "http://x/metrics") == .notFound)
        #expect(AdminRoute.route(method: "POST", target: "/metrics") == .methodNotAllowed)
        #expect(AdminRoute.route(method: "HEAD", target: "/healthz") == .methodNotAllowed)
    }

    @Test func quarantineGaugesOnlyWithAStore() {
        var s = MetricsSnapshot()
        #expect(!s.prometheusText().contains("formwall_quarantine_max_bytes"))
        s.quarantine = QuarantineUsage(bytes: 7486, maxBytes: 8192, full: true)
        let lines = s.prometheusText().split(separator: "\n").map(String.init)
        #expect(lines.contains("# TYPE formwall_quarantine_bytes gauge"))
        #expect(lines.contains("formwall_quarantine_bytes 7486"))
        #expect(lines.contains("# TYPE formwall_quarantine_max_bytes gauge"))
        #expect(lines.contains("formwall_quarantine_max_bytes 8192"))
    }

    @Test func readinessJSON() {
        let ok = ReadinessReport(checks: [.init(name: "upstream", ok: true)])
        #expect(ok.ready && ok.json == #"{"status":"ready","checks":{"upstream":{"ok":true}}}"#)
        let bad = ReadinessReport(checks: [.init(name: "upstream", ok: true), .init(name: "quarantine", ok: false,
                                                                                  error: "d: \"no\"")])
        #expect(!bad.ready)
        #expect(bad.json == #"{"status":"not_ready","checks":{"upstream":{"ok":true},"quarantine":{"ok":false,"error":"d: \"no\""}}}"#)
    }

    @Test func adminResponseBytes() {
        var r = AdminResponse.error(405, "method_not_allowed")
        r.headers = [("Allow", "GET")]
        let text = String(decoding: r.bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n"))
        #expect(text.contains("\r\nAllow: GET\r\n"))
        #expect(text.contains("\r\nContent-Length: 43\r\n"))
        #expect(text.hasSuffix("\r\n\r\n{\"error\":\"method_not_allowed\",\"status\":405}"))
    }
}

@Suite struct RulesInfoTests {
    /// Includes count, where they are included; a file included twice is read once.
    @Test func digestIsSHA256OfTheFilesInLoadOrder() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("fw-rulesinfo-\(getpid())").path
        try FileManager.default.createDirectory(atPath: dir + "/d", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "include inc/x.rules;\nroute /a {}\n".write(toFile: dir + "/top.rules", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: dir + "/inc", withIntermediateDirectories: true)
        try "route /x {}\n".write(toFile: dir + "/inc/x.rules", atomically: true, encoding: .utf8)
        try "route /c {}\n".write(toFile: dir + "/d/2.rules", atomically: true, encoding: .utf8)
        try "route /b {}\ninclude ../inc/x.rules;\n".write(toFile: dir + "/d/1.rules", atomically: true, encoding: .utf8)
        try "not rules".write(toFile: dir + "/d/notes.txt", atomically: true, encoding: .utf8)
        let policy = try Policy.load(paths: [dir + "/top.rules", dir + "/d"])
        let info = RulesInfo(policy: policy, at: AuditTimestamp(millisecondsSinceEpoch: 0))
        #expect(info.files == [dir + "/top.rules", dir + "/inc/x.rules", dir + "/d/1.rules", dir + "/d/2.rules"])
        #expect(info.digest == SHA256Hasher.hex(Array(
            "include inc/x.rules;\nroute /a {}\nroute /x {}\nroute /b {}\ninclude ../inc/x.rules;\nroute /c {}\n".utf8)))
        #expect(info.json.hasSuffix(#""loaded_at":"1970-01-01T00:00:00.000Z"}"#))
    }
}
