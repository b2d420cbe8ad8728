// Configuration of the TLS contexts: plain values, validated when a context is built from them.

/// A TLS protocol version this module can negotiate. Only TLS 1.2 and 1.3 exist here.
public enum TLSVersion: String, Sendable, Equatable, CaseIterable {
    /// TLS 1.2 (RFC 5246).
    case tls12 = "TLSv1.2"
    /// TLS 1.3 (RFC 8446).
    case tls13 = "TLSv1.3"
}

/// A certificate chain and its private key, both PEM files.
public struct TLSCertificateFiles: Sendable, Equatable {
    /// PEM file with the leaf certificate first, then intermediates.
    public var chainPath: String
    /// PEM file with the private key of the leaf.
    public var keyPath: String

    /// Names the chain and key files.
    public init(chainPath: String, keyPath: String) {
        self.chainPath = chainPath
        self.keyPath = keyPath
    }
}

/// Settings of a `TLSServerContext` (the listener side).
public struct TLSServerConfiguration: Sendable, Equatable {
    /// One certificate and the server names (SNI) it answers for.
    public struct Certificate: Sendable, Equatable {
        /// The chain and key files.
        public var files: TLSCertificateFiles
        /// Exact names (`a.test`) and wildcards (`*.example.com`, one label). Empty: the names in the
        /// certificate's subjectAltName (matched with `X509_check_host`).
        public var serverNames: [String]

        /// A certificate for `serverNames` (empty: the names the certificate itself lists).
        public init(chainPath: String, keyPath: String, serverNames: [String] = []) {
            self.files = TLSCertificateFiles(chainPath: chainPath, keyPath: keyPath)
            self.serverNames = serverNames
        }
    }

    /// Whether and how clients must present a certificate (mTLS).
    public enum ClientAuthentication: Sendable, Equatable {
        /// No certificate is requested.
        case none
        /// A certificate is requested; if one is sent it must verify against the CA file, else the handshake goes on.
        case optional(caPath: String)
        /// A certificate verifying against the CA file is required (SSL_VERIFY_FAIL_IF_NO_PEER_CERT).
        case required(caPath: String)
    }

    /// The certificates; the first is the default for clients that send no or an unknown server name.
    public var certificates: [Certificate]
    /// The oldest version accepted. Default TLS 1.3; `.tls12` admits TLS 1.2 clients too.
    public var minimumVersion: TLSVersion = .tls13
    /// The newest version offered (TLS 1.3 unless pinned to 1.2 for a test or an old peer).
    public var maximumVersion: TLSVersion = .tls13
    /// TLS 1.2 cipher list (OpenSSL syntax): ECDHE with AEAD only.
    public var cipherList = TLSServerConfiguration.modernCipherList
    /// TLS 1.3 cipher suites (OpenSSL syntax).
    public var cipherSuites = TLSServerConfiguration.modernCipherSuites
    /// Unknown server names get a fatal `unrecognized_name` alert instead of the default certificate. A client
    /// that sends no name at all still gets the default certificate.
    public var strictSNI = false
    /// Client certificates (mTLS).
    public var clientAuthentication: ClientAuthentication = .none
    /// Resumption with stateless session tickets; off means every connection does a full handshake.
    public var sessionTickets = true
    /// Tickets sent after a TLS 1.3 handshake (`SSL_CTX_set_num_tickets`).
    public var ticketsPerHandshake = 2
    /// How long a session (and so a ticket) may be resumed, in seconds (`SSL_CTX_set_timeout`).
    public var sessionLifetimeSeconds = 3600
    /// How often the ticket encryption key is replaced; the previous key still decrypts for one more interval.
    public var ticketKeyRotationSeconds = 3600

    /// The default TLS 1.2 cipher list: forward secret, AEAD only, ECDSA before RSA.
    public static let modernCipherList = [
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    ].joined(separator: ":")
    /// The default TLS 1.3 cipher suites.
    public static let modernCipherSuites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

    /// A configuration serving `certificates` (the first is the default).
    public init(certificates: [Certificate]) {
        self.certificates = certificates
    }
}

/// Settings of a `TLSClientContext` (the side that connects to an HTTPS upstream).
public struct TLSClientConfiguration: Sendable, Equatable {
    /// Where trusted CA certificates come from.
    public enum Trust: Sendable, Equatable {
        /// The system store (`SSL_CTX_set_default_verify_paths`).
        case system
        /// One PEM file of CA certificates.
        case caFile(String)
    }

    /// The trust anchors for the upstream's certificate.
    public var trust: Trust = .system
    /// Skips certificate and host name verification. Dangerous: only for tests and explicitly configured upstreams.
    public var insecureSkipVerification = false
    /// A client certificate for mTLS to the upstream.
    public var clientCertificate: TLSCertificateFiles?
    /// The oldest version accepted from the upstream. Default TLS 1.2, which most upstreams still speak.
    public var minimumVersion: TLSVersion = .tls12
    /// The newest version offered.
    public var maximumVersion: TLSVersion = .tls13
    /// TLS 1.2 cipher list.
    public var cipherList = TLSServerConfiguration.modernCipherList
    /// TLS 1.3 cipher suites.
    public var cipherSuites = TLSServerConfiguration.modernCipherSuites
    /// ALPN protocols offered, in preference order.
    public var applicationProtocols = ["http/1.1"]

    /// A configuration trusting `trust`.
    public init(trust: Trust = .system) {
        self.trust = trust
    }
}
