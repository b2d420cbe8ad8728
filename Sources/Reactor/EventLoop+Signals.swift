// Signals as ordinary events: block them, read them from a signalfd registered in the loop.
//
//   onSignal(SIGTERM) --> pthread_sigmask(BLOCK, {all watched}) --> signalfd(fd, {all watched})
//   kernel raises SIGTERM --> stays pending (blocked) --> signalfd readable --> read siginfo --> callbacks
//
// No code runs in an asynchronous signal handler. The mask is per thread: a process-directed signal reaches the
// signalfd only if every other thread blocks it too, so block watched signals on the main thread before starting
// worker threads (threads inherit the mask), or watch them on the main thread's loop.
import CLinux
import Glibc

extension EventLoop {
    /// Calls `callback` on this loop each time `signal` is delivered to this thread or the process.
    ///
    /// The signal is blocked for the calling thread and stays blocked after the loop closes.
    public func onSignal(_ signal: Int32, _ callback: @escaping (EventLoop, Int32) -> Void) throws {
        assertInLoop()
        let isNew = signalCallbacks[signal] == nil
        signalCallbacks[signal, default: []].append(callback)
        guard isNew else { return }
        let watched = signalCallbacks.keys.sorted()
        let fd: Int32
        do {
            fd = try watched.withUnsafeBufferPointer { signals throws(IOError) in
                try Syscall.run("signalfd") {
                    cl_signalfd_update(signalFD, signals.baseAddress, Int32(signals.count))
                }
            }
        } catch {
            signalCallbacks[signal] = nil
            throw error
        }
        if signalFD < 0 {
            signalFD = fd
            signalRegistration = try selector.register(fd: fd, interest: .readable, handler: SignalFDHandler())
        }
    }

    /// Reads every queued signal and runs its callbacks.
    func dispatchSignals() {
        while true {
            let result = try? Syscall.call("read(signalfd)") { cl_signalfd_read(signalFD) }
            guard case .processed(let signal)? = result, signal > 0 else { return }
            for callback in signalCallbacks[signal] ?? [] {
                callback(self, signal)
            }
        }
    }
}

/// Forwards signalfd readiness to the loop.
private final class SignalFDHandler: EventHandler {
    func readable(loop: EventLoop) { loop.dispatchSignals() }
}
