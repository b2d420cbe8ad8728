import Glibc
import Reactor
import Testing
@testable import Proxy

// An upstream that stops reading holds a streaming body up: the worker stops reading the client (backpressure).
// - After a second its input and output buffers keep only the bytes they hold, not the storage they grew to;
//   when the upstream reads again, every byte arrives, in order.
// - The client's body timeout does not run meanwhile (the silence is the upstream's); the upstream's response
//   timeout does: an upstream that takes nothing for that long gets the request ended with 504.
// A real worker and real sockets (WorkerBench), with real time for the worker's once-a-second ticks.

/// Body byte `i`: a pattern whose period (251) is prime to every buffer and chunk size, so a lost, repeated or
/// reordered span shows.
private func pattern(_ i: Int) -> UInt8 { UInt8(truncatingIfNeeded: i % 251) }

/// One client uploading `length` pattern bytes (application/octet-stream) through the bench's worker, whose
/// upstream connection the test reads only when it chooses.
private final class HeldUpUpload {
    let bench: WorkerBench
    let fd: Int32
    let length: Int
    private(set) var sent = 0
    /// The pattern from offset 0, one period longer than a send: the bytes from offset `i` start at `i % 251`.
    private static let patterned = (0..<(65_536 + 251)).map(pattern)

    init(_ bench: WorkerBench, length: Int) throws {
        self.bench = bench
        self.length = length
        fd = try connectClient(port: bench.proxyPort)
        try send(fd, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\n"
            + "Content-Length: \(length)\r\n\r\n")
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit { close(fd) }

    /// Sends what the client socket takes now.
    func push() {
        while sent < length {
            let count = min(65_536, length - sent)
            let n = Self.patterned.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + sent % 251, count, Int32(MSG_NOSIGNAL))
            }
            guard n > 0 else { return }
            sent += n
        }
    }

    /// Runs the loop, pushing, until the upstream connection is open (and never read) and the worker has stopped
    /// reading the client. Returns the client connection.
    func heldUp() throws -> ClientConnection {
        #expect(try bench.run {
            push()
            return try bench.acceptUpstream()
                && bench.worker.clients.values.first.map { !$0.machine.wantsClientRead } == true
        })
        return try #require(bench.worker.clients.values.first)
    }

    /// Reads the upstream side until the whole body arrived (pushing the rest meanwhile): the head, the body
    /// length seen, and the first body offset whose byte differs from the pattern.
    func readAll() throws -> (head: String, bodyBytes: Int, mismatch: Int?) {
        var head: [UInt8] = []
        var headDone = false
        var bodyBytes = 0
        var mismatch: Int?
        #expect(try bench.run(seconds: 180) {
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
            var offset = 0
            while mismatch == nil && offset < data.count {   // compared a period-aligned run at a time
                let run = min(65_536, data.count - offset)
                let start = (bodyBytes + offset) % 251
                if data[offset..<(offset + run)] != Self.patterned[start..<(start + run)] {
                    let at = (0..<run).first { data[offset + $0] != pattern(bodyBytes + offset + $0) } ?? 0
                    mismatch = bodyBytes + offset + at
                }
                offset += run
            }
            bodyBytes += data.count
            return bodyBytes >= length
        })
        return (String(decoding: head, as: UTF8.self), bodyBytes, mismatch)
    }
}

@Suite(.serialized) struct StalledUpstreamTests {
    @Test func buffersShrinkWhileTheUpstreamHoldsTheBodyUpAndEveryByteArrives() throws {
        let upload = try HeldUpUpload(try WorkerBench(), length: 32 << 20)
        let client = try upload.heldUp()
        let input = client.machine.clientIn, output = client.machine.upstreamOut
        /// Storage beyond the bytes held, in both buffers; each is shrunk only when that frees at least 64 KiB.
        func spare() -> (input: Int, output: Int) {
            (input.capacity - input.readableBytes, output.capacity - output.pendingBytes)
        }
        let grown = input.capacity + output.capacity
        let before = spare()
        // Within a few of the worker's one-second ticks, neither buffer keeps 64 KiB or more beyond its bytes
        // (measured: 512 KiB each for about 190 and 260 KiB of bytes, before).
        #expect(try upload.bench.run {
            upload.push()
            let now = spare()
            return now.input < 64 * 1024 && now.output < 64 * 1024
        })
        if before.input >= 64 * 1024 || before.output >= 64 * 1024 {
            #expect(input.capacity + output.capacity < grown)
        }

        // The upstream reads again: the head, then exactly the body, in order.
        let (head, bodyBytes, mismatch) = try upload.readAll()
        #expect(head.contains("Content-Length: \(upload.length)\r\n"))
        #expect(bodyBytes == upload.length)
        #expect(mismatch == nil)
    }

    @Test func theClientBodyTimeoutDoesNotRunWhileTheUpstreamHoldsTheBodyUp() throws {
        let bench = try WorkerBench { config in
            config.timeouts.clientBody = 1
            config.timeouts.upstreamResponse = 30
        }
        let upload = try HeldUpUpload(bench, length: 32 << 20)
        _ = try upload.heldUp()
        // Three seconds held up: three times the client body timeout, with the client waiting on Formwall.
        let until = bench.loop.now() + 3_000_000_000
        #expect(try bench.run {
            upload.push()
            return bench.loop.now() >= until
        })
        let early = readClient(upload.fd)
        #expect(early.bytes.isEmpty && !early.closed, "\(String(decoding: early.bytes, as: UTF8.self))")
        let (_, bodyBytes, mismatch) = try upload.readAll()
        #expect(bodyBytes == upload.length && mismatch == nil)
    }

    @Test func anUpstreamThatTakesNothingForTheResponseTimeoutGets504() throws {
        let bench = try WorkerBench { config in
            config.timeouts.upstreamResponse = 1
        }
        let upload = try HeldUpUpload(bench, length: 32 << 20)
        _ = try upload.heldUp()
        var answer: [UInt8] = []
        #expect(try bench.run {
            upload.push()
            answer += readClient(upload.fd).bytes
            return ExchangeRig.contains(Array("upstream_timeout".utf8), in: answer)
        })
        #expect(answer.starts(with: Array("HTTP/1.1 504 ".utf8)))
    }
}
