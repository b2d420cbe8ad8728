import Rules
import Testing
@testable import Proxy

// HTTP conformance at the edges of a first deployment, through ConnectionMachine and ExchangeRig: the header
// that tells the upstream what was stripped, CORS preflights on routes with `methods`, and Upgrade requests.

private let conformanceRules = """
route /spool {
    upstream-body spool;
    unknown strip;
    field title;
    file doc { max 4; action strip; }
}
route /spool-off {
    upstream-body spool;
    modified-header off;
    file doc { max 4; action strip; }
}
route /spool-named {
    upstream-body spool;
    modified-header X-Stripped;
    file doc { max 4; action strip; }
}
route /chunked {
    file doc { max 4; action strip; }
}
route /cors {
    methods POST;
}
route /cors-strict {
    methods POST;
    preflight reject;
}
"""

private func rig() throws -> ExchangeRig {
    let (compiled, diagnostics) = RuleChecker.compile(source: conformanceRules, file: "conformance.rules")
    let policy: Policy = try #require(compiled, "\(diagnostics)")
    return ExchangeRig(config: try ExchangeRig.configuration(), policy: policy)
}

private func post(_ path: String, _ parts: [(String, String?, String)], extra: String = "") -> [UInt8] {
    var body = ""
    for (name, filename, value) in parts {
        body += "--B\r\nContent-Disposition: form-data; name=\"\(name)\""
        if let filename { body += "; filename=\"\(filename)\"\r\nContent-Type: text/plain" }
        body += "\r\n\r\n\(value)\r\n"
    }
    body += "--B--\r\n"
    return Array(("POST \(path) HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\n"
        + "Content-Length: \(body.utf8.count)\r\n\(extra)\r\n" + body).utf8)
}

private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

private func upstreamHead(_ r: ExchangeRig) -> String {
    guard let first = r.connections.first else { return "" }
    // The head with each field's CRLF, without the blank line.
    return String(text(first.received).split(separator: "\r\n\r\n", maxSplits: 1).first ?? "") + "\r\n"
}

@Suite struct ModifiedHeaderTests {
    @Test func spooledRequestListsStrippedPartsAndDropsTheClientsCopy() throws {
        let r = try rig()
        // The client's own X-Formwall-Modified, and its attempt to have Connection drop Formwall's, both fail.
        r.run(client: post("/spool", [("title", nil, "t"), ("doc", "a.txt", "too long"), ("junk", nil, "j"),
                                      ("we ird,=", nil, "x")],
                           extra: "X-Formwall-Modified: forged\r\nConnection: X-Formwall-Modified\r\n"),
              clientEOF: false)
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 200"))
        let head = upstreamHead(r)
        #expect(head.contains("\r\nX-Formwall-Modified: stripped=doc,junk,we%20ird%2C%3D\r\n"), "\(head)")
        #expect(!head.contains("forged"))
        #expect(head.components(separatedBy: "X-Formwall-Modified").count == 2)
        #expect(r.violations() == [])
    }

    @Test func nothingStrippedMeansNoField() throws {
        let r = try rig()
        r.run(client: post("/spool", [("title", nil, "t"), ("doc", "a.txt", "ok")],
                           extra: "X-Formwall-Modified: forged\r\n"), clientEOF: false)
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 200"))
        #expect(!upstreamHead(r).lowercased().contains("x-formwall-modified"))
    }

    @Test func chunkedModeSendsATrailerAndDropsTheClientsCopy() throws {
        let r = try rig()
        r.run(client: post("/chunked", [("doc", "a.txt", "too long")], extra: "X-Formwall-Modified: forged\r\n"),
              clientEOF: false)
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 200"))
        let head = upstreamHead(r)
        #expect(!head.contains("forged"))
        #expect(!head.lowercased().contains("\r\nx-formwall-modified:"), "no field in the head, only the announcement")
        #expect(head.contains("\r\nTrailer: X-Formwall-Modified\r\n"))
        let all = text(r.connections[0].received)
        #expect(all.hasSuffix("\r\n0\r\nX-Formwall-Modified: stripped=doc\r\n\r\n"))
    }

    @Test func offAndRenamed() throws {
        let off = try rig()
        off.run(client: post("/spool-off", [("doc", "a.txt", "too long")]), clientEOF: false)
        #expect(!upstreamHead(off).contains("stripped="))
        let named = try rig()
        named.run(client: post("/spool-named", [("doc", "a.txt", "too long")]), clientEOF: false)
        #expect(upstreamHead(named).contains("\r\nX-Stripped: stripped=doc\r\n"))
        #expect(!upstreamHead(named).contains("X-Formwall-Modified"))
    }

    @Test func valueFormat() {
        func record(_ name: String, _ action: String) -> PartRecord {
            var r = PartRecord(index: 0, part: .init(name: Array(name.utf8)))
            r.action = action
            return r
        }
        #expect(ConnectionMachine.modifiedValue([record("a", "forward")]) == nil)
        #expect(ConnectionMachine.modifiedValue([record("a", "strip"), record("s", "quarantine"),
                                                 record("a", "strip"), record("ü", "strip")])
            == "stripped=a,%C3%BC; quarantined=s")
    }

    @Test(arguments: ["content-length", "Via", "X-Request-Id", "bad name", "X:y"])
    func managedOrInvalidNamesAreRefused(name: String) {
        let (policy, diagnostics) = RuleChecker.compile(source: "modified-header \"\(name)\";", file: "t.rules")
        #expect(policy == nil, "\(diagnostics)")
    }
}

@Suite struct PreflightTests {
    private func options(_ path: String, extra: String) -> [UInt8] {
        Array("OPTIONS \(path) HTTP/1.1\r\nHost: a\r\n\(extra)\r\n".utf8)
    }

    private let cors = "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n"

    @Test func preflightPassesARouteWithMethodsByDefault() throws {
        let r = try rig()
        r.run(client: options("/cors", extra: cors), clientEOF: false)
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 200"))
        #expect(upstreamHead(r).hasPrefix("OPTIONS /cors HTTP/1.1\r\n"))
        #expect(r.violations() == [])
    }

    @Test(arguments: [
        ("/cors-strict", "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n"),
        ("/cors", "Origin: https://app.example\r\n"),
        ("/cors", "Access-Control-Request-Method: POST\r\n"),
        ("/cors", "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\nContent-Length: 2\r\n"
            + "Content-Type: multipart/form-data; boundary=B\r\n"),
    ])
    func otherOptionsRequestsStill405(path: String, extra: String) throws {
        let r = try rig()
        r.run(client: options(path, extra: extra) + Array((extra.contains("Length") ? "xx" : "").utf8))
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 405"))
        #expect(r.connections.isEmpty)
    }

    @Test func unknownModeIsAnError() {
        let (policy, _) = RuleChecker.compile(source: "route / { preflight maybe; }", file: "t.rules")
        #expect(policy == nil)
    }
}

@Suite struct UpgradeTests {
    @Test(arguments: ["websocket", "WebSocket", "h2c, websocket", "TLS/1.2"])
    func upgradeIsRefusedWith501(proto: String) throws {
        let r = ExchangeRig(config: try ExchangeRig.configuration(), policy: nil)
        r.run(client: Array(("GET /chat HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: \(proto)\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8))
        let answer = text(r.clientReceived)
        #expect(answer.hasPrefix("HTTP/1.1 501 Not Implemented\r\n"))
        #expect(answer.contains("\"error\":\"upgrade_not_supported\""))
        #expect(r.connections.isEmpty)
        #expect(r.records.first??.reason == "upgrade_not_supported")
        #expect(r.violations() == [])
    }

    @Test func h2cIsIgnoredAndDropped() throws {
        let r = ExchangeRig(config: try ExchangeRig.configuration(), policy: nil)
        r.run(client: Array("GET /x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n".utf8), clientEOF: false)
        #expect(text(r.clientReceived).hasPrefix("HTTP/1.1 200"))
        #expect(!upstreamHead(r).lowercased().contains("upgrade"))
    }
}
