// The syscall funnel. Every system call the Reactor module makes passes through `Syscall`.
//
//     caller --> Syscall.call(reason) { rawCall() }
//                    |
//                    +- result >= 0 ---------------> .processed(result)
//                    +- errno EINTR ---------------> retry (unless the call says it must not be retried)
//                    +- errno EAGAIN/EWOULDBLOCK --> .wouldBlock
//                    +- errno EBADF/EFAULT --------> preconditionFailure (a bug in this process)
//                    +- any other errno -----------> throw IOError(errno:reason:)
import CLinux
import Glibc

/// The outcome of a non-blocking operation: it either made progress or would have blocked.
public enum IOResult<T> {
    /// The call completed and produced `T` (for reads, `0` means end of file).
    case processed(T)
    /// The call would have blocked (EAGAIN/EWOULDBLOCK, or a connect still in progress).
    case wouldBlock
}

extension IOResult: Equatable where T: Equatable {}
extension IOResult: Sendable where T: Sendable {}

/// A failed system call: the errno it returned and what the module was trying to do.
public struct IOError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The errno value the call failed with.
    public let errnoCode: Int32
    /// A short description of the attempted operation, e.g. `"epoll_ctl(ADD)"`.
    public let reason: String

    /// Creates an error from an errno value and the name of the failed operation.
    public init(errno: Int32, reason: String) {
        self.errnoCode = errno
        self.reason = reason
    }

    /// `"<reason>: <strerror(errno)> (errno <n>)"`.
    public var description: String {
        "\(reason): \(String(cString: strerror(errnoCode))) (errno \(errnoCode))"
    }
}

/// The single funnel for system calls; see the diagram at the top of this file.
@usableFromInline
enum Syscall {
    /// What a raw call produced once EINTR has been retried and our own bugs have trapped.
    @usableFromInline
    enum Outcome<T> {
        case value(T)
        case failed(Int32)
    }

    /// Runs `body` until it does not fail with EINTR, traps on EBADF/EFAULT, and returns the value or the errno.
    ///
    /// `body` follows the C convention: a negative result means failure with the reason in `errno`. Tests inject
    /// their own `body` to script errno sequences. Pass `retryOnEINTR: false` for `close(2)`, which must never be
    /// retried on Linux because the descriptor is already released when EINTR comes back.
    @inlinable
    static func raw<T: FixedWidthInteger>(
        _ reason: @autoclosure () -> String,
        retryOnEINTR: Bool = true,
        _ body: () -> T
    ) -> Outcome<T> {
        while true {
            let result = body()
            if result >= 0 {
                return .value(result)
            }
            let code = errno
            switch code {
            case EINTR where retryOnEINTR:
                continue
            case EBADF, EFAULT:
                preconditionFailure("\(reason()) failed with \(IOError(errno: code, reason: reason()))")
            default:
                return .failed(code)
            }
        }
    }

    /// Runs a non-blocking call: EAGAIN/EWOULDBLOCK become `.wouldBlock`, other failures throw.
    @inlinable
    static func call<T: FixedWidthInteger>(
        _ reason: @autoclosure () -> String,
        _ body: () -> T
    ) throws(IOError) -> IOResult<T> {
        switch raw(reason(), body) {
        case .value(let value):
            return .processed(value)
        case .failed(let code) where code == EAGAIN || code == EWOULDBLOCK:
            return .wouldBlock
        case .failed(let code):
            throw IOError(errno: code, reason: reason())
        }
    }

    /// Runs a call that is never expected to block: every failure, EAGAIN included, throws.
    @inlinable
    static func run<T: FixedWidthInteger>(
        _ reason: @autoclosure () -> String,
        _ body: () -> T
    ) throws(IOError) -> T {
        switch raw(reason(), body) {
        case .value(let value):
            return value
        case .failed(let code):
            throw IOError(errno: code, reason: reason())
        }
    }

    /// Closes `fd`. EINTR is treated as success: on Linux the descriptor is gone either way.
    static func close(_ fd: Int32) throws(IOError) {
        switch raw("close(\(fd))", retryOnEINTR: false, { Glibc.close(fd) }) {
        case .value:
            return
        case .failed(let code) where code == EINTR:
            return
        case .failed(let code):
            throw IOError(errno: code, reason: "close(\(fd))")
        }
    }
}

extension Syscall {
    /// Adds one to an eventfd counter; a full counter (EAGAIN) already means "wake up", so it is not an error.
    static func eventfdSignal(_ fd: Int32) throws(IOError) {
        var one: UInt64 = 1
        _ = try call("write(eventfd)") { Glibc.write(fd, &one, 8) }
    }

    /// Drains an eventfd or timerfd counter; returns the value read, or 0 if it was not readable.
    static func drainCounter(_ fd: Int32) throws(IOError) -> UInt64 {
        var value: UInt64 = 0
        switch try call("read(counter fd)", { Glibc.read(fd, &value, 8) }) {
        case .processed:
            return value
        case .wouldBlock:
            return 0
        }
    }
}

extension Duration {
    /// This duration in whole nanoseconds, clamped to `0...Int64.max`.
    var clampedNanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) {
            return 0
        }
        let (secNanos, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        if overflow || secNanos > UInt64(Int64.max) {
            return UInt64(Int64.max)
        }
        return min(secNanos + UInt64(attoseconds / 1_000_000_000), UInt64(Int64.max))
    }
}
