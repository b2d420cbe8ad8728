// The server's SNI and ALPN callbacks and the state they read (immutable after the context is built).
import COpenSSL

/// What the C callbacks of a server context need; reached through `SSL_CTX_get_app_data` / the servername arg.
final class ServerCallbackState: @unchecked Sendable {
    /// One SSL_CTX and the server-name patterns it answers for (empty: its certificate's subjectAltName).
    struct Entry {
        let context: OpaquePointer
        var names: [ServerNameMatcher.Pattern]
    }

    /// Index 0 is the default.
    let entries: [Entry]
    let strictSNI: Bool
    let ticketKeys: TLSTicketKeys

    init(entries: [Entry], strictSNI: Bool, ticketKeys: TLSTicketKeys) {
        self.entries = entries
        self.strictSNI = strictSNI
        self.ticketKeys = ticketKeys
    }

    /// The context for `name`: exact names first, then wildcards, then certificates' own subjectAltNames.
    func context(forServerName name: String) -> OpaquePointer? {
        let normalized = ServerNameMatcher.normalize(name)
        for entry in entries where entry.names.contains(.exact(normalized)) { return entry.context }
        for entry in entries where entry.names.contains(where: { $0.matches(normalized) }) { return entry.context }
        for entry in entries where entry.names.isEmpty {
            guard let leaf = SSL_CTX_get0_certificate(entry.context) else { continue }
            if X509_check_host(leaf, normalized, normalized.utf8.count, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS),
                               nil) == 1 {
                return entry.context
            }
        }
        return nil
    }
}

/// Server-name patterns: `a.test` (exact) and `*.example.com` (exactly one leftmost label).
enum ServerNameMatcher {
    enum Pattern: Equatable {
        case exact(String)
        /// The suffix including its leading dot, e.g. `.example.com`.
        case wildcard(suffix: String)

        func matches(_ name: String) -> Bool {
            switch self {
            case .exact(let exact):
                return name == exact
            case .wildcard(let suffix):
                guard name.count > suffix.count, name.hasSuffix(suffix) else { return false }
                return !name.dropLast(suffix.count).contains(".")
            }
        }
    }

    /// Lower-cased, without a trailing dot.
    static func normalize(_ name: String) -> String {
        var lowered = name.lowercased()
        if lowered.hasSuffix(".") { lowered.removeLast() }
        return lowered
    }

    /// Parses a configured name; `*` is allowed only as the whole leftmost label.
    static func pattern(_ configured: String) throws -> Pattern {
        let name = normalize(configured)
        if name.hasPrefix("*.") {
            let suffix = String(name.dropFirst())
            guard suffix.count > 1, !suffix.dropFirst().contains("*") else {
                throw TLSError(.configuration, "invalid wildcard server name \"\(configured)\"")
            }
            return .wildcard(suffix: suffix)
        }
        guard !name.isEmpty, !name.contains("*") else {
            throw TLSError(.configuration, "invalid server name \"\(configured)\"")
        }
        return .exact(name)
    }
}

/// SNI: switches the session to the matching certificate's SSL_CTX, keeps the default for unknown names (or
/// sends `unrecognized_name` when strict), and accepts clients that send no name.
let serverNameCallback: cossl_servername_cb = { ssl, alert, arg in
    guard let ssl, let arg else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    let state = Unmanaged<ServerCallbackState>.fromOpaque(arg).takeUnretainedValue()
    guard let raw = SSL_get_servername(ssl, Int32(TLSEXT_NAMETYPE_host_name)) else { return SSL_TLSEXT_ERR_NOACK }
    let name = String(cString: raw)
    if let context = state.context(forServerName: name) {
        if context != state.entries[0].context, SSL_set_SSL_CTX(ssl, context) == nil {
            return SSL_TLSEXT_ERR_ALERT_FATAL
        }
        return SSL_TLSEXT_ERR_OK
    }
    if state.strictSNI {
        alert?.pointee = cossl_ad_unrecognized_name()
        return SSL_TLSEXT_ERR_ALERT_FATAL
    }
    return SSL_TLSEXT_ERR_OK
}

/// ALPN: selects `http/1.1` when offered. A client offering only other protocols (say `h2`) gets no ALPN
/// extension back (SSL_TLSEXT_ERR_NOACK) and the connection goes on as HTTP/1.1; an h2 preface then fails the
/// HTTP/1.1 parser with a 400, which is clearer to debug than a handshake alert.
let alpnSelectCallback: @convention(c) (
    OpaquePointer?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<UInt8>?,
    UnsafePointer<UInt8>?, UInt32, UnsafeMutableRawPointer?
) -> Int32 = { _, out, outLength, offered, offeredLength, _ in
    guard let out, let outLength, let offered else { return SSL_TLSEXT_ERR_NOACK }
    let wanted = Array("http/1.1".utf8)
    var index = 0
    let total = Int(offeredLength)
    while index < total {
        let length = Int(offered[index])
        let start = index + 1
        guard length > 0, start + length <= total else { break }
        if length == wanted.count && (0..<length).allSatisfy({ offered[start + $0] == wanted[$0] }) {
            out.pointee = offered + start
            outLength.pointee = UInt8(length)
            return SSL_TLSEXT_ERR_OK
        }
        index = start + length
    }
    return SSL_TLSEXT_ERR_NOACK
}
