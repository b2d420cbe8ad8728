import Testing
@testable import Proxy
import TestZlib

// A compressed form body expands as it is decoded: one read of a gzip stream within the default ratio (100) can
// become a hundred times as many bytes for the upstream. Decoding pauses at the output high-water mark and goes
// on as the upstream takes bytes (RequestBodyStage.sinkFull, pieces no larger than the mark). Before, every
// decoded byte of a read went into the upstream's queue at once, past its hard cap (4 × the mark): a valid
// 8 MB upload gzipped 17:1 was answered 500 `body_sink_failed` (found by running the exchange fuzzer's harness
// on gzip bodies; Tests/e2e/test_compressed_bodies.py checks the same through the binary).

@Suite struct CompressedBodyTests {
    /// 1,000,000 bytes, one in 64 a pseudo-random byte, the rest zero: about 27:1 under gzip (37 KB), inside
    /// the default ratio of 100.
    static let data: [UInt8] = {
        var x: UInt32 = 1
        return (0..<1_000_000).map { i in
            guard i % 64 == 0 else { return 0 }
            x = x &* 1_103_515_245 &+ 12345
            return UInt8(truncatingIfNeeded: x >> 16)
        }
    }()
    static let body: [UInt8] = Array("--B\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"z.bin\"\r\n\r\n".utf8)
        + data + Array("\r\n--B--\r\n".utf8)

    @Test(arguments: [0, 1, 7, 64, 1000])
    func aDecodedBodyLargerThanTheUpstreamQueueArrivesWhole(piece: Int) throws {
        var config = try ExchangeRig.configuration()
        config.buffers.outputHighWater = 2048   // the upstream queue's hard cap is 2 KiB + 256 KiB (outputCap)
        config.buffers.clientRead = 65536
        let compressed = deflateBytes(Self.body, windowBits: 31)
        // Read whole, the body arrives in one read and decodes to more than three times the queue's cap.
        #expect(!compressed.isEmpty && compressed.count < config.buffers.clientRead - 300
                && Self.body.count > 3 * config.buffers.outputCap && Self.body.count < 100 * compressed.count)
        let request = Array(("POST /up HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\n"
            + "Content-Encoding: gzip\r\nContent-Length: \(compressed.count)\r\n\r\n").utf8) + compressed
        let rig = ExchangeRig(config: config, policy: nil)
        rig.run(client: request, pieces: piece == 0 ? [] : [piece], clientEOF: false)
        #expect(rig.violations() == [])
        #expect(String(decoding: rig.clientReceived, as: UTF8.self).hasPrefix("HTTP/1.1 200 OK"),
                "\(String(decoding: rig.clientReceived.prefix(200), as: UTF8.self))")
        let sent = try #require(rig.connections.last?.received)
        #expect(ExchangeRig.isCompleteRequest(sent))
        // The upstream got the decoded file whole, and no Content-Encoding.
        let upstream = ExchangeRig.dechunked(sent)
        #expect(ExchangeRig.contains(Self.data, in: upstream))
        #expect(!ExchangeRig.contains(Array("Content-Encoding".utf8), in: upstream))
    }
}
