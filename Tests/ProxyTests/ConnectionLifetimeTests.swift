import Glibc
import Reactor
import Testing
@testable import Proxy

// A client connection and the upstream connection attached to it hold each other strongly during an exchange
// (UpstreamConnection.client is strong: a weak reference would give every client connection a side table, and
// each of its retains the runtime's slow path). The cycle must end when the exchange does. These tests run a
// real worker on its own event loop, with real sockets on 127.0.0.1, and check that the client connection is
// freed once it has closed: after an upload the client aborts, and after a response whose upstream connection
// went back to the pool. (WorkerBench is in WorkerBench.swift.)

@Suite struct ConnectionLifetimeTests {
    @Test func aClientThatAbortsMidUploadIsFreedWithItsUpstreamConnection() throws {
        let bench = try WorkerBench()
        let fd = try connectClient(port: bench.proxyPort)
        try send(fd, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\n"
            + "Content-Length: 100000\r\n\r\n" + String(repeating: "x", count: 1000))
        // The request streams upstream: the exchange holds an attached upstream connection.
        #expect(try bench.receiveUpstream { $0.count > 1000 })
        #expect(bench.worker.clients.count == 1)
        weak let client = bench.worker.clients.values.first
        #expect(client != nil)
        close(fd)   // the upload ends short: the exchange is aborted and both connections close
        #expect(try bench.run { bench.worker.clients.isEmpty })
        #expect(try bench.run { client == nil })
    }

    @Test func aClientIsFreedAfterItsUpstreamConnectionWentBackToThePool() throws {
        let bench = try WorkerBench()
        let fd = try connectClient(port: bench.proxyPort)
        defer { close(fd) }
        try send(fd, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello")
        #expect(try bench.receiveUpstream { $0.suffix(5) == Array("hello".utf8) })
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
