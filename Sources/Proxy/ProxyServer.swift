import Glibc
import Reactor
import Synchronization

// The process: N worker loops (each with its own SO_REUSEPORT listener) plus a control loop on the main thread
// that owns the signals.
//
//   main thread (control loop)            worker threads (EventLoopGroup)
//   SIGTERM/SIGINT ──► drain ───execute──► Worker.beginDrain: close listener, idle connections
//                      poll openConnections until 0 or drain timeout, then stop everything, exit 0
//   SIGHUP ──────────► reload ──execute──► Worker.reload (swap immutable configuration pieces)

/// Runs the proxy until it is told to stop.
public final class ProxyServer {
    public let configuration: ProxyConfiguration
    public let stats = ProxyStats()
    private let group: EventLoopGroup
    private let registry = WorkerRegistry()

    /// Binds every worker's listener; throws a readable error (address in use, …) before anything runs.
    public init(configuration: ProxyConfiguration) throws {
        self.configuration = configuration
        // Signals are handled by the control loop's signalfd: block them before any worker thread starts
        // so every thread inherits the mask.
        var set = sigset_t()
        let signals: [Int32] = [SIGTERM, SIGINT, SIGHUP, SIGUSR1]
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        signal(SIGPIPE, SIG_IGN)
        group = try EventLoopGroup(count: max(1, configuration.workers))
        let config = configuration
        let stats = self.stats
        let registry = self.registry
        do {
            try group.runOnEach { loop in
                let worker = Worker(loop: loop, config: config, stats: stats)
                try worker.start()
                registry.add(loop.handle, worker)
            }
        } catch {
            group.shutdownGracefully()
            throw error
        }
    }

    /// Serves until SIGTERM or SIGINT, then drains in-flight requests (up to the drain timeout) and returns.
    /// `onReload` runs on SIGHUP; `onReopen` on SIGUSR1 and SIGHUP (log reopening).
    public func run(onReload: @escaping () -> Void = {}, onReopen: @escaping () -> Void = {}) throws {
        let control = try EventLoop()
        var drainDeadline: UInt64?
        try control.onSignal(SIGHUP) { _, _ in onReload(); onReopen() }
        try control.onSignal(SIGUSR1) { _, _ in onReopen() }
        let beginDrain: (EventLoop, Int32) -> Void = { [registry] loop, _ in
            guard drainDeadline == nil else { return }
            drainDeadline = loop.now() + UInt64(self.configuration.timeouts.drain * 1e9)
            registry.forEach { handle, worker in _ = handle.execute { _ in worker.value.beginDrain() } }
            self.pollDrain(control: loop, deadline: drainDeadline!)
        }
        try control.onSignal(SIGTERM, beginDrain)
        try control.onSignal(SIGINT, beginDrain)
        try control.run()
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

    func forEach(_ body: (EventLoopHandle, Box) -> Void) {
        let snapshot = entries.withLock { $0 }
        for (h, w) in snapshot { body(h, w) }
    }
}
