import Glibc
import HTTP1
import Reactor

// The I/O half of one client connection: its socket, epoll registration and the upstream connection attached
// to it. Everything protocol-related is in `ConnectionMachine`; this class only moves bytes and carries out
// the machine's actions.
//
//   epoll ──► readable/writable/error/hangup ──► read into machine.clientIn ──► event ─┐
//   UpstreamConnection ──► read into machine.upstreamIn ──► event ──────────────────────┤
//   worker tick / drain ──► event ──────────────────────────────────────────────────────┤
//                                                                                        ▼
//                               run(): handle every queued event, apply its actions (connect, release, FIN,
//                               close, audit), write clientOut and upstreamOut (each write is an event too),
//                               until nothing is queued; then reconcile read/write interest on both sockets.
//
// Actions never call back into the machine; what they produce (a connect result, a write error) is queued
// and handled in the same run, so there is no re-entrancy.

/// A client connection: the machine's I/O.
final class ClientConnection: EventHandler, BatchEndHandler {
    typealias Event = ConnectionMachine.Event

    let worker: Worker
    private let socket: TCPSocket
    /// Plain, or TLS over memory BIOs (then it may want to write on its own: a handshake flight, close_notify).
    private let transport: any Transport
    /// When the connection was accepted (a TLS handshake must end within the header timeout from here).
    private let acceptedAt: UInt64
    /// The TLS handshake finished and its facts went to the machine (always true for plain connections).
    private var secured: Bool
    private var registration: Registration?
    private var currentInterest: Interest = []
    private(set) var machine: ConnectionMachine
    /// The machine's buffers (constants of the machine), kept here as constants too: a call through
    /// `machine.clientIn` retains and releases the buffer around it, since the machine is a variable that the
    /// compiler cannot prove unchanged during the call; through a `let` of this class it needs neither.
    private let clientIn: ByteBuffer
    private let clientOut: ByteBuffer
    private let upstreamOut: OutputQueue
    /// Where the attached upstream connection reads into.
    let upstreamIn: ByteBuffer
    private var upstream: UpstreamConnection?
    /// The antivirus scan of a held file part in progress.
    private var scan: ClamdScan?
    /// The servers the current request has dialled (a failed connect moves on to one not in here).
    private var serversTried: [Int] = []
    private var actions: [ConnectionMachine.Action] = []
    private var queue: [Event] = []
    private var running = false
    private var closed = false
    /// Whether the last client read filled all it asked for: the next one asks for twice as much (see `readClient`).
    private var lastReadFilled = false
    /// This connection's writes wait for the end of the current event batch (`deferWrites`).
    private var writesDeferred = false
    /// The machine has closed but TLS ciphertext of the response's last record still waits for the socket (the
    /// transport took the plaintext, the socket not all of its record): the socket closes once that is out, or at
    /// this deadline (the client send timeout), whichever comes first. Nothing else runs meanwhile.
    private var flushingUntil: UInt64?
    let peer: String

    init(worker: Worker, socket: TCPSocket, transport: (any Transport)? = nil) {
        self.worker = worker
        self.socket = socket
        self.transport = transport ?? PlainTransport(socket)
        secured = transport == nil
        acceptedAt = worker.loop.now()
        peer = socket.peerAddress ?? "unknown"
        machine = ConnectionMachine(context: worker, peer: peer, now: worker.loop.now())
        clientIn = machine.clientIn
        clientOut = machine.clientOut
        upstreamOut = machine.upstreamOut
        upstreamIn = machine.upstreamIn
        actions.reserveCapacity(8)
        queue.reserveCapacity(8)
    }

    func start() throws {
        registration = try worker.loop.register(fd: socket.fd, interest: .readable, handler: self)
        currentInterest = .readable
    }

    // MARK: EventHandler

    func readable(loop: EventLoop) {
        guard !closed else { return }
        if machine.wantsClientRead { readClient() }
        run()
        // A read that filled what it asked for (a body streaming in) most likely left more in the socket: read
        // again now rather than after another epoll_wait, a few times at most so other connections get their turn.
        var again = 0
        while again < 3, lastReadFilled, !closed, machine.wantsClientRead {
            again += 1
            readClient()
            run()
        }
    }

    func writable(loop: EventLoop) {
        guard !closed else { return }
        if transport.wantsWritable {
            do { _ = try transport.flush() } catch {
                if flushingUntil != nil { return closeSocket() }
                queue.append(.clientReset)
            }
        }
        if flushingUntil != nil {
            if !transport.wantsWritable { closeSocket() }
            return
        }
        run()
    }

    /// EPOLLERR: the socket failed (a reset). Nothing can be delivered any more, but what the client sent before
    /// it is still readable: the machine gets those bytes first, then the reset.
    func error(loop: EventLoop) {
        guard !closed else { return }
        if flushingUntil != nil { return closeSocket() }
        readThenReset()
    }

    /// EPOLLHUP: both directions are closed. Epoll reports it even with no interest set, so it must end the
    /// connection rather than be ignored: read what is left if the machine wants it, then a reset.
    func hangup(loop: EventLoop) {
        guard !closed else { return }
        if flushingUntil != nil { return closeSocket() }
        readThenReset()
    }

    /// Hands the machine what the kernel received before the connection failed, as far as the machine reads
    /// (a request head that arrived makes a request, with its audit line), then the reset. The kernel keeps
    /// received bytes readable after a reset and reports the error once they are read.
    private func readThenReset() {
        var reads = 0
        while reads < Self.readsBeforeReset, !closed, machine.wantsClientRead {
            reads += 1
            let queued = queue.count
            readClient()
            guard queue.count > queued, case .clientData = queue[queue.count - 1] else { break }
            run()
        }
        if closed { return }
        if case .clientReset = queue.last {} else { queue.append(.clientReset) }
        run()
    }

    /// At most this many reads of what is left before a reset is handed to the machine (each up to the read
    /// size): a bound on one wake-up's work, well past any request head.
    private static let readsBeforeReset = 16

    private func readClient() {
        // Part data still lent from clientIn (writes deferred to the batch's end, see `deferWrites`) is copied
        // before the read can move or overwrite it.
        machine.settleClientInput()
        let input = clientIn
        let room = input.maxCapacity - input.readableBytes
        guard room > 0 else { return }
        let wanted = input.adaptiveReadSize(afterFilledRead: lastReadFilled)
        do {
            let result = try transport.read(into: input, maxBytes: wanted)
            if !secured { transportSecured() }
            if case .processed(let n) = result {
                lastReadFilled = n == wanted
                queue.append(n == 0 ? .clientEOF : .clientData)
            }
        } catch {
            if !secured, worker.handshakeFailed(self, transport: transport, error: error) { closeSocket(); return }
            queue.append(.clientReset)
        }
    }

    /// Once a TLS handshake completed: tell the machine what the connection is (scheme, client certificate).
    private func transportSecured() {
        guard let facts = worker.secureFacts(of: transport) else { return }
        secured = true
        machine.secure(facts)
    }

    // MARK: Running the machine

    /// Handles queued events and writes until nothing is left to do, then reconciles interests.
    private func run() {
        guard !running, flushingUntil == nil else { return }
        running = true
        defer { running = false }
        while !closed {
            var index = 0
            while index < queue.count && !closed {
                // Moved out, a `.timer` left in its place: a copy would go through the enum's copy and destroy
                // again (the list is cleared below).
                var event = Event.timer
                swap(&event, &queue[index])
                index += 1
                actions.removeAll(keepingCapacity: true)
                machine.handle(event, now: worker.loop.iterationTime, into: &actions)
                apply()
            }
            queue.removeAll(keepingCapacity: true)
            if closed { break }
            if deferWrites() { return }
            flushClient()
            writeUpstream()
            // TLS may hold decrypted bytes the socket will not announce again.
            if queue.isEmpty, let up = upstream, up.isConnected, up.hasBufferedInput, machine.wantsUpstreamRead,
               let e = up.readBuffered() {
                queue.append(e)
            }
            if queue.isEmpty, transport.hasBufferedInput, machine.wantsClientRead {
                let before = clientIn.readableBytes
                readClient()
                if queue.isEmpty && clientIn.readableBytes == before { break }
            }
            if queue.isEmpty { break }
        }
        // Every write's event is handled: part data still lent from clientIn (not accepted by the upstream's
        // socket) is copied now, before the next read into clientIn can move or overwrite it.
        upstreamOut.settle()
        // The held part grew: the scan may send more of it.
        scan?.wake()
        reconcile()
    }

    /// Whether this run's writes wait for the end of the event batch (`batchEnded` runs the machine again and
    /// makes them). The first time in a batch that there is something to write, unless the last client read filled
    /// what it asked for (a body streaming in: it is read again at once, see `readable`): the connections that
    /// became ready together are all read and handled first, then all written, so a peer woken by one write
    /// usually finds the others' bytes too instead of sleeping and waking again for each (all the upstream writes
    /// first, `batchWillEnd`). Nothing is settled or reconciled meanwhile; the part data lent from `clientIn` stays
    /// valid because every read into it settles first (`readClient`), and a buffer given back between requests is
    /// settled by the machine.
    private func deferWrites() -> Bool {
        guard !writesDeferred, !lastReadFilled else { return false }
        let upstreamWrite = machine.wantsUpstreamWrite && upstream?.isConnected == true
        guard upstreamWrite || clientOut.readableBytes > 0 else { return false }
        guard worker.loop.runAtBatchEnd(self) else { return false }
        writesDeferred = true
        return true
    }

    // MARK: BatchEndHandler

    /// The first pass at the batch's end: the upstream writes of every connection that deferred its writes go out
    /// back to back, before any of their client writes and event handling (the second pass, `batchEnded`). A
    /// server woken by the first of them then finds the others' requests too. Interleaved with the client writes,
    /// each server and client thread was woken more often: 0.495 context switches per request against 0.449 with
    /// one worker, 1.164 against 1.055 with two (docs/performance.md, sixteenth session). The write's event is
    /// handled in the second pass.
    func batchWillEnd() {
        guard !closed else { return }
        writeUpstream()
    }

    func batchEnded() {
        writesDeferred = false
        guard !closed else { return }
        run()
    }

    /// Writes what the machine queued for the upstream, if it is connected; the write's event waits in `queue`.
    private func writeUpstream() {
        guard let up = upstream, up.isConnected, machine.wantsUpstreamWrite, let e = up.write(from: upstreamOut) else {
            return
        }
        queue.append(e)
    }

    private func flushClient() {
        let output = clientOut
        guard output.readableBytes > 0 else { return }
        do {
            if case .processed(let n) = try transport.write(from: output), n > 0 { queue.append(.clientWrote(n)) }
        } catch {
            queue.append(.clientReset)
        }
    }

    private func apply() {
        for action in actions {
            switch action {
            case .connectUpstream(let group):
                serversTried.removeAll(keepingCapacity: true)
                connectUpstream(group: group, fresh: false)
            case .reconnectUpstream(let group):
                // A replay: a fresh connection to the same server.
                let server = upstream?.server
                dropUpstream(reuse: false)
                if let server { serversTried.removeAll { $0 == server } }
                connectUpstream(group: group, fresh: true, server: server)
            case .retryUpstream(let group):
                dropUpstream(reuse: false)
                connectUpstream(group: group, fresh: false)
            case .scanFile(let file, let id):
                scan?.cancel()
                guard let settings = worker.config.antivirus else {
                    queue.append(.scanResult(.failed(reason: "no antivirus configured"), id: id))
                    continue
                }
                scan = ClamdScan(loop: worker.loop, file: file, settings: settings) { [weak self] verdict in
                    guard let self, !self.closed else { return }
                    self.scan = nil
                    self.queue.append(.scanResult(verdict, id: id))
                    self.run()
                }
            case .scanInputEnded:
                scan?.inputEnded(now: worker.loop.now())
            case .upstreamHealth(let group, let server, let failure):
                worker.reportServer(group: group, server: server, failure: failure)
            case .releaseUpstream(let reuse):
                dropUpstream(reuse: reuse)
            case .shutdownClientWrite:
                try? transport.shutdownWrite()
            case .closeClient:
                closeAfterFlushing()
            case .resetClient:
                try? socket.resetOnClose()
                closeAfterFlushing()
            case .requestCounted:
                worker.requestEnded(nil)
            case .requestEnded(let record):
                worker.requestEnded(record)
            case .log(let line):
                worker.logFailure(line)
            }
        }
    }

    /// Dials `server` of `group`, or the server the group's balancer picks among those this request has not tried.
    private func connectUpstream(group: Int, fresh: Bool, server chosen: Int? = nil) {
        // Every server tried already cannot happen (the machine counts attempts); report the first as failed.
        let server = chosen ?? worker.pickServer(group: group, excluding: serversTried) ?? 0
        serversTried.append(server)
        queue.append(.upstreamChosen(server: server))
        do {
            let up = try worker.acquireUpstream(group: group, server: server, fresh: fresh)
            upstream = up
            worker.serverStarted(group: group, server: server)
            up.attach(to: self)
            if up.isConnected { queue.append(.upstreamConnected(reused: up.reused, server: server)) }
        } catch {
            queue.append(.upstreamConnectFailed("\(error)", server: server))
        }
    }

    /// Detaches the upstream connection: back to the pool (`reuse`) or closed.
    private func dropUpstream(reuse: Bool) {
        guard let up = upstream else { return }
        upstream = nil
        worker.serverFinished(group: up.group, server: up.server)
        if reuse { worker.release(up) } else { up.close() }
    }

    private func reconcile() {
        guard !closed, let registration else { return }
        var want: Interest = []
        if machine.wantsClientRead { want.insert(.readable) }
        if clientOut.readableBytes > 0 || transport.wantsWritable { want.insert(.writable) }
        if want != currentInterest {
            currentInterest = want
            try? worker.loop.setInterest(want, for: registration)
        }
        upstream?.reconcile(wantsRead: machine.wantsUpstreamRead, wantsWrite: machine.wantsUpstreamWrite)
    }

    // MARK: Upstream callbacks

    /// An event from the attached upstream connection (connected, data, EOF, failures, writable).
    func upstreamEvent(_ up: UpstreamConnection, _ event: Event?) {
        guard !closed, up === upstream else { return }
        if let event { queue.append(event) }
        run()
    }

    // MARK: Timeouts and shutdown

    /// The worker's once-a-second tick. Returns the bytes of buffer storage given back meanwhile (a body held up
    /// by the upstream: `ConnectionMachine.tick`), for the worker to return to the kernel.
    @discardableResult
    func tick(now: UInt64) -> Int {
        let held = clientIn.capacity + upstreamOut.capacity
        tickMachine(now: now)
        return held - clientIn.capacity - upstreamOut.capacity
    }

    private func tickMachine(now: UInt64) {
        guard !closed else { return }
        if let until = flushingUntil {
            if now >= until { closeSocket() }
            return
        }
        // A TLS handshake that has not finished within the header timeout (slow or abandoned) ends here.
        if !secured, now &- acceptedAt > UInt64(worker.config.timeouts.clientHeader * 1e9) {
            _ = worker.handshakeFailed(self, transport: transport, error: HandshakeTimeout())
            closeSocket()
            return
        }
        scan?.tick(now: now)
        queue.append(.timer)
        run()
    }

    /// Since when this connection has been idle between requests (or before its first byte) with nothing to
    /// write; nil when it is busy or closed. The worker closes the longest-idle one at its connection limit.
    var idleSince: UInt64? { closed ? nil : machine.idleSince }

    /// Drain: an idle keep-alive connection closes now; a busy one after its response.
    func drainIfIdle() {
        guard !closed else { return }
        queue.append(.drain)
        run()
    }

    /// Closes now (drain timeout); a request still in flight is recorded as cut short.
    func forceClose() {
        guard !closed else { return }
        actions.removeAll(keepingCapacity: true)
        machine.forceClose(into: &actions)
        apply()
        closeSocket()
    }

    /// The machine is done with the connection. A plain socket closes now. A TLS session that was handed all of
    /// the machine's output but whose socket has not taken all of the last record's ciphertext (at most one
    /// record, 16 KiB) sends it first: closing now would cut what the machine counts as delivered. No close_notify
    /// follows (as before: the machine may be ending a response it knows to be cut). Output the machine still
    /// holds (an abort) is not waited for.
    private func closeAfterFlushing() {
        guard clientOut.readableBytes == 0, transport.wantsWritable else { return closeSocket() }
        flushingUntil = worker.loop.now() &+ ConnectionMachine.nanos(worker.config.timeouts.clientSend)
    }

    private func closeSocket() {
        guard !closed else { return }
        closed = true
        scan?.cancel()
        scan = nil
        dropUpstream(reuse: false)
        if let registration { try? worker.loop.deregister(registration) }
        registration = nil
        try? transport.close()
        worker.connectionClosed(self)
    }
}

/// A TLS handshake that did not finish within `--client-header-timeout`.
struct HandshakeTimeout: Error, CustomStringConvertible {
    var description: String { "handshake timeout" }
}
