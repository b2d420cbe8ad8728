import Testing
import TestRandom
@testable import Proxy

// The PROXY protocol parser byte by byte: every proper prefix of a valid header asks for more, the whole
// header gives the source and its length whatever follows, and malformed headers are refused as soon as a
// byte proves it. Then through ConnectionMachine with `proxyProtocol`.

private func v2(command: UInt8 = 0x21, family: UInt8, address: [UInt8], tlvs: [UInt8] = []) -> [UInt8] {
    let body = address + tlvs
    return ProxyProtocol.signature + [command, family, UInt8(body.count >> 8), UInt8(body.count & 0xff)] + body
}

private let v2TCP4 = v2(family: 0x11, address: [192, 0, 2, 1, 198, 51, 100, 2, 0xDC, 0x04, 0x01, 0xBB])
private let v2TCP6 = v2(family: 0x21, address: [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1]
                        + [UInt8](repeating: 0, count: 16) + [0x30, 0x39, 0x00, 0x50], tlvs: [0x04, 0x00, 0x01, 0x00])

@Suite struct ProxyProtocolTests {
    @Test(arguments: [
        (Array("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n".utf8), "192.0.2.1:56324"),
        (Array("PROXY TCP6 2001:db8::1 2001:db8::2 12345 80\r\n".utf8), "[2001:db8::1]:12345"),
        (Array("PROXY UNKNOWN\r\n".utf8), nil),
        (Array("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n".utf8), nil),
        (v2TCP4, "192.0.2.1:56324"),
        (v2TCP6, "[2001:db8::1]:12345"),
        (v2(command: 0x20, family: 0x00, address: []), nil),
        (v2(family: 0x00, address: []), nil),
        (v2(family: 0x31, address: [UInt8](repeating: 0, count: 216)), nil),
    ])
    func everyPrefixNeedsMoreAndTheWholeHeaderIsRead(header: [UInt8], source: String?) {
        for n in 0..<header.count {
            #expect(ProxyProtocol.parse(Array(header[0..<n])) == .needMore, "prefix \(n)")
        }
        let request = Array("GET / HTTP/1.1\r\n\r\n".utf8)
        #expect(ProxyProtocol.parse(header) == .complete(consumed: header.count, source: source))
        #expect(ProxyProtocol.parse(header + request) == .complete(consumed: header.count, source: source))
    }

    @Test(arguments: [
        "GET / HTTP/1.1\r\n", "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\n", "PROXY TCP4 192.0.2.1  198.51.100.2 1 2\r\n",
        "PROXY TCP4 2001:db8::1 198.51.100.2 1 2\r\n", "PROXY TCP6 192.0.2.1 2001:db8::2 1 2\r\n",
        "PROXY TCP4 192.0.2.1 198.51.100.2 65536 2\r\n", "PROXY TCP4 192.0.2.1 198.51.100.2 01 2\r\n",
        "PROXY TCP4 192.0.2.1 198.51.100.2 -1 2\r\n", "PROXY TCP4 192.0.2.1 198.51.100.2 1\r\n",
        "PROXY UDP4 192.0.2.1 198.51.100.2 1 2\r\n", "proxy TCP4 192.0.2.1 198.51.100.2 1 2\r\n",
        "PROXY TCP4 192.0.2.1 198.51.100.2 1 2 \r\n", "PROXY TCP4 192.0.2.1\t198.51.100.2 1 2\r\n",
        "PROXY UNKNOWN" + String(repeating: " ", count: 100) + "\r\n",
    ])
    func malformedV1IsRefused(line: String) {
        guard case .invalid = ProxyProtocol.parse(Array(line.utf8)) else {
            Issue.record("accepted \(line.debugDescription)")
            return
        }
    }

    @Test func v1IsRefusedAtTheFirstWrongByte() {
        #expect(ProxyProtocol.parse(Array("PROXX".utf8)) == .invalid("no PROXY protocol header"))
        #expect(ProxyProtocol.parse(Array("G".utf8)) == .invalid("no PROXY protocol header"))
        #expect(ProxyProtocol.parse([0x0D, 0x0A, 0x0D, 0x0B]) == .invalid("no PROXY protocol header"))
    }

    @Test func malformedV2IsRefused() {
        var badVersion = v2TCP4
        badVersion[12] = 0x11
        var badCommand = v2TCP4
        badCommand[12] = 0x22
        var badFamily = v2TCP4
        badFamily[13] = 0x41
        let short = v2(family: 0x11, address: [192, 0, 2, 1, 198, 51, 100, 2, 0xDC, 0x04])
        let huge = ProxyProtocol.signature + [0x21, 0x11, 0x04, 0x01]
        for bytes in [badVersion, badCommand, badFamily, short, huge] {
            guard case .invalid = ProxyProtocol.parse(bytes) else {
                Issue.record("accepted \(bytes)")
                continue
            }
        }
    }

    /// Mutated headers (bytes flipped, replaced, inserted, dropped; cut short; random bytes after them): the parser
    /// never traps, and its verdict is that of a stream: a header found in some bytes is found, with the same
    /// length and source, whatever follows them; bytes refused stay refused whatever follows; and every prefix of
    /// bytes that give a header asks for more or gives that same header, never a refusal. The proxy parses the
    /// connection's first bytes again after every read, so a verdict that changed as bytes arrive would depend on
    /// how the client's packets were split.
    @Test func mutatedHeadersGiveTheVerdictOfAStream() {
        var rng = SplitMix64(seed: 0x5052_4F58_5900)
        let seeds: [[UInt8]] = [
            Array("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n".utf8),
            Array("PROXY TCP6 2001:db8::1 2001:db8::2 12345 80\r\n".utf8),
            Array("PROXY UNKNOWN\r\n".utf8), v2TCP4, v2TCP6, v2(command: 0x20, family: 0x00, address: []),
        ]
        let alphabet = Array("PROXY TCP46UNKOW0123456789.:abcdef\r\n\u{0}\u{7f}".utf8) + ProxyProtocol.signature + [0xff, 0x80]
        var complete = 0, invalid = 0
        for _ in 0..<4000 {
            var bytes = seeds[rng.below(seeds.count)]
            for _ in 0..<(1 + rng.below(3)) {
                let at = rng.below(bytes.count + 1)
                let byte = rng.below(3) == 0 ? UInt8(truncatingIfNeeded: rng.next()) : alphabet[rng.below(alphabet.count)]
                switch rng.below(5) {
                case 0 where at < bytes.count: bytes[at] = byte
                case 1 where at < bytes.count: bytes[at] ^= UInt8(1 << rng.below(8))
                case 2: bytes.insert(byte, at: at)
                case 3 where at < bytes.count: bytes.remove(at: at)
                default: bytes = Array(bytes.prefix(at))
                }
            }
            let verdict = ProxyProtocol.parse(bytes)
            let tail = (0..<rng.below(40)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            switch verdict {
            case .complete(let consumed, _):
                complete += 1
                #expect(consumed <= bytes.count, "\(bytes)")
                #expect(ProxyProtocol.parse(bytes + tail) == verdict, "\(bytes) + \(tail)")
                for n in 0..<consumed {
                    let early = ProxyProtocol.parse(Array(bytes[0..<n]))
                    #expect(early == .needMore || early == verdict, "prefix \(n) of \(bytes): \(early)")
                }
            case .invalid:
                invalid += 1
                if case .invalid = ProxyProtocol.parse(bytes + tail) {} else {
                    Issue.record("\(bytes) refused, \(bytes + tail) not")
                }
            case .needMore:
                break
            }
        }
        // The mutations reach both verdicts often (a property over only one of them would prove little).
        #expect(complete > 400 && invalid > 400, "complete \(complete), invalid \(invalid)")
    }

    private func rig(_ bytes: [UInt8]) throws -> ExchangeRig {
        var config = try ExchangeRig.configuration()
        config.proxyProtocol = true
        let r = ExchangeRig(config: config, policy: nil)
        r.run(client: bytes, clientEOF: false)
        return r
    }

    @Test(arguments: [Array("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n".utf8), v2TCP4])
    func theHeadersSourceIsTheClient(header: [UInt8]) throws {
        let r = try rig(header + Array("GET /x HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
        #expect(String(decoding: r.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        let up = String(decoding: try #require(r.connections.first).received, as: UTF8.self)
        #expect(up.contains("\r\nX-Forwarded-For: 192.0.2.1\r\n"), "\(up)")
        #expect(r.records.first??.client == "192.0.2.1:56324")
        #expect(r.violations() == [])
    }

    @Test func localKeepsThePeer() throws {
        let r = try rig(v2(command: 0x20, family: 0x00, address: []) + Array("GET /x HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
        #expect(r.records.first??.client == "127.0.0.1:40000")
    }

    @Test func aConnectionWithoutTheHeaderIsRefused() throws {
        let r = try rig(Array("GET /x HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
        let answer = String(decoding: r.clientReceived, as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 400"))
        #expect(answer.contains("invalid_proxy_header"))
        #expect(r.connections.isEmpty)
    }

    @Test func onlyTheFirstRequestCarriesTheHeader() throws {
        let get = Array("GET /x HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
        let r = try rig(Array("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n".utf8) + get + get)
        #expect(r.records.count == 2)
        #expect(r.records.allSatisfy { $0?.client == "192.0.2.1:56324" })
    }
}
