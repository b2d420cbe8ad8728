import Foundation
import HTTP1
import Multipart
import Inspect
import Reactor

// A tiny built-in upstream for `formwall demo` and quick checks: it answers every request with JSON describing
// what it received — fields (values), files (name, size, sha256) — parsed with Formwall's own streaming parser.
//
//   client ──► EchoConnection: head parser ──► body (Content-Length | chunked) ──► FormStage (parse only)
//          ◄── {"method", "path", "fields": {...}, "files": [...], "body_bytes": N}

/// Runs the echo upstream on its own event-loop thread.
public final class EchoUpstream {
    private let group: EventLoopGroup

    /// Starts listening on `address`; throws (address in use, …) before returning.
    public init(address: SocketAddress) throws {
        group = try EventLoopGroup(count: 1)
        try group.runOnEach { loop in
            let listener = try TCPListener(bindingTo: address)
            _ = try loop.register(fd: listener.fd, interest: .readable, handler: EchoAcceptor(listener))
        }
    }

    /// Stops the thread.
    public func shutdown() { group.shutdownGracefully() }
}

final class EchoAcceptor: EventHandler {
    let listener: TCPListener
    init(_ listener: TCPListener) { self.listener = listener }

    func readable(loop: EventLoop) {
        while case .processed(let socket)? = try? listener.accept() {
            let conn = EchoConnection(socket)
            conn.registration = try? loop.register(fd: socket.fd, interest: .readable, handler: conn)
            if conn.registration == nil { try? socket.close() }
        }
    }
}

final class EchoConnection: EventHandler {
    let socket: TCPSocket
    let input = ByteBuffer(initialCapacity: 64 * 1024, maxCapacity: 256 * 1024)
    let output = ByteBuffer(initialCapacity: 4096, maxCapacity: 4 << 20)
    var registration: Registration?
    var parser = HTTPRequestHeadParser()
    var head: HTTPRequestHead?
    var remaining: UInt64 = 0
    var chunked: ChunkedDecoder?
    var form: FormStage?
    var bodyBytes: UInt64 = 0
    var opaque: SHA256Box?
    var failed: String?
    var closeAfter = false

    init(_ socket: TCPSocket) { self.socket = socket }

    func readable(loop: EventLoop) {
        let result = try? PlainTransport(socket).read(into: input, maxBytes: 64 * 1024)
        guard case .processed(let n)? = result, n > 0 else { close(loop); return }
        process(loop)
    }

    func writable(loop: EventLoop) { flush(loop) }

    private func process(_ loop: EventLoop) {
        while input.readableBytes > 0 {
            if head == nil {
                let r = input.withUnsafeReadableBytes { b in Result { () throws(HTTPParseError) in try parser.parse(b) } }
                switch r {
                case .failure: close(loop); return
                case .success(.needMore(let c)): input.moveReaderIndex(forwardBy: c); return
                case .success(.complete(let h, let c)):
                    input.moveReaderIndex(forwardBy: c)
                    start(h)
                }
            }
            guard head != nil else { return }
            let before = input.readableBytes
            input.withUnsafeReadableBytes { bytes in
                var used = 0
                if var decoder = chunked {
                    while let event = try? decoder.decode(bytes, from: &used) {
                        switch event {
                        case .data(let span): body(span)
                        case .end: remaining = 0; chunked = nil
                        }
                        if chunked == nil { break }
                    }
                    if chunked != nil { chunked = decoder }
                } else {
                    let n = Int(min(UInt64(bytes.count), remaining))
                    body(UnsafeRawBufferPointer(rebasing: bytes[0..<n]))
                    remaining -= UInt64(n)
                    used = n
                }
                input.moveReaderIndex(forwardBy: used)
            }
            if chunked == nil && remaining == 0 { respond(loop) }
            if input.readableBytes == before && head != nil { return }
        }
        if head != nil, chunked == nil, remaining == 0 { respond(loop) }
    }

    private func start(_ h: HTTPRequestHead) {
        head = h
        bodyBytes = 0
        failed = nil
        form = nil
        opaque = nil
        chunked = nil
        switch h.framing {
        case .contentLength(let n): remaining = n
        case .chunked: remaining = 1; chunked = ChunkedDecoder()
        case .none, .closeDelimited: remaining = 0
        }
        closeAfter = !h.keepAlive
        if let ct = h.header(named: "content-type"), let b = try? MultipartBoundary.parse(contentType: Array(ct.utf8)) {
            form = FormStage(boundary: b.boundary, limits: MultipartLimits(), anomalies: b.anomalies,
                             reencodeBoundary: nil, evaluator: nil, quarantine: nil)
        } else {
            opaque = SHA256Box()
        }
    }

    private func body(_ span: UnsafeRawBufferPointer) {
        bodyBytes += UInt64(span.count)
        if let form, failed == nil {
            do { try form.feed(span, out: NullOutput.shared) } catch { failed = "\(error)" }
        }
        opaque?.hasher.update(span)
    }

    private func respond(_ loop: EventLoop) {
        guard let h = head else { return }
        head = nil
        if let form, failed == nil {
            do { try form.finish(out: NullOutput.shared) } catch { failed = "\(error)" }
        }
        var json: [String: Any] = ["method": h.method, "path": h.target, "body_bytes": bodyBytes]
        if let form {
            var fields: [String: [String]] = [:]
            var files: [[String: Any]] = []
            for r in form.records {
                let name = r.part.nameString ?? ""
                if r.part.isFile {
                    files.append(["name": name, "filename": r.part.filenameString ?? "", "size": r.size,
                                  "sha256": r.sha256 ?? "", "content_type": r.part.contentTypeString ?? NSNull()])
                } else {
                    fields[name, default: []].append(r.preview ?? "")
                }
            }
            json["fields"] = fields
            json["files"] = files
            json["complete"] = failed == nil
            if let failed { json["error"] = failed }
        } else if let opaque {
            json["sha256"] = opaque.hasher.finalizeHex()
        }
        let data = (try? JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])) ?? Data()
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(data.count)\r\n"
            + (closeAfter ? "Connection: close\r\n" : "") + "\r\n"
        _ = try? output.writeBytes(Array(head.utf8) + Array(data))
        parser.reset()
        flush(loop)
    }

    private func flush(_ loop: EventLoop) {
        _ = try? PlainTransport(socket).write(from: output)
        guard let registration else { return }
        if output.readableBytes > 0 {
            try? loop.setInterest([.readable, .writable], for: registration)
        } else if closeAfter {
            close(loop)
        } else {
            try? loop.setInterest(.readable, for: registration)
        }
    }

    private func close(_ loop: EventLoop) {
        if let registration { try? loop.deregister(registration) }
        registration = nil
        try? socket.close()
    }
}

final class SHA256Box {
    let hasher = SHA256Hasher()
}

/// Discards everything (parse-only form stages).
final class NullOutput: FormOutput {
    nonisolated(unsafe) static let shared = NullOutput()
    func write(_ bytes: UnsafeRawBufferPointer) {}
    func enqueue(_ file: TemporaryFile) -> Bool { file.close(); return false }
    var isReplaying: Bool { false }
}
