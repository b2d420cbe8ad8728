// Helpers of the TLS tests: certificates made with the openssl CLI, an in-memory duplex transport whose writes
// can be made small, and a driver that pumps two sessions until they are quiet.
import Foundation
import Glibc
import Reactor
import Testing
@testable import TLS

/// Certificates generated once per test process into a 0700 temporary directory (files 0600).
final class Certificates: Sendable {
    static let shared = Certificates()

    let directory: String

    private init() {
        var template = Array("/tmp/formwall-tls-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        directory = String(cString: made!)
        let script = """
            set -e
            umask 077
            cd "$1"
            ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
            openssl req -x509 $ec -keyout ca.key -out ca.pem -subj /CN=Formwall-Test-CA -days 30
            openssl req -x509 $ec -keyout otherca.key -out otherca.pem -subj /CN=Other-CA -days 30
            leaf() { # name subject san signer days
                openssl req -new $ec -keyout "$1.key" -out "$1.csr" -subj "$2"
                printf 'subjectAltName=%s\\nbasicConstraints=CA:FALSE\\n' "$3" > "$1.ext"
                openssl x509 -req -in "$1.csr" -CA "$4.pem" -CAkey "$4.key" -CAcreateserial -days "$5" \\
                    -extfile "$1.ext" -out "$1.pem"
            }
            leaf a "/CN=a.test" "DNS:a.test,DNS:localhost" ca 30
            leaf b "/CN=b.test" "DNS:b.test,DNS:*.b.test" ca 30
            leaf wrong "/CN=wrong.test" "DNS:wrong.test" ca 30
            leaf expired "/CN=expired.test" "DNS:a.test,DNS:localhost" ca -1
            leaf client "/CN=client.test/O=Formwall" "DNS:client.test" ca 30
            leaf rogue "/CN=rogue.test" "DNS:rogue.test" otherca 30
            echo not a certificate > garbage.pem
            chmod 600 *
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script, "sh", directory]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try! process.run()
        process.waitUntilExit()
        precondition(process.terminationStatus == 0, "openssl certificate generation failed")
    }

    func path(_ name: String) -> String { "\(directory)/\(name)" }

    func certificate(_ name: String, serverNames: [String] = []) -> TLSServerConfiguration.Certificate {
        .init(chainPath: path("\(name).pem"), keyPath: path("\(name).key"), serverNames: serverNames)
    }

    func files(_ name: String) -> TLSCertificateFiles {
        TLSCertificateFiles(chainPath: path("\(name).pem"), keyPath: path("\(name).key"))
    }

    /// A server with `a` as default and `b` for b.test and *.b.test.
    func serverConfiguration() -> TLSServerConfiguration {
        TLSServerConfiguration(certificates: [certificate("a"), certificate("b", serverNames: ["b.test", "*.b.test"])])
    }

    func clientConfiguration() -> TLSClientConfiguration {
        TLSClientConfiguration(trust: .caFile(path("ca.pem")))
    }
}

/// One direction of an in-memory connection.
final class ByteQueue {
    var bytes: [UInt8] = []
    var head = 0
    var writeShut = false
    var count: Int { bytes.count - head }

    func append(_ data: UnsafeRawBufferPointer) { bytes.append(contentsOf: data) }

    func take(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let n = min(buffer.count, count)
        for index in 0..<n { buffer[index] = bytes[head + index] }
        head += n
        if head == bytes.count { bytes.removeAll(keepingCapacity: true); head = 0 }
        return n
    }
}

/// A transport over two byte queues. `maxWrite` caps each write; `capacity` makes writes block when the peer has
/// that much unread.
final class MemoryTransport: Transport {
    let inbox: ByteQueue
    let outbox: ByteQueue
    var maxWrite = Int.max
    var capacity = Int.max
    var closed = false
    var largestWrite = 0

    init(inbox: ByteQueue, outbox: ByteQueue) {
        self.inbox = inbox
        self.outbox = outbox
    }

    /// Two connected ends.
    static func pair() -> (client: MemoryTransport, server: MemoryTransport) {
        let up = ByteQueue(), down = ByteQueue()
        return (MemoryTransport(inbox: down, outbox: up), MemoryTransport(inbox: up, outbox: down))
    }

    var fd: Int32 { -1 }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> IOResult<Int> {
        if inbox.count == 0 { return inbox.writeShut ? .processed(0) : .wouldBlock }
        return .processed(inbox.take(into: buffer))
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws -> IOResult<Int> {
        precondition(!outbox.writeShut, "write after shutdown")
        let room = capacity == .max ? Int.max : capacity - outbox.count
        let n = min(bytes.count, maxWrite, room)
        if n <= 0 { return .wouldBlock }
        largestWrite = max(largestWrite, n)
        outbox.append(UnsafeRawBufferPointer(rebasing: bytes.prefix(n)))
        return .processed(n)
    }

    func shutdownWrite() throws { outbox.writeShut = true }
    func close() throws { closed = true }
}

/// What happened to each side while pumping.
struct Outcome {
    var clientError: Error?
    var serverError: Error?
    var clientTLS: TLSError? { clientError as? TLSError }
    var serverTLS: TLSError? { serverError as? TLSError }
}

/// Drives reads and flushes on both sessions until both finished the handshake, or one side failed and the
/// other had its chance to see the alert, or nothing moves any more.
@discardableResult
func handshake(_ client: TLSTransport, _ server: TLSTransport) -> Outcome {
    var outcome = Outcome()
    var scratch = [UInt8](repeating: 0, count: 4096)
    for _ in 0..<50 {
        for (side, transport) in [(0, client), (1, server)] {
            if (side == 0 ? outcome.clientError : outcome.serverError) != nil { continue }
            do {
                _ = try scratch.withUnsafeMutableBytes { try transport.read(into: $0) }
                _ = try transport.flush()
            } catch {
                if side == 0 { outcome.clientError = error } else { outcome.serverError = error }
            }
        }
        if client.isHandshakeComplete && server.isHandshakeComplete && !client.wantsWritable
            && !server.wantsWritable && outcome.clientError == nil && outcome.serverError == nil {
            // One more round so TLS 1.3 tickets and late alerts (client certificate rejected) arrive.
            for transport in [client, server] {
                do { _ = try scratch.withUnsafeMutableBytes { try transport.read(into: $0) } } catch {
                    if transport === client { outcome.clientError = error } else { outcome.serverError = error }
                }
            }
            return outcome
        }
        if outcome.clientError != nil && outcome.serverError != nil { return outcome }
    }
    return outcome
}

/// A connected client/server session pair in memory.
func makePair(
    server serverConfiguration: TLSServerConfiguration? = nil,
    client clientConfiguration: TLSClientConfiguration? = nil,
    serverName: String = "a.test",
    resuming session: TLSSession? = nil,
    serverContext: TLSServerContext? = nil
) throws -> (client: TLSTransport, server: TLSTransport, lowers: (client: MemoryTransport, server: MemoryTransport)) {
    let certificates = Certificates.shared
    let serverSide = try serverContext ?? TLSServerContext(
        configuration: serverConfiguration ?? certificates.serverConfiguration())
    let clientSide = try TLSClientContext(configuration: clientConfiguration ?? certificates.clientConfiguration())
    let lowers = MemoryTransport.pair()
    let client = try clientSide.makeTransport(over: lowers.client, serverName: serverName, resuming: session)
    let server = try serverSide.makeTransport(over: lowers.server)
    return (client, server, lowers)
}

extension TLSTransport {
    func readAll(max: Int = 1 << 22) throws -> [UInt8] {
        var out: [UInt8] = []
        var scratch = [UInt8](repeating: 0, count: 8192)
        while out.count < max {
            let result = try scratch.withUnsafeMutableBytes { try read(into: $0) }
            guard case .processed(let n) = result, n > 0 else { break }
            out += scratch[0..<n]
        }
        return out
    }
}
