import Testing

@testable import HTTP1

@Suite struct HTTPRequestHeadParserTests {
    @Test func parsesSimpleGetAndStopsAtTheBody() {
        let head = "GET /upload?x=1 HTTP/1.1\r\nHost: example.com\r\nX-Mixed-Case: Value \r\nAccept: */*\r\n\r\n"
        let outcome = parseRequest(head + "body")
        guard case .complete(let request, let length) = outcome else {
            Issue.record("expected a head, got \(outcome)")
            return
        }
        #expect(length == head.utf8.count)
        #expect(request.method == "GET")
        #expect(request.target == "/upload?x=1")
        #expect(request.version == .http1_1)
        #expect(request.headers.map(\.name) == ["Host", "X-Mixed-Case", "Accept"])
        #expect(request.headers.map(\.value) == ["example.com", "Value", "*/*"])
        #expect(request.header(named: "x-mixed-case") == "Value")
        #expect(request.header(named: "HOST") == "example.com")
        #expect(request.header(named: "missing") == nil)
        #expect(request.framing == .none)
        #expect(request.keepAlive)
        #expect(!request.expectsContinue)
    }

    /// An idle keep-alive connection gives the parser's storage back between requests; the next head, fed in
    /// pieces of any size, parses as on a fresh parser.
    @Test func parsesTheSameAfterReleasingItsStorage() throws {
        let first = Array("POST /a HTTP/1.1\r\nHost: a\r\nX-One: 1\r\nX-Two: 2\r\nContent-Length: 0\r\n\r\n".utf8)
        let second = Array("GET /b?q=1 HTTP/1.1\r\nHost: b\r\nAccept: */*\r\n\r\n".utf8)
        func feed(_ parser: inout HTTPRequestHeadParser, _ bytes: ArraySlice<UInt8>) throws
            -> HTTPHeadParseResult<HTTPRequestHead> {
            try Array(bytes).withUnsafeBytes { try parser.parse($0) }
        }
        var fresh = HTTPRequestHeadParser()
        guard case .complete(let expected, _) = try feed(&fresh, second[...]) else {
            Issue.record("the second head does not parse on a fresh parser")
            return
        }
        // What the connection may have fed before giving the storage back (once or twice: when its exchange ends
        // and again when the answer is flushed): a whole head, or part of one, which the release forgets. A
        // request line cut anywhere, even before its CR, leaves the parser waiting for a request line but not
        // pristine.
        let before: [(ArraySlice<UInt8>, Int)] = [(first[...], 1), (first[...], 2), (first[..<10], 1),
                                                  (first[..<17], 2), (first[..<22], 1), (first[..<(first.count - 1)], 2)]
        for piece in 1...second.count {
            var parser = HTTPRequestHeadParser()
            let (fed, releases) = before[piece % before.count]
            _ = try feed(&parser, fed)
            for _ in 0..<releases { parser.releaseStorage() }
            var got: HTTPRequestHead?
            var offset = 0
            while got == nil, offset < second.count {
                let end = min(offset + piece, second.count)
                switch try feed(&parser, second[offset..<end]) {
                case .complete(let head, _): got = head
                case .needMore: break
                }
                offset = end
            }
            #expect(got == expected, "pieces of \(piece) after \(fed.count) bytes and \(releases) releases")
        }
    }

    @Test func incompleteHeadNeedsMore() {
        #expect(parseRequest("GET / HTTP/1.1\r\nHost: a\r\n") == .incomplete)
        #expect(parseRequest("GET / HTTP/1.1\r\nHost: a\r\n\r") == .incomplete)
    }

    @Test func skipsLeadingEmptyLines() {
        let outcome = parseRequest("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(outcome.head?.target == "/")
    }

    @Test func rejectsLeadingBareLF() {
        #expect(parseRequest("\nGET / HTTP/1.1\r\nHost: a\r\n\r\n").error == .bareLF)
    }

    /// Feeds one chunk to `parser`, as the I/O layer would.
    func feed(
        _ parser: inout HTTPRequestHeadParser,
        _ bytes: ArraySlice<UInt8>
    ) -> Result<HTTPHeadParseResult<HTTPRequestHead>, HTTPParseError> {
        bytes.withUnsafeBytes { buffer in
            Result { () throws(HTTPParseError) in try parser.parse(buffer) }
        }
    }

    @Test func parsesPipelinedRequestsWithOneParser() {
        let bytes = Array("GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: b\r\n\r\n".utf8)
        var parser = HTTPRequestHeadParser()
        guard case .success(.complete(let a, let consumed)) = feed(&parser, bytes[...]) else {
            Issue.record("expected the first head")
            return
        }
        #expect(a.target == "/a")
        guard case .success(.complete(let b, let rest)) = feed(&parser, bytes[consumed...]) else {
            Issue.record("expected the second head")
            return
        }
        #expect(b.target == "/b")
        #expect(consumed + rest == bytes.count)
    }

    @Test func keepsThrowingAfterAnError() {
        var parser = HTTPRequestHeadParser()
        let bad = Array("GET / HTTP/1.1\r\nHost : a\r\n".utf8)
        let good = Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
        for input in [bad, good] {
            guard case .failure(let error) = feed(&parser, input[...]) else {
                Issue.record("expected the error to persist")
                return
            }
            #expect(error == .whitespaceBeforeColon)
        }
        parser.reset()
        guard case .success(.complete(let head, _)) = feed(&parser, good[...]) else {
            Issue.record("expected reset() to clear the error")
            return
        }
        #expect(head.target == "/")
    }

    @Test(arguments: [
        ("GET / HTTP/1.1\r\nHost: a\r\n\r\n", true),
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false),
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, CLOSE\r\n\r\n", false),
        ("GET / HTTP/1.0\r\n\r\n", false),
        ("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true),
        ("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", false),
    ])
    func keepAlive(request: String, expected: Bool) {
        #expect(parseRequest(request).head?.keepAlive == expected)
    }

    @Test(arguments: [
        ("Content-Length: 42\r\n", BodyFraming.contentLength(42)),
        ("Content-Length: 0\r\n", BodyFraming.contentLength(0)),
        ("Content-Length: 9223372036854775807\r\n", BodyFraming.contentLength(UInt64(Int64.max))),
        ("Transfer-Encoding: chunked\r\n", BodyFraming.chunked),
        ("Transfer-Encoding: CHUNKED\r\n", BodyFraming.chunked),
        ("", BodyFraming.none),
    ])
    func framing(field: String, expected: BodyFraming) {
        #expect(parseRequest("POST / HTTP/1.1\r\nHost: a\r\n\(field)\r\n").head?.framing == expected)
    }

    @Test func expectContinue() {
        #expect(
            parseRequest("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n\r\n").head?.expectsContinue == true
        )
        // RFC 9110 §10.1.1: ignored from HTTP/1.0 clients.
        #expect(parseRequest("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").head?.expectsContinue == false)
    }

    @Test func otherExpectationIs417() {
        let error = parseRequest("POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n").error
        #expect(error == .unsupportedExpectation)
        #expect(error?.kind == "unsupported_expectation")
        #expect(error?.status == 417)
    }

    @Test func http10WithoutHostIsFine() {
        #expect(parseRequest("GET / HTTP/1.0\r\n\r\n").head?.version == .http1_0)
    }

    @Test func acceptsUTF8ObsTextInValues() {
        let outcome = parseRequest("GET / HTTP/1.1\r\nHost: a\r\nX-Name: caf\u{e9}\r\n\r\n")
        #expect(outcome.head?.header(named: "x-name") == "caf\u{e9}")
    }

    @Test func headAtExactlyTheLimitIsAccepted() {
        let head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
        let limits = HTTPLimits(maxHeadBytes: head.utf8.count)
        #expect(parseRequest(head, limits: limits).head != nil)
    }

    @Test func headerCountAtExactlyTheLimitIsAccepted() {
        let limits = HTTPLimits(maxHeaderCount: 3)
        #expect(parseRequest("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n", limits: limits).head != nil)
    }
}
