// The single-threaded event loop: one epoll selector, one eventfd, one timerfd, an optional signalfd.
//
//   other threads                         loop thread
//   -------------                         ---------------------------------------------------------------
//   handle.execute(task) -> Mutex<queue>
//                      +--> write(eventfd) -+
//                                           v
//   kernel: sockets -------------------> epoll_wait --> EpollSelector.dispatch --> EventHandler callbacks
//   kernel: CLOCK_MONOTONIC -> timerfd ------+                |
//   kernel: blocked signals -> signalfd -----+                +- eventfd  --> drain queue, run tasks
//                                                             +- timerfd  --> pop expired heap entries, re-arm
//                                                             +- signalfd --> onSignal callbacks
//
// The loop object itself is not Sendable: it is created, used and destroyed on one thread. The only way in from
// another thread is `EventLoopHandle`, which is Sendable and owns the eventfd and the locked task queue.
import CLinux
import Glibc

/// A single-threaded reactor: dispatches readiness to handlers, fires timers, runs tasks posted from other threads.
public final class EventLoop {
    let selector: EpollSelector
    /// The Sendable, cross-thread face of this loop.
    public let handle: EventLoopHandle
    var timers = TimerQueue()
    let timerFD: Int32
    var armedDeadline: UInt64 = 0
    var signalFD: Int32 = -1
    var signalRegistration: Registration?
    var signalCallbacks: [Int32: [(EventLoop, Int32) -> Void]] = [:]
    private var stopRequested = false
    /// Whether `runOnce` is dispatching the events of an `epoll_wait` (see `runAtBatchEnd`).
    private var dispatching = false
    private var batchEndHandlers: [any BatchEndHandler] = []
    private var isClosed = false
    private let ownerThread = pthread_self()

    /// Creates a loop owned by the calling thread.
    public convenience init() throws {
        try self.init(handle: EventLoopHandle())
    }

    /// Creates a loop that drains an existing handle's queue (how `EventLoopGroup` hands handles out early).
    init(handle: EventLoopHandle) throws {
        self.handle = handle
        selector = try EpollSelector()
        do {
            timerFD = try Syscall.run("timerfd_create") { cl_timerfd_create() }
        } catch {
            try? selector.close()
            throw error
        }
        do {
            _ = try selector.register(fd: handle.wakeFD, interest: .readable, handler: WakeupHandler())
            _ = try selector.register(fd: timerFD, interest: .readable, handler: TimerFDHandler())
        } catch {
            try? selector.close()
            try? Syscall.close(timerFD)
            throw error
        }
    }

    deinit {
        close()
    }

    /// True when called on the thread that created this loop.
    public var inEventLoop: Bool { pthread_equal(ownerThread, pthread_self()) != 0 }

    /// The current CLOCK_MONOTONIC time in nanoseconds; the clock all timer deadlines use.
    public func now() -> UInt64 { cl_monotonic_ns() }

    /// `now()` as read when the current iteration's `epoll_wait` returned (at creation before the first): the
    /// time of the events being handled, as nginx and HAProxy keep it. A connection stamps each of its events
    /// with it instead of reading the clock for each (six reads per proxied request); it is behind the clock by
    /// at most the time this iteration has run so far.
    public private(set) var iterationTime: UInt64 = cl_monotonic_ns()

    /// Called by the selector as soon as `epoll_wait` returns.
    @inline(__always)
    func woke() { iterationTime = cl_monotonic_ns() }

    // MARK: Registrations

    /// Registers `fd` for `interest`; the loop keeps `handler` alive until the registration is removed.
    @discardableResult
    public func register(fd: Int32, interest: Interest, handler: any EventHandler) throws -> Registration {
        assertInLoop()
        return try selector.register(fd: fd, interest: interest, handler: handler)
    }

    /// Changes what a live registration is woken for (for example adding `.writable` after a partial write).
    public func setInterest(_ interest: Interest, for registration: Registration) throws {
        assertInLoop()
        try selector.reregister(registration, interest: interest)
    }

    /// The current interest of a live registration, or nil once it has been deregistered.
    public func interest(of registration: Registration) -> Interest? {
        selector.interest(of: registration)
    }

    /// Whether the events fetched by this iteration's `epoll_wait` include one for `registration` that has not
    /// been delivered yet (its handler runs later in the same batch). Costs no system call.
    public func hasUndeliveredEvent(_ registration: Registration) -> Bool {
        selector.hasUndeliveredEvent(registration)
    }

    /// Removes a registration and releases its handler. Call it before closing the descriptor. Idempotent.
    public func deregister(_ registration: Registration) throws {
        assertInLoop()
        try selector.deregister(registration)
    }

    // MARK: Running

    /// Runs iterations until `stop()` is called on this loop or its handle.
    public func run() throws {
        assertInLoop()
        defer { stopRequested = false }
        while !stopRequested && !handle.takeStopRequest() {
            _ = try runOnce(timeout: nil)
        }
    }

    /// Waits at most `timeout` (nil: until something happens) and services everything ready. Returns the number of
    /// epoll events handled, including internal ones (wake-ups, timers, signals).
    @discardableResult
    public func runOnce(timeout: Duration?) throws -> Int {
        assertInLoop()
        precondition(!isClosed, "runOnce on a closed loop")
        let milliseconds: Int32
        if let timeout {
            let nanos = timeout.clampedNanoseconds
            milliseconds = Int32(clamping: (nanos + 999_999) / 1_000_000)
        } else {
            milliseconds = -1
        }
        dispatching = true
        let handled: Int
        do {
            defer {
                dispatching = false
                runBatchEnd()
            }
            handled = try selector.waitAndDispatch(timeoutMilliseconds: milliseconds, loop: self)
        }
        afterEvents?()
        return handled
    }

    /// Asks for `handler.batchWillEnd()` and `handler.batchEnded()` once the events of the current `epoll_wait`
    /// have all been dispatched (the first for every handler of the batch, then the second for each), before the
    /// loop's `afterEvents` and before it waits again. False (nothing is scheduled) outside a dispatch: in
    /// `afterEvents`, in a batch-end callback, or when no `runOnce` is in progress. A connection uses it to make its
    /// writes after every ready descriptor has been read, so one wake-up of a peer carries the output of several
    /// connections.
    public func runAtBatchEnd(_ handler: any BatchEndHandler) -> Bool {
        guard dispatching else { return false }
        batchEndHandlers.append(handler)
        return true
    }

    private func runBatchEnd() {
        guard !batchEndHandlers.isEmpty else { return }
        var index = 0
        while index < batchEndHandlers.count {
            batchEndHandlers[index].batchWillEnd()
            index += 1
        }
        index = 0
        while index < batchEndHandlers.count {
            batchEndHandlers[index].batchEnded()
            index += 1
        }
        batchEndHandlers.removeAll(keepingCapacity: true)
    }

    /// Called at the end of every iteration, after the ready events were handled (the proxy writes its batched
    /// audit lines there: one `write(2)` per iteration instead of one per request).
    public var afterEvents: (() -> Void)?

    /// Makes `run()` return after the current iteration. Use `handle.stop()` from other threads.
    public func stop() {
        stopRequested = true
    }

    /// Deregisters every handler and closes the loop's descriptors. Called by `deinit` if not called earlier.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        handle.markClosed()
        try? selector.close()
        try? Syscall.close(timerFD)
        if signalFD >= 0 {
            try? Syscall.close(signalFD)
        }
        timers.removeAll()
        signalCallbacks.removeAll()
    }

    func assertInLoop(_ function: StaticString = #function) {
        assert(inEventLoop, "\(function) called off the loop's thread")
    }

    /// Runs the tasks posted through the handle; called when the eventfd is readable.
    func runPostedTasks() {
        _ = try? Syscall.drainCounter(handle.wakeFD)
        for task in handle.takeTasks() {
            task(self)
        }
        if handle.takeStopRequest() {
            stopRequested = true
        }
    }
}

/// Drains the wake-up eventfd and runs posted tasks.
private final class WakeupHandler: EventHandler {
    func readable(loop: EventLoop) { loop.runPostedTasks() }
}

/// Fires expired timers when the timerfd expires.
private final class TimerFDHandler: EventHandler {
    func readable(loop: EventLoop) { loop.fireExpiredTimers() }
}
