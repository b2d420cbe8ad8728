import Glibc
import Reactor

/// One connection to the upstream: connecting, attached to a client exchange, or idle in the worker's pool.
///
/// It owns its socket and two buffers; the attached `ClientConnection` decides what goes into `output` and
/// what is done with `input`. Backpressure: it reads only while the client asks for more (`wantsRead`).
final class UpstreamConnection: EventHandler {
    enum Phase { case connecting, attached, idle, closed }

    let worker: Worker
    let socket: TCPSocket
    let transport: PlainTransport
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
    let connectStartedAt: UInt64
    /// The last time bytes moved either way.
    private(set) var lastActivity: UInt64
    /// A spooled body being streamed after `output` drains.
    var spool: (file: TemporaryFile, offset: UInt64)?
    /// The upstream half-closed or the socket failed.
    private(set) var sawEOF = false

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

    /// Whether a pooled connection can carry another request.
    /// The peek costs a syscall, so it is skipped for a connection parked less than a second ago: upstream
    /// keep-alive timeouts are seconds long, and a close racing the reuse is possible with or without it.
    var isReusable: Bool {
        guard phase == .idle, !sawEOF, socket.isOpen else { return false }
        if worker.loop.now() &- idleSince < 1_000_000_000 { return true }
        return socket.isIdleAndOpen
    }

    /// Hands the connection to `client` for one exchange.
    func attach(to client: ClientConnection) {
        self.client = client
        if phase == .idle { phase = .attached }
        wantsRead = true
        lastActivity = worker.loop.now()
        updateInterest()
    }

    /// Parks the connection in the pool.
    func becomeIdle(now: UInt64) {
        client = nil
        phase = .idle
        idleSince = now
        input.clear()
        output.clear()
        spool = nil
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
        try? transport.close()
    }

    /// Re-evaluates what to wait for.
    func updateInterest() {
        guard let registration, phase != .closed else { return }
        var want: Interest = []
        switch phase {
        case .connecting:
            want = .writable
        case .attached:
            if wantsRead && !sawEOF && input.readableBytes < input.maxCapacity { want.insert(.readable) }
            if output.readableBytes > 0 || spool != nil { want.insert(.writable) }
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
        do {
            let result = try transport.read(into: input, maxBytes: min(worker.config.buffers.upstreamRead,
                                                                       input.maxCapacity - input.readableBytes))
            if case .processed(let n) = result {
                if n == 0 { sawEOF = true } else { lastActivity = loop.now() }
            }
        } catch {
            sawEOF = true
        }
        client?.upstreamReadable(self)
        updateInterest()
    }

    /// Writes queued output, then refills it from the spool file. Does nothing until connected, or once closed.
    func flush() {
        guard phase == .attached, socket.isOpen else { return }
        while true {
            if output.readableBytes > 0 {
                do {
                    guard case .processed(let n) = try transport.write(from: output) else { return }
                    if n > 0 { lastActivity = worker.loop.now() }
                    if output.readableBytes > 0 { return }
                } catch {
                    sawEOF = true
                    let client = self.client
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
                sawEOF = true
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
