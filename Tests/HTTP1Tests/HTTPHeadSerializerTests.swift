import Testing

@testable import HTTP1

@Suite struct HTTPHeadSerializerTests {
    let context = HTTPForwardingContext(clientAddress: "203.0.113.7", scheme: "https", requestID: "req-1")

    func serialize(_ head: HTTPRequestHead, framing: BodyFraming, context: HTTPForwardingContext? = nil) -> String {
        var buffer: [UInt8] = []
        HTTPHeadSerializer.writeRequestHead(head, framing: framing, context: context ?? self.context, into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    @Test func requestHeadDropsHopByHopAndAddsForwardingFields() {
        let request = """
            POST /upload HTTP/1.1\r
            Host: app.example\r
            Connection: keep-alive, X-Secret\r
            Keep-Alive: timeout=5\r
            Proxy-Connection: keep-alive\r
            TE: trailers\r
            Trailer: X-Checksum\r
            Upgrade: websocket\r
            X-Secret: s\r
            Transfer-Encoding: chunked\r
            Expect: 100-continue\r
            X-Forwarded-For: 198.51.100.1\r
            X-Forwarded-Proto: http\r
            X-Forwarded-Host: evil\r
            X-Request-Id: client-id\r
            Via: 1.0 edge\r
            Proxy-Authorization: Basic abc\r
            Content-Type: multipart/form-data; boundary=x\r
            \r

            """
        guard let head = parseRequest(request).head else {
            Issue.record("fixture did not parse")
            return
        }
        let expected = """
            POST /upload HTTP/1.1\r
            Host: app.example\r
            Proxy-Authorization: Basic abc\r
            Content-Type: multipart/form-data; boundary=x\r
            Content-Length: 1234\r
            X-Forwarded-For: 198.51.100.1, 203.0.113.7\r
            X-Forwarded-Proto: https\r
            X-Forwarded-Host: app.example\r
            Via: 1.0 edge, 1.1 formwall\r
            X-Request-Id: req-1\r
            \r

            """
        #expect(serialize(head, framing: .contentLength(1234)) == expected)
    }

    /// Path overrides (older Symfony and Zend read them as the path) are dropped in any spelling; method overrides
    /// are forwarded (the policy judges them) and listed by `methodOverrides`.
    @Test func pathOverridesAreDroppedMethodOverridesListed() throws {
        let request = """
            POST /upload HTTP/1.1\r
            Host: app.example\r
            X-Original-URL: /admin\r
            x-rewrite-url: /admin\r
            X-ORIGINAL-URL: /admin\r
            X-HTTP-Method-Override: DELETE\r
            x-http-method: PUT\r
            X-Method-Override: patch\r
            X-Original-URLs: kept\r
            \r

            """
        let head = try #require(parseRequest(request).head)
        let text = serialize(head, framing: .none)
        #expect(!text.lowercased().contains("x-original-url:") && !text.lowercased().contains("x-rewrite-url"))
        #expect(text.contains("X-Original-URLs: kept\r\n"))
        #expect(text.contains("X-HTTP-Method-Override: DELETE\r\n") && text.contains("X-Method-Override: patch\r\n"))
        #expect(head.headers.methodOverrides.map { "\($0.name)=\($0.value)" }
            == ["X-HTTP-Method-Override=DELETE", "x-http-method=PUT", "X-Method-Override=patch"])
        let plain = try #require(parseRequest("GET / HTTP/1.1\r\nHost: a\r\nX-HTTP-Method-Overrid: x\r\n\r\n").head)
        #expect(plain.headers.methodOverrides.isEmpty)
    }

    /// Fields whose names hold a `_` (PHP and CGI servers read `X_Original_URL` as `X-Original-URL`): dropped by
    /// default; when kept, those read as a field the serializer sets or drops are still left out.
    @Test func underscoredFields() throws {
        let request = """
            POST /upload HTTP/1.1\r
            Host: app.example\r
            X_Original_URL: /admin\r
            X_Forwarded_For: 1.2.3.4\r
            x_request_id: mine\r
            Transfer_Encoding: chunked\r
            Host_Name: kept\r
            X_HTTP_Method_Override: DELETE\r
            X_Custom: 1\r
            \r

            """
        let head = try #require(parseRequest(request).head)
        #expect(head.headers.known(at: 1) == .underscored)
        #expect(head.headers.methodOverrides.map(\.name) == ["X_HTTP_Method_Override"])
        // Parsed and queried names classify alike, so lookups by name still find underscored fields.
        #expect(head.headers.values(named: "x_custom") == ["1"])
        #expect(head.headers.first(named: "X_ORIGINAL_URL") == "/admin")
        #expect(head.headers.values(named: "x-custom").isEmpty)
        let dropped = serialize(head, framing: .none)
        #expect(!dropped.contains("_"), "\(dropped)")
        var forwarding = context
        forwarding.dropsUnderscoredFields = false
        let kept = serialize(head, framing: .none, context: forwarding)
        let names = kept.split(separator: "\r\n").compactMap { $0.split(separator: ":").first }
            .filter { $0.contains("_") }
        #expect(names == ["Host_Name", "X_HTTP_Method_Override", "X_Custom"], "\(kept)")
    }

    @Test func requestFramingChoices() {
        let head = HTTPRequestHead(method: "PUT", target: "/x", headers: ["Host": "h", "Content-Length": "9"])
        let chunked = serialize(head, framing: .chunked)
        #expect(chunked.contains("\r\nTransfer-Encoding: chunked\r\n"))
        #expect(!chunked.contains("Content-Length"))
        let none = serialize(head, framing: .none)
        #expect(!none.contains("Content-Length") && !none.contains("Transfer-Encoding"))
    }

    @Test func connectionCannotDropHost() {
        let head = HTTPRequestHead(
            method: "GET",
            target: "/",
            headers: ["Host": "h", "Connection": "host, x-forwarded-for"]
        )
        let text = serialize(head, framing: .none)
        #expect(text.contains("\r\nHost: h\r\n"))
        #expect(text.contains("\r\nX-Forwarded-For: 203.0.113.7\r\n"))
    }

    @Test func http10RequestWithoutHostGetsTheDefaultHost() {
        let head = HTTPRequestHead(method: "GET", target: "/", version: .http1_0, headers: [:])
        let context = HTTPForwardingContext(
            clientAddress: "::1",
            scheme: "http",
            requestID: "r",
            defaultHost: "up:8080"
        )
        let text = serialize(head, framing: .none, context: context)
        #expect(text.hasPrefix("GET / HTTP/1.1\r\nHost: up:8080\r\n"))
        #expect(!text.contains("X-Forwarded-Host"))
    }

    @Test func serializedRequestParsesBack() {
        let original =
            "DELETE /a/b?c=d HTTP/1.1\r\nHost: h\r\nX-Mixed: a, b\r\nCookie: k=v\r\nContent-Length: 3\r\n\r\n"
        guard let head = parseRequest(original).head else {
            Issue.record("fixture did not parse")
            return
        }
        let reparsed = parseRequest(serialize(head, framing: .chunked)).head
        #expect(reparsed?.method == head.method)
        #expect(reparsed?.target == head.target)
        #expect(reparsed?.framing == .chunked)
        let names = reparsed?.headers.map(\.name)
        #expect(
            names == [
                "Host", "X-Mixed", "Cookie", "Transfer-Encoding", "X-Forwarded-For", "X-Forwarded-Proto",
                "X-Forwarded-Host", "Via", "X-Request-Id",
            ]
        )
        #expect(reparsed?.header(named: "x-mixed") == "a, b")
    }

    @Test func responseHeadKeepsFramingAndDropsHopByHop() {
        let response =
            "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Internal\r\nKeep-Alive: timeout=5\r\n"
            + "X-Internal: 1\r\nTransfer-Encoding: chunked\r\nVia: 1.1 backend\r\nSet-Cookie: a=b\r\n\r\n"
        guard let head = parseResponse(response).head else {
            Issue.record("fixture did not parse")
            return
        }
        var buffer: [UInt8] = []
        HTTPHeadSerializer.writeResponseHead(head, close: false, into: &buffer)
        let expected =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nSet-Cookie: a=b\r\nVia: 1.1 backend, 1.1 formwall\r\n\r\n"
        #expect(String(decoding: buffer, as: UTF8.self) == expected)
        #expect(parseResponse(expected).head?.framing == .chunked)
    }

    @Test func responseHeadWithCloseRoundTrips() {
        let head = HTTPResponseHead(
            version: .http1_0,
            status: 201,
            reason: "Created",
            headers: ["Content-Length": "2", "ETag": "\"x\""],
            framing: .contentLength(2)
        )
        var buffer: [UInt8] = []
        HTTPHeadSerializer.writeResponseHead(head, close: true, into: &buffer)
        let text = String(decoding: buffer, as: UTF8.self)
        let expected = "HTTP/1.1 201 Created\r\nContent-Length: 2\r\nETag: \"x\"\r\n"
            + "Via: 1.1 formwall\r\nConnection: close\r\n\r\n"
        #expect(text == expected)
        let reparsed = parseResponse(text).head
        #expect(reparsed?.status == 201)
        #expect(reparsed?.framing == .contentLength(2))
        #expect(reparsed?.keepAlive == false)
    }
}

@Suite struct RequestIDTests {
    @Test(arguments: ["a", "req-1", "A.b_c:d-9", String(repeating: "x", count: 128)])
    func valid(id: String) {
        #expect(RequestID.isValid(id))
    }

    @Test(arguments: ["", String(repeating: "x", count: 129), "a b", "a\r\nX: y", "caf\u{e9}", "a/b", "a\"b", "a,b"])
    func invalid(id: String) {
        #expect(!RequestID.isValid(id))
    }
}
