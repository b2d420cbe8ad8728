import CLinux
import Glibc
import Testing
@testable import Reactor

@Suite struct SelectorTests {
    /// Two readable pipes in one epoll batch. Whichever handler runs first closes the other pipe's read end, puts a
    /// fresh, empty pipe at the same fd number (dup2) and registers a new handler for it. The other pipe's event,
    /// already fetched in the same batch, carries the old generation and must be dropped rather than delivered to
    /// the new handler (whose pipe is empty, so any call it receives in this batch is the stale event).
    @Test func staleEventForReusedFdIsDropped() throws {
        let loop = try EventLoop()
        let first = try Pipe()
        let second = try Pipe()
        first.write("a")
        second.write("b")
        let replacement = try Pipe()
        let newHandler = RecordingHandler()
        var registrations: [Int32: Registration] = [:]
        var reusedFD: Int32 = -1

        func hijack(other: Pipe) -> (EventLoop) -> Void {
            { loop in
                guard reusedFD < 0 else { return }
                let fd = other.readFD
                reusedFD = fd
                try! loop.deregister(registrations[fd]!)
                // dup2 atomically closes `fd` and makes it refer to the replacement pipe.
                let result = dup2(replacement.readFD, fd)
                precondition(result == fd)
                registrations[fd] = try! loop.register(fd: fd, interest: .readable, handler: newHandler)
            }
        }
        let firstHandler = RecordingHandler(onReadable: hijack(other: second))
        let secondHandler = RecordingHandler(onReadable: hijack(other: first))
        registrations[first.readFD] = try loop.register(fd: first.readFD, interest: .readable, handler: firstHandler)
        registrations[second.readFD] = try loop.register(
            fd: second.readFD, interest: .readable, handler: secondHandler)

        let events = try loop.runOnce(timeout: .seconds(5))
        #expect(events == 2, "both pipes must be reported in the same batch for the scenario to mean anything")
        #expect(reusedFD >= 0)
        #expect(firstHandler.readableCount + secondHandler.readableCount == 1)
        #expect(newHandler.readableCount == 0, "the stale event reached the new registration")
        #expect(loop.selector.droppedStaleEvents == 1)

        // The new registration is live: data on the replacement pipe reaches the new handler.
        replacement.write("c")
        #expect(try loop.run(until: { newHandler.readableCount > 0 }))
        try loop.deregister(registrations[reusedFD]!)
    }

    /// The same property through the internal dispatch entry point, with no kernel involvement.
    @Test func injectedEventWithOldGenerationIsDropped() throws {
        let loop = try EventLoop()
        let pipe = try Pipe()
        let old = RecordingHandler()
        let oldRegistration = try loop.register(fd: pipe.readFD, interest: .readable, handler: old)
        try loop.deregister(oldRegistration)
        let current = RecordingHandler()
        let newRegistration = try loop.register(fd: pipe.readFD, interest: .readable, handler: current)
        #expect(newRegistration.generation != oldRegistration.generation)

        loop.selector.dispatch(
            data: cl_epoll_pack(oldRegistration.generation, pipe.readFD), events: cl_epollin(), loop: loop)
        #expect(current.readableCount == 0 && old.readableCount == 0)
        #expect(loop.selector.droppedStaleEvents == 1)

        loop.selector.dispatch(
            data: cl_epoll_pack(newRegistration.generation, pipe.readFD), events: cl_epollin(), loop: loop)
        #expect(current.readableCount == 1)
        try loop.deregister(newRegistration)
    }

    /// Two pipes readable in one batch: while the first handler runs, the other registration's event is fetched and
    /// not delivered; while the second runs, the first's is delivered. Outside a batch nothing is undelivered, and
    /// an event fetched for an fd's earlier registration does not count for its new one.
    @Test func undeliveredEventsOfTheCurrentBatch() throws {
        let loop = try EventLoop()
        let first = try Pipe()
        let second = try Pipe()
        first.write("a")
        second.write("b")
        var registrations: [Registration] = []
        var seen: [(ran: Int, otherUndelivered: Bool, selfUndelivered: Bool)] = []
        func observe(_ me: Int) -> (EventLoop) -> Void {
            { loop in
                seen.append((me, loop.hasUndeliveredEvent(registrations[1 - me]),
                             loop.hasUndeliveredEvent(registrations[me])))
            }
        }
        let handlers = [RecordingHandler(onReadable: observe(0)), RecordingHandler(onReadable: observe(1))]
        registrations.append(try loop.register(fd: first.readFD, interest: .readable, handler: handlers[0]))
        registrations.append(try loop.register(fd: second.readFD, interest: .readable, handler: handlers[1]))
        #expect(!loop.hasUndeliveredEvent(registrations[0]) && !loop.hasUndeliveredEvent(registrations[1]))

        let events = try loop.runOnce(timeout: .seconds(5))
        #expect(events == 2, "both pipes must be reported in the same batch for the scenario to mean anything")
        #expect(seen.count == 2)
        if seen.count == 2 {
            #expect(seen[0].ran != seen[1].ran)
            #expect(seen[0].otherUndelivered, "the later event of the batch was not seen as undelivered")
            #expect(!seen[1].otherUndelivered, "a delivered event was still seen as undelivered")
            #expect(!seen[0].selfUndelivered && !seen[1].selfUndelivered, "the event being delivered counted")
        }
        #expect(!loop.hasUndeliveredEvent(registrations[0]) && !loop.hasUndeliveredEvent(registrations[1]))

        // Same batch again; the first handler to run re-registers the other's fd: the event fetched for the old
        // registration is stale and is not reported for the new one.
        var renewed: Registration?
        var renewedUndelivered: Bool?
        let quiet = RecordingHandler()
        for (index, handler) in handlers.enumerated() {
            handler.onReadable = { loop in
                guard renewed == nil else { return }
                let other = registrations[1 - index]
                try! loop.deregister(other)
                renewed = try! loop.register(fd: other.fd, interest: [], handler: quiet)
                renewedUndelivered = loop.hasUndeliveredEvent(renewed!)
            }
        }
        let again = try loop.runOnce(timeout: .seconds(5))
        #expect(again == 2)
        #expect(renewedUndelivered == false, "an event of the fd's old registration counted for the new one")
        if let renewed { try loop.deregister(renewed) }
    }

    @Test func interestChangesAreObserved() throws {
        let loop = try EventLoop()
        let pipe = try Pipe()
        let handler = RecordingHandler()
        let registration = try loop.register(fd: pipe.writeFD, interest: [], handler: handler)
        try loop.runOnce(timeout: .zero)
        #expect(handler.writableCount == 0)
        try loop.setInterest(.writable, for: registration)
        #expect(loop.interest(of: registration) == .writable)
        #expect(try loop.run(until: { handler.writableCount > 0 }))
        try loop.deregister(registration)
        #expect(loop.interest(of: registration) == nil)
    }
}
