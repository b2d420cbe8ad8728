import Glibc
import Testing
@testable import Reactor

@Suite struct SocketAddressTests {
    @Test func parsesIPv4IPv6AndLocalhost() throws {
        let v4 = try SocketAddress.parse("127.0.0.1:8080")
        #expect(v4.family == .inet && v4.ip == "127.0.0.1" && v4.port == 8080)
        #expect(v4.description == "127.0.0.1:8080")
        let v6 = try SocketAddress.parse("[::1]:8080")
        #expect(v6.family == .inet6 && v6.ip == "::1" && v6.port == 8080)
        #expect(v6.description == "[::1]:8080")
        let local = try SocketAddress.parse("localhost:9000")
        #expect(local.description == "127.0.0.1:9000")
    }

    @Test(arguments: ["127.0.0.1", "127.0.0.1:", ":80", "1.2.3.4:65536", "[::1:80", "::1:80", "[127.0.0.1]:80",
                      "example.invalid:80", "1.2.3.4:8x"])
    func rejectsMalformedAddresses(_ text: String) {
        #expect(throws: SocketError.self) { try SocketAddress.parse(text) }
    }

    @Test func bindFailureNamesTheAddress() throws {
        let first = try TCPListener(bindingTo: SocketAddress.parse("127.0.0.1:0"))
        let taken = first.localAddress
        do {
            _ = try TCPListener(bindingTo: taken, options: .init(reuseAddress: false))
            Issue.record("second bind unexpectedly succeeded")
        } catch let error as SocketError {
            #expect(error == .addressInUse(taken.description))
            #expect(error.description == "address already in use: \(taken)")
        }
    }

    /// The start-up probe (`Options.addressProbe`) finds a port that another socket listens on, SO_REUSEPORT or
    /// not, and while it is open it completes no handshake: a client that connects in that instant is refused and
    /// retries, where a listening probe queued it and reset it on closing.
    @Test func theAddressProbeFindsListenersAndAcceptsNothing() throws {
        let serving = [TCPListener.Options(reuseAddress: false),
                       TCPListener.Options(reuseAddress: true, reusePort: true)]
        for options in serving {
            let serving = try TCPListener(bindingTo: SocketAddress.parse("127.0.0.1:0"), options: options)
            #expect(throws: SocketError.addressInUse(serving.localAddress.description)) {
                _ = try TCPListener(bindingTo: serving.localAddress, options: .addressProbe)
            }
        }
        let probe = try TCPListener(bindingTo: SocketAddress.parse("127.0.0.1:0"), options: .addressProbe)
        #expect(blockingConnect(port: probe.localPort) == ECONNREFUSED)
        try probe.close()
    }

    @Test func acceptOnEmptyListenerIsWouldBlockAndPeerAddressIsFormatted() throws {
        let loop = try EventLoop()
        let listener = try TCPListener(bindingTo: SocketAddress.parse("127.0.0.1:0"))
        guard case .wouldBlock = try listener.accept() else {
            Issue.record("accept on an empty queue must be .wouldBlock")
            return
        }
        let (client, _) = try TCPSocket.connect(to: listener.localAddress)
        var accepted: TCPSocket?
        let acceptor = AcceptHandler(listener: listener) { _, socket in accepted = socket }
        let registration = try loop.register(fd: listener.fd, interest: .readable, handler: acceptor)
        #expect(try loop.run(until: { accepted != nil }))
        try loop.deregister(registration)
        #expect(accepted?.peerAddress?.hasPrefix("127.0.0.1:") == true)
        #expect(client.peerAddress == listener.localAddress.description)
    }

    @Test func anAdoptedBoundSocketListensAndAccepts() throws {
        let loop = try EventLoop()
        var options = TCPListener.Options(reuseAddress: true, reusePort: true)
        options.listens = false
        let parent = try TCPListener(bindingTo: SocketAddress.parse("127.0.0.1:0"), options: options)
        #expect(parent.localPort != 0)
        #expect(blockingConnect(port: parent.localPort) == ECONNREFUSED)  // bound, not yet listening

        let inherited = dup(parent.fd)  // what a child process would inherit
        let listener = try TCPListener(adopting: inherited)
        #expect(listener.localAddress.description == parent.localAddress.description)
        #expect(fcntl(inherited, F_GETFD) & FD_CLOEXEC != 0)
        #expect(fcntl(inherited, F_GETFL) & O_NONBLOCK != 0)
        let (client, _) = try TCPSocket.connect(to: listener.localAddress)
        var accepted: TCPSocket?
        let acceptor = AcceptHandler(listener: listener) { _, socket in accepted = socket }
        let registration = try loop.register(fd: listener.fd, interest: .readable, handler: acceptor)
        #expect(try loop.run(until: { accepted != nil }))
        try loop.deregister(registration)
        _ = client
    }

    @Test func adoptingSomethingElseThrows() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        #expect(throws: IOError.self) { try TCPListener(adopting: fds[0]) }
        #expect(throws: IOError.self) { try TCPListener(adopting: 1_000_000) }  // not open: an error, not a trap
    }

    private func blockingConnect(port: UInt16) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return rc == 0 ? 0 : errno
    }

    @Test func ipv6LoopbackBindsWhenAvailable() throws {
        let address = try SocketAddress.parse("[::1]:0")
        do {
            let listener = try TCPListener(bindingTo: address)
            #expect(listener.localAddress.family == .inet6)
            #expect(listener.localPort != 0)
        } catch let error as SocketError {
            // Hosts without IPv6 loopback cannot run this; the message must still be the operator-facing one.
            #expect(error.description.hasPrefix("address not available"))
        }
    }
}
