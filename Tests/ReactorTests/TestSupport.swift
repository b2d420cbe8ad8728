// Helpers shared by the Reactor tests: readiness-driven waiting, pipes, recording handlers.
import CLinux
import Glibc
import Testing
@testable import Reactor

extension EventLoop {
    /// Runs iterations until `condition` holds; returns false if `deadline` passes first (a failure guard, not a
    /// sleep: each iteration blocks only until something is ready).
    func run(until condition: () -> Bool, deadline: Duration = .seconds(20)) throws -> Bool {
        let limit = now() + deadline.clampedNanoseconds
        while !condition() {
            let current = now()
            if current >= limit { return false }
            try runOnce(timeout: .nanoseconds(Int64(min(limit - current, 100_000_000))))
        }
        return true
    }
}

/// A non-blocking pipe whose ends close on deinit.
final class Pipe {
    var readFD: Int32
    var writeFD: Int32

    init() throws {
        var fds: [Int32] = [-1, -1]
        let result = cl_pipe(&fds)
        try #require(result == 0)
        readFD = fds[0]
        writeFD = fds[1]
    }

    func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(writeFD, $0.baseAddress, $0.count) }
    }

    deinit {
        if readFD >= 0 { close(readFD) }
        if writeFD >= 0 { close(writeFD) }
    }
}

/// Counts callbacks and runs an optional action on readable.
final class RecordingHandler: EventHandler {
    var readableCount = 0
    var writableCount = 0
    var hangupCount = 0
    var onReadable: ((EventLoop) -> Void)?

    init(onReadable: ((EventLoop) -> Void)? = nil) { self.onReadable = onReadable }

    func readable(loop: EventLoop) {
        readableCount += 1
        onReadable?(loop)
    }
    func writable(loop: EventLoop) { writableCount += 1 }
    func hangup(loop: EventLoop) { hangupCount += 1 }
}
