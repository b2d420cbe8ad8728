import Glibc
import Reactor
import Testing
@testable import Proxy

// A client connection and the upstream connection attached to it hold each other strongly during an exchange
// (UpstreamConnection.client is strong: a weak reference would give every client connection a side table, and
// each of its retains the runtime's slow path). The cycle must end when the exchange does. These tests run a
// real worker on its own event loop, with real sockets on 127.0.0.1, and check that the client connection is
// freed once it has closed: after an upload the client aborts, and after a response whose upstream connection
// went back to the pool.

/// A worker listening on 127.0.0.1, whose one upstream is a listener the test answers by hand.
private final class Bench {
    let loop: EventLoop
    let worker: Worker
    let upstreamListener: TCPListener
    let proxyPort: UInt16
    var upstream: TCPSocket?

    init() throws {
        loop = try EventLoop()
        upstreamListener = try TCPListener(bindingTo: try SocketAddress.resolve("127.0.0.1:0"))
        let listener = try TCPListener(bindingTo: try SocketAddress.resolve("127.0.0.1:0"))
        proxyPort = listener.localPort
        let authority = "127.0.0.1:\(upstreamListener.localPort)"
        var config = ProxyConfiguration(listen: listener.localAddress,
                                        upstream: .init(address: try SocketAddress.resolve(authority),
                                                        authority: authority))
        config.audit = nil
        worker = Worker(loop: loop, config: config, stats: ProxyStats(), policy: nil, quarantine: nil, audit: nil)
        try worker.start(inherited: [listener])
    }

    /// Runs the loop until `condition` holds (each iteration waits for readiness, at most 100 ms); false after
    /// 20 s.
    func run(until condition: () throws -> Bool) throws -> Bool {
        let limit = loop.now() + 20_000_000_000
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
private func connectClient(port: UInt16) throws -> Int32 {
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

private func send(_ fd: Int32, _ text: String) throws {
    let bytes = Array(text.utf8)
    let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
    try #require(sent == bytes.count)
}

@Suite struct ConnectionLifetimeTests {
    @Test func aClientThatAbortsMidUploadIsFreedWithItsUpstreamConnection() throws {
        let bench = try Bench()
        let fd = try connectClient(port: bench.proxyPort)
        try send(fd, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\n"
            + "Content-Length: 100000\r\n\r\n" + String(repeating: "x", count: 1000))
        // The request streams upstream: the exchange holds an attached upstream connection.
        var received: [UInt8] = []
        #expect(try bench.run {
            guard try bench.acceptUpstream() else { return false }
            received += try bench.readUpstream()
            return received.count > 1000
        })
        #expect(bench.worker.clients.count == 1)
        weak let client = bench.worker.clients.values.first
        #expect(client != nil)
        close(fd)   // the upload ends short: the exchange is aborted and both connections close
        #expect(try bench.run { bench.worker.clients.isEmpty })
        #expect(try bench.run { client == nil })
    }

    @Test func aClientIsFreedAfterItsUpstreamConnectionWentBackToThePool() throws {
        let bench = try Bench()
        let fd = try connectClient(port: bench.proxyPort)
        defer { close(fd) }
        try send(fd, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello")
        var received: [UInt8] = []
        #expect(try bench.run {
            guard try bench.acceptUpstream() else { return false }
            received += try bench.readUpstream()
            return received.suffix(5) == Array("hello".utf8)
        })
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
        let upstream = try #require(bench.upstream)
        let written = try answer.withUnsafeBytes { try upstream.write($0) }
        guard case .processed(let n) = written else { Issue.record("the upstream socket would block"); return }
        #expect(n == answer.count)
        weak let client = bench.worker.clients.values.first
        #expect(client != nil)
        // The response reaches the client and the upstream connection is pooled, detached from the client.
        #expect(try bench.run { bench.worker.idle.count == 1 })
        #expect(bench.worker.idle.allSatisfy { $0.client == nil })
        shutdown(fd, Int32(SHUT_WR))
        #expect(try bench.run { bench.worker.clients.isEmpty })
        #expect(try bench.run { client == nil })
    }
}
