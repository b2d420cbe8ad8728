import Audit
import Foundation
import Rules
import Testing
@testable import Proxy
import TestRandom

// The whole request path driven without sockets: ConnectionMachine through ExchangeRig, a fake clock and a
// scripted upstream. Each bug the machine replaced has a regression test here; every run also checks the
// rig's invariants (one record per request, no action after close, pooling only after a clean keep-alive
// exchange, liveness once every deadline has passed).

private let policyText = """
route /strict {
    anomaly data-after reject;
    field title;
}
route /up {
    body-max 64KiB;
    field title;
    file doc { max 1KiB; }
}
route /big {
    body-max 64KiB;
    field title;
    file doc { max 32KiB; }
}
route /spool {
    upstream-body spool;
    field title;
    file doc { max 1KiB; }
}
route /hold {
    upstream-body hold;
    field title;
    file doc { max 1KiB; }
}
route /cond {
    host *.example.com;
    require-header X-Token "^ok-[0-9]+$";
    field title;
}
route /cond {
    field title;
}
"""

private func policy() throws -> Policy {
    let (policy, diagnostics) = RuleChecker.compile(source: policyText, file: "test.rules")
    return try #require(policy, "\(diagnostics)")
}

private func form(_ parts: [(String, String?, String)], boundary: String = "B") -> [UInt8] {
    var body = ""
    for (name, filename, value) in parts {
        body += "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\""
        if let filename { body += "; filename=\"\(filename)\"\r\nContent-Type: text/plain" }
        body += "\r\n\r\n\(value)\r\n"
    }
    body += "--\(boundary)--\r\n"
    return Array(body.utf8)
}

private func post(_ path: String, body: [UInt8], extra: String = "", boundary: String = "B") -> [UInt8] {
    Array(("POST \(path) HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=\(boundary)\r\n"
        + "Content-Length: \(body.count)\r\n\(extra)\r\n").utf8) + body
}

private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

private func rig(_ script: ExchangeRig.UpstreamScript = .init(), rules: Bool = true) throws -> ExchangeRig {
    ExchangeRig(config: try ExchangeRig.configuration(), policy: rules ? try policy() : nil, script: script)
}

@Suite struct ExchangeMachineTests {
    @Test func allowedFormIsForwardedCanonicallyAndPooled() throws {
        let r = try rig()
        r.run(client: post("/up", body: form([("title", nil, "hi"), ("doc", "a.txt", "text")])), clientEOF: false)
        #expect(r.violations() == [])
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 200 OK"))
        #expect(r.records.count == 1)
        #expect(r.records[0]?.decision == .allow)
        #expect(r.released == [true])
        let up = text(r.connections[0].received)
        #expect(up.contains("--RigBoundary0123456789abcdefXYZ--\r\n"))
        #expect(up.hasSuffix("\r\n0\r\n\r\n"))
    }

    /// Without random bytes for the re-encode boundary (the CSPRNG failed), a form is refused with 503
    /// `random_unavailable`, a JSON body, an audit record and an error line; nothing reaches the upstream. The
    /// connection closes after the answer, as after any refusal before the body is read (the pool draws again for
    /// the next request: InspectSmokeTests).
    @Test(arguments: [true, false])
    func aFormWithoutRandomBytesIs503NotATrap(rules: Bool) throws {
        let r = try rig(rules: rules)
        r.context.randomFails = true
        r.run(client: post("/up", body: form([("title", nil, "hi")])), clientEOF: false)
        #expect(r.violations() == [])
        let answer = text(r.clientReceived)
        #expect(answer.hasPrefix("HTTP/1.1 503"), "\(answer)")
        #expect(answer.contains("\"error\":\"random_unavailable\""), "\(answer)")
        #expect(r.connections.allSatisfy { !text($0.received).contains("hi") })
        #expect(r.records.count == 1)
        #expect(r.records[0]?.status == 503)
        #expect(r.logs.contains { $0.contains("random bytes unavailable") })
        #expect(r.closed)
    }

    /// Bug 1: bytes after the close delimiter reached the evaluator after `end()` and trapped. Now the
    /// epilogue is the `data-after` anomaly judged by the route, in the same read or a later one: logged and
    /// dropped by default, 400 where the route says `reject`.
    @Test(arguments: [0, 1, 7])
    func epilogueAfterCloseDelimiterIsAnAnomalyNotATrap(piece: Int) throws {
        let body = form([("title", nil, "hi")]) + Array("epilogue\r\n".utf8)
        let logged = try rig()
        logged.run(client: post("/up", body: body), pieces: piece == 0 ? [] : [piece])
        #expect(logged.violations() == [])
        #expect(text(logged.clientReceived).hasPrefix("HTTP/1.1 200"))
        #expect(!text(logged.connections[0].received).contains("epilogue"))
        #expect(logged.records.first??.anomalies.contains("data-after") == true)
        let strict = try rig()
        strict.run(client: post("/strict", body: body), pieces: piece == 0 ? [] : [piece])
        #expect(strict.violations() == [])
        #expect(text(strict.clientReceived).hasPrefix("HTTP/1.1 400"))
        #expect(strict.records.count == 1)
        #expect(strict.records[0]?.decision == .reject)
    }

    /// `host` picks the route from the Host field (port ignored) and `require-header` answers 400
    /// `header_required` from the head alone: nothing reaches the upstream.
    @Test func hostRouteAndRequiredHeaderThroughTheMachine() throws {
        let body = form([("title", nil, "hi")])
        func request(host: String, token: String?) -> [UInt8] {
            Array(("POST /cond/x HTTP/1.1\r\nHost: \(host)\r\nContent-Type: multipart/form-data; boundary=B\r\n"
                + (token.map { "X-Token: \($0)\r\n" } ?? "") + "Content-Length: \(body.count)\r\n\r\n").utf8) + body
        }
        let cases: [(host: String, token: String?, status: String, decision: AuditRecord.Decision)] = [
            ("www.Example.com:8080", "ok-42", "HTTP/1.1 200", .allow),
            ("www.example.com", nil, "HTTP/1.1 400", .reject),
            ("www.example.com", "ok-x", "HTTP/1.1 400", .reject),
            ("other.test", nil, "HTTP/1.1 200", .allow),
        ]
        for c in cases {
            let r = try rig()
            r.run(client: request(host: c.host, token: c.token), clientEOF: false)
            #expect(r.violations() == [])
            #expect(text(r.clientReceived).hasPrefix(c.status), "\(c)")
            #expect(r.records.first??.decision == c.decision, "\(c)")
            if c.decision == .reject {
                #expect(text(r.clientReceived).contains("header_required"), "\(c)")
                #expect(r.connections.allSatisfy { $0.received.isEmpty }, "\(c)")
            }
        }
    }

    /// Bug 2: a response with `Connection: close` returned its connection to the pool.
    @Test(arguments: ["HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
                      "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
                      "HTTP/1.1 200 OK\r\n\r\nok"])
    func responseThatEndsTheConnectionIsNeverPooled(response: String) throws {
        var script = ExchangeRig.UpstreamScript()
        script.response = Array(response.utf8)
        script.then = response.contains("Content-Length") ? .stayOpen : .close
        let r = try rig(script)
        let request = post("/up", body: form([("title", nil, "a")]))
        r.run(client: request + request, clientEOF: false)
        #expect(r.violations() == [])
        #expect(!r.released.contains(true))
        #expect(ExchangeRig.finalStatusLines(in: r.clientReceived) >= 1)
    }

    /// Bug 3: an upstream that answers 403 and stops reading lost its answer to a 502.
    @Test func earlyAnswerReachesTheClientAfterAFailedWrite() throws {
        var script = ExchangeRig.UpstreamScript()
        script.answer = .atHead
        script.readLimit = 300
        script.response = Array("HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 4\r\n\r\nnope".utf8)
        script.then = .reset
        let big = [UInt8](repeating: UInt8(ascii: "x"), count: 200_000)
        let request = Array(("POST /any HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\n"
            + "Content-Length: \(big.count)\r\n\r\n").utf8) + big
        let r = try rig(script, rules: false)
        r.run(client: request, pieces: [4096])
        #expect(r.violations() == [])
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 403 Forbidden"))
        #expect(text(r.clientReceived).hasSuffix("nope"))
    }

    /// Bug 4: a rejection mid-body closed at once (a reset for the client). Now the answer is followed by a
    /// FIN and the rest of the body is read and discarded; the connection closes at the client's EOF.
    @Test func rejectionMidBodyLingersInsteadOfResetting() throws {
        let big = String(repeating: "y", count: 5000)
        let body = form([("title", nil, "t"), ("doc", "a.txt", big)])
        let r = try rig()
        r.run(client: post("/up", body: body), pieces: [512], clientEOF: false, advanceTime: false)
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 413"))
        #expect(r.shutdownSent)
        #expect(!r.closed, "closed with the client still sending: the kernel would reset")
        r.send(.clientEOF)
        #expect(r.closed)
        #expect(r.violations() == [])
    }

    /// Lingering is bounded: a client that never stops sending is closed at the byte budget.
    @Test func lingeringStopsAtTheByteBudget() throws {
        var config = try ExchangeRig.configuration()
        config.linger.bytes = 10_000
        let r = ExchangeRig(config: config, policy: try policy())
        let body = form([("title", nil, "t"), ("doc", "a.txt", String(repeating: "z", count: 50_000))])
        r.run(client: post("/up", body: body), pieces: [1000], clientEOF: false, advanceTime: false)
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 413"))
        #expect(r.closed)
    }

    /// Bug 6: the upstream down was recorded as `allow` with queued bytes counted as sent.
    @Test func upstreamDownIsA502WithNothingSent() throws {
        var script = ExchangeRig.UpstreamScript()
        script.connect = .refuse
        let r = try rig(script)
        r.run(client: post("/up", body: form([("title", nil, "a")])))
        #expect(r.violations() == [])
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 502"))
        #expect(r.records.first??.bytesUpstream == 0)
    }

    /// The upstream down: the record says `error` 502, and none of the queued body counts as sent.
    @Test func upstreamDownIsRecordedAsAnErrorWithNothingSent() throws {
        var script = ExchangeRig.UpstreamScript()
        script.connect = .refuse
        let r = try rig(script)
        r.run(client: post("/up", body: form([("title", nil, "a"), ("doc", "a.txt", String(repeating: "d", count: 900))])))
        let record = try #require(r.records.first ?? nil)
        #expect(record.decision == .error)
        #expect(record.status == 502)
        #expect(record.bytesIn > 900)
        #expect(record.bytesUpstream == 0)
        #expect(r.violations() == [])
    }

    /// A spooled rejection never dials the upstream: 0 bytes upstream and no upstream time.
    @Test func rejectedSpooledRequestIsLoggedWithNothingUpstream() throws {
        let r = try rig()
        let body = form([("title", nil, "t"), ("doc", "a.txt", String(repeating: "q", count: 4000))])
        r.run(client: post("/spool", body: body))
        let record = try #require(r.records.first ?? nil)
        #expect(record.decision == .reject)
        #expect(record.status == 413)
        #expect(record.reason == "file_too_large")
        #expect(record.bytesUpstream == 0)
        #expect(record.upstreamMs == nil)
    }

    /// A request rejected mid-stream counts only the body bytes the upstream took, never what was still queued.
    @Test(arguments: [nil, 120, 400])
    func rejectedStreamedRequestCountsOnlyWhatTheUpstreamTook(readLimit: Int?) throws {
        var script = ExchangeRig.UpstreamScript()
        script.readLimit = readLimit
        let r = try rig(script)
        let body = form([("title", nil, "t"), ("doc", "a.txt", String(repeating: "q", count: 3000))])
        r.run(client: post("/up", body: body))
        let record = try #require(r.records.first ?? nil)
        #expect(record.decision == .reject || record.decision == .error)
        let received = r.connections.map { conn -> Int in
            let head = (ExchangeRig.find([13, 10, 13, 10], in: conn.received) ?? -4) + 4
            return ExchangeRig.dechunked(conn.received).count - head
        }.reduce(0, +)
        #expect(record.bytesUpstream <= received)
        if let readLimit { #expect(record.bytesUpstream < readLimit) }
        #expect(record.upstreamMs != nil)
        #expect(r.violations() == [])
    }

    /// The upstream closes in the middle of its response body: `aborted` (the response had started), never
    /// `reject`, so `formwall tail --decision reject` does not list it.
    @Test func responseCutShortIsAbortedNotRejected() throws {
        var script = ExchangeRig.UpstreamScript()
        script.response = Array("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part of it".utf8)
        script.then = .close
        let r = try rig(script)
        r.run(client: post("/up", body: form([("title", nil, "a")])), clientEOF: false)
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 200"))
        #expect(r.closed)
        let record = try #require(r.records.first ?? nil)
        #expect(record.decision == .aborted)
        #expect(record.status == 200)
        #expect(record.upstreamMs != nil)
        #expect(r.violations() == [])
    }

    @Test func connectThatNeverCompletesTimesOutWith504() throws {
        var script = ExchangeRig.UpstreamScript()
        script.connect = .ignore
        let r = try rig(script)
        r.run(client: post("/up", body: form([("title", nil, "a")])), clientEOF: false)
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 504"))
        #expect(r.violations() == [])
    }

    /// A pooled connection the upstream had closed: the request is replayed once on a fresh connection.
    @Test func staleReusedConnectionIsReplayedOnce() throws {
        var script = ExchangeRig.UpstreamScript()
        script.firstIsPooled = true
        script.firstIsStale = true
        let r = try rig(script)
        r.run(client: post("/up", body: form([("title", nil, "replay me")])), clientEOF: false)
        #expect(r.violations() == [])
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 200"))
        #expect(r.connections.count == 2)
        #expect(r.connections[0].received == r.connections[1].received)
        #expect(r.actions.contains { if case .reconnectUpstream = $0 { return true } else { return false } })
    }

    /// Part data goes upstream straight from the client's buffer and the replay log only records where it was:
    /// the next read into that buffer (the rig overwrites consumed bytes with 0xEE first, as a read may) copies
    /// it. A replay after several such reads still sends exactly the bytes of the first attempt.
    @Test(arguments: [3000, 4096, 7000]) func replayAfterLaterClientReadsSendsTheOriginalBytes(piece: Int) throws {
        var script = ExchangeRig.UpstreamScript()
        script.firstIsPooled = true
        script.firstIsStale = true
        var letters: [UInt8] = []
        for i in 0..<20_000 { letters.append(UInt8(0x41 + (i * 7 + i / 13) % 26)) }
        let file = String(decoding: letters, as: UTF8.self)
        let request = post("/big", body: form([("title", nil, "t"), ("doc", "a.bin", file)]))
        script.staleAfter = request.count - 100   // most of the request has gone out when the upstream fails
        let r = try rig(script)
        r.run(client: request, pieces: [piece], clientEOF: false)
        #expect(r.violations() == [])
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 200"))
        try #require(r.connections.count == 2)
        let first = r.connections[0].received
        let second = r.connections[1].received
        #expect(first.count >= script.staleAfter)
        #expect(ExchangeRig.endsWith(Array("\r\n0\r\n\r\n".utf8), second))
        #expect(!second.contains(0xEE))
        let replayedTheSameBytes = second.count >= first.count && second[..<first.count].elementsEqual(first)
        #expect(replayedTheSameBytes, "the replay differs from the first attempt's bytes")
        #expect(r.machine.upstreamOut.lentTotal > 0)
    }

    /// Spool mode dials the upstream only once the body is complete: a rejected request opens nothing.
    @Test func rejectedSpooledRequestNeverOpensAnUpstreamConnection() throws {
        let r = try rig()
        let body = form([("title", nil, "t"), ("doc", "a.txt", String(repeating: "q", count: 4000))])
        r.run(client: post("/spool", body: body))
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 413"))
        #expect(r.connections.isEmpty)
        #expect(r.violations() == [])
    }

    @Test func acceptedSpooledRequestIsSentWithContentLength() throws {
        let r = try rig()
        r.run(client: post("/spool", body: form([("title", nil, "t"), ("doc", "a.txt", "small")])), clientEOF: false)
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 200"))
        let up = text(r.connections[0].received)
        #expect(up.contains("Content-Length: "))
        #expect(!up.contains("chunked"))
        #expect(r.violations() == [])
    }

    /// Hold mode: a file over its limit never reaches the upstream; the field before it may.
    @Test func heldFileOverItsLimitNeverReachesTheUpstream() throws {
        let r = try rig()
        let secret = String(repeating: "S", count: 3000)
        r.run(client: post("/hold", body: form([("title", nil, "t"), ("doc", "a.txt", secret)])))
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 413"))
        #expect(!r.connections.contains { text($0.received).contains("SSSS") })
        #expect(r.violations() == [])
    }

    /// A client that goes away mid-upload: the upstream never sees the last chunk, one record.
    @Test func clientEOFMidUploadAbortsTheUpstreamRequest() throws {
        let body = form([("title", nil, "t"), ("doc", "a.txt", "abc")])
        let request = post("/up", body: body)
        let r = try rig()
        r.run(client: Array(request.prefix(request.count - 20)), clientEOF: true)
        #expect(r.records.count == 1)
        #expect(!r.connections.contains { ExchangeRig.endsWith(Array("\r\n0\r\n\r\n".utf8), $0.received) })
        #expect(r.closed)
        #expect(r.violations() == [])
    }

    /// The outcome does not depend on how the client's bytes are cut: the same answer, the same records and
    /// the same de-chunked bytes upstream (chunk sizes follow the reads).
    @Test func outcomeIsIndependentOfSplits() throws {
        let request = post("/up", body: form([("title", nil, "hello"), ("doc", "x.txt", "data--B\r\n-")]))
            + post("/up", body: form([("title", nil, "second")]))
            + post("/up", body: form([("title", nil, "third"), ("doc", "big.txt", String(repeating: "b", count: 2000))]))
        let whole = try rig()
        whole.run(client: request, clientEOF: false)
        #expect(whole.violations() == [])
        #expect(whole.records.map { $0?.status } == [200, 200, 413])
        func summary(_ r: ExchangeRig) -> [String] {
            r.records.map { "\($0?.decision.rawValue ?? "-") \($0?.status ?? 0) \($0?.reason ?? "-") \($0?.parts.count ?? 0)" }
        }
        for piece in [1, 2, 3, 5, 64] {
            let split = try rig()
            split.run(client: request, pieces: [piece], clientEOF: false)
            // The same answers; a size in a violation's detail is where the read crossed the limit.
            #expect(ExchangeRig.finalStatusLines(in: split.clientReceived)
                    == ExchangeRig.finalStatusLines(in: whole.clientReceived), "piece \(piece)")
            #expect(split.clientReceived.prefix(80) == whole.clientReceived.prefix(80), "piece \(piece)")
            #expect(summary(split) == summary(whole), "piece \(piece)")
            let completed = { (r: ExchangeRig) in r.connections.filter { ExchangeRig.endsWith(Array("\r\n0\r\n\r\n".utf8), $0.received) } }
            #expect(completed(split).map { ExchangeRig.dechunked($0.received) } == completed(whole).map { ExchangeRig.dechunked($0.received) },
                    "piece \(piece)")
        }
    }

    /// Found by the fuzzer's structural mutator: with small buffers, replaying a held part reserved 128 KiB in
    /// an output buffer capped lower, and the exchange failed with 500 instead of the policy's 415.
    @Test(arguments: [0, 1, 5, 64])
    func heldPartReplaysWithinASmallOutputBuffer(piece: Int) throws {
        let rules = """
        route / {
            unknown strip;
            field note { max 8; action strip; pattern "^[0-9]+$"; }
            file photo { types image/png; }
        }
        """
        let policy = try #require(RuleChecker.compile(source: rules, file: "small.rules").policy)
        var config = try ExchangeRig.configuration()
        config.buffers.outputHighWater = 2048
        let body = form([("note", nil, "12"), ("photo", "a.png", "%PDF-1.4\n%")])
        let r = ExchangeRig(config: config, policy: policy)
        r.run(client: post("/up", body: body), pieces: piece == 0 ? [] : [piece])
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 415"), "piece \(piece)")
        #expect(r.records.first??.reason == "type_not_allowed")
        #expect(r.violations() == [])
    }

    /// A chunked re-encoded body cannot say in its head what will be stripped: the route's `modified-header` goes
    /// in a trailer field, announced by `Trailer`, and only when a part was stripped or quarantined.
    @Test(arguments: [0, 3])
    func strippedPartsAreNamedInATrailerOfAChunkedBody(piece: Int) throws {
        let rules = """
        route / {
            unknown strip;
            field title;
        }
        """
        let policy = try #require(RuleChecker.compile(source: rules, file: "trailer.rules").policy)
        let r = ExchangeRig(config: try ExchangeRig.configuration(), policy: policy)
        let request = Array("POST /up HTTP/1.1\r\nHost: a\r\nTrailer: X-Formwall-Modified\r\n".utf8)
            + post("/up", body: form([("title", nil, "t"), ("extra field", nil, "x")])).dropFirst(28)
        r.run(client: Array(request), pieces: piece == 0 ? [] : [piece], clientEOF: false)
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 200"))
        let up = text(r.connections[0].received)
        #expect(up.components(separatedBy: "Trailer: ").count == 2, "one Trailer field, Formwall's own")
        #expect(up.contains("\r\nTrailer: X-Formwall-Modified\r\n"))
        #expect(up.hasSuffix("\r\n0\r\nX-Formwall-Modified: stripped=extra%20field\r\n\r\n"))
        #expect(ExchangeRig.isCompleteRequest(r.connections[0].received))
        #expect(r.violations() == [])

        let clean = ExchangeRig(config: try ExchangeRig.configuration(), policy: policy)
        clean.run(client: post("/up", body: form([("title", nil, "t")])), clientEOF: false)
        #expect(text(clean.connections[0].received).hasSuffix("\r\n0\r\n\r\n"), "no trailer when nothing changed")
    }

    /// Part data is lent from the client's buffer to the upstream queue (no copy) and copied only when the
    /// upstream takes less than was queued: what the upstream receives is the same for every window and every way
    /// the client's bytes arrive, and the rig overwrites consumed client bytes before each new piece, so a span
    /// left lent after a write would show up as 0xEE bytes.
    @Test(arguments: [0, 1, 4093, 70000])
    func partDataLentFromTheClientBufferReachesTheUpstreamIntact(piece: Int) throws {
        var data: [UInt8] = []
        var x: UInt32 = 12345
        for _ in 0..<200_000 { x = x &* 1_103_515_245 &+ 12345; data.append(UInt8(ascii: "a") + UInt8((x >> 16) % 26)) }
        let body = form([("title", nil, "t"), ("blob", "b.bin", String(decoding: data, as: UTF8.self))])
        let request = post("/big", body: body) + Array("GET /next HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
        var received: [[UInt8]] = []
        // One byte per read lends nothing (every span is below the lending minimum): two windows suffice there.
        for window in piece == 1 ? [nil, 997] : [nil, 1_000_000, 65536, 4099, 997] as [Int?] {
            var script = ExchangeRig.UpstreamScript()
            script.window = window
            script.response = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
            let r = try rig(script, rules: false)
            r.run(client: request, pieces: [piece], clientEOF: false)
            #expect(r.violations() == [])
            #expect(r.records.count == 2, "window \(String(describing: window))")
            let up = r.connections.flatMap(\.received)
            received.append(up)
            // The canonical body carries the part's bytes unchanged (chunk framing aside).
            let dechunked = ExchangeRig.dechunked(Array(up[..<(ExchangeRig.find(Array("GET /next".utf8), in: up) ?? up.count)]))
            #expect(ExchangeRig.contains(Array(data.prefix(4096)), in: dechunked))
            #expect(ExchangeRig.contains(Array(data.suffix(4096)), in: dechunked))
            #expect(!ExchangeRig.contains([0xEE, 0xEE, 0xEE, 0xEE], in: up))
            let queue = r.machine.upstreamOut
            guard piece != 1 else {
                // One byte per read: every span is below the lending minimum, so everything is copied.
                #expect(queue.lentTotal == 0)
                continue
            }
            #expect(queue.lentTotal > 150_000, "part data was lent, not copied")
            if let window, window < 65536 { #expect(queue.settledBytes > 0, "short writes kept lent bytes, copied") }
            // Only what arrived before the upstream was connected (at most one full client buffer) had to wait.
            if window == nil {
                #expect(queue.settledBytes <= UInt64(r.context.config.buffers.clientRead), "nothing else waited")
            }
        }
        #expect(Set(received.map { $0 }).count == 1, "the upstream saw the same bytes for every window")
    }

    /// Random scripts and random cuts: the invariants hold for every combination.
    @Test func invariantsHoldForRandomScripts() throws {
        var generator = SplitMix(seed: 0x5eed)
        let requests = [
            post("/up", body: form([("title", nil, "a"), ("doc", "a.txt", String(repeating: "d", count: 900))])),
            post("/up", body: form([("title", nil, "a"), ("doc", "a.txt", String(repeating: "d", count: 3000))])),
            post("/up", body: form([("other", nil, "a")])),
            post("/hold", body: form([("doc", "a.txt", "x")])),
            post("/spool", body: form([("title", nil, "s")])),
            Array("GET /x HTTP/1.1\r\nHost: a\r\n\r\n".utf8),
            Array("GARBAGE\r\n\r\n".utf8),
        ]
        let responses = ["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
                         "HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 1\r\n\r\nn",
                         "HTTP/1.0 200 OK\r\n\r\nbody", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
                         "garbage"]
        for round in 0..<300 {
            var script = ExchangeRig.UpstreamScript()
            script.connect = [.accept, .accept, .accept, .refuse, .ignore][Int(generator.next() % 5)]
            script.answer = [.atEnd, .atEnd, .atHead, .afterBodyBytes(100), .never][Int(generator.next() % 5)]
            script.response = Array(responses[Int(generator.next() % UInt64(responses.count))].utf8)
            script.then = [.stayOpen, .close, .reset, .stall][Int(generator.next() % 4)]
            if generator.next() % 5 == 0 { script.readLimit = Int(generator.next() % 500) }
            if generator.next() % 3 == 0 { script.window = [1, 7, 100, 2500][Int(generator.next() % 4)] }
            script.firstIsPooled = generator.next() % 3 == 0
            script.firstIsStale = script.firstIsPooled && generator.next() % 2 == 0
            var input: [UInt8] = []
            for _ in 0..<(1 + Int(generator.next() % 3)) {
                input += requests[Int(generator.next() % UInt64(requests.count))]
            }
            let piece = [0, 1, 3, 17, 500][Int(generator.next() % 5)]
            let r = ExchangeRig(config: try ExchangeRig.configuration(), policy: try policy(), script: script)
            let eof = generator.next() % 2 == 0
            r.run(client: input, pieces: [piece], clientEOF: eof)
            let problems = r.violations()
            if !problems.isEmpty {
                print("ROUND \(round): \(problems) then \(script.then) answer \(script.answer) readLimit \(String(describing: script.readLimit)) stale \(script.firstIsStale) resp \(text(script.response)) piece \(piece) eof \(eof)\n\(text(input).prefix(400))\n"
                      + "CLIENT \(text(r.clientReceived).prefix(400))\nACTIONS \(r.actions)\nCONNS \(r.connections.map { text($0.received) })")
            }
            #expect(problems == [], "round \(round)")
            if !problems.isEmpty { return }
        }
    }
}

