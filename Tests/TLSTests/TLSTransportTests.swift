// The transport itself: bulk data with backpressure, close_notify and EOF, plain HTTP on the TLS port, garbage.
import Glibc
import Reactor
import Testing
@testable import TLS

@Suite struct TLSTransportTests {
    /// Moves `outgoing` through `transport` while reading into `incoming`; returns whether anything moved.
    private func step(_ transport: TLSTransport, outgoing: [UInt8], sent: inout Int, incoming: inout [UInt8],
                      maxPending: inout Int) throws -> Bool {
        var progressed = false
        if sent < outgoing.count {
            let result = try outgoing.withUnsafeBytes {
                try transport.write(UnsafeRawBufferPointer(rebasing: $0[sent...]))
            }
            if case .processed(let n) = result, n > 0 {
                sent += n
                progressed = true
            }
        }
        maxPending = max(maxPending, transport.pendingCiphertextBytes)
        if case .processed(let n) = try transport.flush(), n > 0 { progressed = true }
        var scratch = [UInt8](repeating: 0, count: 4096)
        while case .processed(let n) = try scratch.withUnsafeMutableBytes({ try transport.read(into: $0) }), n > 0 {
            incoming += scratch[0..<n]
            progressed = true
        }
        return progressed
    }

    private func pattern(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &+ ($0 >> 12)) }
    }

    private func roundTrip(_ client: TLSTransport, _ server: TLSTransport, size: Int) throws -> Int {
        let up = pattern(size, seed: 1), down = pattern(size, seed: 7)
        var upSent = 0, downSent = 0
        var atServer: [UInt8] = [], atClient: [UInt8] = []
        var maxPending = 0
        var idle = 0
        while (atServer.count < size || atClient.count < size) && idle < 1000 {
            let a = try step(client, outgoing: up, sent: &upSent, incoming: &atClient, maxPending: &maxPending)
            let b = try step(server, outgoing: down, sent: &downSent, incoming: &atServer, maxPending: &maxPending)
            idle = a || b ? 0 : idle + 1
        }
        #expect(atServer == up)
        #expect(atClient == down)
        return maxPending
    }

    @Test(arguments: [TLSVersion.tls12, .tls13])
    func oneMebibyteBothWaysThroughSmallWrites(version: TLSVersion) throws {
        var serverConfiguration = Certificates.shared.serverConfiguration()
        serverConfiguration.minimumVersion = .tls12
        var clientConfiguration = Certificates.shared.clientConfiguration()
        clientConfiguration.maximumVersion = version
        let (client, server, lowers) = try makePair(server: serverConfiguration, client: clientConfiguration)
        for lower in [lowers.client, lowers.server] {
            lower.maxWrite = 700
            lower.capacity = 3000
        }
        #expect(handshake(client, server).clientError == nil)
        let maxPending = try roundTrip(client, server, size: 1 << 20)
        #expect(maxPending <= 16 * 1024 + 256, "pending ciphertext must stay within one record")
        #expect(lowers.client.largestWrite <= 700)
    }

    /// A server flight larger than the outgoing ring stops OpenSSL with WANT_WRITE; the socket also blocks, so
    /// `wantsWritable` must stay true and `flush()` must resume the handshake once the ring has drained.
    @Test(arguments: [TLSVersion.tls12, .tls13])
    func handshakeFlightLargerThanTheOutgoingRing(version: TLSVersion) throws {
        var serverConfiguration = Certificates.shared.serverConfiguration()
        serverConfiguration.minimumVersion = .tls12
        var clientConfiguration = Certificates.shared.clientConfiguration()
        clientConfiguration.maximumVersion = version
        let serverContext = try TLSServerContext(configuration: serverConfiguration)
        let clientContext = try TLSClientContext(configuration: clientConfiguration)
        let lowers = MemoryTransport.pair()
        lowers.server.capacity = 256
        let client = try clientContext.makeTransport(over: lowers.client, serverName: "a.test")
        let server = try TLSTransport(context: serverContext.state.entries[0].context, role: .server,
                                      lower: lowers.server, owner: serverContext, outgoingRingSize: 256)
        var scratch = [UInt8](repeating: 0, count: 4096)
        _ = try scratch.withUnsafeMutableBytes { try client.read(into: $0) }  // sends the ClientHello
        _ = try scratch.withUnsafeMutableBytes { try server.read(into: $0) }  // flight stops: ring and socket full
        #expect(server.wantsWritable)
        // Only writable events from here on, as a driver waiting for the client would get: flush() alone must
        // finish the flight.
        for _ in 0..<100 where server.wantsWritable {
            _ = try server.flush()
            _ = try scratch.withUnsafeMutableBytes { try client.read(into: $0) }
        }
        #expect(!server.wantsWritable)
        if version == .tls13 { #expect(client.isHandshakeComplete) }
        let outcome = handshake(client, server)
        #expect(outcome.clientError == nil)
        #expect(outcome.serverError == nil)
        #expect(client.isHandshakeComplete && server.isHandshakeComplete)
        let maxPending = try roundTrip(client, server, size: 64 * 1024)
        #expect(maxPending <= 16 * 1024 + 256)
    }

    @Test func writeBeforeHandshakeCompletesDrivesIt() throws {
        let (client, server, _) = try makePair()
        let request = Array("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n".utf8)
        var sent = 0
        var received: [UInt8] = []
        for _ in 0..<20 where sent < request.count {
            let result = try request.withUnsafeBytes { try client.write(UnsafeRawBufferPointer(rebasing: $0[sent...])) }
            if case .processed(let n) = result { sent += n }
            received += try server.readAll()
        }
        #expect(sent == request.count)
        received += try server.readAll()
        #expect(received == request)
    }

    @Test func closeNotifyReadsAsEndOfFile() throws {
        let (client, server, lowers) = try makePair()
        #expect(handshake(client, server).clientError == nil)
        _ = try Array("bye".utf8).withUnsafeBytes { try client.write($0) }
        try client.shutdownWrite()
        #expect(lowers.client.outbox.writeShut)
        #expect(!client.wantsWritable)
        #expect(throws: TLSError.self) { _ = try Array("x".utf8).withUnsafeBytes { try client.write($0) } }
        var scratch = [UInt8](repeating: 0, count: 64)
        #expect(try scratch.withUnsafeMutableBytes { try server.read(into: $0) } == .processed(3))
        #expect(try scratch.withUnsafeMutableBytes { try server.read(into: $0) } == .processed(0))
        #expect(try scratch.withUnsafeMutableBytes { try server.read(into: $0) } == .processed(0))
        // The server answers and closes too; the client sees both.
        try server.shutdownWrite()
        #expect(try scratch.withUnsafeMutableBytes { try client.read(into: $0) } == .processed(0))
        try client.close()
        try server.close()
        #expect(lowers.client.closed && lowers.server.closed)
        #expect(throws: TLSError.self) { _ = try scratch.withUnsafeMutableBytes { try server.read(into: $0) } }
    }

    @Test func shutdownWaitsForTheSocketThenShutsItsWriteSide() throws {
        let (client, server, lowers) = try makePair()
        #expect(handshake(client, server).clientError == nil)
        lowers.client.capacity = lowers.client.outbox.count  // the socket is full
        try client.shutdownWrite()
        #expect(client.wantsWritable)
        #expect(!lowers.client.outbox.writeShut)
        #expect(try client.flush() == .wouldBlock)
        lowers.client.capacity = .max
        #expect(try client.flush() == .processed(24))  // the close_notify record, TLS 1.3
        #expect(lowers.client.outbox.writeShut)
        #expect(!client.wantsWritable)
    }

    @Test func endOfFileWithoutCloseNotifyReadsAsEndOfFile() throws {
        let (client, server, lowers) = try makePair()
        #expect(handshake(client, server).clientError == nil)
        lowers.client.outbox.writeShut = true
        var scratch = [UInt8](repeating: 0, count: 64)
        #expect(try scratch.withUnsafeMutableBytes { try server.read(into: $0) } == .processed(0))
        // EOF in the middle of a handshake reads as end of file too (a port scanner, a health check).
        let (_, server2, lowers2) = try makePair()
        lowers2.client.outbox.writeShut = true
        #expect(try scratch.withUnsafeMutableBytes { try server2.read(into: $0) } == .processed(0))
    }

    @Test(arguments: ["GET / HTTP/1.1\r\nHost: a\r\n\r\n", "POST /up HTTP/1.1\r\n", "HEAD / HTTP/1.0\r\n\r\n",
                      "PUT /x HTTP/1.1\r\n", "DELETE / HTTP/1.1\r\n", "OPTIONS * HTTP/1.1\r\n",
                      "PATCH / HTTP/1.1\r\n", "CONNECT a:443 HTTP/1.1\r\n", "G"])
    func plainHTTPIsDetected(request: String) throws {
        let (_, server, lowers) = try makePair()
        Array(request.utf8).withUnsafeBytes { lowers.client.outbox.append($0) }
        var scratch = [UInt8](repeating: 0, count: 64)
        let error = #expect(throws: TLSError.self) {
            _ = try scratch.withUnsafeMutableBytes { try server.read(into: $0) }
        }
        #expect(error?.code == .plainHTTP)
        // The caller answers in clear text on the lower transport.
        let answer = Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8)
        #expect(try answer.withUnsafeBytes { try server.lower.write($0) } == .processed(answer.count))
    }

    @Test(arguments: [
        [0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5],
        [0x16, 0x03, 0x03, 0xff, 0xff] + [UInt8](repeating: 0x41, count: 300),
        [0x17, 0x03, 0x03, 0x00, 0x10] + [UInt8](repeating: 0, count: 16),
        [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28],
        [0x80, 0x2e, 0x01, 0x00, 0x02, 0x00, 0x15, 0x00, 0x00, 0x00, 0x10],
        [0x00, 0x00, 0x00, 0x00],
        [0x16, 0x03, 0x03, 0x00, 0x04, 0x01, 0xff, 0xff, 0xff],
    ] as [[UInt8]])
    func garbageThrowsNeverTraps(bytes: [UInt8]) throws {
        let (_, server, lowers) = try makePair()
        bytes.withUnsafeBytes { lowers.client.outbox.append($0) }
        lowers.client.outbox.writeShut = true
        var scratch = [UInt8](repeating: 0, count: 64)
        do {
            let result = try scratch.withUnsafeMutableBytes { try server.read(into: $0) }
            #expect(result == .processed(0), "a truncated record with EOF may read as end of file")
        } catch let error as TLSError {
            #expect(error.code == .handshakeFailed || error.code == .protocolError)
        }
    }

    @Test func garbageAfterTheHandshakeIsAProtocolError() throws {
        let (client, server, lowers) = try makePair()
        #expect(handshake(client, server).clientError == nil)
        let junk: [UInt8] = [0x17, 0x03, 0x03, 0x00, 0x20] + [UInt8](repeating: 0x5a, count: 32)
        junk.withUnsafeBytes { lowers.client.outbox.append($0) }
        var scratch = [UInt8](repeating: 0, count: 64)
        let error = #expect(throws: TLSError.self) {
            _ = try scratch.withUnsafeMutableBytes { try server.read(into: $0) }
        }
        #expect(error?.code == .protocolError)
    }

    @Test func overRealSocketsWithASmallSendBuffer() throws {
        var fds: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds) == 0)
        let clientSocket = TCPSocket(adopting: fds[0]), serverSocket = TCPSocket(adopting: fds[1])
        for socket in [clientSocket, serverSocket] {
            try socket.setOption(level: SOL_SOCKET, name: SO_SNDBUF, value: 4096)
        }
        let serverContext = try TLSServerContext(configuration: Certificates.shared.serverConfiguration())
        let clientContext = try TLSClientContext(configuration: Certificates.shared.clientConfiguration())
        let client = try clientContext.makeTransport(socket: clientSocket, serverName: "localhost")
        let server = try serverContext.makeTransport(socket: serverSocket)
        #expect(server.fd == fds[1])
        let outcome = handshake(client, server)
        #expect(outcome.clientError == nil && outcome.serverError == nil)
        _ = try roundTrip(client, server, size: 256 * 1024)
        try client.close()
        try server.close()
        #expect(!clientSocket.isOpen && !serverSocket.isOpen)
    }
}
