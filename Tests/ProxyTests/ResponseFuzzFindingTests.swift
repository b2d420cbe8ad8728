import Testing
@testable import Proxy

// Shapes the response fuzzer (fuzz/ResponseFuzz.swift) found, kept as tests with the harness's configuration.
// docs/fuzzing.md lists them.

@Suite struct ResponseFuzzFindingTests {
    /// The rig's count of final responses in the client's stream added a declared Content-Length to an offset
    /// and trapped on `Content-Length: 18446744073709551615` (UInt64.max): test support, not the proxy, the
    /// fuzzer's first input (2026-12-05). The parser now refuses that length, so the count sees no response
    /// there; the largest length it accepts, 2^63 − 1, still overflows an offset it is added to.
    @Test func theRigCountsAResponseDeclaringTheLargestLength() {
        let declaring = { (length: String) in Array("HTTP/1.1 200 OK\r\nContent-Length: \(length)\r\n\r\nx".utf8) }
        #expect(ExchangeRig.finalStatusLines(in: declaring("9223372036854775807")) == 1)
        #expect(ExchangeRig.finalStatusLines(in: declaring("18446744073709551615")) == 0)
    }

    /// The largest length the proxy accepts (2^63 − 1) with one byte behind it: the proxy relays the head, the
    /// exchange ends when the upstream goes silent, and the outcome does not depend on how the response's bytes
    /// arrive.
    @Test(arguments: [0, 1, 7, 64])
    func aResponseDeclaringTheLargestLengthEndsTheExchange(pieces: Int) throws {
        let rig = try Self.play("9223372036854775807", pieces: pieces)
        #expect(rig.violations() == [])
        #expect(ExchangeRig.finalStatusLines(in: rig.clientReceived) == 1)
        let answer = String(decoding: rig.clientReceived, as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(answer.contains("\r\nContent-Length: 9223372036854775807\r\n"))
        #expect(answer.hasSuffix("\r\n\r\nx"), "\(answer)")
        #expect(rig.records.count == 1)
        #expect(rig.records.first??.status == 200)
        #expect(rig.records.first??.reason != nil, "a response cut short is recorded with its reason")
        #expect(rig.closed)
    }

    /// One more, or UInt64.max (the fuzzer's input): a length that a signed 64-bit parser cannot hold is a
    /// malformed response (502 `bad_upstream_response`), never relayed.
    @Test(arguments: ["9223372036854775808", "18446744073709551615"], [0, 1, 7, 64])
    func aResponseDeclaringMoreIsABadGateway(length: String, pieces: Int) throws {
        let rig = try Self.play(length, pieces: pieces)
        #expect(rig.violations() == [])
        #expect(ExchangeRig.finalStatusLines(in: rig.clientReceived) == 1)
        let answer = String(decoding: rig.clientReceived, as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 502 "), "\(answer)")
        #expect(answer.contains("bad_upstream_response"))
        #expect(!answer.contains(length))
        #expect(rig.records.count == 1)
        #expect(rig.records.first??.status == 502)
    }

    /// A close-delimited body goes to an HTTP/1.1 client chunked, a chunk per piece read from the upstream, so the
    /// client's bytes depend on the pieces and its payload must not: the harness compared the raw bytes and stopped
    /// on the seed `HTTP/1.0 200 OK` + `close-delimited` in pieces of one byte (2026-12-07). It compares each
    /// chunked body's payload (`ExchangeRig.responsesDechunked`).
    @Test(arguments: [ExchangeRig.UpstreamScript.Then.stayOpen, .close, .reset])
    func aCloseDelimitedBodyReachesTheClientAlikeWhateverItsPieces(then: ExchangeRig.UpstreamScript.Then) throws {
        func play(_ pieces: Int?) throws -> ExchangeRig {
            var script = ExchangeRig.UpstreamScript()
            script.response = Array("HTTP/1.0 200 OK\r\n\r\nclose-delimited".utf8)
            script.then = then
            script.responsePiece = pieces
            let rig = ExchangeRig(config: try ExchangeRig.fuzzConfiguration(), policy: nil, script: script)
            rig.run(client: Array("GET /a HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
            #expect(rig.violations(judgingPooling: false) == [])
            return rig
        }
        let whole = try play(nil), split = try play(1)
        #expect(whole.recordSummary == split.recordSummary)
        #expect(whole.clientReceived != split.clientReceived, "chunk sizes follow the pieces")
        let payload = ExchangeRig.responsesDechunked(whole.clientReceived)
        #expect(payload == ExchangeRig.responsesDechunked(split.clientReceived))
        let text = String(decoding: payload, as: UTF8.self)
        #expect(text.hasSuffix("\r\n\r\nclose-delimited" + (then == .close ? "<last chunk>" : "")), "\(text)")
    }

    private static func play(_ length: String, pieces: Int) throws -> ExchangeRig {
        let config = try ExchangeRig.fuzzConfiguration()
        var script = ExchangeRig.UpstreamScript()
        script.response = Array("HTTP/1.1 200 OK\r\nContent-Length: \(length)\r\n\r\nx".utf8)
        script.responsePiece = pieces == 0 ? nil : pieces
        let rig = ExchangeRig(config: config, policy: nil, script: script)
        rig.run(client: Array("GET /a HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
        return rig
    }
}
