import CLinux
import Glibc
import Reactor

// One clamd INSTREAM scan of a held file part, driven by the worker's loop (the I/O side of `.scanFile`). It
// starts with the part's first byte and follows the held file as it grows, so clamd scans while the part arrives:
//
//   connect (unix or tcp, non-blocking) ─► "zINSTREAM\0" ─► [len32 | ≤ 64 KiB of the file] … (waits when it has
//   caught up with the file; `wake` after each run of the connection) ─► `inputEnded`: [0000] ─► read the answer
//   up to its NUL: "stream: OK" │ "stream: NAME FOUND" │ "... ERROR" ─► verdict, once
//
// The file is read with pread, one chunk at a time, only when the socket can take it: memory is one chunk.
// Any socket error, an unparsable answer, or the deadline (counted from the part's end) passing is `.failed` (the
// machine fails closed).

/// A running scan; `verdict` is called exactly once (unless `cancel` comes first).
final class ClamdScan: EventHandler {
    typealias Verdict = FormStage.ScanVerdict

    private let loop: EventLoop
    private let file: TemporaryFile
    private var socket: TCPSocket?
    private var registration: Registration?
    private var connected = false
    /// No verdict by then is a failure; set when the part ends (the upload itself is bounded by the client body
    /// timeouts).
    private var deadline: UInt64 = .max
    private let timeout: UInt64
    private var verdict: ((Verdict) -> Void)?
    /// Bytes waiting to go to clamd (the command, one framed chunk, or the terminator).
    /// What goes to clamd next: the command, then one framed chunk at a time, read into this one buffer (allocated
    /// once per scan), of which the first `outgoingLength` bytes are valid.
    private var outgoing: [UInt8] = []
    private var outgoingLength = 0
    private var sentOffset = 0
    private var fileOffset: UInt64 = 0
    private var terminated = false
    /// The part ended: the file will not grow any more.
    private var inputComplete = false
    /// Caught up with the file: waiting for more of it (`wake`) or its end (`inputEnded`).
    private var waiting = false
    private var answer: [UInt8] = []
    static let chunk = 64 * 1024
    /// clamd's answers are short; a longer one is garbage.
    static let answerLimit = 4096

    init(loop: EventLoop, file: TemporaryFile, settings: ProxyConfiguration.AntivirusSettings,
         verdict: @escaping (Verdict) -> Void) {
        self.loop = loop
        self.file = file
        self.verdict = verdict
        timeout = UInt64(max(0.001, min(settings.timeout, 86_400)) * 1e9)
        outgoing = Array("zINSTREAM\0".utf8)
        outgoingLength = outgoing.count
        do {
            try connect(settings.address)
        } catch {
            finish(.failed(reason: "clamd \(settings.address): \(error)"))
        }
    }

    private func connect(_ address: ProxyConfiguration.AntivirusSettings.Address) throws {
        let fd: Int32
        var inProgress: Int32 = 0
        switch address {
        case .unix(let path):
            fd = path.withCString { cl_unix_connect($0, &inProgress) }
            guard fd >= 0 else { throw IOError(errno: errno, reason: "connect(unix:\(path))") }
            socket = TCPSocket(adopting: fd)
        case .tcp(let address):
            let (s, progress) = try TCPSocket.connect(to: address)
            socket = s
            inProgress = progress == .connected ? 0 : 1
        }
        guard let socket else { return }
        connected = inProgress == 0
        registration = try loop.register(fd: socket.fd, interest: .writable, handler: self)
    }

    /// The part ended: send the end of the stream once the file is out, and wait for the verdict.
    func inputEnded(now: UInt64) {
        inputComplete = true
        deadline = now &+ timeout
        wake()
    }

    /// The held file may have grown (or ended): resume sending if the scan was waiting.
    func wake() {
        guard waiting, let registration, inputComplete || file.size > fileOffset else { return }
        waiting = false
        try? loop.setInterest([.readable, .writable], for: registration)
    }

    /// The client connection's tick: the deadline.
    func tick(now: UInt64) {
        if now >= deadline { finish(.failed(reason: "clamd gave no verdict in time")) }
    }

    /// Stops without a verdict (the request ended first).
    func cancel() {
        verdict = nil
        close()
    }

    private func finish(_ result: Verdict) {
        close()
        guard let verdict else { return }
        self.verdict = nil
        verdict(result)
    }

    private func close() {
        if let registration { try? loop.deregister(registration) }
        registration = nil
        try? socket?.close()
        socket = nil
    }

    // MARK: EventHandler

    func writable(loop: EventLoop) {
        guard let socket else { return }
        if !connected {
            do { try socket.finishConnect() } catch {
                finish(.failed(reason: "clamd: \(error)"))
                return
            }
            connected = true
        }
        do {
            while true {
                if sentOffset == outgoingLength {
                    guard refill() else {
                        // Everything sent (wait for the answer), or caught up with the file (wait for `wake`);
                        // an early answer (clamd's size limit) is read either way.
                        if verdict != nil, let registration { try loop.setInterest(.readable, for: registration) }
                        return
                    }
                }
                let result = try outgoing[sentOffset..<outgoingLength].withUnsafeBytes { try socket.write($0) }
                guard case .processed(let n) = result, n > 0 else { return }
                sentOffset += n
            }
        } catch {
            finish(.failed(reason: "clamd: \(error)"))
        }
    }

    /// The next framed chunk of the file (or, once the part ended and all of it went, the zero-length terminator);
    /// false once the terminator is out, or while waiting for the file to grow.
    private func refill() -> Bool {
        guard !terminated else { return false }
        if file.size <= fileOffset && !inputComplete {
            waiting = true
            return false
        }
        if outgoing.count != Self.chunk + 4 { outgoing = [UInt8](repeating: 0, count: Self.chunk + 4) }
        let count: Int
        do {
            count = try outgoing.withUnsafeMutableBytes { buffer in
                try file.read(at: fileOffset, into: UnsafeMutableRawBufferPointer(rebasing: buffer[4...]))
            }
        } catch {
            finish(.failed(reason: "reading the held part: \(error)"))
            return false
        }
        if count == 0 && !inputComplete {
            waiting = true
            return false
        }
        let length = UInt32(count)
        outgoing[0] = UInt8(length >> 24)
        outgoing[1] = UInt8((length >> 16) & 0xFF)
        outgoing[2] = UInt8((length >> 8) & 0xFF)
        outgoing[3] = UInt8(length & 0xFF)
        outgoingLength = 4 + count
        sentOffset = 0
        fileOffset += UInt64(count)
        if count == 0 { terminated = true }
        return true
    }

    func readable(loop: EventLoop) {
        guard let socket else { return }
        var buffer = [UInt8](repeating: 0, count: 1024)
        do {
            let result = try buffer.withUnsafeMutableBytes { try socket.read(into: $0) }
            guard case .processed(let n) = result else { return }
            if n > 0 { answer.append(contentsOf: buffer[..<n]) }
            if let end = answer.firstIndex(of: 0) {
                finish(Self.parse(Array(answer[..<end])))
            } else if n == 0 {
                finish(answer.isEmpty ? .failed(reason: "clamd closed the connection without an answer")
                       : Self.parse(answer))
            } else if answer.count > Self.answerLimit {
                finish(.failed(reason: "clamd answer too long"))
            }
        } catch {
            finish(.failed(reason: "clamd: \(error)"))
        }
    }

    func error(loop: EventLoop) { hangup(loop: loop) }

    func hangup(loop: EventLoop) {
        if !connected, let socket {
            // A refused connect: say why.
            do { try socket.finishConnect() } catch {
                finish(.failed(reason: "clamd: \(error)"))
                return
            }
        }
        if connected && terminated { readable(loop: loop) }
        if verdict != nil { finish(.failed(reason: "clamd closed the connection")) }
    }

    /// `stream: OK`, `stream: Eicar-Signature FOUND`, `INSTREAM size limit exceeded. ERROR`.
    static func parse(_ bytes: [UInt8]) -> Verdict {
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let body = text.hasPrefix("stream: ") ? String(text.dropFirst(8)) : text
        if body == "OK" { return .clean }
        if body.hasSuffix(" FOUND") {
            let name = String(body.dropLast(6)).filter { $0.isASCII && !$0.isNewline }
            return .infected(signature: String(name.prefix(200)))
        }
        return .failed(reason: "clamd: \(String(text.prefix(200)))")
    }
}
