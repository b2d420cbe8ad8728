// What the event loop calls when a registered descriptor becomes ready.
import CLinux

/// The readiness a handler wants to hear about for one descriptor.
public struct Interest: OptionSet, Sendable, Hashable, CustomStringConvertible {
    /// The raw bit set (not epoll bits; see `epollEvents`).
    public let rawValue: UInt8

    /// Creates an interest set from raw bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Data (or end of file) can be read without blocking.
    public static let readable = Interest(rawValue: 1 << 0)
    /// Bytes can be written without blocking (or a non-blocking connect finished).
    public static let writable = Interest(rawValue: 1 << 1)
    /// The peer shut down its writing side (EPOLLRDHUP).
    public static let readHangup = Interest(rawValue: 1 << 2)

    /// The epoll event mask for this interest set (level-triggered: EPOLLET is never set).
    var epollEvents: UInt32 {
        var events: UInt32 = 0
        if contains(.readable) { events |= cl_epollin() }
        if contains(.writable) { events |= cl_epollout() }
        if contains(.readHangup) { events |= cl_epollrdhup() }
        return events
    }

    /// E.g. `"[readable, writable]"`.
    public var description: String {
        var names: [String] = []
        if contains(.readable) { names.append("readable") }
        if contains(.writable) { names.append("writable") }
        if contains(.readHangup) { names.append("readHangup") }
        return "[" + names.joined(separator: ", ") + "]"
    }
}

/// The token for one registration of one descriptor with one loop.
///
/// The generation distinguishes this registration from any earlier or later registration of the same fd number,
/// so an event queued for a closed descriptor can never reach the handler of a new descriptor that reuses its number.
public struct Registration: Hashable, Sendable, CustomStringConvertible {
    /// The registered file descriptor.
    public let fd: Int32
    /// The loop-wide generation assigned when the descriptor was registered.
    public let generation: UInt32

    /// E.g. `"fd 7 gen 3"`.
    public var description: String { "fd \(fd) gen \(generation)" }
}

/// Receives readiness callbacks for a registered descriptor; one instance per connection.
///
/// All callbacks run on the loop's thread. The loop is level-triggered: a callback that leaves data unread, or
/// leaves `.writable` interest set with nothing to write, is called again on the next iteration. Handlers must
/// therefore drop interest they cannot service (for example `.readable` after end of file) or deregister.
public protocol EventHandler: AnyObject {
    /// The descriptor is readable (data, end of file, or a pending error to collect through `read`).
    func readable(loop: EventLoop)
    /// The descriptor is writable, or a non-blocking connect has completed (check it with `finishConnect()`).
    func writable(loop: EventLoop)
    /// The peer hung up (EPOLLHUP, or EPOLLRDHUP when `.readHangup` interest is set). Called after `readable`.
    func hangup(loop: EventLoop)
    /// The descriptor reported EPOLLERR; called before any other callback for the same event.
    func error(loop: EventLoop)
}

extension EventHandler {
    /// Default: nothing to write.
    public func writable(loop: EventLoop) {}
    /// Default: treat a hangup as readable, so the next `read` observes end of file or the error.
    public func hangup(loop: EventLoop) { readable(loop: loop) }
    /// Default: same as `hangup(loop:)`.
    public func error(loop: EventLoop) { hangup(loop: loop) }
}

/// Called once at the end of the event batch during which it asked for it (`EventLoop.runAtBatchEnd`), in two
/// passes: `batchWillEnd` on every handler of the batch, then `batchEnded` on each.
public protocol BatchEndHandler: AnyObject {
    /// The first pass: what should reach the peers of all the batch's handlers back to back (a proxy's writes to
    /// one upstream server, so that the server finds them all when it wakes).
    func batchWillEnd()
    /// The second pass.
    func batchEnded()
}
