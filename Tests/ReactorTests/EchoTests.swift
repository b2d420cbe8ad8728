import CLinux
import Glibc
import Testing
@testable import Reactor

/// Accepts every queued connection and hands it to `makeHandler`.
final class AcceptHandler: EventHandler {
    let listener: TCPListener
    let makeHandler: (EventLoop, TCPSocket) throws -> Void
    var accepted = 0

    init(listener: TCPListener, makeHandler: @escaping (EventLoop, TCPSocket) throws -> Void) {
        self.listener = listener
        self.makeHandler = makeHandler
    }

    func readable(loop: EventLoop) {
        while case .processed(let socket)? = try? listener.accept() {
            accepted += 1
            try? makeHandler(loop, socket)
        }
    }
}

/// Echoes everything back through a small capped buffer, toggling read/write interest for backpressure.
final class EchoServerHandler: EventHandler {
    let transport: PlainTransport
    let buffer = ByteBuffer(initialCapacity: 4096, maxCapacity: 16 * 1024)
    var registration: Registration?
    var sawEOF = false
    var writeInterestToggles = 0
    var closed = false

    init(socket: TCPSocket) { transport = PlainTransport(socket) }

    func readable(loop: EventLoop) {
        let space = buffer.maxCapacity - buffer.readableBytes
        if space > 0 {
            switch try? transport.read(into: buffer, maxBytes: space) {
            case .processed(0)?: sawEOF = true
            case .processed?, .wouldBlock?: break
            case nil: return finish(loop)
            }
        }
        flush(loop)
    }

    func writable(loop: EventLoop) { flush(loop) }

    private func flush(_ loop: EventLoop) {
        if buffer.readableBytes > 0, (try? transport.write(from: buffer)) == nil {
            return finish(loop)
        }
        if sawEOF && buffer.readableBytes == 0 {
            try? transport.shutdownWrite()
            return finish(loop)
        }
        var interest: Interest = []
        if !sawEOF && buffer.readableBytes < buffer.maxCapacity { interest.insert(.readable) }
        if buffer.readableBytes > 0 { interest.insert(.writable) }
        guard let registration else { return }
        if interest.contains(.writable) && !(loop.interest(of: registration)?.contains(.writable) ?? false) {
            writeInterestToggles += 1
        }
        try? loop.setInterest(interest, for: registration)
    }

    private func finish(_ loop: EventLoop) {
        guard let registration, !closed else { return }
        closed = true
        try? loop.deregister(registration)
        try? transport.close()
    }
}

/// Connects, sends `payload` with partial writes, and collects the echo until end of file.
final class EchoClientHandler: EventHandler {
    let socket: TCPSocket
    let payload: [UInt8]
    var sent = 0
    var received: [UInt8] = []
    var connected: Bool
    var registration: Registration?
    var partialWrites = 0
    var done = false
    var failure: (any Error)?

    init(socket: TCPSocket, connected: Bool, payload: [UInt8]) {
        self.socket = socket
        self.connected = connected
        self.payload = payload
        received.reserveCapacity(payload.count)
    }

    /// Reads only while its own writes are stalled (or everything is sent), and then only 2 KiB per wake-up, so the
    /// echo path backs up and the server must wait for writability. Reading whenever writes stall avoids deadlock.
    func writable(loop: EventLoop) {
        do {
            if !connected {
                try socket.finishConnect()
                connected = true
            }
            var writeStalled = false
            while sent < payload.count && !writeStalled {
                let result = try payload.withUnsafeBytes { bytes in
                    try socket.write(UnsafeRawBufferPointer(rebasing: bytes[sent...]))
                }
                switch result {
                case .processed(let count):
                    sent += count
                    writeStalled = sent < payload.count
                case .wouldBlock:
                    writeStalled = true
                }
            }
            if writeStalled { partialWrites += 1 }
            if sent == payload.count {
                try socket.shutdownWrite()
                try loop.setInterest(.readable, for: registration!)
            } else {
                try loop.setInterest(writeStalled ? [.writable, .readable] : .writable, for: registration!)
            }
        } catch {
            fail(error, loop)
        }
    }

    func readable(loop: EventLoop) {
        var chunk = [UInt8](repeating: 0, count: 2048)
        do {
            let result = try chunk.withUnsafeMutableBytes { try socket.read(into: $0) }
            switch result {
            case .processed(0):
                done = true
                try loop.deregister(registration!)
                try socket.close()
            case .processed(let count):
                received.append(contentsOf: chunk[..<count])
            case .wouldBlock:
                break
            }
        } catch {
            fail(error, loop)
        }
    }

    private func fail(_ error: any Error, _ loop: EventLoop) {
        failure = error
        done = true
        if let registration { try? loop.deregister(registration) }
    }
}

@Suite struct EchoTests {
    @Test func echoesOneMebibyteWithPartialWrites() throws {
        let loop = try EventLoop()
        let listener = try TCPListener(bindingTo: SocketAddress.parse("127.0.0.1:0"))
        #expect(listener.localPort != 0)
        var servers: [EchoServerHandler] = []
        let acceptor = AcceptHandler(listener: listener) { loop, socket in
            // Small send buffers guarantee short writes on both sides.
            try socket.setOption(level: cl_sol_socket(), name: cl_so_sndbuf(), value: 32 * 1024)
            try socket.setNoDelay()
            let handler = EchoServerHandler(socket: socket)
            handler.registration = try loop.register(fd: socket.fd, interest: .readable, handler: handler)
            servers.append(handler)
        }
        let listenRegistration = try loop.register(fd: listener.fd, interest: .readable, handler: acceptor)

        var generator = SystemRandomNumberGenerator()
        let payload = (0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let (socket, progress) = try TCPSocket.connect(to: listener.localAddress)
        try socket.setOption(level: cl_sol_socket(), name: cl_so_sndbuf(), value: 32 * 1024)
        try socket.setOption(level: cl_sol_socket(), name: cl_so_rcvbuf(), value: 32 * 1024)
        let client = EchoClientHandler(socket: socket, connected: progress == .connected, payload: payload)
        client.registration = try loop.register(fd: socket.fd, interest: .writable, handler: client)

        #expect(try loop.run(until: { client.done }, deadline: .seconds(60)))
        #expect(client.failure == nil)
        #expect(client.received.count == payload.count)
        // A Bool, not `==` on arrays: a failing array comparison would make the test library diff 1 MiB.
        let identical = client.received.elementsEqual(payload)
        let firstMismatch = zip(client.received, payload).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(identical, "first mismatch at \(String(describing: firstMismatch))")
        #expect(acceptor.accepted == 1)
        #expect(client.partialWrites > 0, "the client never hit a short write")
        #expect(servers.first?.writeInterestToggles ?? 0 > 0, "the server never had to wait for writability")
        #expect(servers.first?.closed == true)
        try loop.deregister(listenRegistration)
    }

    @Test func connectToClosedPortFailsThroughFinishConnect() throws {
        let loop = try EventLoop()
        // Bind then close to find a port with nobody listening.
        let probe = try TCPListener(bindingTo: SocketAddress.parse("127.0.0.1:0"))
        let address = probe.localAddress
        try probe.close()
        let (socket, progress) = try TCPSocket.connect(to: address)
        var error: (any Error)?
        final class Waiter: EventHandler {
            let socket: TCPSocket
            var result: Result<Void, any Error>?
            init(socket: TCPSocket) { self.socket = socket }
            func readable(loop: EventLoop) {}
            func writable(loop: EventLoop) {
                // EPOLLERR and EPOLLOUT arrive together; only the first look at SO_ERROR sees the error.
                if result == nil { result = Result { try socket.finishConnect() } }
            }
            func error(loop: EventLoop) { writable(loop: loop) }
        }
        if progress == .inProgress {
            let waiter = Waiter(socket: socket)
            let registration = try loop.register(fd: socket.fd, interest: .writable, handler: waiter)
            #expect(try loop.run(until: { waiter.result != nil }))
            if case .failure(let failure)? = waiter.result { error = failure }
            try loop.deregister(registration)
        }
        let ioError = try #require(error as? IOError)
        #expect(ioError.errnoCode == ECONNREFUSED)
    }
}
