import Glibc
import Reactor

/// One connection to the upstream: connecting, attached to a client exchange, or idle in the worker's pool.
///
/// It owns its socket and two buffers; the attached `ClientConnection` decides what goes into `output` and
/// what is done with `input`. Backpressure: it reads only while the client asks for more (`wantsRead`).
final class UpstreamConnection: EventHandler {
    enum Phase { case connecting, attached, idle, closed }

    let worker: Worker
    private(set) var socket: TCPSocket
    private(set) var transport: PlainTransport
    let output: ByteBuffer
    let input: ByteBuffer
    private(set) var phase: Phase
    private var registration: Registration?
    private var currentInterest: Interest = []
    weak var client: ClientConnection?
    /// The client wants response bytes (its output is below the high-water mark).
    var wantsRead = true
    private(set) var idleSince: UInt64 = 0
    /// When the connect started (for the connect timeout).
    private(set) var connectStartedAt: UInt64
    /// The last time bytes moved either way.
    private(set) var lastActivity: UInt64
    /// A spooled body being streamed after `output` drains.
    var spool: (file: TemporaryFile, offset: UInt64)?
    /// The receiving direction ended: the upstream sent FIN, or a read failed (after any bytes queued before a
    /// reset were read). Bytes already in `input` are still relayed.
    private(set) var readEnded = false
    /// The sending direction ended: a write failed (EPIPE, ECONNRESET) or the peer hung up. Reading goes on,
    /// so an early answer the upstream sent before closing still reaches the client.
    private(set) var writeFailed = false
    /// Taken from the pool rather than freshly connected for this exchange.
    private(set) var reused = false
    /// Response bytes have arrived on this connection during the current exchange.
    private(set) var receivedBytes = false
    /// A copy of every byte written during this exchange while it fits `pool.replayLimit`, so that a request
    /// sent on a reused connection the upstream had already closed can be replayed on a fresh one. Nil once
    /// more than the limit has been written (the request is no longer replayable).
    private(set) var replayLog: [UInt8]?
    /// Removed from epoll after a hang-up while the client was not reading; re-added when it reads again.
    private var parked = false
    /// Either direction ended.
    var sawEOF: Bool { readEnded || writeFailed }

    private init(worker: Worker, socket: TCPSocket, connected: Bool) {
        self.worker = worker
        self.socket = socket
        transport = PlainTransport(socket)
        let cap = worker.config.buffers.outputHighWater * 4
        output = ByteBuffer(initialCapacity: 16 * 1024, maxCapacity: cap)
        input = ByteBuffer(initialCapacity: 16 * 1024, maxCapacity: max(worker.config.buffers.upstreamRead, 16 * 1024))
        phase = connected ? .attached : .connecting
        connectStartedAt = worker.loop.now()
        lastActivity = connectStartedAt
    }

    /// Starts a non-blocking connect to the configured upstream.
    static func connect(worker: Worker) throws -> UpstreamConnection {
        let (socket, progress) = try TCPSocket.connect(to: worker.config.upstream.address)
        try? socket.setNoDelay()
        let up = UpstreamConnection(worker: worker, socket: socket, connected: progress == .connected)
        do {
            up.registration = try worker.loop.register(fd: socket.fd, interest: .writable, handler: up)
            up.currentInterest = .writable
        } catch {
            try? socket.close()
            throw error
        }
        return up
    }

    var isConnecting: Bool { phase == .connecting }

    /// Whether a pooled connection can carry another request: a non-blocking peek shows whether the upstream
    /// closed it (or sent stray bytes) while it was idle, even when the loop has not yet seen that event.
    /// A close racing the reuse is still possible; `replayLog` covers it.
    var isReusable: Bool {
        guard phase == .idle, !sawEOF, socket.isOpen else { return false }
        return socket.isIdleAndOpen
    }

    /// Hands the connection to `client` for one exchange.
    func attach(to client: ClientConnection) {
        self.client = client
        if phase == .idle {
            phase = .attached
            reused = true
        }
        // Only a reused connection can fail because of the pool; a fresh one is never replayed.
        replayLog = reused ? [] : nil
        receivedBytes = false
        wantsRead = true
        lastActivity = worker.loop.now()
        updateInterest()
    }

    /// Whether the exchange can move to a fresh connection: this one was reused from the pool, nothing of the
    /// response arrived, and every request byte written so far is still in the replay log.
    var canReplay: Bool { reused && !receivedBytes && input.readableBytes == 0 && replayLog != nil && !spoolFailed }

    /// Replaces this connection (a reused one that the upstream had closed) with a fresh one to the same
    /// upstream, keeping the request: the bytes already written go first, then the unsent output and the spool.
    /// Throws if the fresh connect fails at once or the bytes do not fit the output buffer.
    func reconnectForReplay() throws {
        guard let log = replayLog else { throw ReplayError.notReplayable }
        let unsent: [UInt8] = output.readableBytes > 0 ? output.withUnsafeReadableBytes { Array($0) } : []
        output.clear()
        try output.writeBytes(log)
        try output.writeBytes(unsent)
        if let registration { try? worker.loop.deregister(registration) }
        registration = nil
        parked = false
        try? transport.close()
        let (socket, progress) = try TCPSocket.connect(to: worker.config.upstream.address)
        try? socket.setNoDelay()
        self.socket = socket
        transport = PlainTransport(socket)
        phase = progress == .connected ? .attached : .connecting
        connectStartedAt = worker.loop.now()
        lastActivity = connectStartedAt
        readEnded = false
        writeFailed = false
        reused = false
        receivedBytes = false
        replayLog = nil
        input.clear()
        let want: Interest = phase == .connecting ? .writable : [.readable, .writable]
        registration = try worker.loop.register(fd: socket.fd, interest: want, handler: self)
        currentInterest = want
    }

    enum ReplayError: Error { case notReplayable }

    /// Parks the connection in the pool.
    func becomeIdle(now: UInt64) {
        client = nil
        phase = .idle
        idleSince = now
        input.clear()
        output.clear()
        spool = nil
        replayLog = nil
        updateInterest()
    }

    /// Closes the socket (an exchange in progress sees an incomplete request: no final chunk is sent).
    func close() {
        guard phase != .closed else { return }
        phase = .closed
        client = nil
        spool?.file.close()
        spool = nil
        if let registration { try? worker.loop.deregister(registration) }
        registration = nil
        parked = false
        try? transport.close()
    }

    /// Re-evaluates what to wait for.
    func updateInterest() {
        if parked, phase == .attached, wantsRead, input.readableBytes < input.maxCapacity {
            // The client reads again: re-register; the pending hang-up is reported at once and read.
            parked = false
            registration = try? worker.loop.register(fd: socket.fd, interest: .readable, handler: self)
            currentInterest = .readable
            return
        }
        guard let registration, phase != .closed else { return }
        var want: Interest = []
        switch phase {
        case .connecting:
            want = .writable
        case .attached:
            if wantsRead && !readEnded && input.readableBytes < input.maxCapacity { want.insert(.readable) }
            if !writeFailed && (output.readableBytes > 0 || spool != nil) { want.insert(.writable) }
        case .idle:
            want = .readable   // only to notice the upstream closing it
        case .closed:
            return
        }
        if want != currentInterest {
            currentInterest = want
            try? worker.loop.setInterest(want, for: registration)
        }
    }

    // MARK: EventHandler

    func writable(loop: EventLoop) {
        if phase == .connecting {
            do {
                try socket.finishConnect()
            } catch {
                let client = self.client
                close()
                client?.upstreamFailed(self, reason: .connect(error))
                return
            }
            phase = .attached
        }
        guard phase == .attached else { return }
        flush()
        client?.upstreamDrained(self)
        updateInterest()
    }

    func readable(loop: EventLoop) {
        switch phase {
        case .idle:
            // The upstream closed a pooled connection (or sent stray bytes): drop it.
            worker.idleConnectionClosed(self)
            close()
            return
        case .connecting, .closed:
            return
        case .attached:
            break
        }
        guard wantsRead else { updateInterest(); return }
        readOnce(loop: loop)
        client?.upstreamReadable(self)
        updateInterest()
    }

    private func readOnce(loop: EventLoop) {
        guard !readEnded, input.readableBytes < input.maxCapacity else { return }
        do {
            let result = try transport.read(into: input, maxBytes: min(worker.config.buffers.upstreamRead,
                                                                       input.maxCapacity - input.readableBytes))
            if case .processed(let n) = result {
                if n == 0 { readEnded = true } else {
                    lastActivity = loop.now()
                    receivedBytes = true
                }
            }
        } catch {
            readEnded = true
        }
    }

    /// EPOLLERR: a pending socket error. While connecting, the connect failed; otherwise both directions are done,
    /// but bytes the upstream sent before it (an early answer) can still be read.
    func error(loop: EventLoop) { hangup(loop: loop) }

    /// EPOLLHUP: epoll reports it even with no interest set, so every call must make progress or stop the
    /// reports: read what fits, and if the client is not reading, leave epoll until it is.
    func hangup(loop: EventLoop) {
        switch phase {
        case .connecting:
            writable(loop: loop)
            return
        case .idle:
            readable(loop: loop)
            return
        case .closed:
            return
        case .attached:
            break
        }
        if !writeFailed { markWriteFailed() }
        readOnce(loop: loop)
        if !readEnded && input.readableBytes >= input.maxCapacity, let registration {
            // Full and the client is paused: nothing can move until it reads.
            try? worker.loop.deregister(registration)
            self.registration = nil
            currentInterest = []
            parked = true
        }
        client?.upstreamReadable(self)
        if phase != .closed && !parked { updateInterest() }
    }

    /// Stops sending. The unsent output and spool stay, so a replay on a fresh connection can take them over.
    private func markWriteFailed() {
        writeFailed = true
    }

    /// Reading the spool file failed (a local error, not the upstream's).
    private(set) var spoolFailed = false

    /// Keeps a copy of bytes just written while the request is still replayable.
    private func recordWritten(_ bytes: UnsafeRawBufferPointer) {
        guard var log = replayLog else { return }
        replayLog = nil   // unique while appended to
        guard log.count + bytes.count <= worker.config.pool.replayLimit else { return }
        log.append(contentsOf: bytes)
        replayLog = log
    }

    /// Writes queued output, then refills it from the spool file. Does nothing until connected, or once closed.
    func flush() {
        guard phase == .attached, socket.isOpen, !writeFailed else { return }
        while true {
            if output.readableBytes > 0 {
                do {
                    let result = try output.withUnsafeReadableBytes { bytes in
                        let result = try transport.write(bytes)
                        if case .processed(let n) = result, n > 0, replayLog != nil {
                            recordWritten(UnsafeRawBufferPointer(rebasing: bytes.prefix(n)))
                        }
                        return result
                    }
                    guard case .processed(let n) = result else { return }
                    output.moveReaderIndex(forwardBy: n)
                    if output.readableBytes == 0 { output.clear() }
                    if n > 0 { lastActivity = worker.loop.now() }
                    if output.readableBytes > 0 { return }
                } catch {
                    // The sending direction is over; an answer may still be waiting to be read.
                    markWriteFailed()
                    client?.upstreamReadable(self)
                    return
                }
            }
            guard let (file, offset) = spool else { return }
            let want = 128 * 1024
            var n = 0
            do {
                try output.reserveWritable(want)
                n = try output.withUnsafeMutableWritableBytes { region in
                    try file.read(at: offset, into: UnsafeMutableRawBufferPointer(rebasing: region.prefix(want)))
                }
            } catch {
                markWriteFailed()
                spoolFailed = true
                client?.upstreamReadable(self)
                return
            }
            if n == 0 {
                file.close()
                spool = nil
                return
            }
            output.moveWriterIndex(forwardBy: n)
            spool = (file, offset + UInt64(n))
        }
    }
}

/// Why an upstream exchange failed.
enum UpstreamFailure {
    case connect(Error)
}
