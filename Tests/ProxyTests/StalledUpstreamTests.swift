import Glibc
import Reactor
import Testing
@testable import Proxy

// An upstream that stops reading holds a streaming body up: the worker stops reading the client (backpressure),
// and after a second its input and output buffers keep only the bytes they hold, not the storage they grew to.
// When the upstream reads again, every byte arrives, in order. A real worker and real sockets (WorkerBench).

/// Body byte `i`: a pattern whose period (251) is prime to every buffer and chunk size, so a lost, repeated or
/// reordered span shows.
private func pattern(_ i: Int) -> UInt8 { UInt8(truncatingIfNeeded: i % 251) }

@Suite struct StalledUpstreamTests {
    @Test func buffersShrinkWhileTheUpstreamHoldsTheBodyUpAndEveryByteArrives() throws {
        let bench = try WorkerBench()
        let bodyLength = 32 << 20
        let fd = try connectClient(port: bench.proxyPort)
        defer { close(fd) }
        try send(fd, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\n"
            + "Content-Length: \(bodyLength)\r\n\r\n")
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var sent = 0
        var block = [UInt8](repeating: 0, count: 65_536)
        /// Sends what the client socket takes now.
        func push() {
            while sent < bodyLength {
                let count = min(block.count, bodyLength - sent)
                for j in 0..<count { block[j] = pattern(sent + j) }
                let n = block.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, count, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { return }
                sent += n
            }
        }
        // The upstream connects and is never read: the body backs up until the worker stops reading the client.
        #expect(try bench.run {
            push()
            return try bench.acceptUpstream() && bench.worker.clients.values.first.map { !$0.machine.wantsClientRead } == true
        })
        let client = try #require(bench.worker.clients.values.first)
        let grown = client.machine.clientIn.capacity + client.machine.upstreamOut.capacity
        // Within a few of the worker's one-second ticks, each buffer holds its bytes in storage of their size.
        #expect(try bench.run {
            push()
            let input = client.machine.clientIn, output = client.machine.upstreamOut
            return input.capacity == input.readableBytes && output.capacity == output.pendingBytes
        })
        let kept = client.machine.clientIn.capacity + client.machine.upstreamOut.capacity
        #expect(kept < grown)
        #expect(kept <= client.machine.clientIn.maxCapacity + client.machine.upstreamOut.maxCapacity)

        // The upstream reads again: the head, then exactly the body, in order.
        var head: [UInt8] = []
        var headDone = false
        var bodyBytes = 0
        var mismatch: Int?
        #expect(try bench.run {
            push()
            var data: [UInt8] = []
            while true {
                let more = try bench.readUpstream()
                if more.isEmpty { break }
                data += more
            }
            if !headDone {
                head += data
                guard let end = head.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound else { return false }
                data = Array(head[end...])
                head.removeSubrange(end...)
                headDone = true
            }
            for (k, byte) in data.enumerated() where mismatch == nil && byte != pattern(bodyBytes + k) {
                mismatch = bodyBytes + k
            }
            bodyBytes += data.count
            return bodyBytes >= bodyLength
        })
        #expect(String(decoding: head, as: UTF8.self).contains("Content-Length: \(bodyLength)\r\n"))
        #expect(bodyBytes == bodyLength)
        #expect(mismatch == nil)
    }
}
