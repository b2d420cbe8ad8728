import Testing

@testable import HTTP1

@Suite struct HTTPResponseHeadParserTests {
    struct FramingCase: Sendable, CustomTestStringConvertible {
        var method: String
        var head: String
        var framing: BodyFraming
        var keepAlive: Bool
        var testDescription: String { "\(self.method) → \(self.head.prefix(24))" }
    }

    static let framingTable: [FramingCase] = [
        FramingCase(
            method: "HEAD",
            head: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
            framing: .none,
            keepAlive: true
        ),
        FramingCase(
            method: "HEAD",
            head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            framing: .none,
            keepAlive: true
        ),
        FramingCase(
            method: "GET",
            head: "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
            framing: .none,
            keepAlive: true
        ),
        FramingCase(
            method: "GET",
            head: "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
            framing: .none,
            keepAlive: true
        ),
        FramingCase(method: "POST", head: "HTTP/1.1 100 Continue\r\n\r\n", framing: .none, keepAlive: true),
        FramingCase(
            method: "GET",
            head: "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n",
            framing: .none,
            keepAlive: true
        ),
        FramingCase(
            method: "GET",
            head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            framing: .chunked,
            keepAlive: true
        ),
        FramingCase(
            method: "GET",
            head: "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n",
            framing: .contentLength(12),
            keepAlive: true
        ),
        FramingCase(
            method: "GET",
            head: "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n",
            framing: .contentLength(HTTPHeaders.maxContentLength),
            keepAlive: true
        ),
        FramingCase(method: "GET", head: "HTTP/1.1 200 OK\r\n\r\n", framing: .closeDelimited, keepAlive: false),
        FramingCase(
            method: "GET",
            head: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n",
            framing: .contentLength(1),
            keepAlive: false
        ),
        FramingCase(
            method: "GET",
            head: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n",
            framing: .contentLength(1),
            keepAlive: true
        ),
        FramingCase(
            method: "GET",
            head: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n",
            framing: .contentLength(1),
            keepAlive: false
        ),
        FramingCase(
            method: "head",
            head: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n",
            framing: .contentLength(3),
            keepAlive: true
        ),
    ]

    @Test(arguments: framingTable)
    func framing(_ testCase: FramingCase) {
        let head = parseResponse(testCase.head + "xyz", method: testCase.method).head
        #expect(head?.framing == testCase.framing)
        #expect(head?.keepAlive == testCase.keepAlive)
    }

    @Test func parsesStatusReasonVersionAndHeaders() {
        let text = "HTTP/1.1 404 Not  Found\r\nServer: up\r\nX-A: 1\r\n\r\n"
        guard case .complete(let head, let length) = parseResponse(text + "body") else {
            Issue.record("expected a head")
            return
        }
        #expect(length == text.utf8.count)
        #expect(head.version == .http1_1)
        #expect(head.status == 404)
        #expect(head.reason == "Not  Found")
        #expect(head.headers.map(\.name) == ["Server", "X-A"])
        #expect(head.header(named: "SERVER") == "up")
        #expect(!head.isInformational)
    }

    @Test func acceptsAMissingReason() {
        #expect(parseResponse("HTTP/1.1 204\r\n\r\n").head?.reason == "")
        #expect(parseResponse("HTTP/1.1 204 \r\n\r\n").head?.reason == "")
    }

    @Test func interimResponsesAreCompleteHeadsBeforeTheFinalOne() {
        let text = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\n"
            + "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
        let bytes = Array(text.utf8)
        var parser = HTTPResponseHeadParser()
        var offset = 0
        var statuses: [Int] = []
        while offset < bytes.count {
            let result = bytes[offset...].withUnsafeBytes { buffer in
                Result { () throws(HTTPParseError) in try parser.parse(buffer, requestMethod: "POST") }
            }
            guard case .success(.complete(let head, let consumed)) = result else {
                Issue.record("expected a complete head, got \(result)")
                return
            }
            statuses.append(head.status)
            #expect(head.isInformational == (head.status < 200))
            offset += consumed
        }
        #expect(statuses == [100, 103, 201])
    }

    @Test(arguments: [
        "HTTP/1.1 20 OK", "HTTP/1.1 2000 OK", "HTTP/1.1 099 X", "HTTP/1.1 600 X", "HTTP/1.1  200 OK",
        "HTTP/1.1 200\tOK",
        "http/1.1 200 OK", "HTTP/1.1", "ICY 200 OK", "HTTP/1.1 2x0 OK", "HTTP/1.1 200 O\u{1}K",
    ])
    func invalidStatusLine(line: String) {
        let error = parseResponse("\(line)\r\n\r\n").error
        #expect(error == .invalidStatusLine)
        #expect(error?.kind == "invalid_status_line")
    }

    @Test func unsupportedVersion() {
        #expect(parseResponse("HTTP/2.0 200 OK\r\n\r\n").error == .unsupportedVersion)
    }

    @Test func noLeadingEmptyLines() {
        #expect(parseResponse("\r\nHTTP/1.1 200 OK\r\n\r\n").error == .invalidStatusLine)
    }

    @Test(arguments: [
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            HTTPParseError.contentLengthWithTransferEncoding
        ),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", .duplicateContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1,1\r\n\r\n", .contentLengthList),
        ("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", .unsupportedTransferEncoding),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", .invalidTransferEncoding),
        ("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", .obsFold),
        ("HTTP/1.1 200 OK\r\nX : a\r\n\r\n", .whitespaceBeforeColon),
        ("HTTP/1.1 200 OK\nX: a\r\n\r\n", .bareLF),
        ("HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", .bareCR),
        ("HTTP/1.1 200 OK\r\nX: a\u{0}\r\n\r\n", .invalidHeaderValue),
        // Even where the status means no body, the framing fields must be well-formed.
        (
            "HTTP/1.1 204 No Content\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            .contentLengthWithTransferEncoding
        ),
    ])
    func strictLikeRequests(response: String, expected: HTTPParseError) {
        #expect(parseResponse(response).error == expected)
    }

    @Test func limits() {
        let head = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n"
        #expect(parseResponse(head, limits: HTTPLimits(maxHeaderCount: 1)).error == .tooManyHeaders)
        #expect(parseResponse(head, limits: HTTPLimits(maxHeadBytes: head.utf8.count - 1)).error == .headTooLarge)
        #expect(parseResponse(head, limits: HTTPLimits(maxHeadBytes: head.utf8.count)).head != nil)
    }
}
