import Testing
@testable import Proxy

// Shapes the response fuzzer (fuzz/ResponseFuzz.swift) found, kept as tests with the harness's configuration.
// docs/fuzzing.md lists them.

@Suite struct ResponseFuzzFindingTests {
    /// A response declaring `Content-Length: 18446744073709551615` (UInt64.max) and sending one byte: the rig's
    /// count of final responses in the client's stream added the declared length to an offset and trapped (test
    /// support, not the proxy: its first input, 2026-12-05). The proxy relays the head, the exchange ends when the
    /// upstream goes silent, and the outcome does not depend on how the response's bytes arrive.
    @Test(arguments: [0, 1, 7, 64])
    func aResponseDeclaringUInt64MaxBytesEndsTheExchange(pieces: Int) throws {
        let config = try ExchangeRig.fuzzConfiguration()
        var script = ExchangeRig.UpstreamScript()
        script.response = Array("HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\nx".utf8)
        script.responsePiece = pieces == 0 ? nil : pieces
        let rig = ExchangeRig(config: config, policy: nil, script: script)
        rig.run(client: Array("GET /a HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
        #expect(rig.violations() == [])
        #expect(ExchangeRig.finalStatusLines(in: rig.clientReceived) == 1)
        let answer = String(decoding: rig.clientReceived, as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(answer.contains("\r\nContent-Length: 18446744073709551615\r\n"))
        #expect(answer.hasSuffix("\r\n\r\nx"), "\(answer)")
        #expect(rig.records.count == 1)
        #expect(rig.records.first??.status == 200)
        #expect(rig.records.first??.reason != nil, "a response cut short is recorded with its reason")
        #expect(rig.closed)
    }
}
