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
    /// 200,000 bytes, one in 64 not zero: about 40:1 under gzip, inside the default ratio of 100.
    static let data: [UInt8] = (0..<200_000).map { $0 % 64 == 0 ? UInt8(truncatingIfNeeded: ($0 / 64) &* 37 | 1) : 0 }
    static let body: [UInt8] = Array("--B\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"z.bin\"\r\n\r\n".utf8)
        + data + Array("\r\n--B--\r\n".utf8)

    @Test(arguments: [0, 1, 7, 64, 1000])
    func aDecodedBodyLargerThanTheUpstreamQueueArrivesWhole(piece: Int) throws {
        var config = try ExchangeRig.configuration()
        config.buffers.outputHighWater = 2048   // the upstream queue's hard cap is 8 KiB
        config.buffers.clientRead = 4096
        let compressed = deflateBytes(Self.body, windowBits: 31)
        #expect(!compressed.isEmpty && Self.body.count > 20 * 8192 && Self.body.count < 100 * max(compressed.count, 1024))
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
