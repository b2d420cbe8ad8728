// N worker threads, each owning one EventLoop. The group only ever touches loops through their handles.
//
//   EventLoopGroup(count: 2)
//     +- handle[0] <---- thread 0: EventLoop(handle[0]).run()
//     +- handle[1] <---- thread 1: EventLoop(handle[1]).run()
//
//   runOnEach(setup) --> handle[i].execute { setup(loop) ; latch.countDown() } --> caller blocks on the latch
//   shutdownGracefully() --> handle[i].stop() --> pthread_join(thread[i])
import CLinux
import Glibc
import Synchronization

/// A fixed set of event loops, one per thread.
public final class EventLoopGroup {
    /// One handle per worker loop, in worker order.
    public let handles: [EventLoopHandle]
    private var threads: [ReactorThread] = []
    private let nextIndex = Atomic<Int>(0)
    private var isShutDown = false

    /// Starts `count` threads, each creating and running its own `EventLoop`.
    public init(count: Int) throws {
        precondition(count > 0, "EventLoopGroup needs at least one loop")
        var handles: [EventLoopHandle] = []
        for _ in 0..<count {
            handles.append(try EventLoopHandle())
        }
        self.handles = handles
        for (index, handle) in handles.enumerated() {
            threads.append(try ReactorThread.spawn(name: "formwall-loop-\(index)") {
                do {
                    let loop = try EventLoop(handle: handle)
                    defer { loop.close() }
                    try loop.run()
                } catch {
                    handle.markClosed()
                }
            })
        }
    }

    deinit {
        shutdownGracefully()
    }

    /// The next loop in round-robin order, for spreading connections.
    public func next() -> EventLoopHandle {
        let index = nextIndex.wrappingAdd(1, ordering: .relaxed).oldValue
        return handles[index % handles.count]
    }

    /// Runs `setup` on every loop (on its own thread) and waits for all to finish; rethrows the first error.
    ///
    /// Typical use: open each worker's own SO_REUSEPORT listener and register its accept handler.
    public func runOnEach(_ setup: @escaping @Sendable (EventLoop) throws -> Void) throws {
        let latch = try Latch()
        let firstError = Mutex<(any Error)?>(nil)
        var posted = 0
        for handle in handles {
            let accepted = handle.execute { loop in
                do {
                    try setup(loop)
                } catch {
                    firstError.withLock { if $0 == nil { $0 = error } }
                }
                latch.countDown()
            }
            if accepted { posted += 1 }
        }
        try latch.wait(for: posted)
        if let error = firstError.withLock({ $0 }) {
            throw error
        }
        if posted < handles.count {
            throw IOError(errno: ESHUTDOWN, reason: "runOnEach: \(handles.count - posted) loop(s) already closed")
        }
    }

    /// Stops every loop after its current iteration and joins its thread. Idempotent.
    public func shutdownGracefully() {
        guard !isShutDown else { return }
        isShutDown = true
        for handle in handles {
            handle.stop()
        }
        for thread in threads {
            thread.join()
        }
        threads.removeAll()
    }
}

/// A counting latch on a blocking eventfd: workers count down, one thread waits for the total.
final class Latch: Sendable {
    private let fd: Int32

    init() throws(IOError) {
        fd = try Syscall.run("eventfd(latch)") { eventfd(0, Int32(EFD_CLOEXEC)) }
    }

    deinit {
        try? Syscall.close(fd)
    }

    func countDown() {
        var one: UInt64 = 1
        _ = try? Syscall.run("write(latch)") { Glibc.write(fd, &one, 8) }
    }

    /// Blocks until `count` count-downs have happened.
    func wait(for count: Int) throws(IOError) {
        var seen: UInt64 = 0
        while seen < UInt64(count) {
            var value: UInt64 = 0
            _ = try Syscall.run("read(latch)") { Glibc.read(fd, &value, 8) }
            seen += value
        }
    }
}

/// A joinable pthread running a Sendable closure.
struct ReactorThread: Sendable {
    private final class Box: Sendable {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    let id: pthread_t

    /// Starts a thread that runs `body`.
    static func spawn(name: String, _ body: @escaping @Sendable () -> Void) throws(IOError) -> ReactorThread {
        let box = Unmanaged.passRetained(Box(name: name, body: body))
        var id = pthread_t()
        let result = pthread_create(&id, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            _ = cl_set_thread_name(box.name)
            box.body()
            return nil
        }, box.toOpaque())
        guard result == 0 else {
            box.release()
            throw IOError(errno: result, reason: "pthread_create(\(name))")
        }
        return ReactorThread(id: id)
    }

    /// Waits for the thread to finish.
    func join() {
        let result = pthread_join(id, nil)
        precondition(result == 0, "pthread_join failed: \(result)")
    }
}
