// The listener's TLS context: one SSL_CTX per configured certificate, all configured alike, and the C callbacks
// (SNI, ALPN, session tickets) that reach Swift state through an Unmanaged pointer.
//
//   TLSServerConfiguration --> TLSServerContext(configuration:) --+--> SSL_CTX #0 (default certificate)
//                                                                 +--> SSL_CTX #1 (b.test) ...
//   ClientHello --> servername callback --> SSL_set_SSL_CTX(#k) or default, or unrecognized_name (strictSNI)
//               --> ALPN callback ---------> "http/1.1", or no ALPN at all
//   makeTransport(over:) --> SSL_new(#0) + a BIO pair --> TLSTransport
//
// Contexts are immutable. Reloading builds a new context from the configuration; new connections take the new
// one, existing connections keep theirs (each TLSTransport retains its context).
import COpenSSL
import Reactor

/// An immutable server-side TLS context: certificates by server name, protocol settings, ticket keys.
///
/// Thread-safe to share between loops: after `init` nothing in it changes, OpenSSL locks the SSL_CTX reference
/// counts, and the ticket key ring has its own mutex.
public final class TLSServerContext: @unchecked Sendable {
    /// The configuration this context was built from.
    public let configuration: TLSServerConfiguration
    /// The session ticket keys (share them with a reloaded context to keep resumption across reloads).
    public let ticketKeys: TLSTicketKeys
    let state: ServerCallbackState

    /// Builds the context: loads every certificate and key, the client CA file, and installs the callbacks.
    /// Throws `TLSError` (`.certificate` naming the file and carrying the OpenSSL error text, or `.configuration`).
    public init(configuration: TLSServerConfiguration, ticketKeys: TLSTicketKeys? = nil) throws {
        guard !configuration.certificates.isEmpty else {
            throw TLSError(.configuration, "a TLS server needs at least one certificate")
        }
        self.configuration = configuration
        self.ticketKeys = try ticketKeys ?? TLSTicketKeys(rotationInterval: configuration.ticketKeyRotationSeconds)
        var entries: [ServerCallbackState.Entry] = []
        do {
            for certificate in configuration.certificates {
                let context = try TLSServerContext.makeContext(configuration)
                entries.append(ServerCallbackState.Entry(context: context, names: []))
                try TLSServerContext.loadCertificate(certificate.files, into: context)
                entries[entries.count - 1].names = try certificate.serverNames.map(ServerNameMatcher.pattern)
            }
        } catch {
            for entry in entries { SSL_CTX_free(entry.context) }
            throw error
        }
        state = ServerCallbackState(entries: entries, strictSNI: configuration.strictSNI, ticketKeys: self.ticketKeys)
        let raw = Unmanaged.passUnretained(state).toOpaque()
        for entry in entries {
            _ = cossl_ctx_set_app_data(entry.context, raw)
            _ = cossl_ctx_set_servername_callback(entry.context, serverNameCallback)
            _ = cossl_ctx_set_servername_arg(entry.context, raw)
            SSL_CTX_set_alpn_select_cb(entry.context, alpnSelectCallback, nil)
            if configuration.sessionTickets {
                _ = cossl_ctx_set_ticket_key_evp_cb(entry.context, ticketKeyCallback)
            }
        }
    }

    deinit {
        for entry in state.entries { SSL_CTX_free(entry.context) }
    }

    /// A new context from the same configuration (the files are read again), keeping the ticket keys. Throws if a
    /// file is now bad; the caller then keeps using this context.
    public func reloaded() throws -> TLSServerContext {
        try TLSServerContext(configuration: configuration, ticketKeys: ticketKeys)
    }

    /// A server session over `lower` (usually a `PlainTransport` of an accepted socket).
    public func makeTransport(over lower: any Transport) throws -> TLSTransport {
        try TLSTransport(context: state.entries[0].context, role: .server, lower: lower, owner: self)
    }

    /// A server session over an accepted socket.
    public func makeTransport(socket: TCPSocket) throws -> TLSTransport {
        try makeTransport(over: PlainTransport(socket))
    }

    // MARK: Building one SSL_CTX

    private static func makeContext(_ configuration: TLSServerConfiguration) throws -> OpaquePointer {
        OpenSSLErrorQueue.clear()
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw OpenSSLErrorQueue.error(.configuration, "SSL_CTX_new")
        }
        do {
            try TLSContextSettings.apply(
                to: context, minimumVersion: configuration.minimumVersion, maximumVersion: configuration.maximumVersion,
                cipherList: configuration.cipherList, cipherSuites: configuration.cipherSuites)
            var options = cossl_op_cipher_server_preference()
            if !configuration.sessionTickets { options |= cossl_op_no_ticket() }
            _ = SSL_CTX_set_options(context, options)
            // Stateless tickets only: no server-side session cache to grow with the number of clients.
            _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_SESS_CACHE_MODE, Int(SSL_SESS_CACHE_OFF), nil)
            _ = SSL_CTX_set_num_tickets(context, configuration.sessionTickets
                ? max(0, min(configuration.ticketsPerHandshake, 16)) : 0)
            _ = SSL_CTX_set_timeout(context, max(1, configuration.sessionLifetimeSeconds))
            let sessionContext = Array("formwall".utf8)
            _ = SSL_CTX_set_session_id_context(context, sessionContext, UInt32(sessionContext.count))
            try applyClientAuthentication(configuration.clientAuthentication, to: context)
            return context
        } catch {
            SSL_CTX_free(context)
            throw error
        }
    }

    private static func applyClientAuthentication(
        _ authentication: TLSServerConfiguration.ClientAuthentication, to context: OpaquePointer
    ) throws {
        let caPath: String
        let mode: Int32
        switch authentication {
        case .none:
            SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
            return
        case .optional(let path):
            caPath = path
            mode = SSL_VERIFY_PEER
        case .required(let path):
            caPath = path
            mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
        }
        OpenSSLErrorQueue.clear()
        guard SSL_CTX_load_verify_locations(context, caPath, nil) == 1 else {
            throw OpenSSLErrorQueue.error(.certificate, "client CA file \(caPath)")
        }
        guard let names = SSL_load_client_CA_file(caPath) else {
            throw OpenSSLErrorQueue.error(.certificate, "client CA names from \(caPath)")
        }
        SSL_CTX_set_client_CA_list(context, names)
        SSL_CTX_set_verify(context, mode, nil)
    }

    static func loadCertificate(_ files: TLSCertificateFiles, into context: OpaquePointer) throws {
        OpenSSLErrorQueue.clear()
        guard SSL_CTX_use_certificate_chain_file(context, files.chainPath) == 1 else {
            throw OpenSSLErrorQueue.error(.certificate, "certificate chain \(files.chainPath)")
        }
        guard SSL_CTX_use_PrivateKey_file(context, files.keyPath, SSL_FILETYPE_PEM) == 1 else {
            throw OpenSSLErrorQueue.error(.certificate, "private key \(files.keyPath)")
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw OpenSSLErrorQueue.error(
                .certificate, "private key \(files.keyPath) does not match certificate \(files.chainPath)")
        }
    }
}

/// Settings shared by server and client contexts: versions 1.2–1.3 only, ciphers, no compression, no
/// renegotiation, partial writes.
enum TLSContextSettings {
    static func apply(
        to context: OpaquePointer, minimumVersion: TLSVersion, maximumVersion: TLSVersion, cipherList: String,
        cipherSuites: String
    ) throws {
        func number(_ version: TLSVersion) -> Int32 {
            switch version {
            case .tls12: return cossl_tls1_2_version()
            case .tls13: return cossl_tls1_3_version()
            }
        }
        guard number(minimumVersion) <= number(maximumVersion) else {
            throw TLSError(
                .configuration, "minimum version \(minimumVersion.rawValue) above maximum \(maximumVersion.rawValue)")
        }
        guard cossl_ctx_set_min_proto_version(context, number(minimumVersion)) == 1,
              cossl_ctx_set_max_proto_version(context, number(maximumVersion)) == 1
        else { throw OpenSSLErrorQueue.error(.configuration, "protocol versions") }
        guard SSL_CTX_set_cipher_list(context, cipherList) == 1 else {
            throw OpenSSLErrorQueue.error(.configuration, "TLS 1.2 cipher list \"\(cipherList)\"")
        }
        guard SSL_CTX_set_ciphersuites(context, cipherSuites) == 1 else {
            throw OpenSSLErrorQueue.error(.configuration, "TLS 1.3 cipher suites \"\(cipherSuites)\"")
        }
        _ = SSL_CTX_set_options(
            context, cossl_op_no_compression() | cossl_op_no_renegotiation())
        _ = cossl_ctx_set_mode(context, cossl_mode_partial_write_moving_buffer())
    }
}
