// libFuzzer target for the TLS transport: arbitrary bytes as the client's first flights to a server session,
// fed in chunks, must end in plaintext, end of file or a thrown error, never a trap, a leak or a hang. A second
// mode runs a real client session and corrupts its bytes in transit, to reach the states after the handshake.
// Built by fuzz/run.sh with Sources/TLS (certificates in $TLS_FUZZ_CERTS, made by run.sh with the openssl CLI).
//
//   byte 0: bit 0 TLS 1.2 allowed, bit 1 strict SNI, bit 2 optional client certificates, bit 3 man in the middle,
//           bits 4-7 chunk size (1, 2, 3, 5, 8, ... bytes per lower read)
//   rest:   the client's bytes (mode 1), or an XOR mask over the real client's bytes (man in the middle)
import Glibc
import Reactor

/// One direction of an in-memory connection.
final class FuzzQueue {
    var bytes: [UInt8] = []
    var head = 0
    var writeShut = false
    var count: Int { bytes.count - head }
}

/// An in-memory lower transport; `readLimit` bytes per read models how the kernel splits the stream.
final class FuzzTransport: Transport {
    let inbox: FuzzQueue
    let outbox: FuzzQueue
    var readLimit = Int.max

    init(inbox: FuzzQueue, outbox: FuzzQueue) {
        self.inbox = inbox
        self.outbox = outbox
    }

    var fd: Int32 { -1 }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> IOResult<Int> {
        if inbox.count == 0 { return inbox.writeShut ? .processed(0) : .wouldBlock }
        let n = min(buffer.count, inbox.count, readLimit)
        for index in 0..<n { buffer[index] = inbox.bytes[inbox.head + index] }
        inbox.head += n
        return .processed(n)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws -> IOResult<Int> {
        // A socket that takes at most 1000 bytes a call and holds 64 KiB: short writes and would-block both occur.
        let n = min(bytes.count, 1000, 65536 - outbox.count)
        if n <= 0 { return .wouldBlock }
        outbox.bytes.append(contentsOf: bytes.prefix(n))
        return .processed(n)
    }

    func shutdownWrite() throws { outbox.writeShut = true }
    func close() throws {}
}

nonisolated(unsafe) var serverContexts: [TLSServerContext] = []
nonisolated(unsafe) var clientContext: TLSClientContext?

private func setUp() {
    guard serverContexts.isEmpty else { return }
    let directory = getenv("TLS_FUZZ_CERTS").map { String(cString: $0) } ?? "tls-certs"
    func certificate(_ name: String, _ names: [String] = []) -> TLSServerConfiguration.Certificate {
        .init(chainPath: "\(directory)/\(name).pem", keyPath: "\(directory)/\(name).key", serverNames: names)
    }
    for mode in 0..<8 {
        var configuration = TLSServerConfiguration(certificates: [certificate("a"), certificate("b", ["*.b.test"])])
        configuration.minimumVersion = mode & 1 != 0 ? .tls12 : .tls13
        configuration.strictSNI = mode & 2 != 0
        if mode & 4 != 0 { configuration.clientAuthentication = .optional(caPath: "\(directory)/ca.pem") }
        do {
            serverContexts.append(try TLSServerContext(configuration: configuration))
        } catch {
            fatalError("TLS fuzz: cannot build the server context from \(directory): \(error)")
        }
    }
    var client = TLSClientConfiguration(trust: .caFile("\(directory)/ca.pem"))
    client.clientCertificate = TLSCertificateFiles(
        chainPath: "\(directory)/client.pem", keyPath: "\(directory)/client.key")
    clientContext = try? TLSClientContext(configuration: client)
}

/// Reads and flushes until the session would block, ends, or throws; returns false once it is finished.
private func drive(_ transport: TLSTransport, _ scratch: UnsafeMutableRawBufferPointer) -> Bool {
    do {
        for _ in 0..<64 {
            switch try transport.read(into: scratch) {
            case .processed(0): return false
            case .processed: continue
            case .wouldBlock: _ = try transport.flush(); return true
            }
        }
        return true
    } catch {
        _ = error as? TLSError
        return false
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    setUp()
    let mode = Int(data[0])
    let chunkSizes = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 512, 1500, 4096, 20000]
    let chunk = chunkSizes[mode >> 4]
    let input = UnsafeBufferPointer(start: data + 1, count: size - 1)
    let toServer = FuzzQueue(), toClient = FuzzQueue()
    let serverLower = FuzzTransport(inbox: toServer, outbox: toClient)
    serverLower.readLimit = chunk
    guard let server = try? serverContexts[mode & 7].makeTransport(over: serverLower) else { return 0 }
    let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 1)
    defer { scratch.deallocate() }

    if mode & 8 == 0 {
        toServer.bytes.append(contentsOf: input)
        toServer.writeShut = true
        var alive = true
        for _ in 0..<(input.count / chunk + 4) where alive { alive = drive(server, scratch) }
        if server.isHandshakeComplete {
            _ = try? Array("HTTP/1.1 200 OK\r\n\r\n".utf8).withUnsafeBytes { try server.write($0) }
        }
        try? server.shutdownWrite()
        try? server.close()
        return 0
    }

    // Man in the middle: a real client; its bytes are XORed with the input on their way to the server.
    let clientLower = FuzzTransport(inbox: toClient, outbox: FuzzQueue())
    guard let client = try? clientContext?.makeTransport(over: clientLower, serverName: "b.test") else { return 0 }
    var maskAt = 0
    var serverAlive = true, clientAlive = true
    let request = Array("POST /up HTTP/1.1\r\nHost: b.test\r\nContent-Length: 5\r\n\r\nhello".utf8)
    var sent = 0
    for _ in 0..<40 where serverAlive || clientAlive {
        if clientAlive {
            do {
                if sent < request.count, case .processed(let n) = try request.withUnsafeBytes({
                    try client.write(UnsafeRawBufferPointer(rebasing: $0[sent...]))
                }) { sent += n }
            } catch { clientAlive = false }
            if clientAlive { clientAlive = drive(client, scratch) }
        }
        let produced = clientLower.outbox
        while produced.count > 0 {
            var byte = produced.bytes[produced.head]
            produced.head += 1
            if maskAt < input.count { byte ^= input[maskAt] }
            maskAt += 1
            toServer.bytes.append(byte)
        }
        if produced.writeShut { toServer.writeShut = true }
        if serverAlive { serverAlive = drive(server, scratch) }
        if sent == request.count && clientAlive { try? client.shutdownWrite() }
    }
    try? client.close()
    try? server.close()
    return 0
}
