import Testing

@testable import HTTP1

/// One test per rejected framing or syntax trick: the exact error kind and status.
@Suite struct HTTPRequestSmugglingTests {
    func expectRejected(
        _ text: String,
        _ expected: HTTPParseError,
        kind: String,
        status: Int,
        limits: HTTPLimits = HTTPLimits(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let error = parseRequest(text, limits: limits, sourceLocation: sourceLocation).error
        #expect(error == expected, sourceLocation: sourceLocation)
        #expect(error?.kind == kind, sourceLocation: sourceLocation)
        #expect(error?.status == status, sourceLocation: sourceLocation)
    }

    @Test func contentLengthWithTransferEncoding() {
        expectRejected(
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            .contentLengthWithTransferEncoding,
            kind: "content_length_with_transfer_encoding",
            status: 400
        )
    }

    /// Found by the whole-path fuzzer's structural mutator: `text/plain` first and `multipart/form-data` second
    /// was judged by the first and parsed by an upstream that reads the last (WAFFLED's second Content-Type).
    @Test(arguments: ["text/plain", "multipart/form-data; boundary=B"])
    func duplicateContentTypeEvenIfEqual(second: String) {
        expectRejected(
            "POST / HTTP/1.1\r\nHost: a\r\ncontent-type: multipart/form-data; boundary=B\r\nContent-Type: \(second)\r\n"
                + "Content-Length: 0\r\n\r\n",
            .duplicateContentType,
            kind: "duplicate_content_type",
            status: 400
        )
    }

    @Test func duplicateContentLengthEvenIfEqual() {
        expectRejected(
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n",
            .duplicateContentLength,
            kind: "duplicate_content_length",
            status: 400
        )
    }

    @Test func contentLengthListEvenIfEqual() {
        expectRejected(
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n",
            .contentLengthList,
            kind: "content_length_list",
            status: 400
        )
    }

    // Past 2^63 − 1 (the largest a signed 64-bit length holds: nginx and Go refuse more, curl ignores it), up to
    // UInt64's limit and past it.
    @Test(arguments: ["-1", "+5", "0x10", "5 5", "1e3", "", "9223372036854775808", "18446744073709551615",
                      "18446744073709551616", "99999999999999999999999"])
    func badContentLength(value: String) {
        expectRejected(
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \(value)\r\n\r\n",
            .invalidContentLength,
            kind: "invalid_content_length",
            status: 400
        )
    }

    @Test(arguments: ["gzip", "gzip, chunked", "x-custom"])
    func unknownTransferCodingIs501(value: String) {
        expectRejected(
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \(value)\r\n\r\n",
            .unsupportedTransferEncoding,
            kind: "unsupported_transfer_encoding",
            status: 501
        )
    }

    @Test(arguments: ["chunked, chunked", "identity", "chunked;q=1", "", ",chunked", "chunked,"])
    func malformedTransferEncodingList(value: String) {
        expectRejected(
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \(value)\r\n\r\n",
            .invalidTransferEncoding,
            kind: "invalid_transfer_encoding",
            status: 400
        )
    }

    @Test func transferEncodingInTwoFields() {
        expectRejected(
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            .invalidTransferEncoding,
            kind: "invalid_transfer_encoding",
            status: 400
        )
    }

    @Test func chunkedNotLast() {
        expectRejected(
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            .chunkedNotFinal,
            kind: "chunked_not_final",
            status: 400
        )
    }

    @Test func transferEncodingInHTTP10() {
        expectRejected(
            "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            .transferEncodingInHTTP10,
            kind: "transfer_encoding_in_http10",
            status: 400
        )
    }

    @Test func obsFold() {
        expectRejected(
            "GET / HTTP/1.1\r\nHost: a\r\nX-A: one\r\n two\r\n\r\n",
            .obsFold,
            kind: "obs_fold",
            status: 400
        )
        expectRejected("GET / HTTP/1.1\r\n\tHost: a\r\n\r\n", .obsFold, kind: "obs_fold", status: 400)
    }

    @Test func spaceBeforeColon() {
        expectRejected(
            "GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n",
            .whitespaceBeforeColon,
            kind: "whitespace_before_colon",
            status: 400
        )
    }

    @Test(arguments: ["X(A): 1", ": empty", "NoColon", "X\u{1}: 1", "Caf\u{e9}: 1"])
    func invalidHeaderName(line: String) {
        expectRejected(
            "GET / HTTP/1.1\r\nHost: a\r\n\(line)\r\n\r\n",
            .invalidHeaderName,
            kind: "invalid_header_name",
            status: 400
        )
    }

    @Test(arguments: [
        "GET / HTTP/1.1\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\n\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX: a\nb\r\n\r\n",
    ])
    func bareLF(request: String) {
        expectRejected(request, .bareLF, kind: "bare_lf", status: 400)
    }

    @Test(arguments: [
        "GET / HTTP/1.1\rHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\n\r\r\n",
    ])
    func bareCR(request: String) {
        expectRejected(request, .bareCR, kind: "bare_cr", status: 400)
    }

    @Test(arguments: ["a\u{0}b", "a\u{1}b", "a\u{7f}b", "\u{1b}[31m"])
    func controlCharactersInValue(value: String) {
        expectRejected(
            "GET / HTTP/1.1\r\nHost: a\r\nX: \(value)\r\n\r\n",
            .invalidHeaderValue,
            kind: "invalid_header_value",
            status: 400
        )
    }

    @Test func invalidUTF8InValue() {
        let bytes = Array("GET / HTTP/1.1\r\nHost: a\r\nX: ".utf8) + [0xFF, 0xFE] + Array("\r\n\r\n".utf8)
        #expect(parseRequest(bytes: bytes).error == .invalidHeaderValue)
    }

    @Test func headTooLarge() {
        let head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
        expectRejected(
            head,
            .headTooLarge,
            kind: "head_too_large",
            status: 431,
            limits: HTTPLimits(maxHeadBytes: head.utf8.count - 1)
        )
        let big = "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "a", count: 600) + "\r\n\r\n"
        expectRejected(big, .headTooLarge, kind: "head_too_large", status: 431, limits: HTTPLimits(maxHeadBytes: 512))
    }

    /// The default limit (16 KiB), fed whole and byte by byte only: every split of 17 KiB is too slow.
    @Test func headTooLargeWithDefaultLimits() {
        let big = Array(
            ("GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "a", count: 16 * 1024) + "\r\n\r\n").utf8
        )
        for chunks in [[big], big.map { [$0] }] {
            var parser = HTTPRequestHeadParser()
            let outcome = feedHead(chunks) { (buffer) throws(HTTPParseError) in try parser.parse(buffer) }
            #expect(outcome == .failed(.headTooLarge))
        }
    }

    @Test func headTooLargeCountsLeadingEmptyLines() {
        let request = String(repeating: "\r\n", count: 20) + "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
        expectRejected(
            request,
            .headTooLarge,
            kind: "head_too_large",
            status: 431,
            limits: HTTPLimits(maxHeadBytes: 40)
        )
    }

    @Test func tooManyHeaders() {
        expectRejected(
            "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n",
            .tooManyHeaders,
            kind: "too_many_headers",
            status: 431,
            limits: HTTPLimits(maxHeaderCount: 2)
        )
        let many = (0..<101).map { "X-\($0): v\r\n" }.joined()
        expectRejected(
            "GET / HTTP/1.1\r\nHost: a\r\n\(many)\r\n",
            .tooManyHeaders,
            kind: "too_many_headers",
            status: 431
        )
    }

    @Test(arguments: ["HTTP/1.2", "HTTP/2.0", "HTTP/0.9", "HTTP/3.0"])
    func unsupportedVersionIs505(version: String) {
        expectRejected(
            "GET / \(version)\r\nHost: a\r\n\r\n",
            .unsupportedVersion,
            kind: "unsupported_version",
            status: 505
        )
    }

    @Test(arguments: [
        "GET / http/1.1", "GET / HTTP/1.1 ", "GET  / HTTP/1.1", "GET /  HTTP/1.1", "GET / HTTP/1.10",
        "GET /", "GET", "/ HTTP/1.1", "G(T / HTTP/1.1", "GET /a\u{7f} HTTP/1.1", "GET /caf\u{e9} HTTP/1.1",
        " GET / HTTP/1.1", "GET\t/ HTTP/1.1", "GET / HTTP/1.1\t",
    ])
    func badRequestLine(line: String) {
        expectRejected("\(line)\r\nHost: a\r\n\r\n", .invalidRequestLine, kind: "invalid_request_line", status: 400)
    }

    @Test func missingHost() {
        expectRejected("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", .missingHost, kind: "missing_host", status: 400)
    }

    @Test func doubleHost() {
        expectRejected(
            "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n",
            .duplicateHost,
            kind: "duplicate_host",
            status: 400
        )
        expectRejected(
            "GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n",
            .duplicateHost,
            kind: "duplicate_host",
            status: 400
        )
    }
}
