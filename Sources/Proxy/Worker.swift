import Audit
import Foundation
import Glibc
import Inspect
import Quarantine
import Reactor
import Rules
import Synchronization

/// Counters shared by all workers and read by the control thread (drain, tests).
public final class ProxyStats: Sendable {
    /// Client connections currently open, across workers.
    public let openConnections = Atomic<Int>(0)
    /// Requests that reached a response or an error, across workers.
    public let completedRequests = Atomic<Int>(0)

    public init() {}
}

/// One event-loop thread's share of the proxy: its SO_REUSEPORT listener, its client connections and its
/// upstream keep-alive pool. Everything here is touched only on `loop`'s thread.
final class Worker {
    let loop: EventLoop
    let config: ProxyConfiguration
    let stats: ProxyStats
    private(set) var draining = false
    private var listener: TCPListener?
    private var listenerRegistration: Registration?
    private var idle: [UpstreamConnection] = []
    private(set) var clients: [ObjectIdentifier: ClientConnection] = [:]
    private var poolTimer: TimerID?
    /// The policy new requests use; swapped atomically (per worker) on reload. Nil: no rules.
    var policy: Policy?
    /// The shared quarantine store, if configured.
    let quarantine: QuarantineStore?
    /// This worker's own audit log handle (each worker opens the same path with O_APPEND).
    private(set) var audit: AuditLog?
    private var auditFailed = false
    /// Request ids and boundaries come from here (one RAND_bytes call per ~100 requests).
    let random = SecureRandomPool()

    init(loop: EventLoop, config: ProxyConfiguration, stats: ProxyStats, policy: Policy?, quarantine: QuarantineStore?,
         audit: AuditLog?) {
        self.loop = loop
        self.config = config
        self.stats = stats
        self.policy = policy
        self.quarantine = quarantine
        self.audit = audit
    }

    /// Appends one audit record; a failing log is reported once on stderr and retried on the next record.
    func writeAudit(_ record: AuditRecord) {
        if config.audit?.human == true {
            let line = String(decoding: record.jsonLine, as: UTF8.self)
            if let data = line.data(using: .utf8),
               let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] {
                FileOutput.stdout(AuditTail.humanLine(object, color: isatty(1) != 0))
            }
            return
        }
        guard let audit else { return }
        do {
            try audit.write(record)
            auditFailed = false
        } catch {
            if !auditFailed { FileOutput.stderr("formwall: audit log write failed: \(error)") }
            auditFailed = true
        }
    }

    /// Reopens the audit log (SIGUSR1/SIGHUP, for logrotate).
    func reopenAudit() {
        try? audit?.reopen()
    }

    /// Opens this worker's listener (SO_REUSEPORT, so every worker binds the same address), or uses `inherited`,
    /// one the supervisor process bound and passed down.
    func start(inherited: TCPListener? = nil) throws {
        let listener = try inherited
            ?? TCPListener(bindingTo: config.listen, options: .init(reuseAddress: true, reusePort: true))
        self.listener = listener
        listenerRegistration = try loop.register(fd: listener.fd, interest: .readable, handler: AcceptHandler(self))
        schedulePoolSweep()
    }

    /// Accepts every pending connection.
    func acceptReady() {
        guard let listener, !draining else { return }
        while true {
            let result: IOResult<TCPSocket>
            do { result = try listener.accept() } catch {
                // EMFILE/ENFILE and friends: stop accepting for this wake-up; the backlog keeps them.
                return
            }
            guard case .processed(let socket) = result else { return }
            try? socket.setNoDelay()
            let client = ClientConnection(worker: self, socket: socket)
            do {
                try client.start()
                clients[ObjectIdentifier(client)] = client
                stats.openConnections.add(1, ordering: .relaxed)
            } catch {
                client.forceClose()
            }
        }
    }

    /// Called by a connection when it has closed.
    func connectionClosed(_ client: ClientConnection) {
        if clients.removeValue(forKey: ObjectIdentifier(client)) != nil {
            stats.openConnections.subtract(1, ordering: .relaxed)
        }
    }

    /// Stops accepting; idle connections close now, busy ones after their current response.
    func beginDrain() {
        guard !draining else { return }
        draining = true
        if let reg = listenerRegistration { try? loop.deregister(reg) }
        try? listener?.close()
        listener = nil
        for client in Array(clients.values) { client.drainIfIdle() }
        for up in idle { up.close() }
        idle.removeAll()
    }

    /// Closes every connection at once (drain timeout).
    func closeAll() {
        for client in Array(clients.values) { client.forceClose() }
        for up in idle { up.close() }
        idle.removeAll()
    }

    // MARK: Upstream pool

    /// A pooled connection that is still open, or a new one (connecting).
    func acquireUpstream() throws -> UpstreamConnection {
        while let up = idle.popLast() {
            if up.isReusable { return up }
            up.close()
        }
        return try UpstreamConnection.connect(worker: self)
    }

    /// Returns a finished upstream connection to the pool (or closes it when the pool is full or draining).
    func release(_ up: UpstreamConnection) {
        guard !draining, idle.count < config.pool.maxIdle else { up.close(); return }
        up.becomeIdle(now: loop.now())
        idle.append(up)
    }

    /// Removes a pooled connection that the upstream closed.
    func idleConnectionClosed(_ up: UpstreamConnection) {
        idle.removeAll { $0 === up }
    }

    private func schedulePoolSweep() {
        poolTimer = loop.schedule(after: .milliseconds(1000)) { [weak self] loop in
            guard let self else { return }
            let limit = UInt64(self.config.pool.idleTimeout * 1e9)
            let now = loop.now()
            let expired = self.idle.filter { now &- $0.idleSince > limit }
            self.idle.removeAll { now &- $0.idleSince > limit }
            for up in expired { up.close() }
            for client in Array(self.clients.values) { client.tick(now: now) }
            self.schedulePoolSweep()
        }
    }
}

/// Wakes the worker when its listener has connections.
final class AcceptHandler: EventHandler {
    unowned let worker: Worker
    init(_ worker: Worker) { self.worker = worker }
    func readable(loop: EventLoop) { worker.acceptReady() }
}

/// One line to stderr or stdout with a single write.
enum FileOutput {
    static func stdout(_ line: String) {
        var bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(1, $0.baseAddress, $0.count) }
    }

    static func stderr(_ line: String) {
        var bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}
