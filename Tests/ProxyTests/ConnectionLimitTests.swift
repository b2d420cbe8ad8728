import Glibc
import Reactor
import Testing
@testable import Proxy

// `--max-connections`: a worker keeps at most that many client connections. A new connection at the limit closes
// the longest-idle one; with every connection busy, accepting pauses and new connections wait in the backlog until
// one closes. A real worker and real sockets (WorkerBench); every wait runs the loop until a condition holds.

/// What a client socket has seen, without waiting: `eof` (the proxy closed it), `data`, or `nothing` yet.
private enum Seen: Equatable { case nothing, data, eof }

private func peek(_ fd: Int32) -> Seen {
    var byte: UInt8 = 0
    let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
    if n > 0 { return .data }
    if n == 0 { return .eof }
    return errno == EAGAIN || errno == EWOULDBLOCK ? .nothing : .eof   // a reset counts as closed
}

/// A worker with `--max-connections limit`, counting /metrics (an admin address set, never bound here).
private func limitedBench(_ limit: Int) throws -> WorkerBench {
    try WorkerBench { config in
        config.maxConnections = limit
        config.admin = try? SocketAddress.resolve("127.0.0.1:9")
    }
}

@Suite struct ConnectionLimitTests {
    @Test func aNewConnectionClosesTheLongestIdleOne() throws {
        let bench = try limitedBench(2)
        let first = try connectClient(port: bench.proxyPort)
        defer { close(first) }
        #expect(try bench.run { bench.worker.clients.count == 1 })
        let second = try connectClient(port: bench.proxyPort)
        defer { close(second) }
        #expect(try bench.run { bench.worker.clients.count == 2 })
        // At the limit, with no connection waiting: nobody is closed.
        for _ in 0..<3 { _ = try bench.loop.runOnce(timeout: .milliseconds(20)) }
        #expect(peek(first) == .nothing && peek(second) == .nothing)
        #expect(bench.worker.metrics.connectionLimit == .init())

        let third = try connectClient(port: bench.proxyPort)
        defer { close(third) }
        #expect(try bench.run { peek(first) == .eof })
        #expect(bench.worker.clients.count == 2)
        #expect(peek(second) == .nothing)
        #expect(bench.worker.metrics.connectionLimit.closedIdle == 1)
        // The new connection is served: its request reaches the upstream.
        try send(third, "GET /third HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(try bench.receiveUpstream { $0.starts(with: Array("GET /third ".utf8)) })
    }

    @Test func busyConnectionsMakeNewOnesWaitInTheBacklog() throws {
        let bench = try limitedBench(1)
        let busy = try connectClient(port: bench.proxyPort)
        try send(busy, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nabc")
        #expect(try bench.receiveUpstream { $0.suffix(3) == Array("abc".utf8) })
        let waiting = try connectClient(port: bench.proxyPort)   // the kernel completes it from the backlog
        defer { close(waiting) }
        try send(waiting, "GET /waiting HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(try bench.run { bench.worker.metrics.connectionLimit.paused == 1 })
        #expect(bench.worker.clients.count == 1)
        #expect(bench.worker.metrics.connectionLimit.closedIdle == 0)
        #expect(peek(busy) == .nothing && peek(waiting) == .nothing)

        // The busy client gives up: its connection closes, and the waiting one is accepted and served.
        close(busy)
        bench.upstream.map { try? $0.close() }
        bench.upstream = nil
        #expect(try bench.receiveUpstream { $0.starts(with: Array("GET /waiting ".utf8)) })
        #expect(bench.worker.clients.count == 1)
    }

    @Test func aConnectionThatBecameIdleMakesRoomLater() throws {
        let bench = try limitedBench(1)
        let first = try connectClient(port: bench.proxyPort)
        defer { close(first) }
        try send(first, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhel")
        #expect(try bench.receiveUpstream { $0.suffix(3) == Array("hel".utf8) })
        let second = try connectClient(port: bench.proxyPort)
        defer { close(second) }
        #expect(try bench.run { bench.worker.metrics.connectionLimit.paused == 1 })
        // The first request ends and its connection stays open, idle: no connection closed to wake the worker,
        // so its retry timer finds the idle one and closes it for the waiting one.
        try send(first, "lo")
        #expect(try bench.receiveUpstream { $0.suffix(2) == Array("lo".utf8) })
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
        let upstream = try #require(bench.upstream)
        _ = try answer.withUnsafeBytes { try upstream.write($0) }
        #expect(try bench.run { readClient(first).closed })
        #expect(bench.worker.metrics.connectionLimit.closedIdle == 1)
        #expect(try bench.run { bench.worker.clients.count == 1 && peek(second) == .nothing })
    }
}
