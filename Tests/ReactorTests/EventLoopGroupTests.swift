import CLinux
import Glibc
import Synchronization
import Testing
@testable import Reactor

/// Per-worker counts of served connections, shared across threads.
final class ServedCounts: Sendable {
    private let counts: Mutex<[Int]>
    init(workers: Int) { counts = Mutex(Array(repeating: 0, count: workers)) }
    func bump(_ worker: Int) { counts.withLock { $0[worker] += 1 } }
    func value(_ worker: Int) -> Int { counts.withLock { $0[worker] } }
}

/// Reads one byte and answers with the worker's number, then closes.
final class OneShotResponder: EventHandler {
    let socket: TCPSocket
    let reply: UInt8
    let onServed: () -> Void
    var registration: Registration?

    init(socket: TCPSocket, reply: UInt8, onServed: @escaping () -> Void) {
        self.socket = socket
        self.reply = reply
        self.onServed = onServed
    }

    func readable(loop: EventLoop) {
        var byte: UInt8 = 0
        let result = try? withUnsafeMutableBytes(of: &byte) { try socket.read(into: $0) }
        if case .wouldBlock? = result { return }
        if case .processed(1)? = result {
            var answer = reply
            _ = try? withUnsafeBytes(of: &answer) { try socket.write($0) }
            onServed()
        }
        if let registration { try? loop.deregister(registration) }
        try? socket.close()
    }
}

/// Worker-side state opened by the setup closure and kept by the loop's registrations.
final class WorkerListener: EventHandler {
    let listener: TCPListener
    let worker: Int
    let counts: ServedCounts

    init(listener: TCPListener, worker: Int, counts: ServedCounts) {
        self.listener = listener
        self.worker = worker
        self.counts = counts
    }

    func readable(loop: EventLoop) {
        while case .processed(let socket)? = try? listener.accept() {
            let counts = self.counts
            let worker = self.worker
            let responder = OneShotResponder(socket: socket, reply: UInt8(worker)) { counts.bump(worker) }
            responder.registration = try? loop.register(fd: socket.fd, interest: .readable, handler: responder)
        }
    }
}

@Suite struct EventLoopGroupTests {
    @Test func twoWorkersShareAPortThroughSOReusePort() throws {
        let options = TCPListener.Options(reusePort: true)
        // The probe reserves a port for the workers; it never accepts and is closed once they are listening.
        let probe = try TCPListener(bindingTo: SocketAddress.parse("127.0.0.1:0"), options: options)
        let address = probe.localAddress

        let group = try EventLoopGroup(count: 2)
        defer { group.shutdownGracefully() }
        let counts = ServedCounts(workers: 2)
        let workerNumbers = Mutex<Int>(0)
        try group.runOnEach { [counts] loop in
            let worker = workerNumbers.withLock { next in
                defer { next += 1 }
                return next
            }
            let listener = try TCPListener(bindingTo: address, options: options)
            let handler = WorkerListener(listener: listener, worker: worker, counts: counts)
            try loop.register(fd: listener.fd, interest: .readable, handler: handler)
        }
        try probe.close()

        let connections = 200
        var replies: [UInt8: Int] = [:]
        for _ in 0..<connections {
            let reply = try blockingRequest(address)
            replies[reply, default: 0] += 1
        }
        #expect(replies.values.reduce(0, +) == connections)
        #expect(replies[0, default: 0] > 0 && replies[1, default: 0] > 0, "one worker never accepted: \(replies)")
        group.shutdownGracefully()
        #expect(counts.value(0) + counts.value(1) == connections)
        #expect(group.handles.allSatisfy { $0.isClosed })
    }

    @Test func setupErrorsPropagate() throws {
        let group = try EventLoopGroup(count: 2)
        defer { group.shutdownGracefully() }
        #expect(throws: IOError.self) {
            try group.runOnEach { _ in throw IOError(errno: EPERM, reason: "setup") }
        }
    }

    /// A plain blocking client: connect, send one byte, read one byte.
    private func blockingRequest(_ address: SocketAddress) throws -> UInt8 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        let connected = address.withSockAddr { sa, length in Glibc.connect(fd, sa, length) }
        try #require(connected == 0, "connect failed: errno \(errno)")
        var byte: UInt8 = 0x21
        try #require(Glibc.write(fd, &byte, 1) == 1)
        var answer: UInt8 = 0xFF
        try #require(Glibc.read(fd, &answer, 1) == 1)
        return answer
    }
}
