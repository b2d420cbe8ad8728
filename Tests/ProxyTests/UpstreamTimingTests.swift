import Audit
import Reactor
import Testing
@testable import Proxy

// The audit record's split of a request's time, in the pure machine with the rig's fake clock: `client_body_ms`
// (the client's body), and nginx's $upstream_connect_time, $upstream_header_time and $upstream_response_time
// (`upstream_connect_ms`, `upstream_header_ms`, `upstream_response_ms`) of the attempt that answered. A slow
// application and a slow client give records that tell which was slow; `upstream_ms` spans every attempt.

private let second: UInt64 = 1_000_000_000

private func rig(_ script: ExchangeRig.UpstreamScript, servers: Int = 1) throws -> ExchangeRig {
    var config = try ExchangeRig.configuration()
    config.timeouts.upstreamConnect = 2
    if servers > 1 {
        let list = try (0..<servers).map { i in
            ProxyConfiguration.UpstreamGroup.Server(
                .init(address: try SocketAddress.resolve("127.0.0.1:\(9000 + i)"), authority: "127.0.0.1:\(9000 + i)"),
                weight: 1)
        }
        config.upstreams = [ProxyConfiguration.UpstreamGroup(name: "app", servers: list)]
    }
    return ExchangeRig(config: config, policy: nil, script: script)
}

private func only(_ r: ExchangeRig) throws -> AuditRecord {
    #expect(r.records.count == 1)
    return try #require(r.records.first ?? nil)
}

@Suite struct UpstreamTimingTests {
    /// The application takes 3 s to answer a GET: the header time says so, and the client's body took no time.
    @Test func aSlowApplicationShowsInTheHeaderTime() throws {
        var script = ExchangeRig.UpstreamScript()
        script.answer = .atHead
        script.answerDelay = 3 * second
        let r = try rig(script)
        r.run(client: Array("GET /slow HTTP/1.1\r\nHost: a\r\n\r\n".utf8), clientEOF: false)
        let record = try only(r)
        #expect(record.status == 200)
        #expect(record.clientBodyMs == 0)
        #expect(record.upstreamConnectMs == 0)
        let header = try #require(record.upstreamHeaderMs)
        #expect(header >= 3000 && header <= 4000, "header \(header) ms")
        #expect(record.upstreamResponseMs == header)   // a 2-byte body comes with the head
        #expect(record.upstreamMs == record.upstreamResponseMs)
        #expect(record.durationMs == header)
        #expect(header - (record.clientBodyMs ?? 0) >= 3000)
    }

    /// The client sends its body over 1.5 s to an application that answers at once: the client's body time is
    /// the request's, and the upstream's header follows the body's last byte with no time of its own.
    @Test func aSlowClientBodyShowsInTheClientBodyTime() throws {
        var script = ExchangeRig.UpstreamScript()
        script.answer = .atEnd
        let r = try rig(script)
        let body = [UInt8](repeating: 0x61, count: 4000)
        let head = Array("POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: \(body.count)\r\n\r\n".utf8)
        r.run(client: head + body[0..<1000], clientEOF: false, advanceTime: false)
        for piece in 1..<4 {
            r.elapse(500_000_000)
            r.run(client: Array(body[(piece * 1000)..<((piece + 1) * 1000)]), clientEOF: false, advanceTime: false)
        }
        let record = try only(r)
        #expect(record.status == 200 && record.bytesIn == body.count)
        let clientBody = try #require(record.clientBodyMs)
        let header = try #require(record.upstreamHeaderMs)
        #expect(clientBody == 1500, "client body \(clientBody) ms")
        // Streamed: the upstream was dialled at the head and answered after the body, so its header time spans
        // the upload, and what the application added on top of it is nothing.
        #expect(header == 1500 && header - clientBody == 0)
        #expect(record.upstreamConnectMs == 0)
        #expect(record.durationMs == 1500)
    }

    /// A client that reads a 1 MiB response at 64 KiB a second: the head came at once, the response's last byte
    /// seconds later, as the client let it through.
    @Test func aSlowDownloadShowsInTheResponseTime() throws {
        var config = try ExchangeRig.configuration()
        config.timeouts.clientSend = 30
        var script = ExchangeRig.UpstreamScript()
        script.answer = .atHead
        let size = 1 << 20
        script.response = Array("HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n\r\n".utf8)
            + [UInt8](repeating: 0x62, count: size)
        let r = ExchangeRig(config: config, policy: nil, script: script)
        r.clientReadRate = 64 * 1024
        r.run(client: Array("GET /big HTTP/1.1\r\nHost: a\r\n\r\n".utf8), clientEOF: false)
        let record = try only(r)
        #expect(record.status == 200)
        #expect(record.upstreamHeaderMs == 0)
        let response = try #require(record.upstreamResponseMs)
        #expect(response >= 4000, "response \(response) ms")
        #expect(record.clientBodyMs == 0)
    }

    /// The first server never answers the connect (2 s timeout), the second does: the answering attempt's times
    /// count from its own dial, `upstream_ms` from the first.
    @Test func upstreamMsSpansEveryAttemptTheSplitOnlyTheAnsweringOne() throws {
        var script = ExchangeRig.UpstreamScript()
        script.ignoreServers = [0]
        script.answer = .atHead
        script.answerDelay = second / 2
        let r = try rig(script, servers: 2)
        r.run(client: Array("GET /x HTTP/1.1\r\nHost: a\r\n\r\n".utf8), clientEOF: false)
        let record = try only(r)
        #expect(record.status == 200 && record.upstream == "127.0.0.1:9001")
        let total = try #require(record.upstreamMs)
        let response = try #require(record.upstreamResponseMs)
        let header = try #require(record.upstreamHeaderMs)
        #expect(total >= 2000 + response, "upstream \(total) ms, response \(response) ms")
        #expect(header >= 500 && header <= response)
        #expect(record.upstreamConnectMs == 0)
    }

    /// Nothing connected: no connect or header time; the response time runs to the failure.
    @Test func aFailedConnectHasNoConnectOrHeaderTime() throws {
        var script = ExchangeRig.UpstreamScript()
        script.connect = .ignore
        let r = try rig(script)
        r.run(client: Array("GET /x HTTP/1.1\r\nHost: a\r\n\r\n".utf8), clientEOF: false)
        let record = try only(r)
        #expect(record.status == 504)
        #expect(record.upstreamConnectMs == nil && record.upstreamHeaderMs == nil)
        let response = try #require(record.upstreamResponseMs)
        #expect(response >= 2000 && record.upstreamMs == response)
    }

    /// A request refused before any dial has no upstream time at all; a body cut short has no client body time.
    @Test func noUpstreamNoUpstreamTimes() throws {
        let r = try rig(ExchangeRig.UpstreamScript())
        r.run(client: Array("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc".utf8))
        let record = try only(r)
        #expect(record.clientBodyMs == nil)
        let refused = try rig(ExchangeRig.UpstreamScript())
        refused.run(client: Array("CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
        let head = try only(refused)
        #expect(head.status == 405)
        #expect(head.upstreamMs == nil && head.upstreamConnectMs == nil && head.upstreamHeaderMs == nil
            && head.upstreamResponseMs == nil)
    }
}

/// /metrics carries the same split as histograms, merged across workers, and the rate limit's left-out lines.
@Suite struct TimingMetricsTests {
    private func record(body: Double?, connect: Double?, header: Double?, response: Double?) -> AuditRecord {
        AuditRecord(timestamp: AuditTimestamp(millisecondsSinceEpoch: 0), requestID: "r", client: "c", method: "GET",
                    path: "/", route: nil, decision: .allow, status: 200, durationMs: 3000, clientBodyMs: body,
                    upstreamMs: response, upstreamConnectMs: connect, upstreamHeaderMs: header,
                    upstreamResponseMs: response, upstream: response == nil ? nil : "app:8000")
    }

    @Test func histogramsSplitTheUpstreamTime() {
        var a = RequestMetrics()
        var b = RequestMetrics()
        a.record(record(body: 0, connect: 0.2, header: 2900, response: 3000))      // a slow application
        b.record(record(body: 2990, connect: 0.3, header: 2995, response: 3000))   // a slow client body
        b.record(record(body: nil, connect: nil, header: nil, response: nil))      // refused before the upstream
        b.logSuppressed["upstream marked down"] = 3
        a.logSuppressed["upstream marked down"] = 1
        var s = MetricsSnapshot()
        s.requests.merge(a)
        s.requests.merge(b)
        let t = s.requests.timing
        #expect(t.connect.count == 2 && t.header.count == 2 && t.response.count == 2 && t.clientBody.count == 2)
        // le=0.005: both connects, one client body (0 s); le=2.5: nothing more; le=5: the rest.
        #expect(t.connect.counts.first == 2 && t.clientBody.counts.first == 1 && t.header.counts.first == 0)
        let text = s.prometheusText()
        for line in [
            "# TYPE formwall_upstream_connect_seconds histogram",
            "formwall_upstream_connect_seconds_count 2",
            "formwall_upstream_header_seconds_bucket{le=\"2.5\"} 0",
            "formwall_upstream_header_seconds_bucket{le=\"5\"} 2",
            "formwall_upstream_response_seconds_sum 6",
            "formwall_client_body_seconds_bucket{le=\"0.005\"} 1",
            "formwall_client_body_seconds_count 2",
            "# TYPE formwall_log_suppressed_total counter",
            "formwall_log_suppressed_total{message=\"upstream marked down\"} 4",
        ] {
            #expect(text.contains(line + "\n"), "\(line)")
        }
    }
}
