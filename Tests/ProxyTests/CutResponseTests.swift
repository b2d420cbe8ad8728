import Audit
import HTTP1
import Testing
@testable import Proxy

// A response whose body ends when the upstream closes (no Content-Length, not chunked) cannot show a cut by
// itself: a reset after 100,000 bytes and a clean close after them look the same to a client that gets a FIN.
// Formwall relays such a body chunked to HTTP/1.1 clients (the last chunk only after a clean close) and ends an
// HTTP/1.0 client's connection with a reset when the upstream's ended in one; the audit record says aborted.

private let payload = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

/// The rig with an upstream that answers `200` close-delimited with `payload`, then closes or resets. With
/// `slowClient`, small buffers and a client that takes 7,000 bytes a second, so the client's output fills.
private func run(client version: String, then: ExchangeRig.UpstreamScript.Then, pieces: Int? = nil,
                 slowClient: Bool = false) throws -> ExchangeRig {
    var script = ExchangeRig.UpstreamScript()
    script.response = Array("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n".utf8) + payload
    script.then = then
    script.responsePiece = pieces
    let config = slowClient ? try ExchangeRig.fuzzConfiguration() : try ExchangeRig.configuration()
    let rig = ExchangeRig(config: config, policy: nil, script: script)
    if slowClient { rig.clientReadRate = 7_000 }
    rig.run(client: Array("GET /download \(version)\r\nHost: a\r\n\r\n".utf8))
    return rig
}

/// The first response in the client's stream: its head, its payload (de-chunked) and whether the payload reached
/// its framing's end (the last chunk, for chunked; never, for close-delimited).
private func response(_ bytes: [UInt8]) throws -> (head: HTTPResponseHead, body: [UInt8], ended: Bool) {
    let first = try #require(ExchangeRig.relayedResponses(in: bytes).responses.first, "no complete response head")
    return (first.head, first.payload, first.ended)
}

@Suite struct CutResponseTests {
    @Test(arguments: [nil, 1, 4096])
    func aCloseDelimitedBodyGoesToAnHTTP11ClientChunkedAndEndsOnlyAtACleanClose(pieces: Int?) throws {
        let rig = try run(client: "HTTP/1.1", then: .close, pieces: pieces)
        #expect(rig.violations() == [])
        let (head, body, ended) = try response(rig.clientReceived)
        #expect(head.framing == .chunked)
        #expect(body == payload)
        #expect(ended, "a clean close ends the body with the last chunk")
        #expect(!rig.resetSent)
        #expect(rig.records.first??.decision == .allow)
    }

    @Test func aClientWhoseOutputIsFullStillGetsTheLastChunk() throws {
        let rig = try run(client: "HTTP/1.1", then: .close, slowClient: true)
        #expect(rig.violations() == [])
        let (_, body, ended) = try response(rig.clientReceived)
        #expect(body == payload)
        #expect(ended)
        #expect(rig.records.first??.decision == .allow)
    }

    @Test(arguments: [nil, 1, 4096])
    func aResetAfterPartOfACloseDelimitedBodyIsNoEndForAnHTTP11Client(pieces: Int?) throws {
        let rig = try run(client: "HTTP/1.1", then: .reset, pieces: pieces)
        #expect(rig.violations() == [])
        let (head, body, ended) = try response(rig.clientReceived)
        #expect(head.framing == .chunked)
        #expect(body == payload, "what the upstream sent before its reset is relayed")
        #expect(!ended, "no last chunk: the client can tell the body was cut")
        let record = try #require(rig.records.first ?? nil)
        #expect(record.decision == .aborted)
        #expect(record.status == 200)
        #expect(record.reason == "upstream_closed")
        #expect(record.error == "upstream_reset_mid_response")
    }

    @Test func aResetAfterPartOfACloseDelimitedBodyResetsAnHTTP10Client() throws {
        let rig = try run(client: "HTTP/1.0", then: .reset)
        #expect(rig.violations() == [])
        let (head, body, _) = try response(rig.clientReceived)
        #expect(head.framing == .closeDelimited, "an HTTP/1.0 client reads to the close")
        #expect(body == payload)
        #expect(rig.resetSent, "a FIN would read as the body's end")
        #expect(rig.records.first??.decision == .aborted)
    }

    @Test func aChunkedBodyCutBeforeItsLastChunkResetsAnHTTP10Client() throws {
        var script = ExchangeRig.UpstreamScript()
        script.response = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n".utf8)
        script.then = .close
        let rig = ExchangeRig(config: try ExchangeRig.configuration(), policy: nil, script: script)
        rig.run(client: Array("GET /download HTTP/1.0\r\nHost: a\r\n\r\n".utf8))
        #expect(rig.violations() == [])
        let (head, body, _) = try response(rig.clientReceived)
        #expect(head.framing == .closeDelimited, "an HTTP/1.0 client gets the payload close-delimited")
        #expect(body == Array("0123456789abcdef".utf8))
        #expect(rig.resetSent)
        #expect(rig.records.first??.error == "upstream_closed_mid_response")
    }

    @Test func aCleanCloseEndsAnHTTP10ClientsBodyWithAFin() throws {
        let rig = try run(client: "HTTP/1.0", then: .close)
        #expect(rig.violations() == [])
        let (head, body, _) = try response(rig.clientReceived)
        #expect(head.framing == .closeDelimited)
        #expect(body == payload)
        #expect(rig.closed && !rig.resetSent)
        #expect(rig.records.first??.decision == .allow)
    }
}
