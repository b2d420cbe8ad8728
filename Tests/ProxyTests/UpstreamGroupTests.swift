import Audit
import Rules
import Foundation
import Reactor
import Testing
@testable import Proxy

// Upstream groups: the balancer (pure), and the machine moving a request to the next server when connecting
// fails, through ExchangeRig.

private func group(_ weights: [Int], balance: ProxyConfiguration.UpstreamGroup.Balance = .roundRobin,
                   maxFails: Int = 1, failTimeout: Double = 10) throws -> ProxyConfiguration.UpstreamGroup {
    let servers = try weights.enumerated().map { i, w in
        ProxyConfiguration.UpstreamGroup.Server(
            .init(address: try SocketAddress.resolve("127.0.0.1:\(9000 + i)"), authority: "127.0.0.1:\(9000 + i)"),
            weight: w)
    }
    var g = ProxyConfiguration.UpstreamGroup(name: "app", servers: servers)
    g.balance = balance
    g.maxFails = maxFails
    g.failTimeout = failTimeout
    return g
}

private let refused = UpstreamFailure("upstream_unreachable", error: "connect: Connection refused")

@Suite struct UpstreamBalancerTests {
    @Test func roundRobinFollowsWeightsSmoothly() throws {
        var b = UpstreamBalancer(group: try group([5, 1, 1]))
        let picks = (0..<7).compactMap { _ in b.pick(excluding: [], now: 0) }
        // nginx's smooth weighted round-robin: a a b a c a a, never five in a row.
        #expect(picks == [0, 0, 1, 0, 2, 0, 0])
        var counts = [0, 0, 0]
        for _ in 0..<700 { counts[b.pick(excluding: [], now: 0) ?? 0] += 1 }
        #expect(counts == [500, 100, 100])
    }

    @Test func excludedServersAreSkippedAndNilWhenAllTried() throws {
        var b = UpstreamBalancer(group: try group([1, 1, 1]))
        do { let v = b.pick(excluding: [0, 1], now: 0); #expect(v == 2) }
        do { let v = b.pick(excluding: [2, 0], now: 0); #expect(v == 1) }
        do { let v = b.pick(excluding: [0, 1, 2], now: 0); #expect(v == nil) }
    }

    @Test func leastConnectionsPrefersTheIdleServerRelativeToWeight() throws {
        var b = UpstreamBalancer(group: try group([1, 2], balance: .leastConnections))
        b.started(0)
        do { let v = b.pick(excluding: [], now: 0); #expect(v == 1) }
        b.started(1)
        b.started(1)
        // 1/1 in flight against 2/2: a tie, settled round-robin by weight.
        let tie = (0..<3).compactMap { _ in b.pick(excluding: [], now: 0) }
        #expect(Set(tie) == [0, 1])
        b.started(1)
        do { let v = b.pick(excluding: [], now: 0); #expect(v == 0) }   // 1/1 < 3/2
        b.finished(0)
        b.finished(0)   // never below zero
        #expect(b.active == [0, 3])
    }

    @Test func maxFailsMarksAServerDownForFailTimeout() throws {
        var b = UpstreamBalancer(group: try group([1, 1], maxFails: 2, failTimeout: 5))
        do { let v = b.report(0, failure: refused, now: 0); #expect(!v) }
        do { let v = b.report(0, failure: refused, now: 0); #expect(v) }
        #expect(b.isDown(0, now: 4_999_999_999))
        for _ in 0..<4 { do { let v = b.pick(excluding: [], now: 1); #expect(v == 1) } }
        #expect(!b.isDown(0, now: 5_000_000_000))
        // A success in between resets the count.
        do { let v = b.report(1, failure: refused, now: 0); #expect(!v) }
        do { let v = b.report(1, failure: nil, now: 0); #expect(!v) }
        do { let v = b.report(1, failure: refused, now: 0); #expect(!v) }
    }

    @Test func everyServerDownIsTriedAnyway() throws {
        var b = UpstreamBalancer(group: try group([1, 1], maxFails: 1))
        _ = b.report(0, failure: refused, now: 0)
        _ = b.report(1, failure: refused, now: 0)
        do { let v = b.pick(excluding: [], now: 1); #expect(v != nil) }
        do { let v = b.pick(excluding: [0], now: 1); #expect(v == 1) }
    }

    @Test func maxFailsZeroNeverMarksDown() throws {
        var b = UpstreamBalancer(group: try group([1], maxFails: 0))
        for _ in 0..<10 { do { let v = b.report(0, failure: refused, now: 0); #expect(!v) } }
        #expect(!b.isDown(0, now: 0))
    }
}

@Suite struct UpstreamRetryExchangeTests {
    private func rig(_ script: ExchangeRig.UpstreamScript, servers: Int = 3) throws -> ExchangeRig {
        var config = try ExchangeRig.configuration()
        config.upstreams = [try group(Array(repeating: 1, count: servers))]
        return ExchangeRig(config: config, policy: nil, script: script)
    }

    private let request = Array("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello".utf8)

    @Test func refusedServersAreSkippedUntilOneAccepts() throws {
        var script = ExchangeRig.UpstreamScript()
        script.refuseServers = [0, 1]
        let r = try rig(script)
        r.run(client: request)
        #expect(String(decoding: r.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        #expect(r.connections.count == 3)
        #expect(r.health.map(\.server) == [0, 1, 2])
        #expect(r.health.map(\.ok) == [false, false, true])
        #expect(r.health.map(\.reason) == ["upstream_unreachable", "upstream_unreachable", nil])
        let record = try #require(r.records.first ?? nil)
        #expect(record.upstream == "127.0.0.1:9002")
        #expect(record.decision == .allow)
    }

    @Test func everyServerRefusingIs502AfterTryingEachOnce() throws {
        var script = ExchangeRig.UpstreamScript()
        script.connect = .refuse
        let r = try rig(script)
        r.run(client: request)
        #expect(String(decoding: r.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 502"))
        #expect(r.connections.count == 3)
        let record = try #require(r.records.first ?? nil)
        #expect(record.decision == .error)
        #expect(record.upstream == "127.0.0.1:9002")
        #expect(record.bytesUpstream == 0)
    }

    @Test func aConnectTimeoutMovesOnToTheNextServer() throws {
        var script = ExchangeRig.UpstreamScript()
        script.ignoreServers = [0]
        let r = try rig(script, servers: 2)
        r.run(client: request)
        #expect(String(decoding: r.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        #expect(r.connections.count == 2)
        #expect(r.logs.contains { $0.contains("upstream connect timed out") && $0.contains("127.0.0.1:9000") })
        #expect(r.health.map(\.reason) == ["upstream_connect_timeout", nil])
    }

    @Test func aSingleServerThatTimesOutIs504() throws {
        var script = ExchangeRig.UpstreamScript()
        script.connect = .ignore
        let r = try rig(script, servers: 1)
        r.run(client: request)
        #expect(String(decoding: r.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 504"))
        #expect(r.connections.count == 1)
    }

    /// Once connected, nothing is retried (the request went up), but the silence counts against the server.
    @Test func aSilentServerIsReportedUnhealthyAndNotRetried() throws {
        var script = ExchangeRig.UpstreamScript()
        script.answer = .never
        let r = try rig(script, servers: 2)
        r.run(client: request)
        #expect(String(decoding: r.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 504"))
        #expect(r.connections.count == 1)
        #expect(r.health.map(\.server) == [0])
        #expect(r.health.map(\.ok) == [false])
        #expect(r.health.map(\.reason) == ["upstream_timeout"])
    }
}

@Suite struct IdleBufferTests {
    /// A keep-alive connection between requests gives its buffers back: none keeps any storage.
    @Test func buffersAreReleasedBetweenRequests() throws {
        let r = ExchangeRig(config: try ExchangeRig.configuration(), policy: nil)
        r.run(client: Array("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello".utf8), clientEOF: false)
        #expect(String(decoding: r.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        #expect(!r.closed)
        let buffers = [r.machine.clientIn, r.machine.clientOut, r.machine.upstreamIn]
        #expect(buffers.map(\.capacity) + [r.machine.upstreamOut.capacity] == [0, 0, 0, 0])
        // And the next request on the connection still works.
        r.run(client: Array("GET /y HTTP/1.1\r\nHost: a\r\n\r\n".utf8), clientEOF: false)
        #expect(ExchangeRig.finalStatusLines(in: r.clientReceived) == 2)
    }
}

@Suite struct AntivirusExchangeTests {
    private func rig(_ verdict: FormStage.ScanVerdict, allowFailure: Bool = false, policy: Policy? = nil) throws
        -> ExchangeRig {
        var config = try ExchangeRig.configuration()
        var av = ProxyConfiguration.AntivirusSettings(address: .unix("/nonexistent"))
        av.allowOnFailure = allowFailure
        config.antivirus = av
        var script = ExchangeRig.UpstreamScript()
        script.scanVerdict = verdict
        return ExchangeRig(config: config, policy: policy, script: script)
    }

    private func upload(_ content: String = "hello") -> [UInt8] {
        let body = "--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nt\r\n"
            + "--B\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\n"
            + content + "\r\n--B--\r\n"
        return Array(("POST /up HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n" + body).utf8)
    }

    @Test func aCleanFileIsForwardedAfterItsVerdict() throws {
        let r = try rig(.clean)
        r.run(client: upload())
        #expect(r.scans == 1)
        #expect(String(decoding: r.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        let sent = String(decoding: r.connections.first?.received ?? [], as: UTF8.self)
        #expect(sent.contains("hello") && sent.contains("title"))
    }

    @Test func anInfectedFileIs403AndNeverReachesTheUpstream() throws {
        let r = try rig(.infected(signature: "Eicar-Test-Signature"))
        r.run(client: upload("X5O!P%@AP"))
        #expect(String(decoding: r.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 403"))
        let forwarded = String(decoding: r.connections.first?.received ?? [], as: UTF8.self)
        #expect(!forwarded.contains("X5O!P"))
        let record = try #require(r.records.first ?? nil)
        #expect(record.reason == "malware")
        #expect(record.violations.contains { $0.kind == "malware" && $0.detail.contains("Eicar-Test-Signature") })
        #expect(r.violations() == [])
    }

    @Test func aFailedScanIs503UnlessFailuresAreAllowed() throws {
        let closed = try rig(.failed(reason: "clamd down"))
        closed.run(client: upload())
        #expect(String(decoding: closed.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 503"))
        let forwarded = String(decoding: closed.connections.first?.received ?? [], as: UTF8.self)
        #expect(!forwarded.contains("hello"))
        let open = try rig(.failed(reason: "clamd down"), allowFailure: true)
        open.run(client: upload())
        #expect(String(decoding: open.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        #expect(try #require(open.records.first ?? nil).anomalies.contains("antivirus-unscanned"))
    }

    /// The scan starts with the file's first byte (clamd reads while the upload arrives), and the verdict is
    /// asked for only once the part has ended.
    @Test func theScanStartsBeforeThePartEnds() throws {
        let r = try rig(.clean)
        let request = upload(String(repeating: "z", count: 5000))
        let half = request.count / 2
        r.run(client: Array(request[..<half]), clientEOF: false, advanceTime: false)
        #expect(r.scans == 1)
        #expect(r.clientReceived.isEmpty)
        r.run(client: Array(request[half...]), clientEOF: true)
        #expect(String(decoding: r.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        #expect(r.scans == 1)
    }

    @Test func verdictsDoNotDependOnReads() throws {
        for piece in [1, 7, 64] {
            let r = try rig(.infected(signature: "X"))
            r.run(client: upload(), pieces: [piece])
            #expect(String(decoding: r.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 403"), "reads of \(piece)")
        }
    }
}
