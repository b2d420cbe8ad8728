// The only cross-thread path into an EventLoop: a locked task queue plus an eventfd wake-up.
//
//   any thread: execute(task) --> lock { tasks.append(task) } --> write(eventfd, 1)
//   loop thread: eventfd readable --> read(eventfd) --> lock { swap tasks out } --> run each task(loop)
import CLinux
import Glibc
import Synchronization

/// A Sendable reference to an `EventLoop` that other threads use to post work and request a stop.
public final class EventLoopHandle: Sendable {
    private struct State {
        var tasks: [@Sendable (EventLoop) -> Void] = []
        var stopRequested = false
        var closed = false
    }

    /// The eventfd that wakes the loop; owned here so it outlives every thread that might still signal it.
    let wakeFD: Int32
    private let state = Mutex(State())

    /// Creates a handle with a fresh eventfd; normally obtained from `EventLoop.handle` or `EventLoopGroup`.
    init() throws(IOError) {
        wakeFD = try Syscall.run("eventfd") { cl_eventfd() }
    }

    deinit {
        try? Syscall.close(wakeFD)
    }

    /// Posts `task` to run on the loop's thread during its next iteration and wakes the loop if it is blocked.
    ///
    /// Tasks run in the order posted. Returns false (and drops the task) if the loop has already closed.
    @discardableResult
    public func execute(_ task: @escaping @Sendable (EventLoop) -> Void) -> Bool {
        let accepted = state.withLock { state in
            if state.closed { return false }
            state.tasks.append(task)
            return true
        }
        if accepted {
            wake()
        }
        return accepted
    }

    /// Asks the loop's `run()` to return after its current iteration; safe from any thread.
    public func stop() {
        state.withLock { $0.stopRequested = true }
        wake()
    }

    /// Whether the loop behind this handle has closed and stopped accepting tasks.
    public var isClosed: Bool { state.withLock { $0.closed } }

    private func wake() {
        // EAGAIN means the counter is saturated, which is already a pending wake-up.
        try? Syscall.eventfdSignal(wakeFD)
    }

    func takeTasks() -> [@Sendable (EventLoop) -> Void] {
        state.withLock { state in
            let tasks = state.tasks
            state.tasks.removeAll(keepingCapacity: true)
            return tasks
        }
    }

    func takeStopRequest() -> Bool {
        state.withLock { state in
            let requested = state.stopRequested
            state.stopRequested = false
            return requested
        }
    }

    func markClosed() {
        state.withLock { state in
            state.closed = true
            state.tasks.removeAll()
        }
    }
}
