import CLinux
import Glibc
import Synchronization
import Testing
@testable import Reactor

@Suite struct EventLoopTests {
    @Test func timersFireInDeadlineOrderAndCancelledOnesNever() throws {
        let loop = try EventLoop()
        var fired: [String] = []
        // Scheduled out of order on purpose; two share a deadline and must keep scheduling order.
        let start = loop.now()
        loop.schedule(atNanoseconds: start + 30_000_000) { _ in fired.append("c") }
        loop.schedule(atNanoseconds: start + 10_000_000) { _ in fired.append("a") }
        let doomed = loop.schedule(atNanoseconds: start + 20_000_000) { _ in fired.append("cancelled") }
        loop.schedule(atNanoseconds: start + 20_000_000) { _ in fired.append("b1") }
        loop.schedule(atNanoseconds: start + 20_000_000) { _ in fired.append("b2") }
        let late = loop.schedule(after: .milliseconds(40)) { _ in fired.append("late-cancelled") }
        var sentinelFired = false
        loop.schedule(after: .milliseconds(60)) { loop in
            sentinelFired = true
            #expect(loop.now() >= start + 60_000_000)
        }
        #expect(loop.cancel(doomed))
        #expect(!loop.cancel(doomed), "second cancel reports nothing pending")
        // A timer can cancel a later one while it runs.
        loop.schedule(atNanoseconds: start + 35_000_000) { loop in loop.cancel(late) }

        #expect(try loop.run(until: { sentinelFired }))
        #expect(fired == ["a", "b1", "b2", "c"])
        #expect(loop.timers.liveCount == 0)
    }

    /// Two timers already due when the loop wakes fire in one batch; the first cancelling the second must
    /// still prevent it (it used to fire: the batch was taken before any callback ran). Deterministic: both
    /// deadlines are in the past before the loop runs.
    @Test func aTimerCancelsALaterOneDueInTheSameBatch() throws {
        let loop = try EventLoop()
        var fired: [String] = []
        let start = loop.now()
        var second: TimerID?
        loop.schedule(atNanoseconds: start) { loop in
            fired.append("first")
            if let second { loop.cancel(second) }
        }
        second = loop.schedule(atNanoseconds: start + 1) { _ in fired.append("second") }
        var done = false
        loop.schedule(atNanoseconds: start + 2) { _ in done = true }
        #expect(try loop.run(until: { done }))
        #expect(fired == ["first"])
    }

    @Test func timerScheduledFromATimerFires() throws {
        let loop = try EventLoop()
        var chain: [Int] = []
        loop.schedule(after: .zero) { loop in
            chain.append(1)
            loop.schedule(after: .milliseconds(1)) { _ in chain.append(2) }
        }
        #expect(try loop.run(until: { chain.count == 2 }))
        #expect(chain == [1, 2])
    }

    /// `iterationTime` is the clock as read when the iteration's `epoll_wait` returned: a timer's callback sees
    /// a time at or past its deadline, and not ahead of the clock.
    @Test func iterationTimeIsReadWhenTheWaitReturns() throws {
        let loop = try EventLoop()
        let scheduledAt = loop.now()
        var seen: (iteration: UInt64, clock: UInt64)?
        loop.schedule(after: .milliseconds(20)) { loop in seen = (loop.iterationTime, loop.now()) }
        #expect(try loop.run(until: { seen != nil }))
        let (iteration, clock) = try #require(seen)
        #expect(iteration >= scheduledAt + 20_000_000)
        #expect(iteration <= clock)
    }

    /// `afterEvents` runs once per iteration, after that iteration's callbacks (the audit log's batch is written
    /// there, so it must see everything the iteration did).
    @Test func afterEventsRunsOncePerIterationAfterItsCallbacks() throws {
        let loop = try EventLoop()
        var log: [String] = []
        loop.afterEvents = { log.append("after") }
        loop.schedule(after: .zero) { _ in log.append("timer 1") }
        try loop.runOnce(timeout: .seconds(5))
        #expect(log == ["timer 1", "after"])
        loop.schedule(after: .zero) { _ in log.append("timer 2") }
        loop.schedule(after: .zero) { _ in log.append("timer 3") }
        try loop.runOnce(timeout: .seconds(5))
        #expect(log == ["timer 1", "after", "timer 2", "timer 3", "after"])
        try loop.runOnce(timeout: .zero)
        #expect(log.last == "after" && log.count == 6, "an iteration with nothing ready still ends with it")
    }

    /// `runAtBatchEnd`: a callback that asks during a dispatch is called once, after every callback of that
    /// `epoll_wait` (here two timers due in one batch) and before `afterEvents`, its first pass (`batchWillEnd`)
    /// for every handler before any second pass; asking twice calls it twice, and asking outside a dispatch
    /// (before `runOnce`, from the batch-end callback itself, from `afterEvents`) schedules nothing.
    @Test func batchEndHandlersRunAfterTheWholeBatchAndBeforeAfterEvents() throws {
        final class Recorder: BatchEndHandler {
            var log: [String] = []
            weak var loop: EventLoop?
            func batchWillEnd() {
                log.append("will end")
                if let loop, loop.runAtBatchEnd(self) { log.append("scheduled from the first pass") }
            }
            func batchEnded() {
                log.append("batch end")
                if let loop, loop.runAtBatchEnd(self) { log.append("scheduled from batch end") }
            }
        }
        let loop = try EventLoop()
        let recorder = Recorder()
        recorder.loop = loop
        #expect(!loop.runAtBatchEnd(recorder), "no dispatch in progress")
        loop.afterEvents = {
            recorder.log.append("after")
            if loop.runAtBatchEnd(recorder) { recorder.log.append("scheduled from afterEvents") }
        }
        let start = loop.now()
        loop.schedule(atNanoseconds: start) { loop in
            recorder.log.append("timer 1")
            #expect(loop.runAtBatchEnd(recorder))
        }
        loop.schedule(atNanoseconds: start + 1) { loop in
            recorder.log.append("timer 2")
            #expect(loop.runAtBatchEnd(recorder))
        }
        try loop.runOnce(timeout: .seconds(5))
        #expect(recorder.log == ["timer 1", "timer 2", "will end", "will end", "batch end", "batch end", "after"])
        recorder.log.removeAll()
        try loop.runOnce(timeout: .zero)
        #expect(recorder.log == ["after"], "nothing carried over to the next iteration")
    }

    @Test func executeFromAnotherThreadWakesABlockedLoop() throws {
        let loop = try EventLoop()
        let handle = loop.handle
        let ran = Flag()
        let onLoopThread = Flag()
        let thread = try ReactorThread.spawn(name: "poster") {
            handle.execute { loop in
                onLoopThread.set(loop.inEventLoop)
                ran.set(true)
            }
        }
        let before = loop.now()
        // Blocks in epoll_wait with no timers; only the eventfd can end this early.
        while !ran.value && loop.now() - before < 20_000_000_000 {
            try loop.runOnce(timeout: .seconds(20))
        }
        thread.join()
        #expect(ran.value)
        #expect(onLoopThread.value)
        #expect(loop.now() - before < 10_000_000_000, "the loop was not woken by the eventfd")
    }

    @Test func stopFromAnotherThreadEndsRun() throws {
        let loop = try EventLoop()
        let handle = loop.handle
        let thread = try ReactorThread.spawn(name: "stopper") { handle.stop() }
        try loop.run()
        thread.join()
        loop.close()
        #expect(!handle.execute { _ in }, "a closed loop refuses tasks")
    }

    @Test func signalArrivesThroughSignalfd() throws {
        let loop = try EventLoop()
        var received: [Int32] = []
        try loop.onSignal(SIGUSR2) { _, signal in received.append(signal) }
        // Blocked by onSignal for this thread, so it stays pending until the signalfd reads it.
        #expect(pthread_kill(pthread_self(), SIGUSR2) == 0)
        #expect(try loop.run(until: { !received.isEmpty }))
        #expect(received == [SIGUSR2])
    }
}

/// A Sendable boolean for cross-thread test signalling.
final class Flag: Sendable {
    private let storage = Atomic<Bool>(false)
    var value: Bool { storage.load(ordering: .sequentiallyConsistent) }
    func set(_ newValue: Bool) { storage.store(newValue, ordering: .sequentiallyConsistent) }
}
