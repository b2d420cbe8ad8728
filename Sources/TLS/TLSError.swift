// Errors of the TLS module: one struct, a code to switch on, and the OpenSSL error queue text for logs.
import COpenSSL

/// A TLS failure: a context that cannot be built, or a session the peer broke.
///
/// Compare `code` (`error.code == .plainHTTP`) to tell the kinds apart; new codes can be added without breaking
/// callers, because `Code` is a struct.
public struct TLSError: Error, CustomStringConvertible, Sendable, Equatable {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case configuration, certificate, plainHTTP, handshakeFailed, peerVerificationFailed, protocolError
            case closed, bufferLimit
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The configuration is invalid (bad version, cipher list, ALPN list...).
        public static let configuration = Code(.configuration)
        /// A certificate, key or CA file could not be loaded or does not match.
        public static let certificate = Code(.certificate)
        /// The first bytes on a TLS port were a plain-text HTTP request; answer `400` in clear text.
        public static let plainHTTP = Code(.plainHTTP)
        /// The handshake failed (no shared version or cipher, an alert from the peer, strict SNI...).
        public static let handshakeFailed = Code(.handshakeFailed)
        /// The peer's certificate did not verify (unknown CA, expired, wrong host name, missing client cert).
        public static let peerVerificationFailed = Code(.peerVerificationFailed)
        /// A malformed or unexpected record after the handshake.
        public static let protocolError = Code(.protocolError)
        /// The session was already closed with `close()`.
        public static let closed = Code(.closed)
        /// The peer made this side buffer more ciphertext than the bound allows.
        public static let bufferLimit = Code(.bufferLimit)

        /// The code's name, e.g. `handshakeFailed`.
        public var description: String { base.rawValue }
    }

    /// The kind of failure.
    public let code: Code
    /// What went wrong, with the OpenSSL error queue text and file paths where there are any.
    public let reason: String

    /// Creates an error of kind `code`.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// `"tls <code>: <reason>"`.
    public var description: String { "tls \(code): \(reason)" }
}

/// The calling thread's OpenSSL error queue.
enum OpenSSLErrorQueue {
    /// Empties the queue, so the next failure reports only its own errors.
    static func clear() { ERR_clear_error() }

    /// Drains the queue into one line, oldest first, e.g. `"error:0A000086:SSL routines::certificate verify failed"`.
    static func drain() -> String {
        var parts: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var text = [CChar](repeating: 0, count: 256)
            text.withUnsafeMutableBufferPointer { ERR_error_string_n(code, $0.baseAddress, $0.count) }
            parts.append(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return parts.isEmpty ? "no OpenSSL error detail" : parts.joined(separator: "; ")
    }

    /// An error of kind `code` with `context` and the drained queue.
    static func error(_ code: TLSError.Code, _ context: String) -> TLSError {
        TLSError(code, "\(context): \(drain())")
    }
}
