// What a session negotiated, for routing and logs: ALPN, SNI, version, cipher, the peer's certificate.
import COpenSSL

extension TLSTransport {
    /// Whether the handshake has completed.
    public var isHandshakeComplete: Bool {
        guard let ssl else { return false }
        return !failed && SSL_is_init_finished(ssl) == 1
    }

    /// The ALPN protocol agreed on (`"http/1.1"`), or nil.
    public var negotiatedProtocol: String? {
        guard let ssl else { return nil }
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// The server name (SNI) the client sent, or on a client session the one it sends.
    public var serverName: String? {
        guard let ssl, let name = SSL_get_servername(ssl, Int32(TLSEXT_NAMETYPE_host_name)) else { return nil }
        return String(cString: name)
    }

    /// The negotiated version, e.g. `"TLSv1.3"`.
    public var protocolVersion: String? {
        guard let ssl, isHandshakeComplete, let name = SSL_get_version(ssl) else { return nil }
        return String(cString: name)
    }

    /// The negotiated cipher, e.g. `"TLS_AES_128_GCM_SHA256"`.
    public var cipher: String? {
        guard let ssl, let current = SSL_get_current_cipher(ssl), let name = SSL_CIPHER_get_name(current) else {
            return nil
        }
        return String(cString: name)
    }

    /// Whether the session was resumed from a ticket.
    public var isSessionReused: Bool {
        guard let ssl else { return false }
        return SSL_session_reused(ssl) == 1
    }

    /// The peer certificate's subject as an RFC 2253 string (`"CN=a.test,O=Formwall"`), or nil without one.
    public var peerSubject: String? {
        guard let ssl, let certificate = SSL_get0_peer_certificate(ssl),
              let name = X509_get_subject_name(certificate), let bio = BIO_new(BIO_s_mem())
        else { return nil }
        defer { BIO_free(bio) }
        guard X509_NAME_print_ex(bio, name, 0, cossl_xn_flag_rfc2253()) >= 0 else { return nil }
        var data: UnsafeMutablePointer<CChar>?
        let length = cossl_bio_get_mem_data(bio, &data)
        guard let data, length > 0 else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }

    /// The verification result of the peer's certificate (`X509_V_OK` = 0) and its text, or nil without one.
    public var peerVerifyResult: (code: Int, text: String)? {
        guard let ssl, SSL_get0_peer_certificate(ssl) != nil else { return nil }
        let code = SSL_get_verify_result(ssl)
        return (code, String(cString: X509_verify_cert_error_string(code)))
    }
}
