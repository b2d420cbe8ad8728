// Timers: a binary min-heap of deadlines plus one CLOCK_MONOTONIC timerfd armed for the earliest one.
//
//   schedule(after:) --> heap.push(deadline, id) --> earliest changed? --> timerfd_settime(ABSTIME, earliest)
//   cancel(id)       --> callbacks[id] = nil          (heap entry left behind; skipped when it surfaces)
//   timerfd readable --> pop every entry with deadline <= now --> run the ones still in `callbacks`, in order
//                    --> re-arm for the new earliest live deadline (or disarm)
//
// Why a timerfd rather than the epoll_wait timeout: nanosecond deadlines instead of milliseconds, and expiry
// arrives as an ordinary event, so `runOnce` needs no special timeout arithmetic. Cancellation is lazy (O(1));
// the heap is rebuilt when dead entries outnumber live ones, so churning idle timeouts cannot grow it unbounded.
import CLinux

/// Identifies a scheduled timer so it can be cancelled.
public struct TimerID: Hashable, Sendable, CustomStringConvertible {
    let raw: UInt64
    /// E.g. `"timer 12"`.
    public var description: String { "timer \(raw)" }
}

/// A min-heap of (deadline, id) plus the callbacks of the live timers.
struct TimerQueue {
    struct Entry {
        var deadline: UInt64
        var id: UInt64

        /// Earlier deadline first; ties fire in scheduling order.
        func precedes(_ other: Entry) -> Bool {
            deadline != other.deadline ? deadline < other.deadline : id < other.id
        }
    }

    private(set) var heap: [Entry] = []
    private var callbacks: [UInt64: (EventLoop) -> Void] = [:]
    private var nextID: UInt64 = 1

    /// Number of timers that will still fire.
    var liveCount: Int { callbacks.count }

    mutating func schedule(deadline: UInt64, _ callback: @escaping (EventLoop) -> Void) -> TimerID {
        let id = nextID
        nextID += 1
        callbacks[id] = callback
        push(Entry(deadline: deadline, id: id))
        return TimerID(raw: id)
    }

    /// Returns true if the timer was still pending.
    @discardableResult
    mutating func cancel(_ timer: TimerID) -> Bool {
        guard callbacks.removeValue(forKey: timer.raw) != nil else { return false }
        if heap.count > 64 && heap.count > 2 * callbacks.count {
            heap.removeAll { callbacks[$0.id] == nil }
            heapify()
        }
        return true
    }

    /// The earliest deadline of a live timer, discarding cancelled entries on the way.
    mutating func earliestDeadline() -> UInt64? {
        while let top = heap.first {
            if callbacks[top.id] != nil { return top.deadline }
            _ = pop()
        }
        return nil
    }

    /// The id the next scheduled timer will get: timers scheduled from now on have ids at or above it.
    var nextTimerID: UInt64 { nextID }

    /// Removes and returns the callback of the first live timer due at `now` that was scheduled before
    /// `before` (an id bound, so a callback that schedules a timer due at once cannot keep the batch going).
    /// One at a time, so that a callback can still cancel a later timer of the same batch.
    mutating func popExpired(now: UInt64, before: UInt64) -> ((EventLoop) -> Void)? {
        var skipped: [Entry] = []
        defer { for entry in skipped { push(entry) } }
        while let top = heap.first, top.deadline <= now {
            _ = pop()
            guard top.id < before else {
                if callbacks[top.id] != nil { skipped.append(top) }
                continue
            }
            if let callback = callbacks.removeValue(forKey: top.id) { return callback }
        }
        return nil
    }

    /// Whether `timer` is still pending.
    func isPending(_ timer: TimerID) -> Bool { callbacks[timer.raw] != nil }

    mutating func removeAll() {
        heap.removeAll()
        callbacks.removeAll()
    }

    private mutating func push(_ entry: Entry) {
        heap.append(entry)
        siftUp(heap.count - 1)
    }

    private mutating func pop() -> Entry? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let entry = heap.removeLast()
        if !heap.isEmpty { siftDown(0) }
        return entry
    }

    private mutating func heapify() {
        var index = heap.count / 2 - 1
        while index >= 0 {
            siftDown(index)
            index -= 1
        }
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var first = parent
            if left < heap.count, heap[left].precedes(heap[first]) { first = left }
            if right < heap.count, heap[right].precedes(heap[first]) { first = right }
            if first == parent { return }
            heap.swapAt(parent, first)
            parent = first
        }
    }
}

extension EventLoop {
    /// Runs `callback` on this loop once `delay` has elapsed (CLOCK_MONOTONIC). Zero or negative means "soon".
    @discardableResult
    public func schedule(after delay: Duration, _ callback: @escaping (EventLoop) -> Void) -> TimerID {
        schedule(atNanoseconds: now() &+ delay.clampedNanoseconds, callback)
    }

    /// Runs `callback` on this loop at the absolute monotonic time `deadline` (nanoseconds, as from `now()`).
    @discardableResult
    public func schedule(atNanoseconds deadline: UInt64, _ callback: @escaping (EventLoop) -> Void) -> TimerID {
        assertInLoop()
        let id = timers.schedule(deadline: max(deadline, 1), callback)
        rearmTimerFD()
        return id
    }

    /// Cancels a pending timer; its callback will never run. Returns false if it already fired or was cancelled.
    @discardableResult
    public func cancel(_ timer: TimerID) -> Bool {
        assertInLoop()
        let wasPending = timers.cancel(timer)
        if wasPending { rearmTimerFD() }
        return wasPending
    }

    /// Whether `timer` has neither fired nor been cancelled.
    public func isPending(_ timer: TimerID) -> Bool { timers.isPending(timer) }

    /// Called when the timerfd is readable.
    func fireExpiredTimers() {
        _ = try? Syscall.drainCounter(timerFD)
        // The timerfd may have been armed for a deadline that has since been cancelled; nothing is due then.
        armedDeadline = 0
        let due = now()
        let before = timers.nextTimerID
        while let callback = timers.popExpired(now: due, before: before) {
            callback(self)
        }
        rearmTimerFD()
    }

    /// Points the timerfd at the earliest live deadline, touching the kernel only when that deadline changed.
    func rearmTimerFD() {
        let earliest = timers.earliestDeadline() ?? 0
        guard earliest != armedDeadline else { return }
        do {
            _ = try Syscall.run("timerfd_settime") { cl_timerfd_set_absolute(timerFD, earliest) }
            armedDeadline = earliest
        } catch {
            preconditionFailure("timerfd_settime cannot fail with valid arguments: \(error)")
        }
    }
}
