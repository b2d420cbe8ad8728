import Foundation
import Glibc
import Reactor
import TLS
import Testing
@testable import Proxy

// A TLS client whose response ends the connection (`Connection: close`). The TLS transport takes a record's
// plaintext even when the socket takes only part of its ciphertext (the rest waits, at most one record), so the
// machine counts the response as delivered while up to 16 KiB of it are still in Formwall. Closing then cut them.

/// A self-signed certificate for localhost, made by the openssl CLI in a fresh 0700 directory.
private func localhostCertificate() throws -> (certificate: String, key: String) {
    var template = Array("/tmp/formwall-tls-close-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    let directory = String(cString: try #require(made))
    let openssl = Process()
    openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    openssl.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                         "-keyout", "\(directory)/key.pem", "-out", "\(directory)/cert.pem", "-subj", "/CN=localhost",
                         "-days", "2"]
    openssl.standardOutput = FileHandle.nullDevice
    openssl.standardError = FileHandle.nullDevice
    try openssl.run()
    openssl.waitUntilExit()
    try #require(openssl.terminationStatus == 0)
    return ("\(directory)/cert.pem", "\(directory)/key.pem")
}

private let bodySize = 300_000
private let payload = (0..<bodySize).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 17) }

/// A worker terminating TLS whose accepted sockets take 4 KiB at a time (SO_SNDBUF on its listener), so nearly
/// every record's ciphertext waits in part, the last one included; and a TLS client connected to it.
private func tlsBench(clientSend: Double = 60) throws -> (WorkerBench, TLSTransport) {
    let files = try localhostCertificate()
    let bench = try WorkerBench(configure: { config in
        config.tls = .init(certificates: [(files.certificate, files.key)])
        config.tlsListeners = [0]
        config.timeouts.clientSend = clientSend
    }, listenerOptions: { listener in
        var size: Int32 = 4096
        #expect(setsockopt(listener.fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size)) == 0)
    })
    var clientConfig = TLSClientConfiguration()
    clientConfig.insecureSkipVerification = true
    let (socket, _) = try TCPSocket.connect(to: try SocketAddress.resolve("127.0.0.1:\(bench.proxyPort)"))
    let client = try TLSClientContext(configuration: clientConfig).makeTransport(socket: socket, serverName: "localhost")
    return (bench, client)
}

/// Sends a `Connection: close` GET, answers it upstream with `payload`, and runs the worker until `done`; the
/// client reads what arrives once `reading` says so. Returns what the client received and whether it saw the end.
private func download(_ bench: WorkerBench, _ client: TLSTransport, reading: @escaping () -> Bool,
                      until done: (_ ended: Bool) -> Bool) throws -> (received: [UInt8], ended: Bool) {
    var request = Array("GET /d HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".utf8)
    var response: [UInt8] = Array("HTTP/1.1 200 OK\r\nContent-Length: \(bodySize)\r\n\r\n".utf8) + payload
    var upstreamGot: [UInt8] = []
    var received: [UInt8] = []
    var ended = false
    var buffer = [UInt8](repeating: 0, count: 65_536)
    let finished = try bench.run {
        // The client: the request (the handshake runs inside), then whatever plaintext has arrived.
        if !request.isEmpty, case .processed(let n) = try request.withUnsafeBytes({ try client.write($0) }) {
            request.removeFirst(n)
        }
        if client.wantsWritable { _ = try client.flush() }
        while !ended && (request.isEmpty ? reading() : true) {
            let result: IOResult<Int>
            do { result = try buffer.withUnsafeMutableBytes { try client.read(into: $0) } } catch {
                ended = true   // a reset
                break
            }
            guard case .processed(let n) = result else { break }
            if n == 0 { ended = true } else { received += buffer[..<n] }
        }
        // The upstream: once the request head is in, the whole response.
        guard try bench.acceptUpstream(), let upstream = bench.upstream else { return done(ended) }
        upstreamGot += try bench.readUpstream()
        if !response.isEmpty, ExchangeRig.contains([13, 10, 13, 10], in: upstreamGot),
           case .processed(let n) = try response.withUnsafeBytes({ try upstream.write($0) }) {
            response.removeFirst(n)
        }
        return done(ended)
    }
    #expect(finished, "the worker did not get there within 20 s")
    return (received, ended)
}

@Suite(.serialized) struct TLSCloseTests {
    /// The client gets every byte of the response, then the end of the connection.
    @Test func responseClosingTheConnectionArrivesWholeOverTLS() throws {
        let (bench, client) = try tlsBench()
        defer { try? client.close() }
        let (received, ended) = try download(bench, client, reading: { true }, until: { $0 })
        #expect(ended)
        #expect(String(decoding: received.prefix(20), as: UTF8.self).hasPrefix("HTTP/1.1 200 OK"))
        let head = try #require(ExchangeRig.find([13, 10, 13, 10], in: received))
        let body = received[(head + 4)...]
        let whole = body.elementsEqual(payload)
        #expect(whole, "received \(body.count) of \(bodySize) body bytes")
    }

    /// A client that reads nothing: the response cannot leave the machine's buffer, the send timeout ends it, and
    /// the socket closes then (the machine's output is not waited for again), in one loop that does not spin.
    @Test func clientThatReadsNothingIsClosedAtTheSendTimeout() throws {
        let (bench, client) = try tlsBench(clientSend: 1)
        defer { try? client.close() }
        let start = bench.loop.now()
        _ = try download(bench, client, reading: { false }, until: { _ in
            bench.upstream != nil && bench.worker.clients.isEmpty
        })
        #expect(bench.worker.clients.isEmpty)
        let elapsed = bench.loop.now() - start
        #expect(elapsed >= 1_000_000_000 && elapsed < 4_000_000_000, "closed after \(elapsed / 1_000_000) ms")
    }
}
