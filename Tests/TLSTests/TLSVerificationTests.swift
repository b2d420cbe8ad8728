// Certificates: bad files, client certificates (mTLS), host name verification, expiry, verification off.
import Reactor
import Testing
@testable import TLS

@Suite struct TLSVerificationTests {
    let certificates = Certificates.shared

    @Test func badCertificateFilesThrowWithPathAndOpenSSLText() throws {
        let missing = TLSServerConfiguration(certificates: [certificates.certificate("nonexistent")])
        let error = #expect(throws: TLSError.self) { try TLSServerContext(configuration: missing) }
        #expect(error?.code == .certificate)
        #expect(error?.reason.contains(certificates.path("nonexistent.pem")) == true)
        #expect(error?.reason.contains("error:") == true)

        let garbage = TLSServerConfiguration(certificates: [
            .init(chainPath: certificates.path("garbage.pem"), keyPath: certificates.path("a.key")),
        ])
        #expect(throws: TLSError.self) { try TLSServerContext(configuration: garbage) }

        let mismatched = TLSServerConfiguration(certificates: [
            .init(chainPath: certificates.path("a.pem"), keyPath: certificates.path("b.key")),
        ])
        let mismatch = #expect(throws: TLSError.self) { try TLSServerContext(configuration: mismatched) }
        #expect(mismatch?.reason.contains("does not match") == true || mismatch?.reason.contains("key values") == true)

        var badCiphers = certificates.serverConfiguration()
        badCiphers.cipherList = "NOT-A-CIPHER"
        let cipherError = #expect(throws: TLSError.self) { try TLSServerContext(configuration: badCiphers) }
        #expect(cipherError?.code == .configuration)
        #expect(throws: TLSError.self) { try TLSServerContext(configuration: TLSServerConfiguration(certificates: [])) }
    }

    private func mtlsServer(_ mode: (String) -> TLSServerConfiguration.ClientAuthentication) -> TLSServerConfiguration {
        var configuration = certificates.serverConfiguration()
        configuration.clientAuthentication = mode(certificates.path("ca.pem"))
        return configuration
    }

    private func client(certificate: String?) -> TLSClientConfiguration {
        var configuration = certificates.clientConfiguration()
        configuration.clientCertificate = certificate.map(certificates.files)
        return configuration
    }

    @Test(arguments: [TLSVersion.tls12, .tls13])
    func mtlsRequiredAcceptsAValidClientCertificate(version: TLSVersion) throws {
        var serverConfiguration = mtlsServer { .required(caPath: $0) }
        serverConfiguration.minimumVersion = .tls12
        var clientConfiguration = client(certificate: "client")
        clientConfiguration.maximumVersion = version
        let (client, server, _) = try makePair(server: serverConfiguration, client: clientConfiguration)
        let outcome = handshake(client, server)
        #expect(outcome.clientError == nil && outcome.serverError == nil)
        #expect(server.peerSubject == "O=Formwall,CN=client.test")
        #expect(server.peerVerifyResult?.code == 0)
    }

    @Test(arguments: [TLSVersion.tls12, .tls13])
    func mtlsRequiredRejectsAMissingClientCertificate(version: TLSVersion) throws {
        var serverConfiguration = mtlsServer { .required(caPath: $0) }
        serverConfiguration.minimumVersion = .tls12
        var clientConfiguration = client(certificate: nil)
        clientConfiguration.maximumVersion = version
        let (client, server, _) = try makePair(server: serverConfiguration, client: clientConfiguration)
        let outcome = handshake(client, server)
        #expect(outcome.serverTLS?.code == .peerVerificationFailed)
        #expect(outcome.clientError != nil)
    }

    @Test func mtlsRejectsAClientCertificateFromAnotherCA() throws {
        let (client, server, _) = try makePair(
            server: mtlsServer { .required(caPath: $0) }, client: client(certificate: "rogue"))
        let outcome = handshake(client, server)
        #expect(outcome.serverTLS?.code == .peerVerificationFailed)
        #expect(outcome.serverTLS?.reason.contains("unable to get local issuer certificate") == true)
        #expect(outcome.clientError != nil)
    }

    @Test func mtlsOptionalAcceptsBothButStillVerifies() throws {
        let optional = mtlsServer { .optional(caPath: $0) }
        let (client, server, _) = try makePair(server: optional, client: client(certificate: nil))
        #expect(handshake(client, server).serverError == nil)
        #expect(server.peerSubject == nil)
        let (client2, server2, _) = try makePair(server: optional, client: self.client(certificate: "client"))
        #expect(handshake(client2, server2).serverError == nil)
        #expect(server2.peerSubject == "O=Formwall,CN=client.test")
        let (client3, server3, _) = try makePair(server: optional, client: self.client(certificate: "rogue"))
        #expect(handshake(client3, server3).serverTLS?.code == .peerVerificationFailed)
    }

    @Test func hostNameVerification() throws {
        let (client, server, _) = try makePair(serverName: "localhost")
        #expect(handshake(client, server).clientError == nil)
        // The server answers unknown.test with the default certificate (a.test, localhost): the client refuses it.
        let (client2, server2, _) = try makePair(serverName: "unknown.test")
        let outcome = handshake(client2, server2)
        #expect(outcome.clientTLS?.code == .peerVerificationFailed)
        #expect(outcome.clientTLS?.reason.contains("hostname mismatch") == true)
        #expect(outcome.serverError != nil)
    }

    @Test func wrongHostCertificateFails() throws {
        let configuration = TLSServerConfiguration(certificates: [certificates.certificate("wrong")])
        let (client, server, _) = try makePair(server: configuration, serverName: "a.test")
        #expect(handshake(client, server).clientTLS?.code == .peerVerificationFailed)
    }

    @Test func untrustedServerFails() throws {
        var clientConfiguration = certificates.clientConfiguration()
        clientConfiguration.trust = .caFile(certificates.path("otherca.pem"))
        let (client, server, _) = try makePair(client: clientConfiguration)
        #expect(handshake(client, server).clientTLS?.code == .peerVerificationFailed)
    }

    @Test func expiredCertificateFailsUnlessVerificationIsOff() throws {
        let configuration = TLSServerConfiguration(certificates: [certificates.certificate("expired")])
        let (client, server, _) = try makePair(server: configuration)
        let outcome = handshake(client, server)
        #expect(outcome.clientTLS?.code == .peerVerificationFailed)
        #expect(outcome.clientTLS?.reason.contains("certificate has expired") == true)

        var insecure = certificates.clientConfiguration()
        insecure.insecureSkipVerification = true
        let (client2, server2, _) = try makePair(server: configuration, client: insecure)
        let outcome2 = handshake(client2, server2)
        #expect(outcome2.clientError == nil && outcome2.serverError == nil)
        #expect(client2.peerSubject == "CN=expired.test")
    }

    @Test func clientContextFiles() throws {
        var configuration = certificates.clientConfiguration()
        configuration.trust = .caFile(certificates.path("missing.pem"))
        let error = #expect(throws: TLSError.self) { try TLSClientContext(configuration: configuration) }
        #expect(error?.reason.contains("missing.pem") == true)
        #expect(throws: Never.self) { try TLSClientContext(configuration: TLSClientConfiguration()) }
    }
}

@Suite struct TLSSNIClientAuthenticationTests {
    @Test func switchedContextStillRequiresTheClientCertificate() throws {
        let certificates = Certificates.shared
        var configuration = certificates.serverConfiguration()
        configuration.clientAuthentication = .required(caPath: certificates.path("ca.pem"))
        let (client, server, _) = try makePair(server: configuration, serverName: "b.test")
        #expect(handshake(client, server).serverTLS?.code == .peerVerificationFailed)
        var withCertificate = certificates.clientConfiguration()
        withCertificate.clientCertificate = certificates.files("client")
        let (client2, server2, _) = try makePair(server: configuration, client: withCertificate, serverName: "b.test")
        #expect(handshake(client2, server2).serverError == nil)
        #expect(client2.peerSubject == "CN=b.test")
        #expect(server2.peerSubject == "O=Formwall,CN=client.test")
    }
}
