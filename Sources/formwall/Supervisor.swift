// The supervisor: what `formwall serve` runs unless --single-process. It owns the listening sockets and runs the
// proxy as a child process, restarting it when it dies, so a crash costs only the requests in flight.
//
//   supervisor (one thread, one event loop)                   proxy process (posix_spawn of /proc/self/exe)
//   bind N SO_REUSEPORT sockets, clear FD_CLOEXEC ───spawn──► FORMWALL_LISTEN_FDS=3,4: worker i adopts fd i
//                                                              and listen()s on it once start-up succeeded
//   bind the --admin socket ─────────────────────────spawn──► FORMWALL_ADMIN_FD=5 (the admin listener)
//   restart count ───────────────────────────────────spawn──► FORMWALL_RESTARTS=2 (exported in /metrics)
//   status socket pair ──────────────────────────────spawn──► FORMWALL_STATUS_FD=6 (SupervisorChannel)
//   the last good configuration (memfd) ─────────────spawn──► FORMWALL_LAST_GOOD_FD=7: served instead of the disk
//   "ready" / "reloaded" + memfd ◄──────────────── status ───  after start-up and after each SIGHUP
//   SIGCHLD ─► reap ─► stderr + audit `worker_exit` ─► spawn again (backoff 0, 0.1, 0.2 … 5 s)
//   SIGHUP ─► RELOADING=1 to systemd, forwarded ─────────────► reload rules ─► "reloaded" ─► READY=1, status file
//   SIGUSR1 ──────────────────────── forwarded ──────────────► reopen logs
//   SIGTERM, SIGINT ─► STOPPING=1, close listeners, forward ─► drain, exit 0 ─► supervisor exits with its status
//
// After a proxy process has listened, the sockets stay listening in the supervisor while no proxy process runs,
// so the kernel keeps completing handshakes and queueing connections in their backlogs; the next proxy process
// accepts them. Only when a proxy process exits before it said it was ready (it could not start) does the
// supervisor stop them listening (shutdown(SHUT_RD)): queued connections are reset and new ones refused, rather
// than left waiting for a process that may never come, until a proxy process starts and listens again.

import Audit
import CLinux
import Foundation
import Glibc
import Proxy
import Quarantine
import Reactor

/// The environment through which the supervisor hands its sockets to the proxy process.
enum SupervisorEnvironment {
    /// Comma-separated listening descriptors, one per worker and listening address, worker by worker, e.g. `3,4`
    /// (two workers, one address) or `3,4,5,6` (two workers, two addresses: worker 0 adopts 3 and 4).
    static let listenFDs = "FORMWALL_LISTEN_FDS"
    /// The supervisor's pid. The proxy process asks for SIGTERM (a drain) when that process goes away.
    static let supervised = "FORMWALL_SUPERVISED"
    /// The admin listener's descriptor (`--admin`), when there is one.
    static let adminFD = "FORMWALL_ADMIN_FD"
    /// How many times the supervisor restarted the proxy process before starting this one.
    static let restarts = "FORMWALL_RESTARTS"
    /// The proxy process's end of the status socket pair (`SupervisorMessage`).
    static let statusFD = "FORMWALL_STATUS_FD"
    /// A memory file holding the configuration last in force (`LastGoodConfiguration`), when there is one.
    static let lastGoodFD = "FORMWALL_LAST_GOOD_FD"

    /// glibc's tunables, which the proxy process starts with. Each worker thread keeps freed small blocks (up to
    /// 1,032 bytes) in its own cache, 7 of a size by default; a worker with 64 requests in flight frees more
    /// objects of a size than that between requests, and the rest went through malloc's slower shared bins
    /// (docs/performance.md, ninth session). 128 of a size keeps them for 128 requests at once: at most about
    /// 4 MiB per worker if every one of its 64 sizes were full.
    static let tunables = "GLIBC_TUNABLES"
    static let tcacheCount = "glibc.malloc.tcache_count=128"

    /// `GLIBC_TUNABLES` for the proxy process: the operator's own setting of the cache size wins; any other
    /// tunables they set are kept, the cache size appended (tunables are separated by colons).
    static func mallocTunables(_ given: String?) -> String {
        guard let given, !given.isEmpty else { return tcacheCount }
        if given.contains("glibc.malloc.tcache_count=") { return given }
        return given + ":" + tcacheCount
    }

    /// What the proxy process inherited: the listener descriptors, the supervisor's pid and restart count, the
    /// status channel and the last good configuration.
    struct Inherited {
        var listeners: [Int32]
        var supervisor: pid_t?
        var admin: Int32?
        var restarts = 0
        var status: Int32?
        var lastGood: Int32?
    }

    /// Reads and removes the variables (so nothing the proxy starts sees them); nil when not supervised.
    static func take() throws -> Inherited? {
        guard let text = ProcessInfo.processInfo.environment[listenFDs] else { return nil }
        let environment = ProcessInfo.processInfo.environment
        let supervisor = environment[supervised].flatMap { pid_t($0) }
        let adminText = environment[adminFD]
        let restartCount = environment[restarts].flatMap { Int($0) } ?? 0
        let descriptor = { (name: String) in environment[name].flatMap { Int32($0) }.flatMap { $0 >= 0 ? $0 : nil } }
        let status = descriptor(statusFD)
        let lastGood = descriptor(lastGoodFD)
        for name in [listenFDs, supervised, adminFD, restarts, statusFD, lastGoodFD] { unsetenv(name) }
        for fd in [status, lastGood].compactMap({ $0 }) { _ = cl_set_cloexec(fd, 1) }
        var admin: Int32?
        if let adminText {
            guard let fd = Int32(adminText), fd >= 0 else {
                throw ConfigurationError("\(adminFD) must be a descriptor, got '\(adminText)'")
            }
            admin = fd
        }
        let fds = text.split(separator: ",").map { Int32($0) }
        guard !fds.isEmpty, fds.allSatisfy({ ($0 ?? -1) >= 0 }) else {
            throw ConfigurationError("\(listenFDs) must list descriptors like 3,4, got '\(text)'")
        }
        return Inherited(listeners: fds.map { $0! }, supervisor: supervisor, admin: admin, restarts: restartCount,
                         status: status, lastGood: lastGood)
    }
}

/// Restart delays: the first restart is immediate; a process that keeps dying quickly waits 0.1 s, 0.2 s, …
/// up to `maximum`; one that ran for `stablePeriod` resets the sequence.
struct RestartBackoff {
    var stablePeriod = 10.0
    var first = 0.1
    var maximum = 5.0
    private var quickExits = 0

    /// The delay in seconds before replacing a process that ran `uptime` seconds.
    mutating func delay(afterUptime uptime: Double) -> Double {
        if uptime >= stablePeriod { quickExits = 0 }
        defer { quickExits += 1 }
        guard quickExits > 0 else { return 0 }
        return min(maximum, first * pow(2, Double(quickExits - 1)))
    }
}

/// Owns the listeners and keeps one proxy process running until SIGTERM or SIGINT.
final class Supervisor {
    /// Signals the proxy process starts with blocked, so one that arrives before it watches them stays pending
    /// (its control loop reads them from a signalfd) instead of killing it.
    static let forwardedSignals = [SIGTERM, SIGINT, SIGHUP, SIGUSR1]

    private let configuration: ProxyConfiguration
    private let arguments: [String]
    private var listeners: [TCPListener] = []
    private var adminListener: TCPListener?
    private var child: pid_t?
    private var childStarted: UInt64 = 0
    private var restarts = 0
    private var backoff = RestartBackoff()
    private var restartTimer: TimerID?
    private var stopping = false
    private var exitCode: Int32 = 0
    private let events: EventLog
    /// The supervisor's end of the current proxy process's status socket pair, and its registration.
    private var channel: (fd: Int32, registration: Registration)?
    /// Whether the current proxy process said it was ready; whether any ever did (systemd's READY=1).
    private var childReady = false
    private var everReady = false
    /// The listeners stopped listening because a proxy process could not start.
    private var refusing = false
    /// The memory file holding the configuration last in force (`LastGoodConfiguration`); -1: none yet.
    private var lastGood: Int32 = -1
    /// The SIGHUP reload under way: when it began and the proxy process it was passed to (nil: none running yet).
    private var reload: (started: UInt64, child: pid_t?)?
    /// Ends a reload the proxy process never answers (`reloadTimeout`), so later SIGHUPs are not queued forever.
    private var reloadTimer: TimerID?
    static let reloadTimeout = 60.0
    /// A SIGHUP arrived during a reload: another one follows it, so the files read are at least as new as the
    /// signal.
    private var reloadQueued = false
    private let notifier: ServiceNotifier
    /// `<pid-file>.status` (`SupervisorStatus`); nil without `--pid-file`.
    private let statusPath: String?
    private var status: SupervisorStatus

    /// A supervisor that will run `/proc/self/exe` with `arguments` (argv, including argv[0]), telling systemd
    /// (`$NOTIFY_SOCKET`) and `statusPath` how it goes.
    init(configuration: ProxyConfiguration, arguments: [String], statusPath: String? = nil) {
        self.configuration = configuration
        self.arguments = arguments
        events = configuration.eventLog
        notifier = ServiceNotifier(environment: ProcessInfo.processInfo.environment)
        self.statusPath = statusPath
        status = SupervisorStatus(pid: getpid())
    }

    deinit {
        if lastGood >= 0 { close(lastGood) }
    }

    /// Checks what the proxy process would check at start-up, so a mistake is one error and exit status 1
    /// here rather than a proxy process that fails over and over.
    static func validate(_ config: ProxyConfiguration) throws {
        try ProxyServer.checkSpoolDirectory(config.spoolDirectory)
        _ = try config.tls.map { try ProxyServer.tlsServerContext($0) }
        _ = try ProxyServer.tlsClientContext(config)
        _ = try ProxyServer.loadPolicy(config.rules, quarantine: config.quarantine != nil,
                                       upstreamGroups: config.upstreams.map(\.name))
        if let q = config.quarantine {
            do {
                _ = try QuarantineStore(directory: q.directory, maxBytes: Int64(clamping: q.maxBytes),
                                        retention: .seconds(Int64(q.retentionSeconds)))
            } catch {
                throw ConfigurationError("quarantine store \(q.directory): \(error)")
            }
        }
        if let a = config.audit, !a.human {
            do { _ = try AuditLog(path: a.path) } catch { throw ConfigurationError("audit log \(a.path): \(error)") }
        }
    }

    /// Binds one SO_REUSEPORT socket per worker; throws "address in use" and the like before anything runs.
    func bind() throws {
        // A plain bind first: SO_REUSEPORT would silently share a port another formwall already serves.
        for address in configuration.listeners {
            let probe = try TCPListener(bindingTo: address, options: .addressProbe)
            try? probe.close()
        }
        // Bound, not listening: the proxy process listens once it is ready, so the first connections do not
        // wait for its start-up (or for a start-up that fails). From then on the sockets stay listening.
        var options = TCPListener.Options(reuseAddress: true, reusePort: true)
        options.listens = false
        // One socket per worker on each address, worker by worker (worker i adopts the i-th run of them).
        var firsts: [TCPListener] = []
        for address in configuration.listeners { firsts.append(try TCPListener(bindingTo: address, options: options)) }
        listeners = firsts
        for _ in 1..<max(1, configuration.workers) {
            // The first listener's address, so a port-0 bind gives every worker the same port.
            for first in firsts { listeners.append(try TCPListener(bindingTo: first.localAddress, options: options)) }
        }
        // The admin listener too, so it keeps its port across restarts; a port in use is a start-up error here.
        if let address = configuration.admin {
            adminListener = try ProxyServer.bindAdmin(address, listens: false)
        }
        for listener in listeners + (adminListener.map { [$0] } ?? []) {
            guard cl_set_cloexec(listener.fd, 0) == 0 else {
                throw ConfigurationError("fcntl(FD_CLOEXEC): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Runs until SIGTERM or SIGINT has stopped the proxy process; returns the exit status for `serve`.
    func run() throws -> Int32 {
        var set = sigset_t()
        sigemptyset(&set)
        for s in Self.forwardedSignals + [SIGCHLD] { sigaddset(&set, s) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        let loop = try EventLoop()
        try loop.onSignal(SIGCHLD) { [unowned self] loop, _ in self.reap(loop) }
        for s in [SIGHUP, SIGUSR1] {
            try loop.onSignal(s) { [unowned self] loop, s in
                self.events.write(.debug, "signal received", [.string("signal", Self.name(of: s)),
                                                              .int("child_pid", Int(self.child ?? 0))])
                if s == SIGHUP {
                    self.beginReload(loop)
                } else if let child = self.child {
                    kill(child, s)
                }
            }
        }
        for s in [SIGTERM, SIGINT] {
            try loop.onSignal(s) { [unowned self] loop, s in self.stop(loop, signal: s) }
        }
        writeStatus()
        start(loop)
        try loop.run()
        if let channel { closeChannel(channel, loop) }
        loop.close()
        if let statusPath { unlink(statusPath) }
        return exitCode
    }

    // MARK: The proxy process

    private func start(_ loop: EventLoop) {
        restartTimer = nil
        var environment = ProcessInfo.processInfo.environment
        environment[SupervisorEnvironment.listenFDs] = listeners.map { String($0.fd) }.joined(separator: ",")
        environment[SupervisorEnvironment.supervised] = String(getpid())
        environment[SupervisorEnvironment.restarts] = String(restarts)
        let tunables = SupervisorEnvironment.mallocTunables(environment[SupervisorEnvironment.tunables])
        environment[SupervisorEnvironment.tunables] = tunables
        if let admin = adminListener { environment[SupervisorEnvironment.adminFD] = String(admin.fd) }
        // systemd hears from the supervisor only.
        environment[ServiceNotifier.variable] = nil
        var pair: [Int32] = [-1, -1]
        guard cl_seqpacket_pair(&pair) == 0 else {
            events.write(.error, "proxy process spawn failed", [.string("error", "status socket pair: "
                + String(cString: strerror(errno)))])
            scheduleRestart(loop, after: backoff.delay(afterUptime: 0))
            return
        }
        _ = cl_set_cloexec(pair[1], 0)
        environment[SupervisorEnvironment.statusFD] = String(pair[1])
        if lastGood >= 0, cl_set_cloexec(lastGood, 0) == 0 {
            environment[SupervisorEnvironment.lastGoodFD] = String(lastGood)
        }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var pid: pid_t = 0
        let code = Self.forwardedSignals.withUnsafeBufferPointer { blocked in
            cl_spawn("/proc/self/exe", argv, envp, blocked.baseAddress, Int32(blocked.count), &pid)
        }
        childStarted = loop.now()
        close(pair[1])
        if lastGood >= 0 { _ = cl_set_cloexec(lastGood, 1) }
        guard code == 0 else {
            close(pair[0])
            events.write(.error, "proxy process spawn failed", [.string("error", String(cString: strerror(code)))])
            scheduleRestart(loop, after: backoff.delay(afterUptime: 0))
            return
        }
        child = pid
        childReady = false
        do {
            let registration = try loop.register(fd: pair[0], interest: .readable, handler: ChannelHandler(self))
            channel = (pair[0], registration)
        } catch {
            close(pair[0])
        }
        events.write(.info, "proxy process started",
                     [.int("child_pid", Int(pid)),
                      .string("glibc_tunables", tunables)])
        // A reload asked for while no proxy process ran: this one does it once it has started.
        if let reload, reload.child == nil {
            self.reload = (reload.started, pid)
            kill(pid, SIGHUP)
        }
    }

    // MARK: The status channel

    /// Reads what the proxy process said; closes the channel at its end.
    fileprivate func readChannel(_ loop: EventLoop) {
        guard let channel else { return }
        let (messages, closed) = SupervisorMessage.receiveAll(from: channel.fd)
        for (message, attached) in messages { received(message, attached: attached, loop) }
        if closed { closeChannel(channel, loop) }
    }

    private func closeChannel(_ channel: (fd: Int32, registration: Registration), _ loop: EventLoop) {
        try? loop.deregister(channel.registration)
        close(channel.fd)
        self.channel = nil
    }

    private func received(_ message: SupervisorMessage, attached: Int32?, _ loop: EventLoop) {
        if let attached {
            if lastGood >= 0 { close(lastGood) }
            lastGood = attached
        }
        switch message.event {
        case .ready:
            childReady = true
            refusing = false
            status.serving = true
            events.write(.info, "proxy process ready", [.int("child_pid", Int(child ?? 0))])
            if !everReady {
                everReady = true
                notifier.send(["READY=1", "STATUS=serving", "MAINPID=\(getpid())"])
            } else {
                notifier.send(["STATUS=serving"])
            }
            writeStatus()
        case .reloaded:
            finishReload(loop, errors: message.errors, warnings: message.warnings)
        }
    }

    // MARK: Reloads

    /// SIGHUP: passed to the proxy process (or to the next one, when none runs), whose answer ends the reload.
    /// A SIGHUP during a reload queues one more after it.
    private func beginReload(_ loop: EventLoop) {
        guard reload == nil else {
            reloadQueued = true
            return
        }
        let now = loop.now()
        reload = (now, child)
        status.reload = SupervisorStatus.Reload(startedNs: now)
        if everReady { notifier.send(["RELOADING=1", ServiceNotifier.monotonicMicroseconds(now), "STATUS=reloading"]) }
        writeStatus()
        if let child { kill(child, SIGHUP) }
        reloadTimer = loop.schedule(after: .milliseconds(Int64(Self.reloadTimeout * 1000))) { [unowned self] loop in
            self.reloadTimer = nil
            self.finishReload(loop, errors: ["no answer from the proxy process within \(Int(Self.reloadTimeout)) s"],
                              warnings: [])
        }
    }

    private func finishReload(_ loop: EventLoop, errors: [String], warnings: [String]) {
        guard let started = reload?.started else { return }
        reload = nil
        if let timer = reloadTimer { _ = loop.cancel(timer) }
        reloadTimer = nil
        status.reload = SupervisorStatus.Reload(startedNs: started, finishedNs: loop.now(), errors: errors,
                                                warnings: warnings)
        let summary = errors.first.map { "reload failed: " + $0.prefix(300) }
        if everReady { notifier.send(["READY=1", "STATUS=" + (summary ?? "serving")]) }
        writeStatus()
        if reloadQueued {
            reloadQueued = false
            beginReload(loop)
        }
    }

    private func writeStatus() {
        guard let statusPath else { return }
        do { try status.write(to: statusPath) } catch {
            events.write(.error, "status file write failed", [.string("path", statusPath), .error(error)])
        }
    }

    /// Reaps every exited child; the proxy process's exit leads to a restart, or ends the supervisor when stopping.
    private func reap(_ loop: EventLoop) {
        while true {
            var status: Int32 = -1
            var signal: Int32 = 0
            let pid = cl_reap_child(&status, &signal)
            guard pid > 0 else { return }
            guard pid == child else { continue }
            // What it said before it died counts (it may have become ready, or finished a reload).
            readChannel(loop)
            if let channel { closeChannel(channel, loop) }
            child = nil
            exited(loop, pid: pid, status: status, signal: signal)
        }
    }

    private func exited(_ loop: EventLoop, pid: pid_t, status: Int32, signal: Int32) {
        if stopping {
            exitCode = signal == 0 ? status : 1
            if signal != 0 {
                events.write(.error, "proxy process killed while draining", [.int("child_pid", Int(pid)),
                                                                             .string("signal", Self.name(of: signal))])
            }
            loop.stop()
            return
        }
        let uptime = Double(loop.now() &- childStarted) / 1e9
        let wasReady = childReady
        childReady = false
        self.status.serving = false
        if let reload, reload.child == pid {
            finishReload(loop, errors: ["the proxy process exited during the reload; the next one serves the "
                + "last good configuration"], warnings: [])
        }
        restarts += 1
        let delay = backoff.delay(afterUptime: uptime)
        var fields: [LogField] = [.int("child_pid", Int(pid))]
        fields.append(signal != 0 ? .string("signal", Self.name(of: signal)) : .int("exit_status", Int(status)))
        fields += [.seconds("uptime_s", uptime), .seconds("restart_in_s", delay), .int("restarts", restarts)]
        events.write(.error, "proxy process exited", fields)
        writeAudit(WorkerExitRecord(pid: Int(pid), signal: signal != 0 ? Self.name(of: signal) : nil,
                                    exitStatus: signal == 0 ? Int(status) : nil, restarts: restarts))
        if !wasReady { refuseConnections(pid) }
        writeStatus()
        scheduleRestart(loop, after: delay)
    }

    /// A proxy process exited before it was ready: no connection waits for the next one, which may fail the same
    /// way. Every listener stops listening (queued connections are reset, new ones refused); the next proxy process
    /// listens again once it has started.
    private func refuseConnections(_ pid: pid_t) {
        // A socket bound to port 0 would give its port back on shutdown (only an explicit port stays bound).
        let ports = configuration.listeners.map(\.port) + (configuration.admin.map { [$0.port] } ?? [])
        guard !refusing, !ports.contains(0) else { return }
        refusing = true
        for listener in listeners + (adminListener.map { [$0] } ?? []) { _ = cl_stop_listening(listener.fd) }
        events.write(.error, "not serving", [
            .int("child_pid", Int(pid)), .string("reason", "the proxy process exited before it was ready"),
            .string("action", "refusing connections until a proxy process starts"),
        ])
    }

    private func scheduleRestart(_ loop: EventLoop, after delay: Double) {
        guard delay > 0 else { start(loop); return }
        restartTimer = loop.schedule(after: .milliseconds(Int64(delay * 1000))) { [unowned self] loop in
            self.start(loop)
        }
    }

    /// SIGTERM/SIGINT: stop accepting at once (close our copies of the listeners; the proxy process closes its
    /// own as it begins draining), pass the signal on, and exit once the proxy process has.
    private func stop(_ loop: EventLoop, signal: Int32) {
        if let child { kill(child, signal) }
        guard !stopping else { return }
        stopping = true
        notifier.send(["STOPPING=1", "STATUS=draining"])
        for listener in listeners { try? listener.close() }
        listeners = []
        try? adminListener?.close()
        adminListener = nil
        if let timer = restartTimer { _ = loop.cancel(timer) }
        guard let child else { loop.stop(); return }
        // The proxy process bounds its own drain; this bounds a proxy process that is stuck.
        let grace = configuration.timeouts.drain + 5
        _ = loop.schedule(after: .milliseconds(Int64(grace * 1000))) { [unowned self] _ in
            if self.child == child { kill(child, SIGKILL) }
        }
    }

    private func writeAudit(_ record: WorkerExitRecord) {
        guard let settings = configuration.audit, !settings.human else { return }
        do {
            // Opened per record: exits are rare, and a fresh open follows any rotation or reopen in between.
            let log = try AuditLog(path: settings.path, rotation: settings.rotateBytes.map {
                AuditLog.Rotation(maxBytes: $0, keep: settings.keep)
            })
            try record.jsonLine.withUnsafeBytes { try log.write(line: $0) }
        } catch {
            events.write(.error, "audit log write failed", [.string("path", settings.path), .error(error)])
        }
    }

    /// `SIGKILL` for 9; `SIG42` for a signal without a name.
    static func name(of signal: Int32) -> String {
        guard let abbreviation = cl_signal_abbreviation(signal) else { return "SIG\(signal)" }
        return "SIG" + String(cString: abbreviation)
    }
}

/// Reads the status channel when the proxy process wrote to it (or closed it).
private final class ChannelHandler: EventHandler {
    unowned let supervisor: Supervisor
    init(_ supervisor: Supervisor) { self.supervisor = supervisor }
    func readable(loop: EventLoop) { supervisor.readChannel(loop) }
}
