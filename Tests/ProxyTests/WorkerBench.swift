import Glibc
import Reactor
import Testing
@testable import Proxy

// A real worker on its own event loop, with real sockets on 127.0.0.1, for tests of what it does with
// connections (ConnectionLifetimeTests, ConnectionLimitTests).

/// A worker listening on 127.0.0.1, whose one upstream is a listener the test answers by hand.
final class WorkerBench {
    let loop: EventLoop
    let worker: Worker
    let upstreamListener: TCPListener
    let proxyPort: UInt16
    var upstream: TCPSocket?

    /// `configure` adjusts the configuration before the worker starts (limits, `admin` to count metrics);
    /// `listenerOptions` sets socket options on the proxy's listener, which accepted sockets inherit.
    init(configure: (inout ProxyConfiguration) -> Void = { _ in },
         listenerOptions: (TCPListener) throws -> Void = { _ in }) throws {
        loop = try EventLoop()
        upstreamListener = try TCPListener(bindingTo: try SocketAddress.resolve("127.0.0.1:0"))
        let listener = try TCPListener(bindingTo: try SocketAddress.resolve("127.0.0.1:0"))
        try listenerOptions(listener)
        proxyPort = listener.localPort
        let authority = "127.0.0.1:\(upstreamListener.localPort)"
        var config = ProxyConfiguration(listen: listener.localAddress,
                                        upstream: .init(address: try SocketAddress.resolve(authority),
                                                        authority: authority))
        config.audit = nil
        configure(&config)
        worker = Worker(loop: loop, config: config, stats: ProxyStats(), policy: nil, quarantine: nil, audit: nil,
                        tlsServer: try config.tls.map { try ProxyServer.tlsServerContext($0) })
        try worker.start(inherited: [listener])
    }

    /// Runs the loop until `condition` holds (each iteration waits for readiness, at most 100 ms); false after
    /// `seconds` (a bound on a hang, not a measure: moving tens of MiB through a debug build on a loaded machine
    /// takes a good part of the default).
    func run(seconds: UInt64 = 20, until condition: () throws -> Bool) throws -> Bool {
        let limit = loop.now() + seconds * 1_000_000_000
        while try !condition() {
            if loop.now() >= limit { return false }
            _ = try loop.runOnce(timeout: .milliseconds(100))
        }
        return true
    }

    /// Accepts the proxy's upstream connection once it has dialled.
    func acceptUpstream() throws -> Bool {
        if upstream != nil { return true }
        if case .processed(let socket) = try upstreamListener.accept() { upstream = socket }
        return upstream != nil
    }

    /// Runs the loop, accepting the proxy's upstream connection once it dials, until what the upstream received
    /// since this call satisfies `done`; false after 20 s.
    func receiveUpstream(until done: ([UInt8]) -> Bool) throws -> Bool {
        var received: [UInt8] = []
        return try run {
            guard try acceptUpstream() else { return false }
            received += try readUpstream()
            return done(received)
        }
    }

    /// Reads what the upstream socket has (nothing when it would block).
    func readUpstream() throws -> [UInt8] {
        guard let upstream else { return [] }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let result = try buffer.withUnsafeMutableBytes { try upstream.read(into: $0) }
        guard case .processed(let n) = result else { return [] }
        return Array(buffer[..<n])
    }
}

/// A blocking client socket connected to the proxy (the kernel completes the handshake from the backlog).
func connectClient(port: UInt16) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(fd >= 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    try #require(rc == 0)
    return fd
}

func send(_ fd: Int32, _ text: String) throws {
    let bytes = Array(text.utf8)
    let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
    try #require(sent == bytes.count)
}

/// What a client socket has received so far, read without waiting, and whether the proxy closed it (EOF or a
/// reset).
func readClient(_ fd: Int32) -> (bytes: [UInt8], closed: Bool) {
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        if n > 0 { out += buffer[..<n]; continue }
        return (out, n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
    }
}
