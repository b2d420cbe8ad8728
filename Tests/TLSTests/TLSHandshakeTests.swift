// Handshakes in memory: versions, ALPN, SNI (exact, wildcard, unknown, strict), resumption with rotating keys.
import Reactor
import Testing
@testable import TLS

@Suite struct TLSHandshakeTests {
    @Test func tls13ByDefaultWithALPN() throws {
        let (client, server, _) = try makePair()
        let outcome = handshake(client, server)
        #expect(outcome.clientError == nil && outcome.serverError == nil)
        #expect(client.isHandshakeComplete && server.isHandshakeComplete)
        #expect(server.protocolVersion == "TLSv1.3")
        #expect(client.protocolVersion == "TLSv1.3")
        #expect(server.negotiatedProtocol == "http/1.1")
        #expect(client.negotiatedProtocol == "http/1.1")
        #expect(server.serverName == "a.test")
        #expect(server.cipher?.hasPrefix("TLS_") == true)
        #expect(client.peerSubject == "CN=a.test")
        #expect(client.peerVerifyResult?.code == 0)
        #expect(server.peerSubject == nil)
    }

    @Test func tls12WhenAllowed() throws {
        var serverConfiguration = Certificates.shared.serverConfiguration()
        serverConfiguration.minimumVersion = .tls12
        var clientConfiguration = Certificates.shared.clientConfiguration()
        clientConfiguration.maximumVersion = .tls12
        let (client, server, _) = try makePair(server: serverConfiguration, client: clientConfiguration)
        let outcome = handshake(client, server)
        #expect(outcome.clientError == nil && outcome.serverError == nil)
        #expect(server.protocolVersion == "TLSv1.2")
        #expect(server.cipher == "ECDHE-ECDSA-AES128-GCM-SHA256")
        #expect(client.negotiatedProtocol == "http/1.1")
    }

    @Test func tls12RefusedByDefault() throws {
        var clientConfiguration = Certificates.shared.clientConfiguration()
        clientConfiguration.maximumVersion = .tls12
        let (client, server, _) = try makePair(client: clientConfiguration)
        let outcome = handshake(client, server)
        #expect(outcome.serverTLS?.code == .handshakeFailed)
        #expect(outcome.serverTLS?.reason.contains("unsupported protocol") == true)
        #expect(outcome.clientTLS?.code == .handshakeFailed)
    }

    @Test func clientOfferingOnlyH2GetsNoALPN() throws {
        var clientConfiguration = Certificates.shared.clientConfiguration()
        clientConfiguration.applicationProtocols = ["h2"]
        let (client, server, _) = try makePair(client: clientConfiguration)
        let outcome = handshake(client, server)
        #expect(outcome.clientError == nil && outcome.serverError == nil)
        #expect(server.negotiatedProtocol == nil)
        #expect(client.negotiatedProtocol == nil)
    }

    @Test(arguments: [("b.test", "CN=b.test"), ("x.b.test", "CN=b.test"), ("B.TEST.", "CN=b.test"),
                      ("localhost", "CN=a.test"), ("a.test", "CN=a.test")])
    func sniPicksTheCertificate(name: String, subject: String) throws {
        let (client, server, _) = try makePair(serverName: name)
        let outcome = handshake(client, server)
        #expect(outcome.clientError == nil && outcome.serverError == nil)
        #expect(client.peerSubject == subject)
    }

    @Test func sniFallsBackToSubjectAltNames() throws {
        // No explicit names: the wrong.test certificate answers for the names in its own subjectAltName.
        var configuration = Certificates.shared.serverConfiguration()
        configuration.certificates.append(Certificates.shared.certificate("wrong"))
        let (client, server, _) = try makePair(server: configuration, serverName: "wrong.test")
        #expect(handshake(client, server).clientError == nil)
        #expect(client.peerSubject == "CN=wrong.test")
    }

    @Test func unknownNameGetsTheDefaultCertificate() throws {
        var clientConfiguration = Certificates.shared.clientConfiguration()
        clientConfiguration.insecureSkipVerification = true
        let (client, server, _) = try makePair(client: clientConfiguration, serverName: "unknown.test")
        let outcome = handshake(client, server)
        #expect(outcome.clientError == nil && outcome.serverError == nil)
        #expect(client.peerSubject == "CN=a.test")
        #expect(server.serverName == "unknown.test")
    }

    @Test func strictSNIRejectsUnknownNames() throws {
        var configuration = Certificates.shared.serverConfiguration()
        configuration.strictSNI = true
        let (client, server, _) = try makePair(server: configuration, serverName: "unknown.test")
        let outcome = handshake(client, server)
        #expect(outcome.serverTLS?.code == .handshakeFailed)
        #expect(outcome.clientTLS?.code == .handshakeFailed)
        #expect(outcome.clientTLS?.reason.contains("unrecognized name") == true)
        // A known name still works under strict SNI.
        let (client2, server2, _) = try makePair(server: configuration, serverName: "b.test")
        #expect(handshake(client2, server2).serverError == nil)
        #expect(client2.peerSubject == "CN=b.test")
    }

    @Test func resumptionSurvivesOneRotationNotTwo() throws {
        let context = try TLSServerContext(configuration: Certificates.shared.serverConfiguration())
        func connect(_ session: TLSSession?) throws -> (reused: Bool, session: TLSSession?) {
            let (client, server, _) = try makePair(resuming: session, serverContext: context)
            let outcome = handshake(client, server)
            #expect(outcome.clientError == nil && outcome.serverError == nil)
            return (client.isSessionReused, client.resumableSession)
        }
        let first = try connect(nil)
        #expect(first.reused == false)
        let session = try #require(first.session)
        #expect(try connect(session).reused == true)
        context.ticketKeys.rotate()
        #expect(try connect(session).reused == true)  // the previous key still decrypts
        context.ticketKeys.rotate()
        #expect(try connect(session).reused == false)  // dropped after the second rotation
    }

    @Test func ticketKeysRotateOnTheirOwnAfterTheInterval() throws {
        let keys = try TLSTicketKeys(rotationInterval: 60)
        let first = keys.encryptionKey(at: TLSTicketKeys.monotonicSeconds())
        let same = keys.encryptionKey(at: first.created + 59)
        #expect(same.name == first.name)
        let next = keys.encryptionKey(at: first.created + 60)
        #expect(next.name != first.name)
        #expect(first.name.withUnsafeBufferPointer { keys.decryptionKey(named: $0.baseAddress!)?.isCurrent } == false)
        #expect(next.name.withUnsafeBufferPointer { keys.decryptionKey(named: $0.baseAddress!)?.isCurrent } == true)
    }

    @Test func reloadedContextKeepsTicketsAndServes() throws {
        let context = try TLSServerContext(configuration: Certificates.shared.serverConfiguration())
        let (client, server, _) = try makePair(serverContext: context)
        #expect(handshake(client, server).clientError == nil)
        let session = try #require(client.resumableSession)
        let reloaded = try context.reloaded()
        #expect(reloaded !== context)
        let (client2, server2, _) = try makePair(resuming: session, serverContext: reloaded)
        #expect(handshake(client2, server2).clientError == nil)
        #expect(client2.isSessionReused)
    }

    @Test func ticketsCanBeTurnedOff() throws {
        var configuration = Certificates.shared.serverConfiguration()
        configuration.sessionTickets = false
        let context = try TLSServerContext(configuration: configuration)
        let (client, server, _) = try makePair(serverContext: context)
        #expect(handshake(client, server).clientError == nil)
        #expect(client.resumableSession == nil)
    }
}
