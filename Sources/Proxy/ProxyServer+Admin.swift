import Audit
import Quarantine
import Reactor

extension ProxyServer {
    /// Binds the admin listener; "admin address in use" when another process has it.
    public static func bindAdmin(_ address: SocketAddress, listens: Bool = true) throws -> TCPListener {
        var options = TCPListener.Options(reuseAddress: true, reusePort: false, backlog: 64)
        options.listens = listens
        do {
            return try TCPListener(bindingTo: address, options: options)
        } catch let error as SocketError where error == .addressInUse(address.description) {
            throw ConfigurationError("admin address in use: \(address)")
        } catch {
            throw ConfigurationError("--admin \(address): \(error)")
        }
    }

    /// Answers one admin request on the control loop.
    func answerAdmin(_ route: AdminRoute, loop: EventLoop, readiness: ReadinessProbe,
                     reply: @escaping (AdminResponse) -> Void) {
        switch route {
        case .healthz:
            reply(.json(200, "{\"status\":\"ok\"}"))
        case .rules:
            reply(.json(200, rulesInfo?.json ?? "{\"files\":[],\"digest\":null,\"loaded_at\":null}"))
        case .upstreams:
            collectMetrics(loop: loop) { snapshot in reply(.json(200, snapshot.upstreams.json)) }
        case .metrics:
            collectMetrics(loop: loop) { snapshot in
                reply(AdminResponse(status: 200, contentType: PrometheusText.contentType,
                                    body: snapshot.prometheusText()))
            }
        case .readyz:
            // Read now, not when the probe returns: the state to report is the one at the request.
            var checks = [ReadinessReport.Check(name: "accepting", ok: !draining, error: draining ? "draining" : nil)]
            if !configuration.rules.isEmpty {
                checks.append(.init(name: "rules", ok: rulesInfo != nil, error: rulesInfo == nil ? "no policy" : nil))
            }
            readiness.check(loop: loop) { slow in
                let report = ReadinessReport(checks: checks + slow)
                reply(.json(report.ready ? 200 : 503, report.json))
            }
        case .notFound:
            reply(.error(404, "not_found"))
        case .methodNotAllowed:
            var response = AdminResponse.error(405, "method_not_allowed")
            response.headers = [("Allow", "GET")]
            reply(response)
        }
    }

    /// Asks every worker for a copy of its counters and merges the copies on `loop` (the control loop), then
    /// calls `done` there with the process-wide values added. No lock is taken on any worker's request path.
    func collectMetrics(loop: EventLoop, _ done: @escaping (MetricsSnapshot) -> Void) {
        var snapshot = MetricsSnapshot()
        snapshot.activeConnections = stats.openConnections.load(ordering: .relaxed)
        snapshot.connectionCapacity = configuration.connectionCapacity
        snapshot.ruleReloadsOK = ruleReloads.ok
        snapshot.ruleReloadsFailed = ruleReloads.failed
        snapshot.supervisorRestarts = supervisorRestarts
        if let store = quarantine {
            store.rescanIfDue()
            snapshot.quarantine = store.usage
        }
        let gather = MetricsGather(expected: registry.count) { [configuration] merged in
            snapshot.requests = merged
            snapshot.upstreams = UpstreamHealth(groups: configuration.upstreams, stats: merged.upstreamServers,
                                                now: loop.now(), wallClock: AuditTimestamp.now())
            done(snapshot)
        }
        let back = ControlLoopBox(value: gather)
        let control = loop.handle
        registry.forEach { handle, worker in
            let posted = handle.execute { _ in
                let copy = worker.value.scrapedMetrics
                control.execute { _ in back.value.add(copy) }
            }
            if !posted { gather.add(RequestMetrics()) }
        }
    }
}

/// Merges the workers' copies as they arrive on the control loop; calls `done` after the last.
final class MetricsGather {
    private var merged = RequestMetrics()
    private var remaining: Int
    private var done: ((RequestMetrics) -> Void)?

    init(expected: Int, done: @escaping (RequestMetrics) -> Void) {
        remaining = expected
        self.done = done
        if expected == 0 { finish() }
    }

    func add(_ metrics: RequestMetrics) {
        merged.merge(metrics)
        remaining -= 1
        if remaining == 0 { finish() }
    }

    private func finish() {
        let done = self.done
        self.done = nil
        done?(merged)
    }
}

/// Carries a control-loop object through a worker's task and back; it is dereferenced only on the control loop,
/// which is why it is `@unchecked Sendable` (as `WorkerRegistry.Box` is for workers).
struct ControlLoopBox<T: AnyObject>: @unchecked Sendable {
    let value: T
}
