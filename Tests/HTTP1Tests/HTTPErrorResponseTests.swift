import Testing

@testable import HTTP1

@Suite struct HTTPErrorResponseTests {
    @Test func rendersACompleteResponse() {
        let bytes = HTTPErrorResponse.render(.headTooLarge, requestID: "r-1")
        let body = #"{"error":"head_too_large","status":431,"request_id":"r-1"}"#
        let expected =
            "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\nX-Request-Id: r-1\r\n\r\n" + body
        #expect(String(decoding: bytes, as: UTF8.self) == expected)
    }

    @Test(arguments: [400, 413, 431, 502, 504])
    func parsesBackWithMatchingLength(status: Int) {
        let text = String(decoding: HTTPErrorResponse.render(status: status, kind: "k", requestID: "id"), as: UTF8.self)
        guard case .complete(let head, let headLength) = parseResponse(text) else {
            Issue.record("error response did not parse")
            return
        }
        #expect(head.status == status)
        #expect(head.reason != "Error")
        #expect(head.keepAlive == false)
        #expect(head.framing == .contentLength(UInt64(text.utf8.count - headLength)))
    }

    @Test func escapesJSONStrings() {
        let bytes = HTTPErrorResponse.render(status: 400, kind: "a\"b\\c\nd\u{1}e\u{7f}\u{e9}", requestID: "bad id\t")
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasSuffix(#"{"error":"a\"b\\c\nd\u0001e\u007f\#u{e9}","status":400,"request_id":"bad id\t"}"#))
        #expect(!text.contains("X-Request-Id"))
    }
}
