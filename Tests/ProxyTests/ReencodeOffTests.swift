import Rules
import Testing
@testable import Proxy

/// `reencode off`: urlencoded bodies are judged but reach the upstream byte for byte (signed webhooks).
@Suite struct ReencodeOffTests {
    private static let rules = """
    route /hook {
        reencode off;
        content-types application/x-www-form-urlencoded;
        field sig { pattern "^[0-9a-f]+$"; }
        field * { max 64; }
    }
    route /form {
        content-types application/x-www-form-urlencoded;
        field sig { pattern "^[0-9a-f]+$"; }
        field * { max 64; }
    }
    route /strip {
        reencode off;
        content-types application/x-www-form-urlencoded;
        field note { max 2; action strip; }
        field * { }
    }
    """

    /// Non-canonical on purpose: `%7e` (lowercase, unreserved), `+`, an empty pair, a trailing `&`.
    private static let body = Array("sig=abc123&msg=hello+w%6Frld%7e&&x=1&".utf8)

    private func run(_ path: String, body: [UInt8] = body) throws -> ExchangeRig {
        let policy = try #require(RuleChecker.compile(source: Self.rules, file: "hook.rules").policy)
        let r = ExchangeRig(config: try ExchangeRig.configuration(), policy: policy)
        let head = "POST \(path) HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded; charset=UTF-8\r\n"
            + "Content-Length: \(body.count)\r\n\r\n"
        r.run(client: Array(head.utf8) + body, clientEOF: false)
        #expect(r.violations() == [])
        return r
    }

    private func upstreamBody(_ r: ExchangeRig) -> [UInt8] {
        guard let received = r.connections.first?.received else { return [] }
        let message = ExchangeRig.dechunked(received)
        guard let end = message.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound else { return [] }
        return Array(message[end...])
    }

    @Test func upstreamGetsTheClientsBytesOnAReencodeOffRoute() throws {
        let r = try run("/hook")
        #expect(String(decoding: r.clientReceived.prefix(12), as: UTF8.self) == "HTTP/1.1 200")
        #expect(upstreamBody(r) == Self.body)
        let head = String(decoding: r.connections[0].received.prefix(300), as: UTF8.self)
        #expect(head.contains("application/x-www-form-urlencoded; charset=UTF-8"))
        #expect(r.records.first??.anomalies == ["reencode-off"])
    }

    @Test func upstreamGetsTheCanonicalEncodingOnANormalRoute() throws {
        let r = try run("/form")
        #expect(String(decoding: r.clientReceived.prefix(12), as: UTF8.self) == "HTTP/1.1 200")
        #expect(String(decoding: upstreamBody(r), as: UTF8.self) == "sig=abc123&msg=hello+world%7E&x=1")
        #expect(r.records.first??.anomalies == [])
    }

    /// The rules still judge the parsed body: a bad signature field is refused, an over-long field too.
    @Test func rulesStillApplyOnAReencodeOffRoute() throws {
        let r = try run("/hook", body: Array("sig=XYZ&x=1".utf8))
        #expect(String(decoding: r.clientReceived.prefix(12), as: UTF8.self) == "HTTP/1.1 422")
        #expect(r.records.first??.reason == "pattern_mismatch")
    }

    /// A strip would change the bytes: it becomes a rejection.
    @Test func stripBecomesRejectionWhenBytesCannotChange() throws {
        let r = try run("/strip", body: Array("note=long&x=1".utf8))
        #expect(String(decoding: r.clientReceived.prefix(12), as: UTF8.self) == "HTTP/1.1 413")
        #expect(r.records.first??.decision == .reject)
    }
}
