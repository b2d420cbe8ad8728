import Testing

@testable import HTTP1
import TestRandom

/// Seeded random mutations of valid inputs: whatever the verdict, it must not depend on the chunking,
/// and no input may over-read (every chunk sits against a guard page).
@Suite struct MutationConsistencyTests {
    static let interesting: [UInt8] = Array("\r\n \t:;,=\"\\0aF\u{0}\u{7f}".utf8) + [0x80, 0xC3, 0xFF]

    static func mutate(_ bytes: inout [UInt8], using random: inout SplitMix64) {
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            let position = Int.random(in: 0...bytes.count, using: &random)
            let byte = interesting.randomElement(using: &random)!
            switch Int.random(in: 0..<3, using: &random) {
            case 0 where position < bytes.count:
                bytes[position] = byte
            case 1 where position < bytes.count:
                bytes.remove(at: position)
            default:
                bytes.insert(byte, at: position)
            }
        }
    }

    static let requests = [
        "POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
        "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "PUT /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
    ]

    static let responses = [
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
        "HTTP/1.1 100 Continue\r\n\r\n",
        "HTTP/1.0 204 No Content\r\nConnection: close\r\n\r\n",
    ]

    static let chunkedBodies = [
        "3\r\nabc\r\n0\r\n\r\n",
        "a;x=y\r\n0123456789\r\n0;z=\"q\\\"\"\r\nT: v\r\n\r\n",
    ]

    @Test(arguments: 0..<40)
    func requests(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for _ in 0..<4 {
            var bytes = Array(Self.requests.randomElement(using: &random)!.utf8)
            Self.mutate(&bytes, using: &random)
            _ = parseRequest(bytes: bytes)
        }
    }

    @Test(arguments: 0..<40)
    func responses(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for _ in 0..<4 {
            var bytes = Array(Self.responses.randomElement(using: &random)!.utf8)
            Self.mutate(&bytes, using: &random)
            _ = parseResponse(bytes: bytes, method: "GET")
        }
    }

    @Test(arguments: 0..<40)
    func chunkedBodies(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for _ in 0..<4 {
            var bytes = Array(Self.chunkedBodies.randomElement(using: &random)!.utf8)
            Self.mutate(&bytes, using: &random)
            _ = decodeChunked(bytes: bytes, limits: HTTPLimits(maxChunkExtensionBytes: 8, maxTrailerBytes: 12))
        }
    }
}
