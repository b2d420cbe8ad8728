import Glibc
import Quarantine
import Reactor

/// The outcome of /readyz's checks.
public struct ReadinessReport: Sendable, Equatable {
    /// One named check.
    public struct Check: Sendable, Equatable {
        public var name: String
        public var ok: Bool
        /// Why it failed, or nil.
        public var error: String?

        public init(name: String, ok: Bool, error: String? = nil) {
            self.name = name
            self.ok = ok
            self.error = error
        }
    }

    /// The checks, in a fixed order.
    public var checks: [Check]

    public init(checks: [Check]) { self.checks = checks }

    /// Ready when every check passed.
    public var ready: Bool { checks.allSatisfy(\.ok) }

    /// `{"status":"ready"|"not_ready","checks":{"upstream":{"ok":true},...}}`.
    public var json: String {
        let items = checks.map { c in
            let error = c.error.map { ",\"error\":\(JSONText.quote($0))" } ?? ""
            return "\(JSONText.quote(c.name)):{\"ok\":\(c.ok)\(error)}"
        }
        return "{\"status\":\"\(ready ? "ready" : "not_ready")\",\"checks\":{\(items.joined(separator: ","))}}"
    }
}

/// The slow /readyz checks (quarantine writable and not full; upstream reachable, for the groups that say
/// `readiness required;`), run asynchronously on the control loop and cached for `cacheFor`; concurrent requests
/// wait for the probe already running.
final class ReadinessProbe {
    /// A cached result is reused this long.
    static let cacheFor: UInt64 = 1_000_000_000
    /// An upstream connect that has not completed by then counts as unreachable.
    static let connectTimeout: Duration = .seconds(1)

    /// The upstream groups; every server of each group whose readiness is `required` is probed.
    let groups: [ProxyConfiguration.UpstreamGroup]
    let quarantine: QuarantineStore?
    private var cached: (at: UInt64, checks: [ReadinessReport.Check])?
    private var waiting: [([ReadinessReport.Check]) -> Void] = []
    /// The probes of the round in progress (empty: none running), and their results by group and server.
    private var running: [UpstreamProbe] = []
    private var results: [[String?]] = []
    private var outstanding = 0

    init(groups: [ProxyConfiguration.UpstreamGroup], quarantine: QuarantineStore?) {
        self.groups = groups
        self.quarantine = quarantine
    }

    /// Calls `done` with the upstream and quarantine checks: cached, or once a round of probes finishes (at once
    /// when there is nothing to probe). See `upstreamChecks` for the upstream groups'.
    func check(loop: EventLoop, _ done: @escaping ([ReadinessReport.Check]) -> Void) {
        if let cached, loop.now() &- cached.at < Self.cacheFor {
            done(cached.checks)
            return
        }
        waiting.append(done)
        guard outstanding == 0 else { return }
        let probed = groups.map { $0.readiness == .required }
        results = groups.map { Array(repeating: nil, count: $0.servers.count) }
        outstanding = groups.indices.reduce(0) { $0 + (probed[$1] ? groups[$1].servers.count : 0) }
        guard outstanding > 0 else { return complete(loop: loop) }
        for (g, group) in groups.enumerated() where probed[g] {
            for (i, server) in group.servers.enumerated() {
                let probe = UpstreamProbe.start(loop: loop, address: server.upstream.address,
                                                timeout: Self.connectTimeout) { [weak self] error in
                    self?.finished(group: g, server: i, error: error.map { "\($0)" } ?? "", loop: loop)
                }
                if !probe.isFinished { running.append(probe) }
            }
        }
    }

    /// One probe's outcome ("" for connected); the last one of the round answers the waiting requests.
    private func finished(group: Int, server: Int, error: String, loop: EventLoop) {
        results[group][server] = error
        outstanding -= 1
        guard outstanding == 0 else { return }
        complete(loop: loop)
    }

    /// One check per upstream group whose readiness is `required`, `upstream` for the default group and
    /// `upstream:NAME` for the others: a group is reachable when at least one of its servers accepts a
    /// connection. `results` holds each server's probe outcome (nil: not probed, "": connected, else why not).
    /// Groups with `readiness optional` (the default) have no check: their health is on /upstreams and /metrics.
    static func upstreamChecks(_ groups: [ProxyConfiguration.UpstreamGroup],
                               results: [[String?]]) -> [ReadinessReport.Check] {
        groups.enumerated().compactMap { g, group in
            guard group.readiness == .required else { return nil }
            let outcomes = results.indices.contains(g) ? results[g] : []
            let failures = group.servers.indices.compactMap { i -> String? in
                let result = outcomes.indices.contains(i) ? outcomes[i] ?? "not probed" : "not probed"
                return result.isEmpty ? nil : "\(group.servers[i].upstream.authority): \(result)"
            }
            return .init(name: g == 0 ? "upstream" : "upstream:\(group.name)",
                         ok: failures.count < group.servers.count,
                         error: failures.isEmpty ? nil : failures.joined(separator: "; "))
        }
    }

    /// The round is over: every check, cached and handed to the waiting requests.
    private func complete(loop: EventLoop) {
        running = []
        var checks = Self.upstreamChecks(groups, results: results)
        if let store = quarantine {
            let problem = Self.probeWritable(store.directory) ?? Self.fullness(store)
            checks.append(.init(name: "quarantine", ok: problem == nil, error: problem))
        }
        cached = (loop.now(), checks)
        let callbacks = waiting
        waiting = []
        for callback in callbacks { callback(checks) }
    }

    /// Why the store counts as full (after a rescan if one is due), or nil.
    static func fullness(_ store: QuarantineStore) -> String? {
        store.rescanIfDue()
        let usage = store.usage
        guard usage.full else { return nil }
        let why = usage.bytes >= usage.maxBytes ? "" : "; a part did not fit"
        return "full: \(usage.bytes) of \(usage.maxBytes) bytes (--quarantine-max) used\(why)"
    }

    /// Creates and removes a probe file in `directory`; nil when that worked, else why not.
    static func probeWritable(_ directory: String) -> String? {
        let path = "\(directory)/.formwall-ready-\(getpid())"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return "\(directory): \(String(cString: strerror(errno)))" }
        let byte: [UInt8] = [0x0A]
        let wrote = byte.withUnsafeBytes { write(fd, $0.baseAddress, 1) }
        let code = errno
        Glibc.close(fd)
        unlink(path)
        return wrote == 1 ? nil : "\(directory): \(String(cString: strerror(code)))"
    }
}

/// One non-blocking TCP connect with a timeout; reports nil (connected) or the error, once.
final class UpstreamProbe: EventHandler {
    private let loop: EventLoop
    private var socket: TCPSocket?
    private var registration: Registration?
    private var timer: TimerID?
    private var done: ((String?) -> Void)?

    /// Whether the result was reported.
    var isFinished: Bool { done == nil }

    private init(loop: EventLoop, done: @escaping (String?) -> Void) {
        self.loop = loop
        self.done = done
    }

    /// Starts connecting to `address`; `done` runs on `loop`, possibly before this returns.
    static func start(loop: EventLoop, address: SocketAddress, timeout: Duration,
                      done: @escaping (String?) -> Void) -> UpstreamProbe {
        let probe = UpstreamProbe(loop: loop, done: done)
        do {
            let (socket, progress) = try TCPSocket.connect(to: address)
            probe.socket = socket
            if progress == .connected {
                probe.finish(nil)
            } else {
                probe.registration = try loop.register(fd: socket.fd, interest: .writable, handler: probe)
                probe.timer = loop.schedule(after: timeout) { _ in probe.finish("connect timed out") }
            }
        } catch {
            probe.finish("\(error)")
        }
        return probe
    }

    func readable(loop: EventLoop) {}

    func writable(loop: EventLoop) { completeConnect() }

    func hangup(loop: EventLoop) { completeConnect() }

    func error(loop: EventLoop) { completeConnect() }

    private func completeConnect() {
        do {
            try socket?.finishConnect()
            finish(nil)
        } catch {
            finish("\(error)")
        }
    }

    private func finish(_ error: String?) {
        guard let done else { return }
        self.done = nil
        if let timer { _ = loop.cancel(timer) }
        timer = nil
        if let registration { try? loop.deregister(registration) }
        registration = nil
        try? socket?.close()
        socket = nil
        done(error)
    }
}
