// The epoll backend: registrations, the wait, and stale-event filtering.
//
//   register(fd) --> generation g = next++ --> slots[fd] = (g, interest, handler)
//                                         +--> epoll_ctl(ADD, fd, data = pack(g, fd))
//
//   epoll_wait --> [(data, mask)] --> for each: fd, g = unpack(data)
//                                        slots[fd]?.generation == g ?  -- no --> dropped (stale)
//                                                 | yes
//                                                 v
//                          error -> readable -> writable -> hangup   (generation re-checked before each call,
//                                                                   because a callback may deregister or
//                                                                   close-and-reuse the fd mid-batch)
//
// Level-triggered on purpose: a handler may read a bounded amount per wake-up and be called again, which keeps
// per-connection fairness and backpressure simple. The price is an epoll_ctl(MOD) whenever interest changes,
// and handlers must drop interest they cannot service.
import CLinux
import Glibc

/// An epoll instance plus the table of live registrations indexed by fd.
final class EpollSelector {
    /// One live registration.
    struct Slot {
        var generation: UInt32
        var interest: Interest
        var handler: any EventHandler
    }

    /// Events fetched per `epoll_wait` (the C side clamps to 256 as well).
    static let batchSize = 256

    let epfd: Int32
    private var slots: [Slot?] = []
    private var nextGeneration: UInt32 = 1
    private let eventData: UnsafeMutablePointer<UInt64>
    private let eventMasks: UnsafeMutablePointer<UInt32>
    private var closed = false

    /// Per fd, the last event `epoll_wait` fetched for it: its registration's generation, the batch it came in
    /// (counted from 1) and its place in that batch. `hasUndeliveredEvent` reads it; kept as long as `slots`.
    private struct Fetched {
        var generation: UInt32 = 0
        var batch: UInt32 = 0
        var index: UInt32 = 0
    }
    private var fetched: [Fetched] = []
    /// The batch being (or last) dispatched, and the index of the event being delivered (`batchSize` once the
    /// whole batch is delivered).
    private var batch: UInt32 = 0
    private var dispatching = EpollSelector.batchSize

    /// Events discarded because their generation no longer matched the fd's registration (for tests and metrics).
    private(set) var droppedStaleEvents = 0
    /// Number of live registrations.
    private(set) var registrationCount = 0

    init() throws(IOError) {
        epfd = try Syscall.run("epoll_create1") { cl_epoll_create() }
        eventData = .allocate(capacity: Self.batchSize)
        eventMasks = .allocate(capacity: Self.batchSize)
    }

    deinit {
        eventData.deallocate()
        eventMasks.deallocate()
        if !closed {
            try? Syscall.close(epfd)
        }
    }

    /// Adds `fd` with `interest`; the returned registration is the only way to address it afterwards.
    func register(fd: Int32, interest: Interest, handler: any EventHandler) throws(IOError) -> Registration {
        precondition(fd >= 0, "register: negative fd \(fd)")
        if fd < slots.count, slots[Int(fd)] != nil {
            preconditionFailure("register: fd \(fd) is already registered; deregister before reusing it")
        }
        let generation = nextGeneration
        nextGeneration &+= 1
        if nextGeneration == 0 { nextGeneration = 1 }
        let data = cl_epoll_pack(generation, fd)
        _ = try Syscall.run("epoll_ctl(ADD, fd \(fd))") {
            cl_epoll_ctl(epfd, cl_epoll_ctl_add(), fd, interest.epollEvents, data)
        }
        if Int(fd) >= slots.count {
            slots.append(contentsOf: repeatElement(nil, count: Int(fd) + 1 - slots.count))
            fetched.append(contentsOf: repeatElement(Fetched(), count: slots.count - fetched.count))
        }
        slots[Int(fd)] = Slot(generation: generation, interest: interest, handler: handler)
        registrationCount += 1
        return Registration(fd: fd, generation: generation)
    }

    /// Replaces the interest set of a live registration. A no-op if the interest is unchanged.
    func reregister(_ registration: Registration, interest: Interest) throws(IOError) {
        let fd = registration.fd
        guard var slot = slot(for: registration) else {
            preconditionFailure("reregister: \(registration) is not live")
        }
        if slot.interest == interest { return }
        let data = cl_epoll_pack(registration.generation, fd)
        _ = try Syscall.run("epoll_ctl(MOD, fd \(fd))") {
            cl_epoll_ctl(epfd, cl_epoll_ctl_mod(), fd, interest.epollEvents, data)
        }
        slot.interest = interest
        slots[Int(fd)] = slot
    }

    /// Removes a live registration; must be called before the fd is closed. Returns the handler it held.
    @discardableResult
    func deregister(_ registration: Registration) throws(IOError) -> (any EventHandler)? {
        guard let slot = slot(for: registration) else { return nil }
        let fd = registration.fd
        slots[Int(fd)] = nil
        registrationCount -= 1
        _ = try Syscall.run("epoll_ctl(DEL, fd \(fd))") {
            cl_epoll_ctl(epfd, cl_epoll_ctl_del(), fd, 0, 0)
        }
        return slot.handler
    }

    /// The current interest of a live registration, or nil if it is gone.
    func interest(of registration: Registration) -> Interest? {
        slot(for: registration)?.interest
    }

    /// Every live registration, for orderly teardown.
    var liveRegistrations: [Registration] {
        slots.enumerated().compactMap { index, slot in
            slot.map { Registration(fd: Int32(index), generation: $0.generation) }
        }
    }

    /// Waits up to `timeoutMilliseconds` (-1 forever) and dispatches every event to `loop`. Returns the event count.
    func waitAndDispatch(timeoutMilliseconds: Int32, loop: EventLoop) throws(IOError) -> Int {
        let count = try Syscall.run("epoll_wait") {
            cl_epoll_wait(epfd, eventData, eventMasks, Int32(Self.batchSize), timeoutMilliseconds)
        }
        loop.woke()
        let events = Int(count)
        batch &+= 1
        for index in 0..<events {
            let data = eventData[index]
            let fd = Int(Int32(truncatingIfNeeded: data))
            if fd >= 0, fd < fetched.count {
                fetched[fd] = Fetched(generation: UInt32(truncatingIfNeeded: data >> 32), batch: batch,
                                      index: UInt32(index))
            }
        }
        defer { dispatching = Self.batchSize }
        for index in 0..<events {
            dispatching = index
            dispatch(data: eventData[index], events: eventMasks[index], loop: loop)
        }
        return events
    }

    /// Whether the batch being dispatched holds an event for `registration` that has not been delivered yet: its
    /// fd became readable, writable or hung up before this batch was fetched, and its handler has not run. (A
    /// pooled upstream connection that the upstream closed is one; reusing it would fail.)
    func hasUndeliveredEvent(_ registration: Registration) -> Bool {
        let fd = Int(registration.fd)
        guard fd >= 0, fd < fetched.count else { return false }
        let event = fetched[fd]
        return event.batch == batch && event.generation == registration.generation && Int(event.index) > dispatching
    }

    /// Delivers one raw epoll event, dropping it if its generation is stale. Internal so tests can inject events.
    func dispatch(data: UInt64, events: UInt32, loop: EventLoop) {
        let registration = Registration(fd: Int32(truncatingIfNeeded: data), generation: UInt32(data >> 32))
        guard let handler = slot(for: registration)?.handler else {
            droppedStaleEvents += 1
            return
        }
        if events & cl_epollerr() != 0 {
            handler.error(loop: loop)
            guard isLive(registration) else { return }
        }
        if events & cl_epollin() != 0 {
            handler.readable(loop: loop)
            guard isLive(registration) else { return }
        }
        if events & cl_epollout() != 0 {
            handler.writable(loop: loop)
            guard isLive(registration) else { return }
        }
        if events & (cl_epollhup() | cl_epollrdhup()) != 0 {
            handler.hangup(loop: loop)
        }
    }

    /// Closes the epoll descriptor; the selector is unusable afterwards.
    func close() throws(IOError) {
        guard !closed else { return }
        closed = true
        slots.removeAll()
        registrationCount = 0
        try Syscall.close(epfd)
    }

    private func slot(for registration: Registration) -> Slot? {
        let fd = Int(registration.fd)
        guard fd >= 0, fd < slots.count, let slot = slots[fd], slot.generation == registration.generation else {
            return nil
        }
        return slot
    }

    private func isLive(_ registration: Registration) -> Bool {
        slot(for: registration) != nil
    }
}
