import Audit
import Foundation
import Glibc
import Quarantine
import Reactor
import Rules
import Synchronization
import TLS

// The process: N worker loops (each with its own SO_REUSEPORT listener, bound here or inherited from the
// supervisor process) plus a control loop on the main thread that owns the signals.
//
//   main thread (control loop)            worker threads (EventLoopGroup)
//   SIGTERM/SIGINT ──► drain ───execute──► Worker.beginDrain: close listener, idle connections
//                      poll openConnections until 0 or drain timeout, then stop everything, exit 0
//   SIGHUP ──────────► reload ──execute──► Worker.reload (swap immutable configuration pieces)
//   --admin listener ► /metrics ─execute──► each worker copies its counters ─execute─► merged here, answered

/// Runs the proxy until it is told to stop.
public final class ProxyServer {
    public let configuration: ProxyConfiguration
    public let stats = ProxyStats()
    private let group: EventLoopGroup
    let registry = WorkerRegistry()
    let quarantine: QuarantineStore?
    /// The TLS listeners' certificates in force (SIGHUP builds a new one from the same files).
    private var tlsServerContext: TLSServerContext?
    /// Where SIGHUP finds the rule files: set when a configuration file lists them (its `include`s are read
    /// again), with what it has to say about the rest of the file (settings that need a restart); nil:
    /// `configuration.rules`.
    public var rulePaths: (() throws -> (paths: [String], warnings: [String]))?
    /// Called on the control loop when a SIGHUP reload is over: every worker uses the new policy, or it failed.
    public var onReloadFinished: ((ReloadOutcome) -> Void)?
    /// The admin listener's socket (`--admin`), bound in `init`, served by `run`.
    private let adminListener: TCPListener?
    /// Control-loop state (main thread only): reload counts, the policy's files and digest, draining.
    private(set) var ruleReloads = (ok: 0, failed: 0)
    /// The policy in force (nil without `--rules`); updated on each successful reload.
    public private(set) var rulesInfo: RulesInfo?
    /// The rule paths of the policy in force (`--rules`, or the rule files a configuration file names) and the
    /// files as they were read: enough to compile it again (`ProxyConfiguration.lastGoodRules`).
    public private(set) var rulesInForce: (paths: [String], sources: [PolicySource]) = ([], [])
    private(set) var draining = false
    /// How many times the supervisor restarted the proxy process before this one (exported as a metric).
    public var supervisorRestarts = 0

    /// Binds every worker's listener; throws a readable error (address in use, …) before anything runs.
    ///
    /// With `inheritedListeners` (listening sockets a supervisor bound, one per worker) nothing is bound:
    /// worker *i* adopts the *i*-th descriptor.
    ///
    /// `inheritedAdmin` is the admin listener's descriptor when the supervisor bound it (`--admin`).
    public init(configuration: ProxyConfiguration, inheritedListeners: [Int32] = [], inheritedAdmin: Int32? = nil) throws {
        self.configuration = configuration
        Self.blockSignals()
        try Self.checkSpoolDirectory(configuration.spoolDirectory)
        let lastGood = configuration.lastGoodRules
        let policy = try Self.loadPolicy(configuration.rules, quarantine: configuration.quarantine != nil,
                                         upstreamGroups: configuration.upstreams.map(\.name), from: lastGood?.sources)
        rulesInfo = policy.map { RulesInfo(policy: $0, at: lastGood?.loadedAt ?? .now()) }
        rulesInForce = (configuration.rules, policy?.sources ?? [])
        if let q = configuration.quarantine {
            do {
                let store = try QuarantineStore(directory: q.directory, maxBytes: Int64(clamping: q.maxBytes),
                                                retention: .seconds(Int64(q.retentionSeconds)))
                _ = try store.recover()
                quarantine = store
            } catch {
                throw ConfigurationError("quarantine store \(q.directory): \(error)")
            }
        } else {
            quarantine = nil
        }
        if let a = configuration.audit, !a.human {
            // Open once here so a bad path is a start-up error, not a silent gap.
            do { _ = try AuditLog(path: a.path) } catch { throw ConfigurationError("audit log \(a.path): \(error)") }
        }
        // Workers bind with SO_REUSEPORT, which would silently share a port another formwall already
        // serves; a plain bind first turns that into a clear "address already in use".
        let perWorker = configuration.listeners.count
        if inheritedListeners.isEmpty {
            for address in configuration.listeners {
                let probe = try TCPListener(bindingTo: address, options: .addressProbe)
                try? probe.close()
            }
        } else if inheritedListeners.count != max(1, configuration.workers) * perWorker {
            throw ConfigurationError("\(inheritedListeners.count) inherited listeners for \(configuration.workers) "
                + "workers on \(perWorker) addresses")
        }
        if let fd = inheritedAdmin {
            adminListener = try TCPListener(adopting: fd)
        } else if let address = configuration.admin {
            adminListener = try Self.bindAdmin(address)
        } else {
            adminListener = nil
        }
        let tlsServer = try configuration.tls.map { try Self.tlsServerContext($0) }
        tlsServerContext = tlsServer
        let tlsClient = try Self.tlsClientContext(configuration)
        if tlsClient != nil, !configuration.upstreamTLS.verify {
            Self.warnInsecureUpstream(configuration)
        }
        let handout = ListenerHandout(inheritedListeners)
        let numbering = Atomic<Int>(0)
        group = try EventLoopGroup(count: max(1, configuration.workers))
        let config = configuration
        let stats = self.stats
        let registry = self.registry
        let store = quarantine
        do {
            try group.runOnEach { [numbering] loop in
                let audit = try config.audit.flatMap { $0.human ? nil : $0 }.map {
                    try AuditLog(path: $0.path,
                                 rotation: $0.rotateBytes.map { AuditLog.Rotation(maxBytes: $0, keep: config.audit!.keep) })
                }
                // Each worker judges with its own copy of the policy (`workerCopy`), compiled on its own thread.
                let own = Self.workerCopy(of: policy) {
                    try Self.loadPolicy(config.rules, quarantine: config.quarantine != nil,
                                        upstreamGroups: config.upstreams.map(\.name), from: lastGood?.sources)
                }
                let worker = Worker(loop: loop, config: config, stats: stats, policy: own, quarantine: store,
                                    audit: audit, index: numbering.add(1, ordering: .relaxed).oldValue,
                                    tlsServer: tlsServer, tlsClient: tlsClient)
                try worker.start(inherited: handout.take(perWorker).map { try TCPListener(adopting: $0) })
                registry.add(loop.handle, worker)
            }
        } catch {
            group.shutdownGracefully()
            throw error
        }
    }

    /// Blocks the signals the control loop reads from its signalfd, and ignores SIGPIPE. Call it before
    /// starting any thread (threads inherit the mask); `init` calls it too.
    public static func blockSignals() {
        var set = sigset_t()
        sigemptyset(&set)
        for s in [SIGTERM, SIGINT, SIGHUP, SIGUSR1] { sigaddset(&set, s) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        signal(SIGPIPE, SIG_IGN)
    }

    /// Loads and compiles rule files; nil when there are none. Throws the diagnostics as one error, and refuses a
    /// policy that uses `action quarantine` when no quarantine store is configured (`quarantine` false): every
    /// such part would otherwise fail with 503.
    ///
    /// `upstreamGroups` (nil: not checked, as `inspect` does) are the declared group names; a route naming
    /// another group is refused. With `sources` the files are read from them, not from the disk
    /// (`Policy.load(paths:from:)`).
    public static func loadPolicy(_ paths: [String], quarantine: Bool, upstreamGroups: [String]? = nil,
                                  from sources: [PolicySource]? = nil) throws -> Policy? {
        guard !paths.isEmpty else { return nil }
        let policy: Policy
        do {
            if let sources {
                policy = try Policy.load(paths: paths, from: sources)
            } else {
                policy = try Policy.load(paths: paths)
            }
        } catch {
            throw ConfigurationError("invalid rules:\n" + error.diagnostics.map(\.description).joined(separator: "\n"))
        }
        if let groups = upstreamGroups {
            for route in policy.routes {
                guard let name = route.upstream, !groups.contains(name.name) else { continue }
                let at = name.location.map { "\($0.file):\($0.line):\($0.column): " } ?? ""
                throw ConfigurationError("\(at)route \(route.prefix) names upstream group '\(name.name)', which is not "
                    + "declared (declared: \(groups.joined(separator: ", ")))")
            }
        }
        if !quarantine {
            let rules = (policy.routes + [policy.fallback]).flatMap {
                $0.fields + $0.files + [$0.otherFields, $0.otherFiles].compactMap { $0 }
            }
            if let rule = rules.first(where: { $0.action == .quarantine }) {
                throw ConfigurationError("\(rule.location): `action quarantine` needs --quarantine-dir")
            }
        }
        return policy
    }

    /// A worker's own copy of `policy`: `compile` run again (the same rule files, read and compiled anew), so that
    /// the policy's arrays and strings, whose reference counts every request changes, are the worker's alone. With
    /// one shared policy two workers wrote the same cache lines 14 times a request (`bench/proxy/sharing.py`,
    /// docs/performance.md, "Workers that write no shared memory"). The copy is used only when it equals
    /// `policy`, sources included: when a file changed in between (or no longer compiles), `policy` itself is
    /// shared, so every worker always judges by the policy that was checked and reported.
    static func workerCopy(of policy: Policy?, compile: () throws -> Policy?) -> Policy? {
        guard let policy else { return nil }
        guard let copy = try? compile(), copy == policy else { return policy }
        return copy
    }

    /// Refuses a spool directory (`--spool-dir`) where no temporary file can be created: missing, not a
    /// directory, not writable. Creates one (unnamed, or unlinked at once) and closes it.
    public static func checkSpoolDirectory(_ directory: String) throws {
        do {
            let probe = try TemporaryFile(directory: directory)
            probe.close()
        } catch {
            throw ConfigurationError("--spool-dir \(directory) is not a writable directory: \(error)")
        }
    }

    /// Re-reads the rule files; on success every worker switches to the new policy for new requests
    /// (requests in flight finish under the old one). On failure the old policy stays and the errors are logged.
    /// `done` runs on `control` (the control loop) once every worker has switched, or at once on failure.
    public func reloadRules(on control: EventLoop, then done: @escaping (ReloadOutcome) -> Void) {
        var outcome = ReloadOutcome()
        let paths: [String]
        do {
            let found = try rulePaths?() ?? (paths: configuration.rules, warnings: [])
            paths = found.paths
            outcome.warnings = found.warnings
        } catch {
            ruleReloads.failed += 1
            configuration.eventLog.write(.error, "rules reload failed", [
                .error(error), .string("action", "keeping the previous rules"),
            ])
            outcome.errors.append("\(error)")
            done(outcome)
            return
        }
        guard !paths.isEmpty else { done(outcome); return }
        let upstreamGroups = configuration.upstreams.map(\.name)
        let hasQuarantine = configuration.quarantine != nil
        do {
            let fresh = try Self.loadPolicy(paths, quarantine: hasQuarantine, upstreamGroups: upstreamGroups)
            ruleReloads.ok += 1
            rulesInfo = RulesInfo(policy: fresh ?? Policy())
            rulesInForce = (paths, fresh?.sources ?? [])
            // The line is written, and `done` called, once every worker has switched, so "reloaded" means in
            // force everywhere.
            let pending = Countdown(registry.count)
            let events = configuration.eventLog
            let rules = paths
            let finished = ControlLoopBox(value: ReloadCompletion { done(outcome) })
            let back = control.handle
            registry.forEach { handle, worker in
                let own = Self.workerCopy(of: fresh) {
                    try Self.loadPolicy(paths, quarantine: hasQuarantine, upstreamGroups: upstreamGroups)
                }
                _ = handle.execute { _ in
                    worker.value.policy = own
                    guard pending.finishOne() else { return }
                    events.write(.info, "rules reloaded", [LogField("rules", .strings(rules))])
                    _ = back.execute { _ in finished.value.run() }
                }
            }
        } catch {
            ruleReloads.failed += 1
            configuration.eventLog.write(.error, "rules reload failed", [
                LogField("rules", .strings(paths)), .error(error),
                .string("action", "keeping the previous rules"),
            ])
            outcome.errors.append("\(error)")
            done(outcome)
        }
    }

    /// The server context for `--tls-certificate`…: every certificate and key is read and checked here, so a bad
    /// file is a start-up error (or, on reload, keeps the old certificates).
    public static func tlsServerContext(_ settings: ProxyConfiguration.TLSSettings,
                                        keys: TLSTicketKeys? = nil) throws -> TLSServerContext {
        var tls = TLSServerConfiguration(certificates: settings.certificates.map {
            .init(chainPath: $0.certificate, keyPath: $0.key)
        })
        tls.minimumVersion = settings.minimumVersion == "1.2" ? .tls12 : .tls13
        if let ciphers = settings.ciphers { tls.cipherList = ciphers }
        if let suites = settings.ciphersuites { tls.cipherSuites = suites }
        tls.strictSNI = settings.strictSNI
        if let ca = settings.clientCA {
            tls.clientAuthentication = settings.clientCertificateRequired ? .required(caPath: ca) : .optional(caPath: ca)
        }
        do { return try TLSServerContext(configuration: tls, ticketKeys: keys) } catch {
            throw ConfigurationError("TLS: \(error)")
        }
    }

    /// The client context for `https://` upstream servers; nil when there are none.
    public static func tlsClientContext(_ configuration: ProxyConfiguration) throws -> TLSClientContext? {
        guard configuration.upstreams.contains(where: { $0.servers.contains { $0.upstream.tls } }) else { return nil }
        let settings = configuration.upstreamTLS
        var tls = TLSClientConfiguration(trust: settings.caFile.map { .caFile($0) } ?? .system)
        tls.insecureSkipVerification = !settings.verify
        if let pair = settings.certificate {
            tls.clientCertificate = TLSCertificateFiles(chainPath: pair.certificate, keyPath: pair.key)
        }
        do { return try TLSClientContext(configuration: tls) } catch {
            throw ConfigurationError("TLS to the upstream: \(error)")
        }
    }

    /// `--upstream-tls-verify off`: said at start-up and on every reload, at level error, so it is never missed.
    static func warnInsecureUpstream(_ configuration: ProxyConfiguration) {
        let servers = configuration.upstreams.flatMap { $0.servers.filter(\.upstream.tls).map(\.upstream.authority) }
        configuration.eventLog.write(.error, "upstream tls verification off", [
            LogField("upstreams", .strings(servers)),
            .string("risk", "any certificate is accepted: a machine in the middle can read and change every request"),
        ])
    }

    /// SIGHUP: reads the certificates and keys again. On success new connections use them (open ones keep
    /// theirs); on failure the old ones stay, the error is logged and returned.
    @discardableResult
    public func reloadCertificates() -> String? {
        if !configuration.upstreamTLS.verify, configuration.upstreams.contains(where: { $0.servers.contains { $0.upstream.tls } }) {
            Self.warnInsecureUpstream(configuration)
        }
        guard let current = tlsServerContext else { return nil }
        do {
            let fresh = try current.reloaded()
            tlsServerContext = fresh
            registry.forEach { handle, worker in _ = handle.execute { _ in worker.value.tlsServer = fresh } }
            configuration.eventLog.write(.info, "certificates reloaded", [
                LogField("certificates", .strings(configuration.tls?.certificates.map(\.certificate) ?? [])),
            ])
            return nil
        } catch {
            configuration.eventLog.write(.error, "certificates reload failed", [
                .error(error), .string("action", "keeping the previous certificates"),
            ])
            return "certificates: \(error)"
        }
    }

    /// Serves until SIGTERM or SIGINT, then drains in-flight requests (up to the drain timeout) and returns.
    /// `onReload` runs on SIGHUP; `onReopen` on SIGUSR1 and SIGHUP (log reopening).
    public func run(onReload: @escaping () -> Void = {}, onReopen: @escaping () -> Void = {}) throws {
        let control = try EventLoop()
        var drainDeadline: UInt64?
        let reopenAll: () -> Void = { [registry] in
            registry.forEach { handle, worker in _ = handle.execute { _ in worker.value.reopenAudit() } }
        }
        let events = configuration.eventLog
        try control.onSignal(SIGHUP) { [weak self] loop, _ in
            events.write(.debug, "signal received", [.string("signal", "SIGHUP")])
            guard let self else { return }
            let certificates = self.reloadCertificates()
            reopenAll(); onReload(); onReopen()
            self.reloadRules(on: loop) { [weak self] outcome in
                var outcome = outcome
                if let certificates { outcome.errors.append(certificates) }
                self?.onReloadFinished?(outcome)
            }
        }
        try control.onSignal(SIGUSR1) { _, _ in
            events.write(.debug, "signal received", [.string("signal", "SIGUSR1")])
            reopenAll(); onReopen()
        }
        if let store = quarantine {
            func prune(_ loop: EventLoop) {
                _ = try? store.prune(now: Date())
                _ = loop.schedule(after: .seconds(60)) { prune($0) }
            }
            prune(control)
            // Sees what others changed in the store (formwall quarantine delete, files removed by hand).
            func rescan(_ loop: EventLoop) {
                store.rescanIfDue()
                _ = loop.schedule(after: QuarantineStore.rescanPeriod) { rescan($0) }
            }
            _ = control.schedule(after: QuarantineStore.rescanPeriod) { rescan($0) }
        }
        let beginDrain: (EventLoop, Int32) -> Void = { [registry] loop, signal in
            guard drainDeadline == nil else { return }
            self.draining = true
            events.write(.info, "draining", [.string("signal", signal == SIGINT ? "SIGINT" : "SIGTERM"),
                                             .seconds("drain_timeout_s", self.configuration.timeouts.drain)])
            drainDeadline = loop.now() + UInt64(self.configuration.timeouts.drain * 1e9)
            registry.forEach { handle, worker in _ = handle.execute { _ in worker.value.beginDrain() } }
            self.pollDrain(control: loop, deadline: drainDeadline!)
        }
        try control.onSignal(SIGTERM, beginDrain)
        try control.onSignal(SIGINT, beginDrain)
        let admin = try adminListener.map { listener in
            let readiness = ReadinessProbe(groups: configuration.upstreams, quarantine: quarantine)
            return try AdminServer(listener: listener, loop: control) { [unowned self] route, loop, reply in
                self.answerAdmin(route, loop: loop, readiness: readiness, reply: reply)
            }
        }
        try control.run()
        admin?.close()
        control.close()
        group.shutdownGracefully()
    }

    private func pollDrain(control: EventLoop, deadline: UInt64) {
        if stats.openConnections.load(ordering: .relaxed) == 0 || control.now() >= deadline {
            registry.forEach { handle, worker in _ = handle.execute { _ in worker.value.closeAll() } }
            control.stop()
            return
        }
        _ = control.schedule(after: .milliseconds(20)) { [weak self] loop in
            self?.pollDrain(control: loop, deadline: deadline)
        }
    }
}

/// Maps each worker loop's handle to its worker, so the control thread can post work to it.
///
/// The `Worker` itself is only ever touched on its own loop thread (inside `execute`); the box merely carries
/// the reference across, which is why it is `@unchecked Sendable`.
final class WorkerRegistry: Sendable {
    struct Box: @unchecked Sendable { let value: Worker }
    private let entries = Mutex<[(EventLoopHandle, Box)]>([])

    func add(_ handle: EventLoopHandle, _ worker: Worker) {
        entries.withLock { $0.append((handle, Box(value: worker))) }
    }

    var count: Int { entries.withLock { $0.count } }

    func forEach(_ body: (EventLoopHandle, Box) -> Void) {
        let snapshot = entries.withLock { $0 }
        for (h, w) in snapshot { body(h, w) }
    }
}

/// Hands each worker one inherited listener descriptor (or nil when the workers bind their own).
final class ListenerHandout: Sendable {
    private let remaining: Mutex<[Int32]>
    init(_ fds: [Int32]) { remaining = Mutex(fds.reversed()) }
    /// The next `count` descriptors (a worker's listeners, one per address), or none when there are fewer.
    func take(_ count: Int) -> [Int32] {
        remaining.withLock { fds in
            guard fds.count >= count else { return [] }
            return (0..<count).compactMap { _ in fds.popLast() }
        }
    }
}

/// What one SIGHUP reload did, once it is over.
public struct ReloadOutcome: Sendable {
    /// What failed, one message each (the rules' diagnostics, the certificates' error); empty: all reloaded.
    public var errors: [String] = []
    /// What was left as it was without failing the reload: configuration settings that need a restart.
    public var warnings: [String] = []
    public init() {}
}

/// A callback carried to the control loop in a `ControlLoopBox`.
final class ReloadCompletion {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

/// Counts down from `n`; `finishOne` is true for exactly the call that reaches zero.
final class Countdown: Sendable {
    private let remaining: Atomic<Int>
    init(_ n: Int) { remaining = Atomic(n) }
    func finishOne() -> Bool { remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 }
}
