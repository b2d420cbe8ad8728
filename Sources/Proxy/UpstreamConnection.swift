import Glibc
import Reactor
import TLS

/// The I/O half of one upstream connection: connecting, attached to a client connection, or idle in the
/// worker's pool. It has no buffers of its own: while attached it reads into and writes from the client's
/// `ConnectionMachine` buffers, and reports what happened as machine events.
final class UpstreamConnection: EventHandler, PooledConnection {
    enum Phase { case connecting, attached, idle, closed }

    typealias Event = ConnectionMachine.Event

    let worker: Worker
    let socket: TCPSocket
    /// Plain, or TLS for an `https://` server (the handshake runs on the first reads; writes wait for it).
    let transport: any Transport
    private let tls: TLSTransport?
    /// The socket of a plain connection, written with one gathering send per step; nil for TLS.
    private let plain: TCPSocket?
    private(set) var phase: Phase
    private var registration: Registration?
    private var currentInterest: Interest = []
    /// The client connection this one is attached to, from `attach` until `becomeIdle` or `close`: the client
    /// detaches it (`dropUpstream`) before it closes, so the reference cycle lives exactly as long as the
    /// exchange. Strong, not weak: a weakly referenced object gets a side table, and every retain and release of
    /// the client connection (a dozen a request) then takes the runtime's slow path.
    private(set) var client: ClientConnection?
    private(set) var idleSince: UInt64 = 0
    /// Taken from the pool for the current exchange.
    private(set) var reused = false
    /// The upstream's sending side ended (EOF or a read error) during the current exchange.
    private var readEnded = false
    /// The last read filled what it asked for: the next asks for twice the buffer.
    private var lastReadFilled = false
    /// Removed from epoll after a hang-up that cannot be served now (the machine is not reading, or the read
    /// side already ended); re-added when the machine reads again.
    private var parked = false

    /// The upstream group and the server within it this connection goes to.
    let group: Int
    let server: Int

    private init(worker: Worker, socket: TCPSocket, connected: Bool, group: Int, server: Int) throws {
        self.worker = worker
        self.group = group
        self.server = server
        self.socket = socket
        let upstream = worker.config.upstreams[group].servers[server].upstream
        if upstream.tls {
            guard let context = worker.tlsClient else {
                throw ConfigurationError("https upstream \(upstream.authority) without a TLS client context")
            }
            let session = try context.makeTransport(socket: socket, serverName: upstream.host)
            tls = session
            transport = session
            plain = nil
        } else {
            tls = nil
            transport = PlainTransport(socket)
            plain = socket
        }
        phase = connected ? .attached : .connecting
    }

    /// Whether a TLS error ended the handshake (not a failure after it, which is a plain read failure).
    private func handshakeFailedNow(_ error: TLSError) -> Bool {
        tls.map { !$0.isHandshakeComplete } ?? false
    }

    /// A TLS upstream whose handshake has not finished: reads drive it, writes wait for it.
    private var handshaking: Bool { tls.map { !$0.isHandshakeComplete } ?? false }

    /// TLS decoded more than the last read returned; the client's run reads again (the socket will not say so).
    var hasBufferedInput: Bool { transport.hasBufferedInput }

    /// Starts a non-blocking connect to server `server` of upstream group `group`.
    static func connect(worker: Worker, group: Int, server: Int) throws -> UpstreamConnection {
        let (socket, progress) = try TCPSocket.connect(to: worker.config.upstreams[group].servers[server].upstream.address)
        try? socket.setNoDelay()
        let up: UpstreamConnection
        do {
            up = try UpstreamConnection(worker: worker, socket: socket, connected: progress == .connected,
                                        group: group, server: server)
        } catch {
            try? socket.close()
            throw error
        }
        let interest: Interest = progress == .connected ? [] : .writable
        do {
            up.registration = try worker.loop.register(fd: socket.fd, interest: interest, handler: up)
            up.currentInterest = interest
        } catch {
            try? socket.close()
            throw error
        }
        return up
    }

    /// Connected and attached: bytes can flow.
    var isConnected: Bool { phase == .attached }

    /// Whether a pooled connection can carry another request. An idle connection is watched for reads, so the
    /// upstream closing it (or sending stray bytes) is an event: handled already, it closed the connection;
    /// fetched in this loop iteration but not yet delivered, it makes the connection unusable here, with no
    /// system call. An unwatched one is asked with a non-blocking peek. A close that reaches the kernel after
    /// this iteration's `epoll_wait` can still race the reuse; the machine replays small requests for that.
    var isReusable: Bool {
        guard phase == .idle, socket.isOpen, !transport.hasBufferedInput else { return false }
        guard let registration else { return socket.isIdleAndOpen }
        return !worker.loop.hasUndeliveredEvent(registration)
    }

    /// Hands the connection to `client` for one exchange.
    func attach(to client: ClientConnection) {
        self.client = client
        reused = phase == .idle
        if phase == .idle { phase = .attached }
        readEnded = false
        lastReadFilled = false
    }

    /// Parks the connection in the pool, watching only for the upstream closing it.
    func becomeIdle(now: UInt64) {
        client = nil
        phase = .idle
        idleSince = now
        set(.readable)
    }

    /// Closes the socket (an exchange in progress leaves the upstream with an incomplete request).
    func close() {
        guard phase != .closed else { return }
        phase = .closed
        client = nil
        if let registration { try? worker.loop.deregister(registration) }
        registration = nil
        parked = false
        try? transport.close()
    }

    /// Sets read and write interest as the machine wants them.
    func reconcile(wantsRead: Bool, wantsWrite: Bool) {
        guard phase == .attached else { return }
        if parked {
            guard wantsRead && !readEnded else { return }
            // The machine reads again: re-register; a pending hang-up is reported at once and read.
            parked = false
            registration = try? worker.loop.register(fd: socket.fd, interest: .readable, handler: self)
            currentInterest = .readable
            return
        }
        var want: Interest = []
        // During a TLS handshake the server's flight must be read before anything can be written.
        if (wantsRead || handshaking) && !readEnded { want.insert(.readable) }
        if (wantsWrite && !handshaking) || transport.wantsWritable { want.insert(.writable) }
        set(want)
    }

    private func set(_ want: Interest) {
        guard let registration, want != currentInterest else { return }
        currentInterest = want
        try? worker.loop.setInterest(want, for: registration)
    }

    /// Writes the first bytes of `output` without consuming them (the machine does, from the event): a plain
    /// socket takes owned and lent pieces in one gathering send; TLS encrypts from the owned bytes after the
    /// queue is settled.
    func write(from output: OutputQueue) -> Event? {
        guard phase == .attached, !output.isEmpty else { return nil }
        do {
            let result: IOResult<Int>
            if let plain {
                result = try output.withPieces(limit: 64) { try plain.writev($0) }
            } else {
                output.settle()
                result = try output.withPieces(limit: 1) { try transport.write($0[0]) }
            }
            if case .processed(let n) = result, n > 0 { return .upstreamWrote(n) }
            return nil
        } catch {
            return .upstreamWriteFailed
        }
    }

    /// Reads again when TLS holds decoded bytes (called by the client's run while the machine wants them).
    func readBuffered() -> Event? { read() }

    /// Reads what fits into the machine's `upstreamIn`.
    private func read() -> Event? {
        guard let input = client?.upstreamIn, !readEnded else { return nil }
        let room = input.maxCapacity - input.readableBytes
        guard room > 0 else { return nil }
        // Adaptive, as on the client side: a small response never takes a `buffers.upstreamRead` block.
        let wanted = input.adaptiveReadSize(afterFilledRead: lastReadFilled, limit: worker.config.buffers.upstreamRead)
        do {
            let result = try transport.read(into: input, maxBytes: wanted)
            guard case .processed(let n) = result else { return nil }
            lastReadFilled = n == wanted
            if n == 0 {
                readEnded = true
                return .upstreamEOF
            }
            return .upstreamData
        } catch {
            readEnded = true
            if let failure = error as? TLSError, handshakeFailedNow(failure) { return .upstreamTLSFailed("\(failure)") }
            return .upstreamReadFailed
        }
    }

    // MARK: EventHandler

    func writable(loop: EventLoop) {
        switch phase {
        case .connecting:
            do {
                try socket.finishConnect()
            } catch {
                let client = self.client
                close()
                client?.upstreamEvent(self, .upstreamConnectFailed("\(error)", server: server))
                return
            }
            phase = .attached
            set([])
            client?.upstreamEvent(self, .upstreamConnected(reused: false, server: server))
        case .attached:
            if transport.wantsWritable { _ = try? transport.flush() }
            client?.upstreamEvent(self, nil)   // the client's run writes upstreamOut
        case .idle, .closed:
            return
        }
    }

    func readable(loop: EventLoop) {
        switch phase {
        case .idle:
            // The upstream closed a pooled connection (or sent stray bytes): drop it.
            worker.idleConnectionClosed(self)
            close()
        case .connecting, .closed:
            return
        case .attached:
            let event = read()
            client?.upstreamEvent(self, event)
        }
    }

    /// EPOLLERR: while connecting, the connect failed; otherwise the bytes the upstream sent before the error
    /// (an early answer) can still be read.
    func error(loop: EventLoop) { hangup(loop: loop) }

    /// EPOLLHUP: reported even with no interest set, so every call must make progress or stop the reports.
    func hangup(loop: EventLoop) {
        switch phase {
        case .connecting:
            writable(loop: loop)
        case .idle:
            readable(loop: loop)
        case .closed:
            return
        case .attached:
            let event = read()
            if event == nil || readEnded, let registration {
                // Nothing more can be read now (the machine's buffer is full) or ever (the read side ended):
                // leave epoll until the machine reads again.
                try? worker.loop.deregister(registration)
                self.registration = nil
                currentInterest = []
                parked = true
            }
            client?.upstreamEvent(self, event)
        }
    }
}
