import Testing
@testable import Proxy

// Which timeout runs when, at the edges of an exchange, in the pure machine with a fake clock:
// - a client that reads a response slowly, after the upstream has finished sending it: the tail of the response
//   still waits in Formwall's output buffer. Only the client send timeout (no byte taken for that long) may cut
//   it; the body and keep-alive timeouts, measured from the client's last request byte, must not;
// - a body hold that ends between two ticks: the body timeout counts from its end, not from the tick before.

private let size = 1 << 20
private let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

private func response(close: Bool) -> [UInt8] {
    Array("HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n\(close ? "Connection: close\r\n" : "")\r\n".utf8) + payload
}

/// The rig with 5-second client timeouts and a client that reads `rate` bytes a second.
private func slowRig(rate: Int, closeAfter: Bool, send: Double = 5) throws -> ExchangeRig {
    var config = try ExchangeRig.configuration()
    config.timeouts.clientBody = 5
    config.timeouts.clientKeepAlive = 5
    config.timeouts.clientSend = send
    var script = ExchangeRig.UpstreamScript()
    script.answer = .atHead
    script.response = response(close: closeAfter)
    let rig = ExchangeRig(config: config, policy: nil, script: script)
    rig.clientReadRate = rate
    return rig
}

private func request(close: Bool) -> [UInt8] {
    Array("GET /download HTTP/1.1\r\nHost: a\r\n\(close ? "Connection: close\r\n" : "")\r\n".utf8)
}

private func body(_ received: [UInt8]) -> ArraySlice<UInt8> {
    guard let end = ExchangeRig.find([13, 10, 13, 10], in: received) else { return [] }
    return received[(end + 4)...]
}

@Suite struct SlowClientResponseTests {
    /// 1 MiB at 64 KiB a second takes 16 s, three times every client timeout: each second the client takes bytes,
    /// so the response arrives whole, on a connection that closes (`Connection: close`) and on one kept alive.
    @Test(arguments: [true, false])
    func slowReaderGetsTheWholeResponse(closeAfter: Bool) throws {
        let r = try slowRig(rate: 64 * 1024, closeAfter: closeAfter)
        r.run(client: request(close: closeAfter), clientEOF: false)
        #expect(r.violations() == [])
        let whole = body(r.clientReceived).elementsEqual(payload)
        #expect(whole, "received \(body(r.clientReceived).count) of \(size) bytes, or other bytes")
        #expect(r.recordSummary == ["allow 200 -"])
        if closeAfter { #expect(r.closed) } else { #expect(r.machine.isIdle) }
    }

    /// A client that takes nothing for the send timeout while the tail waits is cut then, not before.
    @Test(arguments: [true, false])
    func readerThatStopsIsCutAfterTheSendTimeout(closeAfter: Bool) throws {
        // 128 KiB a second for the first two seconds only: then the client stops reading. The send timeout (8 s)
        // is longer than the body and keep-alive timeouts (5 s), which must not cut it first.
        let r = try slowRig(rate: 128 * 1024, closeAfter: closeAfter, send: 8)
        r.run(client: request(close: closeAfter), clientEOF: false, advanceTime: false)
        let start = r.now
        var stoppedAt: UInt64?
        var lastTaken = 0
        for _ in 0..<40 where !r.closed {
            if stoppedAt == nil && r.now - start >= 2_000_000_000 {
                r.clientReadRate = 0
                stoppedAt = r.now
                lastTaken = r.clientReceived.count
            }
            r.runClock(limit: 1)
        }
        #expect(r.closed)
        let stopped = try #require(stoppedAt)
        // Cut by the send timeout (8 s after its last byte taken, plus up to two ticks), not before.
        #expect(r.now - stopped >= 8_000_000_000 && r.now - stopped <= 10_000_000_000)
        #expect(r.clientReceived.count == lastTaken && body(r.clientReceived).count < size)
        let prefix = body(r.clientReceived).elementsEqual(payload.prefix(body(r.clientReceived).count))
        #expect(prefix, "what arrived is not the response's start")
    }
}

/// The upstream holds a body up across several ticks, lets it through just before the next tick, and the client's
/// next bytes come just after that tick: the client was silent for a fraction of a second while Formwall wanted to
/// read, so a 1 s body timeout must not end it (it did: the tick counted from the previous tick, held up, 1.05 s
/// before).
@Suite struct HoldEndingBetweenTicksTests {
    @Test func bodyTimeoutCountsFromTheEndOfTheHoldNotTheTickBefore() throws {
        var config = try ExchangeRig.configuration()
        config.timeouts.clientBody = 1
        let r = ExchangeRig(config: config, policy: nil)
        r.tickNanos = 1_050_000_000
        let body = [UInt8](repeating: 0x61, count: 4 << 20)
        let head = Array(("POST /u HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\n"
            + "Content-Length: \(body.count)\r\n\r\n").utf8)
        r.upstreamPaused = true
        // The client sends until Formwall stops reading (the upstream takes nothing); three ticks pass so.
        let request = head + body
        let sent = r.run(client: request, clientEOF: false, advanceTime: false, waitForClock: false)
        #expect(!r.machine.wantsClientRead && sent < request.count, "the body was not held up")
        r.runClock(limit: 3)
        #expect(r.recordSummary.isEmpty)
        // 0.9 s after the last tick the upstream takes everything; 0.15 s later comes the next tick.
        r.elapse(900_000_000)
        r.upstreamPaused = false
        r.elapse(0)
        #expect(r.machine.wantsClientRead)
        r.runClock(limit: 1)
        #expect(r.recordSummary.isEmpty)
        // The client sends the rest: the request completes.
        r.run(client: Array(request[sent...]), clientEOF: false)
        #expect(r.recordSummary == ["allow 200 -"])
        #expect(r.violations() == [])
    }
}

@Suite struct PipelinedBehindSlowResponseTests {
    /// Two pipelined GETs behind a 1 MiB response read at 64 KiB a second (16 s, past the 10 s header timeout):
    /// the second is answered after the first, whole, not with a 408.
    @Test func pipelinedRequestWaitsForTheSlowResponseAhead() throws {
        let r = try slowRig(rate: 64 * 1024, closeAfter: false)
        r.run(client: request(close: false) + request(close: false), clientEOF: false)
        #expect(r.violations() == [])
        #expect(r.recordSummary == ["allow 200 -", "allow 200 -"])
        // Each response: its head, then the payload whole.
        var rest = r.clientReceived[...]
        for _ in 0..<2 {
            let end = try #require(ExchangeRig.find([13, 10, 13, 10], in: Array(rest)))
            #expect(ExchangeRig.startsWith(Array("HTTP/1.1 200 OK".utf8), Array(rest.prefix(15))))
            let start = rest.startIndex + end + 4
            let whole = rest[start...].prefix(size).elementsEqual(payload)
            #expect(whole, "a response's body is not the payload")
            rest = rest[min(rest.endIndex, start + size)...]
        }
        #expect(rest.isEmpty)
    }
}
