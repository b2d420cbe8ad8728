import Testing
@testable import Proxy

// The output queues' hard cap must leave room above the high-water mark for one step's output: output is
// produced only below the mark, but one step can write a part's whole header block, held from earlier reads (up
// to 16 KiB, escaped up to three times as long). With the cap at 4x a 2 KiB mark, a request with a 15 KB part
// name got 500 `body_sink_failed` in some read patterns and its proper answer in others (found by the exchange
// fuzzer once its gzip bodies could carry long runs of one byte).

@Suite struct OutputCapTests {
    @Test func theCapIsFourTimesTheMarkAndAtLeast256KiBAboveIt() {
        var buffers = ProxyConfiguration.Buffers()
        #expect(buffers.outputCap == 4 * buffers.outputHighWater)
        buffers.outputHighWater = 2048
        #expect(buffers.outputCap == 2048 + 256 * 1024)
        buffers.outputHighWater = Int.max / 2
        #expect(buffers.outputCap > buffers.outputHighWater)   // no overflow trap
    }

    @Test(arguments: [0, 1, 13, 1000])
    func aLongPartHeaderUnderASmallMarkIsForwardedWhole(reads: Int) throws {
        var config = try ExchangeRig.configuration()
        config.buffers.outputHighWater = 2048
        config.buffers.clientRead = 4096
        let name = String(repeating: "n", count: 15_000)
        let body = Array("--B\r\nContent-Disposition: form-data; name=\"\(name)\"\r\n\r\nvalue\r\n--B--\r\n".utf8)
        let request = Array(("POST /up HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\n"
            + "Content-Length: \(body.count)\r\n\r\n").utf8) + body
        let rig = ExchangeRig(config: config, policy: nil)
        rig.run(client: request, pieces: reads == 0 ? [] : [reads])
        #expect(rig.violations() == [])
        #expect(rig.records.map { $0?.status } == [200], "\(rig.logs)")
        let sent = try #require(rig.connections.last?.received)
        #expect(ExchangeRig.isCompleteRequest(sent))
        #expect(ExchangeRig.contains(Array(name.utf8), in: sent))
    }
}
