import Testing
@testable import Proxy

// `--trusted-proxies`: ranges parsed and matched byte by byte, the client found in X-Forwarded-For, and what
// the upstream and the audit log see through ConnectionMachine.

@Suite struct TrustedProxiesTests {
    @Test(arguments: [
        ("10.0.0.0/8", "10.0.0.0/8"), ("10.1.2.3/8", "10.0.0.0/8"), ("192.0.2.7", "192.0.2.7/32"),
        ("0.0.0.0/0", "0.0.0.0/0"), ("::1", "0:0:0:0:0:0:0:1/128"), ("2001:db8::/32", "2001:db8:0:0:0:0:0:0/32"),
        ("::ffff:10.0.0.1/32", "10.0.0.1/32"), ("10.0.0.0/7", "10.0.0.0/7"),
    ])
    func rangesParse(text: String, expected: String) throws {
        #expect(try #require(AddressRange(text)).description == expected)
    }

    @Test(arguments: ["", "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/+8", "host.example",
                      "10.0.0.256", "10.0.0.0/8/8", "1.2.3.4/0008"])
    func invalidRangesAreRefused(text: String) {
        #expect(AddressRange(text) == nil)
    }

    @Test func parseListNamesTheBadEntry() {
        guard case .failure(let error) = TrustedProxies.parse("10.0.0.0/8, nope") else {
            Issue.record("accepted")
            return
        }
        #expect(error.entry == "nope")
        guard case .success(let ok) = TrustedProxies.parse("10.0.0.0/8, ::1") else {
            Issue.record("refused")
            return
        }
        #expect(ok.ranges.count == 2)
    }

    @Test func containsChecksThePrefixBits() throws {
        let range = try #require(AddressRange("192.168.4.0/22"))
        #expect(range.contains(AddressRange.bytes(of: "192.168.7.255")!))
        #expect(!range.contains(AddressRange.bytes(of: "192.168.8.0")!))
        #expect(!range.contains(AddressRange.bytes(of: "::1")!))
        let trusted = TrustedProxies([range])
        #expect(trusted.trusts("::ffff:192.168.5.1"))
    }

    @Test(arguments: [
        // peer, X-Forwarded-For fields, client, chain kept
        ("203.0.113.1", ["198.51.100.9"], "203.0.113.1", false),          // untrusted peer: replaced
        ("10.0.0.5", [], "10.0.0.5", true),                                 // trusted peer, no chain
        ("10.0.0.5", ["198.51.100.9"], "198.51.100.9", true),
        ("10.0.0.5", ["6.6.6.6, 198.51.100.9, 10.0.0.7"], "198.51.100.9", true),  // right-most untrusted
        ("10.0.0.5", ["6.6.6.6", "198.51.100.9,10.0.0.7"], "198.51.100.9", true), // several fields
        ("10.0.0.5", ["10.0.0.9, 10.0.0.8"], "10.0.0.9", true),             // all trusted: left-most
        ("10.0.0.5", ["198.51.100.9, garbage, 10.0.0.7"], "10.0.0.7", true), // garbage stops the walk
        ("10.0.0.5", ["unknown"], "10.0.0.5", true),
    ])
    func resolve(peer: String, xff: [String], client: String, keep: Bool) throws {
        let trusted = TrustedProxies([try #require(AddressRange("10.0.0.0/8"))])
        #expect(trusted.resolve(peer: peer, forwardedFor: xff) == .init(client: client, keepChain: keep))
    }

    private func run(trusted: String?) throws -> ExchangeRig {
        var config = try ExchangeRig.configuration()
        if let trusted, case .success(let t) = TrustedProxies.parse(trusted) { config.trustedProxies = t }
        let r = ExchangeRig(config: config, policy: nil)
        r.run(client: Array("GET /x HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 6.6.6.6, 198.51.100.9\r\n\r\n".utf8),
              clientEOF: false)
        return r
    }

    @Test func untrustedPeerChainIsReplaced() throws {
        let r = try run(trusted: nil)
        let up = String(decoding: try #require(r.connections.first).received, as: UTF8.self)
        #expect(up.contains("\r\nX-Forwarded-For: 127.0.0.1\r\n"), "\(up)")
        #expect(!up.contains("198.51.100.9"))
        #expect(r.records.first??.client == "127.0.0.1:40000")
    }

    @Test func trustedPeerChainIsKeptAndNamesTheClient() throws {
        let r = try run(trusted: "127.0.0.1")
        let up = String(decoding: try #require(r.connections.first).received, as: UTF8.self)
        #expect(up.contains("\r\nX-Forwarded-For: 6.6.6.6, 198.51.100.9, 127.0.0.1\r\n"), "\(up)")
        #expect(r.records.first??.client == "198.51.100.9")
    }
}
