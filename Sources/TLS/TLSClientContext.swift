// The upstream side: one SSL_CTX that verifies servers (system store or a CA file) and, per session, checks the
// host name (SSL_set1_host) and sends SNI.
//
//   TLSClientConfiguration --> TLSClientContext --> makeTransport(over:serverName:) --> TLSTransport (connect state)
import COpenSSL
import Glibc
import Reactor

/// An immutable client-side TLS context for HTTPS upstreams.
///
/// Thread-safe to share between loops: nothing in it changes after `init`.
public final class TLSClientContext: @unchecked Sendable {
    /// The configuration this context was built from.
    public let configuration: TLSClientConfiguration
    let context: OpaquePointer

    /// Builds the context. Throws `TLSError` if a file cannot be loaded or a setting is invalid.
    public init(configuration: TLSClientConfiguration) throws {
        self.configuration = configuration
        OpenSSLErrorQueue.clear()
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw OpenSSLErrorQueue.error(.configuration, "SSL_CTX_new")
        }
        do {
            try TLSContextSettings.apply(
                to: context, minimumVersion: configuration.minimumVersion, maximumVersion: configuration.maximumVersion,
                cipherList: configuration.cipherList, cipherSuites: configuration.cipherSuites)
            try TLSClientContext.applyTrust(configuration, to: context)
            if let files = configuration.clientCertificate {
                try TLSServerContext.loadCertificate(files, into: context)
            }
            var wire: [UInt8] = []
            for name in configuration.applicationProtocols {
                let bytes = Array(name.utf8)
                guard !bytes.isEmpty, bytes.count <= 255 else {
                    throw TLSError(.configuration, "invalid ALPN protocol name \"\(name)\"")
                }
                wire.append(UInt8(bytes.count))
                wire += bytes
            }
            // Inverted convention: 0 is success.
            if !wire.isEmpty, SSL_CTX_set_alpn_protos(context, wire, UInt32(wire.count)) != 0 {
                throw OpenSSLErrorQueue.error(.configuration, "ALPN protocols")
            }
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        self.context = context
    }

    deinit { SSL_CTX_free(context) }

    /// A client session over `lower` (a connected socket's transport) that verifies `serverName` (a DNS name or an
    /// IP literal) and sends it as SNI when it is a DNS name.
    /// Pass a `session` taken from an earlier connection to the same upstream to resume it (no full handshake).
    public func makeTransport(
        over lower: any Transport, serverName: String, resuming session: TLSSession? = nil
    ) throws -> TLSTransport {
        let transport = try TLSTransport(context: context, role: .client, lower: lower, owner: self)
        try transport.configureClient(serverName: serverName, verify: !configuration.insecureSkipVerification)
        if let session, let ssl = transport.ssl {
            _ = SSL_set_session(ssl, session.pointer)  // a session the server no longer accepts means a full handshake
        }
        return transport
    }

    /// A client session over a connected socket.
    public func makeTransport(
        socket: TCPSocket, serverName: String, resuming session: TLSSession? = nil
    ) throws -> TLSTransport {
        try makeTransport(over: PlainTransport(socket), serverName: serverName, resuming: session)
    }

    private static func applyTrust(_ configuration: TLSClientConfiguration, to context: OpaquePointer) throws {
        if configuration.insecureSkipVerification {
            SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
            return
        }
        switch configuration.trust {
        case .system:
            guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                throw OpenSSLErrorQueue.error(.certificate, "system trust store")
            }
        case .caFile(let path):
            guard SSL_CTX_load_verify_locations(context, path, nil) == 1 else {
                throw OpenSSLErrorQueue.error(.certificate, "CA file \(path)")
            }
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
    }
}

extension TLSTransport {
    /// Host name (or IP) verification and SNI for a client session.
    func configureClient(serverName name: String, verify: Bool) throws {
        guard let ssl else { throw TLSError(.closed, "session already closed") }
        // "example.com." and "example.com" are the same host; SNI and the certificate carry the latter.
        let serverName = name.hasSuffix(".") ? String(name.dropLast()) : name
        guard !serverName.isEmpty else { throw TLSError(.configuration, "empty upstream server name") }
        var address = in6_addr()
        let isIPv4 = serverName.withCString { inet_pton(AF_INET, $0, &address) } == 1
        let isIPv6 = serverName.withCString { inet_pton(AF_INET6, $0, &address) } == 1
        OpenSSLErrorQueue.clear()
        if !isIPv4 && !isIPv6 {
            // SNI carries DNS names only (RFC 6066 §3).
            guard cossl_set_tlsext_host_name(ssl, serverName) == 1 else {
                throw OpenSSLErrorQueue.error(.configuration, "SNI name \"\(serverName)\"")
            }
        }
        guard verify else { return }
        if isIPv4 || isIPv6 {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1 else {
                throw OpenSSLErrorQueue.error(.configuration, "verify IP \(serverName)")
            }
        } else {
            guard SSL_set1_host(ssl, serverName) == 1 else {
                throw OpenSSLErrorQueue.error(.configuration, "verify host \"\(serverName)\"")
            }
        }
    }
}

/// A resumable client session (an `SSL_SESSION` reference), taken from a finished connection with
/// `TLSTransport.resumableSession` and handed to the next `makeTransport(...resuming:)` for the same upstream.
public final class TLSSession: @unchecked Sendable {
    let pointer: OpaquePointer

    init(retaining pointer: OpaquePointer) { self.pointer = pointer }

    deinit { SSL_SESSION_free(pointer) }
}

extension TLSTransport {
    /// The session to resume on the next connection, if the server issued a resumable one (with TLS 1.3 the
    /// ticket arrives after the handshake, so take it after the first response was read).
    public var resumableSession: TLSSession? {
        guard let ssl, let session = SSL_get1_session(ssl) else { return nil }
        guard SSL_SESSION_is_resumable(session) == 1 else {
            SSL_SESSION_free(session)
            return nil
        }
        return TLSSession(retaining: session)
    }
}
