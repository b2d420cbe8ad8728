import Audit
import CLinux
import Foundation
import Glibc
import HTTP1
import Inspect
import Quarantine
import Reactor
import Rules
import Synchronization
import TLS

/// Counters shared by all workers and read by the control thread (drain, the admin snapshot). Only what another
/// thread reads is shared: a per-request count here (one there was, read by nothing) was an atomic add on a cache
/// line both workers write, moved between the cores on every request.
public final class ProxyStats: Sendable {
    /// Client connections currently open, across workers.
    public let openConnections = Atomic<Int>(0)

    public init() {}
}

/// One event-loop thread's share of the proxy: its SO_REUSEPORT listener, its client connections and its
/// upstream keep-alive pool. Everything here is touched only on `loop`'s thread.
final class Worker {
    let loop: EventLoop
    /// The configuration, by reference: the connections' machines share it (`config` reads it, from
    /// `ExchangeContext`).
    let sharedConfig: SharedConfiguration
    let stats: ProxyStats
    private(set) var draining = false
    /// This worker's listening sockets, one per listening address, and their registrations.
    private var listeners: [(socket: TCPListener, registration: Registration)] = []
    /// Idle upstream connections, reused oldest first (IdlePool).
    private var pool = IdlePool<UpstreamConnection>()
    /// The idle upstream connections, oldest first (tests).
    var idle: [UpstreamConnection] { pool.connections }
    private(set) var clients: [ObjectIdentifier: ClientConnection] = [:]
    private var poolTimer: TimerID?
    private var lastClientTick: UInt64 = 0
    /// The most client connections open at once since memory was last returned (`returnMemoryAfterBurst`).
    private var peakClients = 0
    /// Requests ended since the last `malloc_trim`, and the count at the last tick (see `returnMemoryAfterBurst`).
    var requestsSinceTrim = 0
    private var requestsAtLastTick = 0
    /// Accepting is paused after EMFILE/ENFILE/ENOBUFS/ENOMEM; new connections wait in the backlog.
    private var acceptPaused = false
    private var acceptBackoffMs = 0
    private var acceptTimer: TimerID?
    /// The policy new requests use; swapped atomically (per worker) on reload. Nil: no rules.
    var policy: Policy? {
        didSet { evaluatorTemplate = policy.map { EvaluatorTemplate(PolicyEvaluator(policy: $0)) } }
    }
    /// An evaluator made once per policy (at start and on every reload): each request's starts from it and
    /// shares its boxed policy instead of boxing (copying) the policy again. Kept in a box: without rules, each
    /// request's test of an optional evaluator copied its few hundred bytes; a nil reference costs nothing.
    private var evaluatorTemplate: EvaluatorTemplate?

    private final class EvaluatorTemplate {
        let evaluator: PolicyEvaluator
        init(_ evaluator: PolicyEvaluator) { self.evaluator = evaluator }
    }
    /// The shared quarantine store, if configured.
    let quarantine: QuarantineStore?
    /// This worker's own audit log handle (each worker opens the same path with O_APPEND).
    private(set) var audit: AuditLog?
    private var auditFailed = false
    /// Per upstream group (same order as `config.upstreams`): the next server, in-flight counts, passive health.
    private var balancers: [UpstreamBalancer]
    /// Request ids and boundaries come from here (one RAND_bytes call per ~100 requests).
    let random = SecureRandomPool()
    /// Request ids made while random bytes could not be had (`newRequestID`).
    private var fallbackIDs = 0
    /// Buffers, replay logs and head arrays kept between this worker's requests (RequestPools).
    let pools: RequestPools?
    /// This worker's share of /metrics: plain counters, touched only on this loop's thread (a scrape copies them
    /// here, inside `execute`). Counted only with `--admin`.
    private(set) var metrics = RequestMetrics()
    /// This worker's number (0 …), the `worker` field of its stderr lines.
    let index: Int
    /// The certificates TLS listeners present; replaced on a SIGHUP reload (connections keep the context they
    /// started with).
    var tlsServer: TLSServerContext?
    /// For `https://` upstream servers.
    let tlsClient: TLSClientContext?
    /// Event and error lines on stderr.
    let events: EventLog

    init(loop: EventLoop, config: ProxyConfiguration, stats: ProxyStats, policy: Policy?, quarantine: QuarantineStore?,
         audit: AuditLog?, index: Int = 0, tlsServer: TLSServerContext? = nil, tlsClient: TLSClientContext? = nil) {
        self.tlsServer = tlsServer
        self.tlsClient = tlsClient
        self.loop = loop
        self.sharedConfig = SharedConfiguration(config)
        self.index = index
        events = config.eventLog
        self.stats = stats
        self.policy = policy
        evaluatorTemplate = policy.map { EvaluatorTemplate(PolicyEvaluator(policy: $0)) }   // didSet does not run in init
        self.quarantine = quarantine
        self.audit = audit
        balancers = config.upstreams.map { UpstreamBalancer(group: $0) }
        pools = RequestPools(replayLimit: config.pool.replayLimit)
    }

    /// A request ended: counts it, and with its audit record (an audit log is configured) counts it for /metrics
    /// (with `--admin`) and appends the record.
    func requestEnded(_ record: AuditRecord?) {
        requestsSinceTrim += 1
        guard let record else { return }
        if config.admin != nil { metrics.record(record) }
        writeAudit(record)
    }

    /// Appends one audit record; a failing log is reported once on stderr and retried on the next record.
    func writeAudit(_ record: AuditRecord) {
        guard let settings = config.audit else { return }
        if settings.human {
            let line = String(decoding: record.jsonLine, as: UTF8.self)
            if let data = line.data(using: .utf8),
               let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] {
                FileOutput.stdout(AuditTail.humanLine(object, color: isatty(1) != 0))
            }
            return
        }
        guard let audit else { return }
        auditWrite { try audit.append(record) }
    }

    /// Writes the audit lines batched during this event-loop iteration (the loop's `afterEvents`).
    func flushAudit() {
        guard let audit, audit.hasPending else { return }
        auditWrite { try audit.flush() }
    }

    /// Runs an audit-log write; a failing log is reported once on stderr until a write succeeds again.
    private func auditWrite(_ body: () throws -> Void) {
        guard let audit else { return }
        do {
            try body()
            auditFailed = false
        } catch {
            if !auditFailed {
                events.write(.error, "audit log write failed", [
                    .int("worker", index), .string("path", audit.configuration.path), .error(error),
                ])
            }
            auditFailed = true
        }
    }

    /// Per rate-limiting key (a kind of failure, a server marked down...): when its last line was printed, and
    /// how many were suppressed since.
    private var failureLines: [String: (at: UInt64, suppressed: Int)] = [:]

    /// Writes a failure line on stderr (level error): at most one per `kind` (upstream, spool, quarantine) per
    /// second in this worker; the next written line's `suppressed` field says how many were left out meanwhile.
    func logFailure(_ line: ConnectionMachine.FailureLine) {
        logEvent(kind: line.kind, level: .error, line.msg, line.fields + [.int("worker", index)])
    }

    /// Writes an event line, at most one per `kind` per second in this worker; the next one written says how many
    /// were left out (`suppressed`). Every line left out is counted by `msg` (/metrics
    /// `formwall_log_suppressed_total`). Every event a request or a connection can cause goes through here.
    func logEvent(kind: String, level: LogLevel, _ msg: StaticString, _ fields: [LogField]) {
        let now = loop.now()
        if let last = failureLines[kind], now &- last.at < 1_000_000_000 {
            failureLines[kind] = (last.at, last.suppressed + 1)
            if config.admin != nil { metrics.logSuppressed["\(msg)", default: 0] += 1 }
            return
        }
        let suppressed = failureLines[kind]?.suppressed ?? 0
        failureLines[kind] = (now, 0)
        var fields = fields
        if suppressed > 0 { fields.append(.int("suppressed", suppressed)) }
        events.write(level, msg, fields)
    }

    /// Reopens the audit log (SIGUSR1/SIGHUP, for logrotate).
    func reopenAudit() {
        flushAudit()   // lines of requests that ended before the signal go to the file they were logged under
        try? audit?.reopen()
    }

    /// Opens this worker's listeners, one per listening address (SO_REUSEPORT, so every worker binds the same
    /// addresses), or uses `inherited`, the ones the supervisor process bound and passed down (one per address,
    /// in the order of `config.listeners`).
    func start(inherited: [TCPListener] = []) throws {
        let sockets = try inherited.isEmpty
            ? config.listeners.map { try TCPListener(bindingTo: $0, options: .init(reuseAddress: true, reusePort: true)) }
            : inherited
        for (i, socket) in sockets.enumerated() {
            let registration = try loop.register(fd: socket.fd, interest: .readable, handler: AcceptHandler(self, i))
            listeners.append((socket, registration))
        }
        if audit != nil { loop.afterEvents = { [weak self] in self?.flushAudit() } }
        schedulePoolSweep()
    }

    /// Accepts every pending connection on listener `index`.
    func acceptReady(_ index: Int) {
        guard listeners.indices.contains(index), !draining, !acceptPaused else { return }
        let listener = listeners[index].socket
        while true {
            if clients.count >= config.maxConnections {
                // At the limit, and only when a connection is waiting (the listener stays armed until one is):
                // an idle connection makes room for it; with every connection busy, new ones wait in the backlog.
                guard listener.hasPendingConnection else { return }
                guard closeLongestIdle() else {
                    pauseAccepting(atLimit: true)
                    return
                }
            }
            let result: IOResult<TCPSocket>
            do { result = try listener.accept() } catch {
                // EMFILE/ENFILE and friends. The listener is level-triggered: returning with it armed would
                // spin. Stop listening, retry on a timer (50 ms doubling to 1 s) or when a connection closes;
                // the kernel keeps new connections in the backlog meanwhile.
                pauseAccepting(atLimit: false)
                return
            }
            guard case .processed(let socket) = result else { return }
            acceptBackoffMs = 0   // a pause after this one is a new one, with the shortest retry
            try? socket.setNoDelay()
            var transport: (any Transport)?
            if config.tlsListeners.contains(index), let tls = tlsServer {
                do { transport = try tls.makeTransport(socket: socket) } catch {
                    tlsFailed(reason: "protocol_error", error: error)
                    try? socket.close()
                    continue
                }
            }
            let client = ClientConnection(worker: self, socket: socket, transport: transport)
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
        if acceptPaused { resumeAccepting() }
    }

    /// Times accepting was paused for lack of descriptors or memory (tests and logs).
    private(set) var acceptPauses = 0

    /// At the connection limit (`maxConnections`): closes the connection that has been idle longest, to make room
    /// for a new one. False when none is idle. Scans this worker's connections, which happens only at the limit.
    private func closeLongestIdle() -> Bool {
        var oldest: (client: ClientConnection, since: UInt64)?
        for client in clients.values {
            guard let since = client.idleSince else { continue }
            if oldest.map({ since < $0.since }) ?? true { oldest = (client, since) }
        }
        guard let (client, since) = oldest else { return false }
        let before = clients.count
        client.drainIfIdle()
        guard clients.count < before else { return false }
        limitReached(closedIdle: true, [.seconds("idle_s", Double(loop.now() &- since) / 1e9)])
        return true
    }

    /// Counts (for /metrics) and logs (at most once a second) what the connection limit did: closed an idle
    /// connection, or paused accepting.
    private func limitReached(closedIdle: Bool, _ extra: [LogField] = []) {
        if config.admin != nil {
            if closedIdle { metrics.connectionLimit.closedIdle += 1 } else { metrics.connectionLimit.paused += 1 }
        }
        logEvent(kind: "connection_limit", level: .warn, "connection limit reached", [
            .int("worker", index), .int("max_connections", config.maxConnections),
            .string("action", closedIdle ? "closed_idle" : "paused"),
        ] + extra)
    }

    /// Stops accepting: at the connection limit (`atLimit`), or after `accept` failed for lack of descriptors or
    /// memory. Accepting resumes when a connection closes, or on a timer (50 ms, doubling to 1 s), which at the
    /// limit looks again for a connection that has become idle.
    private func pauseAccepting(atLimit: Bool) {
        guard !acceptPaused, !listeners.isEmpty else { return }
        acceptPaused = true
        // A retry on the timer that finds every connection still busy continues the same pause: counted once.
        if atLimit && acceptBackoffMs == 0 {
            limitReached(closedIdle: false)
        } else if !atLimit {
            acceptPauses += 1
            logEvent(kind: "accept", level: .warn, "accept paused", [
                .int("worker", index), .int("pauses", acceptPauses), .string("error", "out of descriptors or memory"),
            ])
        }
        for l in listeners { try? loop.setInterest([], for: l.registration) }
        acceptBackoffMs = acceptBackoffMs == 0 ? 50 : min(acceptBackoffMs * 2, 1000)
        acceptTimer = loop.schedule(after: .milliseconds(acceptBackoffMs)) { [weak self] _ in
            self?.acceptTimer = nil
            self?.resumeAccepting()
        }
    }

    private func resumeAccepting() {
        guard acceptPaused, !draining else { return }
        acceptPaused = false
        if let t = acceptTimer { loop.cancel(t); acceptTimer = nil }
        for l in listeners { try? loop.setInterest(.readable, for: l.registration) }
        for i in listeners.indices { acceptReady(i) }
        if !acceptPaused { acceptBackoffMs = 0 }
    }

    /// Stops accepting; idle connections close now, busy ones after their current response.
    func beginDrain() {
        guard !draining else { return }
        draining = true
        for l in listeners {
            try? loop.deregister(l.registration)
            try? l.socket.close()
        }
        listeners = []
        for client in Array(clients.values) { client.drainIfIdle() }
        for up in pool.removeAll() { up.close() }
    }

    /// Closes every connection at once (drain timeout).
    func closeAll() {
        for client in Array(clients.values) { client.forceClose() }
        for up in pool.removeAll() { up.close() }
    }

    // MARK: Upstream pool

    /// The oldest pooled connection to server `server` of group `group` that is still open, or a new one
    /// (connecting).
    func acquireUpstream(group: Int, server: Int, fresh: Bool) throws -> UpstreamConnection {
        if !fresh {
            while let up = pool.take(group: group, server: server) {
                if up.isReusable { return up }
                up.close()
            }
        }
        return try UpstreamConnection.connect(worker: self, group: group, server: server)
    }

    /// The server of `group` for the next attempt of a request that tried `tried` (round-robin or least-conn,
    /// skipping servers marked down); nil when it tried them all.
    func pickServer(group: Int, excluding tried: [Int]) -> Int? {
        balancers[group].pick(excluding: tried, now: loop.iterationTime)
    }

    /// What a scrape takes from this worker: its request metrics with every group's per-server health counts.
    var scrapedMetrics: RequestMetrics {
        var copy = metrics
        copy.upstreamServers = balancers.map(\.stats)
        return copy
    }

    /// A request started or finished on a server (least-conn counts).
    func serverStarted(group: Int, server: Int) { balancers[group].started(server) }
    func serverFinished(group: Int, server: Int) { balancers[group].finished(server) }

    /// Passive health: what a request learnt about a server (nil: it answered). The report that marks it down
    /// is logged, at most once a second per server (with every server of a group down, each request marks one
    /// down again).
    func reportServer(group: Int, server: Int, failure: UpstreamFailure?) {
        guard balancers[group].report(server, failure: failure, now: loop.iterationTime) else { return }
        let g = config.upstreams[group]
        logEvent(kind: "down \(group) \(server)", level: .warn, "upstream marked down", [
            .string("upstream", g.servers[server].upstream.authority), .string("group", g.name),
            .int("failures", g.maxFails), .seconds("down_s", g.failTimeout), .int("worker", index),
        ])
    }

    /// Returns a finished upstream connection to the pool (or closes it when the pool is full or draining).
    func release(_ up: UpstreamConnection) {
        guard !draining, pool.count < config.pool.maxIdle else { up.close(); return }
        up.becomeIdle(now: loop.iterationTime)
        pool.put(up, now: up.idleSince)
    }

    /// Removes a pooled connection that the upstream closed.
    func idleConnectionClosed(_ up: UpstreamConnection) {
        pool.remove(up)
    }

    /// Every `idleTimeout / 4` (50 ms to 1 s): closes pooled connections idle longer than the idle timeout, and once
    /// per idle timeout half of those the load did not need in it (`IdlePool.sweep`);
    /// about once a second, lets every client check its deadlines.
    /// After a burst, gives freed heap pages back to the kernel (`malloc_trim`), so RSS returns towards its baseline
    /// instead of staying at the burst's peak: once a burst of connections closed (the count fell to a quarter of
    /// its peak since the last trim, and by at least 256), or once a burst of at least 256 requests on open
    /// connections is over (no request ended since the last tick, no pooled upstream connection left: their
    /// buffers are freed too), or once the buffers of bodies held up by the upstream gave back at least 1 MiB
    /// (`released`). At most once a second per worker.
    private func returnMemoryAfterBurst(released: Int) {
        peakClients = max(peakClients, clients.count)
        let connectionsClosed = peakClients - clients.count >= 256 && clients.count * 4 <= peakClients
        let requestsQuiet = requestsSinceTrim >= 256 && requestsSinceTrim == requestsAtLastTick && pool.isEmpty
        requestsAtLastTick = requestsSinceTrim
        // Buffers of bodies the upstream holds up were cut in this tick (ClientConnection.tick): malloc keeps
        // the freed blocks mapped until trimmed.
        let buffersReleased = released >= 1 << 20
        guard connectionsClosed || requestsQuiet || buffersReleased else { return }
        _ = cl_malloc_trim()
        peakClients = clients.count
        requestsSinceTrim = 0
        requestsAtLastTick = 0
    }

    private func schedulePoolSweep() {
        let interval = Int(min(1000, max(50, config.pool.idleTimeout * 250)))
        poolTimer = loop.schedule(after: .milliseconds(interval)) { [weak self] loop in
            guard let self else { return }
            let limit = UInt64(max(0, min(self.config.pool.idleTimeout, 86_400)) * 1e9)
            let now = loop.now()
            for up in self.pool.sweep(now: now, idleLimit: limit) { up.close() }
            if now &- self.lastClientTick >= 1_000_000_000 - 1_000_000 {
                self.lastClientTick = now
                var released = 0
                for client in Array(self.clients.values) { released += max(0, client.tick(now: now)) }
                self.returnMemoryAfterBurst(released: released)
            }
            self.schedulePoolSweep()
        }
    }
}

// MARK: - TLS client connections

extension Worker {
    /// What a finished TLS handshake established, for the machine; nil for a plain transport or while the
    /// handshake is still going on.
    func secureFacts(of transport: any Transport) -> ConnectionMachine.SecureFacts? {
        guard let tls = transport as? TLSTransport, tls.isHandshakeComplete else { return nil }
        if config.admin != nil { metrics.tlsHandshakes += 1 }
        return ConnectionMachine.SecureFacts(version: tls.protocolVersion ?? "TLS", cipher: tls.cipher ?? "",
                                             serverName: tls.serverName, clientSubject: tls.peerSubject)
    }

    /// A client connection failed before its TLS handshake finished. Plain HTTP sent to a TLS port is answered
    /// 400 in clear text, as nginx does; every failure is counted (/metrics) and logged (rate-limited). True when
    /// the caller should close the connection now; false for errors that are not the handshake's (a reset).
    func handshakeFailed(_ client: ClientConnection, transport: any Transport, error: any Error) -> Bool {
        guard let tls = transport as? TLSTransport else { return false }
        let reason: String
        if error is HandshakeTimeout {
            reason = "timeout"
        } else if let failure = error as? TLSError {
            switch failure.code {
            case .plainHTTP:
                reason = "plain_http"
                let body = #"{"error":"plain_http_to_tls_port","status":400}"#
                let answer = Array(("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body).utf8)
                _ = try? answer.withUnsafeBytes { try tls.lower.write($0) }
            case .peerVerificationFailed: reason = "client_certificate"
            case .handshakeFailed: reason = "handshake_failed"
            case .closed: reason = "closed"
            default: reason = "protocol_error"
            }
        } else {
            return false
        }
        tlsFailed(reason: reason, error: error, peer: client.peer)
        return true
    }

    func tlsFailed(reason: String, error: any Error, peer: String? = nil) {
        if config.admin != nil { metrics.tlsHandshakeFailures[reason, default: 0] += 1 }
        var fields: [LogField] = [.string("reason", reason), .error(error), .int("worker", index)]
        if let peer { fields.append(.string("client", peer)) }
        logEvent(kind: "tls", level: .warn, "tls handshake failed", fields)
    }
}

/// Wakes the worker when one of its listeners has connections.
final class AcceptHandler: EventHandler {
    unowned let worker: Worker
    let index: Int
    init(_ worker: Worker, _ index: Int) {
        self.worker = worker
        self.index = index
    }
    func readable(loop: EventLoop) { worker.acceptReady(index) }
}

/// One line to stdout with a single write (`demo`'s human audit lines).
enum FileOutput {
    static func stdout(_ line: String) {
        var bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(1, $0.baseAddress, $0.count) }
    }
}

extension Worker: ExchangeContext {
    func newRequestID() -> String {
        if let id = random.hexID(bytes: 12) { return id }
        // Without random bytes (the boundary's refusal logs why): this worker's count, unique in the process.
        fallbackIDs &+= 1
        return "w\(index)-\(fallbackIDs)"
    }
    func newBoundary() -> [UInt8]? { random.boundary() }
    func timestamp() -> AuditTimestamp { .now() }

    func newEvaluator() -> PolicyEvaluator? {
        guard let template = evaluatorTemplate else { return nil }
        return template.evaluator.fresh()
    }
}
