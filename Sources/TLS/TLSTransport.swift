// TLS as a byte transform inside the event loop: one SSL object on the internal half of a BIO pair. OpenSSL never
// touches the socket; this type moves ciphertext between the pair's network half and the lower transport in
// place (the socket reads into and writes from the pair's own ring buffers: no copy in userland), never blocking.
//
//            plaintext                  internal BIO    network BIO              ciphertext
//   handler <---------- SSL_read  <---- [ incoming ring, 64 KiB ] <-- BIO_nwrite0/nwrite <-- lower.read
//                                                                    (read(2) straight into the free span,
//                                                                     only when OpenSSL wants more input)
//   handler ----------> SSL_write ----> [ outgoing ring, 64 KiB ] --> BIO_nread0/nread --> lower.write
//                                                                    (write(2) straight from the pending span;
//                                                                     short/would-block: stays in the ring,
//                                                                     wantsWritable, flush() later)
//
// Who flushes: every call (read, write, flush, shutdownWrite) pushes the outgoing ring to the lower transport,
// so handshake flights produced inside `read` leave at once. Backpressure: `write` accepts no plaintext while
// ciphertext is pending, and at most one record (16 KiB) per call, so the outgoing ring holds at most one
// SSL_write's output plus what the handshake or alerts produced. A ring is contiguous only up to its end: both
// directions loop over at most two spans.
import COpenSSL
import Reactor

/// A `Transport` that speaks TLS over a lower transport (a `PlainTransport` of a TCP socket, or any test double).
///
/// One loop thread owns it. `read` returns plaintext, `.wouldBlock` until some is available, `.processed(0)` on
/// close_notify or end of file; everything the peer can get wrong is a thrown `TLSError` (or `IOError` from the
/// socket), never a trap.
public final class TLSTransport: Transport {
    /// Which side of the handshake this session plays.
    public enum Role: Sendable, Equatable {
        /// Accepts (a listener's session).
        case server
        /// Connects (an upstream session).
        case client
    }

    /// Largest plaintext passed to one SSL_write.
    static let recordSize = 16 * 1024
    /// Ciphertext read from the lower transport per step (a few records: fewer read calls on large transfers),
    /// and the size of the incoming ring, which therefore never holds more.
    static let pullSize = 64 * 1024
    /// Size of the outgoing ring, the cap of the pending ciphertext: one record plus overhead, plus room for
    /// handshake flights and alerts. A flight larger than this waits in OpenSSL until the ring drains.
    static let outboundLimit = 64 * 1024

    /// The role of this session.
    public let role: Role
    /// The transport carrying the ciphertext (for a plain-text `400` after `TLSError.plainHTTP`).
    public let lower: any Transport
    /// The SSL object; nil once freed by `close()`.
    private(set) var ssl: OpaquePointer?
    /// OpenSSL's half of the BIO pair (owned by the SSL object).
    private let internalBIO: OpaquePointer
    /// Our half of the BIO pair: `nwrite` commits ciphertext read from the socket, `nread` consumes what the
    /// socket took. Freed with the SSL object.
    private let networkBIO: OpaquePointer
    /// Keeps the context (and its callback state) alive as long as the session.
    private let owner: AnyObject
    /// Server side: the first ciphertext byte has not been checked for plain HTTP yet.
    private var awaitingFirstByte: Bool
    /// The lower transport reported end of file.
    private var receivedEOF = false
    /// The peer sent close_notify.
    private var receivedCloseNotify = false
    /// `shutdownWrite()` was called: close_notify queued, lower write side shut once flushed.
    private var shutdownRequested = false
    private var lowerWriteShut = false
    /// A fatal error was thrown: the session must not be resumed.
    private(set) var failed = false
    /// The handshake finished at some point (OpenSSL's own state is unusable after a fatal error).
    private(set) var handshakeFinished = false

    /// `outgoingRingSize` is `outboundLimit` except in tests that need a handshake flight larger than the ring.
    init(context: OpaquePointer, role: Role, lower: any Transport, owner: AnyObject,
         outgoingRingSize: Int = TLSTransport.outboundLimit) throws {
        OpenSSLErrorQueue.clear()
        guard let ssl = SSL_new(context) else { throw OpenSSLErrorQueue.error(.configuration, "SSL_new") }
        // The first buffer is what the internal BIO writes (outgoing), the second what the network BIO writes.
        var internalBIO: OpaquePointer?
        var networkBIO: OpaquePointer?
        guard BIO_new_bio_pair(&internalBIO, outgoingRingSize, &networkBIO, TLSTransport.pullSize) == 1,
              let internalBIO, let networkBIO
        else {
            SSL_free(ssl)
            throw OpenSSLErrorQueue.error(.configuration, "BIO_new_bio_pair")
        }
        SSL_set_bio(ssl, internalBIO, internalBIO)  // the SSL object owns the internal half from here on
        switch role {
        case .server: SSL_set_accept_state(ssl)
        case .client: SSL_set_connect_state(ssl)
        }
        self.ssl = ssl
        self.internalBIO = internalBIO
        self.networkBIO = networkBIO
        self.role = role
        self.lower = lower
        self.owner = owner
        self.awaitingFirstByte = role == .server
    }

    deinit {
        freeSession()
    }

    /// Frees the SSL object exactly once. A session that ended without an error is marked shut down first, so
    /// OpenSSL does not mark it "bad" (not resumable) just because the socket closed without close_notify.
    private func freeSession() {
        guard let ssl else { return }
        if !failed && handshakeFinished {
            SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN)
        }
        SSL_free(ssl)
        BIO_free(networkBIO)
        self.ssl = nil
    }

    // MARK: Transport

    /// The lower transport's descriptor.
    public var fd: Int32 { lower.fd }

    /// Reads plaintext, driving the handshake and pulling ciphertext from the lower transport as needed. Fills
    /// `buffer` with as many records as are available without blocking (one SSL_read returns one record), so a
    /// large transfer costs the caller one call per socket read, not one per 16 KiB record.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> IOResult<Int> {
        guard let ssl else { throw TLSError(.closed, "read after close") }
        guard let base = buffer.baseAddress, buffer.count > 0 else { return .processed(0) }
        var total = 0
        while total < buffer.count {
            if receivedCloseNotify { break }
            OpenSSLErrorQueue.clear()
            let count = SSL_read(ssl, base + total, Int32(clamping: buffer.count - total))
            noteHandshakeState(ssl)
            if count > 0 {
                total += Int(count)
                continue
            }
            let code = SSL_get_error(ssl, count)
            switch code {
            case SSL_ERROR_ZERO_RETURN:
                receivedCloseNotify = true
            case SSL_ERROR_WANT_WRITE:
                // The outgoing ring is full (a flight larger than it): make room, or wait for writable.
                if try pushOutbound() > 0 { continue }
                return total > 0 ? .processed(total) : .wouldBlock
            case SSL_ERROR_WANT_READ:
                _ = try pushOutbound()
                switch try pullCiphertext() {
                case .fed: continue
                case .wouldBlock: return total > 0 ? .processed(total) : .wouldBlock
                case .endOfFile: break
                }
            default:
                // Plaintext already decrypted is delivered first; the error is sticky and comes with the next read.
                if total > 0 { return .processed(total) }
                throw failure(code, during: "read")
            }
            break
        }
        _ = try pushOutbound()
        return .processed(total)
    }

    /// Encrypts `bytes` a record at a time while each record's ciphertext leaves at once; returns the plaintext
    /// bytes accepted. A record whose ciphertext the socket does not take stays pending (at most one), and the
    /// call returns what was accepted so far. `.wouldBlock` while earlier ciphertext is still pending
    /// (`wantsWritable`) or while the handshake waits for the peer.
    public func write(_ bytes: UnsafeRawBufferPointer) throws -> IOResult<Int> {
        guard let ssl else { throw TLSError(.closed, "write after close") }
        guard !shutdownRequested else { throw TLSError(.closed, "write after shutdownWrite") }
        _ = try pushOutbound()
        if pendingCiphertextBytes > 0 { return .wouldBlock }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return .processed(0) }
        var total = 0
        while true {
            let chunk = Int32(min(bytes.count - total, TLSTransport.recordSize))
            OpenSSLErrorQueue.clear()
            let count = SSL_write(ssl, base + total, chunk)
            noteHandshakeState(ssl)
            if count > 0 {
                total += Int(count)
                _ = try pushOutbound()
                if total == bytes.count || pendingCiphertextBytes > 0 { return .processed(total) }
                continue
            }
            if total > 0 { return .processed(total) }
            let code = SSL_get_error(ssl, count)
            switch code {
            case SSL_ERROR_WANT_WRITE:
                // Only during the handshake, with a flight larger than the outgoing ring: make room or wait.
                if try pushOutbound() > 0 { continue }
                return .wouldBlock
            case SSL_ERROR_WANT_READ:
                // Only during the handshake (renegotiation is off): send our flight, then look for the peer's.
                _ = try pushOutbound()
                switch try pullCiphertext() {
                case .fed: continue
                case .wouldBlock: return .wouldBlock
                case .endOfFile: throw TLSError(.handshakeFailed, "peer closed the connection during the handshake")
                }
            case SSL_ERROR_ZERO_RETURN:
                throw TLSError(.closed, "peer sent close_notify during the handshake")
            default:
                throw failure(code, during: "write")
            }
        }
    }

    /// Sends close_notify (once the handshake is complete), flushes what it can, and shuts the lower write side
    /// when everything is out; if the socket blocks, `flush()` finishes the job.
    public func shutdownWrite() throws {
        guard let ssl, !shutdownRequested else { return }
        shutdownRequested = true
        if handshakeFinished && !failed {
            OpenSSLErrorQueue.clear()
            _ = SSL_shutdown(ssl)  // 0: close_notify queued, the peer's not seen yet; errors: nothing more to send
            OpenSSLErrorQueue.clear()
        }
        _ = try pushOutbound()
    }

    /// Frees the SSL object (and its BIOs) and closes the lower transport. Idempotent for the SSL part.
    public func close() throws {
        freeSession()
        try lower.close()
    }

    // MARK: Pending ciphertext

    /// Ciphertext is waiting for the socket: register for writable and call `flush()`.
    public var wantsWritable: Bool {
        guard let ssl else { return false }
        return BIO_ctrl_pending(networkBIO) > 0 || (shutdownRequested && !lowerWriteShut)
            || (!handshakeFinished && !failed && SSL_want(ssl) == SSL_WRITING)
    }

    /// Ciphertext bytes waiting for the lower transport (bounded by one record plus handshake flights).
    public var pendingCiphertextBytes: Int {
        ssl == nil ? 0 : Int(BIO_ctrl_pending(networkBIO))
    }

    /// OpenSSL holds input already pulled from the socket (for example by a `write` during the handshake): call
    /// `read` even without a readable event.
    public var hasBufferedInput: Bool {
        guard let ssl else { return false }
        return SSL_pending(ssl) > 0 || BIO_ctrl_pending(internalBIO) > 0
    }

    /// Pushes pending ciphertext: `.processed(n)` bytes went out (0: nothing was pending), `.wouldBlock` if none
    /// could. Completes a pending `shutdownWrite()` once everything is out, and resumes a handshake that stopped
    /// on a full outgoing ring.
    public func flush() throws -> IOResult<Int> {
        guard let ssl else { return .processed(0) }
        let hadPending = wantsWritable
        var sent = try pushOutbound()
        if !handshakeFinished && !failed && SSL_want(ssl) == SSL_WRITING && pendingCiphertextBytes == 0 {
            OpenSSLErrorQueue.clear()
            let result = SSL_do_handshake(ssl)
            noteHandshakeState(ssl)
            if result != 1 {
                let code = SSL_get_error(ssl, result)
                if code != SSL_ERROR_WANT_READ && code != SSL_ERROR_WANT_WRITE {
                    throw failure(code, during: "handshake")
                }
            }
            sent += try pushOutbound()
        }
        if sent == 0 && hadPending && wantsWritable { return .wouldBlock }
        return .processed(sent)
    }

    /// Writes the outgoing ring to the lower transport straight from its buffer until it is empty or the socket
    /// would block (two spans when the ring wraps); returns the bytes written.
    private func pushOutbound() throws -> Int {
        guard ssl != nil else { return 0 }
        var sent = 0
        while true {
            var span: UnsafeMutablePointer<CChar>?
            let available = BIO_nread0(networkBIO, &span)
            guard available > 0, let start = span else { break }
            let result = try lower.write(UnsafeRawBufferPointer(start: start, count: Int(available)))
            guard case .processed(let count) = result, count > 0 else { break }
            // Consume what the socket took (count <= available, so this cannot fall short).
            guard BIO_nread(networkBIO, &span, Int32(clamping: count)) == count else {
                throw OpenSSLErrorQueue.error(.bufferLimit, "BIO_nread of \(count) ciphertext bytes")
            }
            sent += count
            if count < Int(available) { break }  // short write: the socket is full
        }
        if shutdownRequested && !lowerWriteShut && BIO_ctrl_pending(networkBIO) == 0 {
            lowerWriteShut = true
            try lower.shutdownWrite()
        }
        return sent
    }

    // MARK: Incoming ciphertext

    private enum Pull {
        case fed, wouldBlock, endOfFile
    }

    /// Reads at most `pullSize` bytes of ciphertext from the lower transport straight into the incoming ring's
    /// free space (two spans when it wraps), committing them with `BIO_nwrite`.
    private func pullCiphertext() throws -> Pull {
        if receivedEOF { return .endOfFile }
        var pulled = 0
        while pulled < TLSTransport.pullSize {
            var span: UnsafeMutablePointer<CChar>?
            let room = BIO_nwrite0(networkBIO, &span)
            guard room > 0, let start = span else {
                if pulled > 0 { return .fed }
                // OpenSSL asks for more while the ring is full: no record is this large, so it is not a peer's doing.
                throw OpenSSLErrorQueue.error(.bufferLimit, "no room for ciphertext in the incoming ring")
            }
            let wanted = min(Int(room), TLSTransport.pullSize - pulled)
            let region = UnsafeMutableRawBufferPointer(start: start, count: wanted)
            switch try lower.read(into: region) {
            case .wouldBlock:
                return pulled > 0 ? .fed : .wouldBlock
            case .processed(0):
                receivedEOF = true
                return pulled > 0 ? .fed : .endOfFile
            case .processed(let count):
                if awaitingFirstByte {
                    awaitingFirstByte = false
                    // Looked at in the ring before it is committed: plain HTTP never reaches OpenSSL.
                    if PlainHTTPDetector.looksLikeHTTP(UnsafeRawBufferPointer(rebasing: region.prefix(count))) {
                        throw TLSError(.plainHTTP, "the plain HTTP request was sent to HTTPS port")
                    }
                }
                guard BIO_nwrite(networkBIO, &span, Int32(clamping: count)) == count else {
                    throw OpenSSLErrorQueue.error(.bufferLimit, "BIO_nwrite of \(count) ciphertext bytes")
                }
                pulled += count
                if count < region.count { return .fed }  // the socket had no more for now
            }
        }
        return .fed
    }

    // MARK: Errors

    private func noteHandshakeState(_ ssl: OpaquePointer) {
        if !handshakeFinished && SSL_is_init_finished(ssl) == 1 { handshakeFinished = true }
    }

    /// Turns a failed SSL_read/SSL_write into a `TLSError` with the error queue and the verify result.
    private func failure(_ code: Int32, during operation: String) -> TLSError {
        let detail = OpenSSLErrorQueue.drain()
        guard let ssl else { return TLSError(.closed, detail) }
        failed = true
        // The fatal alert OpenSSL queued tells the peer why; send what the socket takes, the error wins anyway.
        _ = try? pushOutbound()
        let verify = SSL_get_verify_result(ssl)
        if verify != Int(X509_V_OK) {
            let text = String(cString: X509_verify_cert_error_string(verify))
            return TLSError(.peerVerificationFailed, "peer certificate: \(text) (\(detail))")
        }
        if detail.contains("peer did not return a certificate") || detail.contains("certificate required") {
            return TLSError(.peerVerificationFailed, "peer certificate required: \(detail)")
        }
        if !handshakeFinished {
            return TLSError(.handshakeFailed, "handshake (\(operation), SSL error \(code)): \(detail)")
        }
        return TLSError(.protocolError, "\(operation) (SSL error \(code)): \(detail)")
    }
}

/// Recognizes a plain-text HTTP request on a TLS port from its first bytes.
///
/// A TLS connection starts with a handshake record (0x16), an SSLv2-style hello has the high bit set; an HTTP
/// request starts with an upper-case method token (`GET `, `POST`, `HEAD`, `PUT `, `DELE`, `OPTI`, `PATC`,
/// `CONN`, ...). Any upper-case ASCII letter first is taken as HTTP, like nginx, which needs only one byte to decide.
public enum PlainHTTPDetector {
    /// Whether `bytes` (at least one) look like the start of an HTTP request rather than TLS.
    public static func looksLikeHTTP(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let first = bytes.first else { return false }
        return first >= UInt8(ascii: "A") && first <= UInt8(ascii: "Z")
    }
}
