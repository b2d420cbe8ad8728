import Testing

@testable import HTTP1

@Suite struct HTTPErrorPageTests {
    static func page(status: Int = 413, kind: String = "file_too_large", part: String? = "avatar",
                     limit: UInt64? = 1_048_576, detail: String? = "2 MiB > 1 MiB", requestID: String = "r-1") -> String {
        String(decoding: HTTPErrorPage.render(status: status, kind: kind, part: part, limit: limit, detail: detail,
                                              requestID: requestID), as: UTF8.self)
    }

    @Test func carriesTheSameFactsAsTheJSONBody() {
        let html = Self.page()
        #expect(html.hasPrefix("<!DOCTYPE html>\n"))
        #expect(html.contains("<title>413 Content Too Large</title>"))
        #expect(html.contains("<h1>413 Content Too Large</h1>"))
        #expect(html.contains("<dt>Status</dt><dd>413</dd>"))
        #expect(html.contains("<dt>Reason</dt><dd>file_too_large</dd>"))
        #expect(html.contains("<dt>Part</dt><dd>avatar</dd>"))
        #expect(html.contains("<dt>Limit</dt><dd>1048576</dd>"))
        #expect(html.contains("<dt>Detail</dt><dd>2 MiB &gt; 1 MiB</dd>"))
        #expect(html.contains("<dt>Request id</dt><dd>r-1</dd>"))
        #expect(html.hasSuffix("</html>\n"))
    }

    @Test func leavesOutAbsentFacts() {
        let html = Self.page(status: 502, kind: "upstream_unreachable", part: nil, limit: nil, detail: nil)
        #expect(html.contains("<h1>502 Bad Gateway</h1>"))
        #expect(!html.contains("<dt>Part</dt>"))
        #expect(!html.contains("<dt>Limit</dt>"))
        #expect(!html.contains("<dt>Detail</dt>"))
        #expect(html.contains("<dt>Request id</dt>"))
    }

    @Test func isSelfContained() {
        let html = Self.page().lowercased()
        for needle in ["<script", "src=", "href=", "<link", "url(", "@import", "http:", "https:", "//"] {
            #expect(!html.contains(needle), "page contains \(needle)")
        }
    }

    @Test func escapesHostileValuesEverywhere() {
        let hostile = #"<script>alert("x")</script>&amp;'"><img src=x onerror=alert(1)>"#
        let escaped = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;amp;&#39;&quot;&gt;"
            + "&lt;img src=x onerror=alert(1)&gt;"
        let html = Self.page(kind: hostile, part: hostile, detail: hostile, requestID: hostile)
        #expect(html.ranges(of: "<dd>\(escaped)</dd>").count == 4)
        #expect(!html.contains("<script"))
        #expect(!html.contains("<img"))
        // Outside the markup the page itself writes, no raw `<`, `>`, `"` or `'` remains.
        var rest = html
        for markup in ["<dt>", "</dt>", "<dd>", "</dd>"] { rest = rest.replacingAll(markup, with: "") }
        let body = rest[rest.firstRange(of: "<dl>\n")!.upperBound..<rest.firstRange(of: "</dl>")!.lowerBound]
        #expect(!body.contains(where: { "<>\"'".contains($0) }))
    }

    @Test func replacesControlCharacters() {
        let html = Self.page(part: "a\u{0}b\u{1b}c\u{7f}d\te\nf")
        #expect(html.contains("<dd>a\u{fffd}b\u{fffd}c\u{fffd}d\te\nf</dd>"))
    }

    @Test func keepsUnicode() {
        let html = Self.page(part: "résumé €")
        #expect(html.contains("<dd>résumé €</dd>"))
    }

    @Test func wrapsIntoACompleteResponse() {
        let page = HTTPErrorPage.render(status: 415, kind: "type_not_allowed", part: "f", limit: nil, detail: nil,
                                        requestID: "abc")
        var bytes: [UInt8] = []
        HTTPErrorResponse.write(status: 415, body: page, contentType: HTTPErrorPage.contentType, requestID: "abc",
                                varyAccept: true, into: &bytes)
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix(
            "HTTP/1.1 415 Unsupported Media Type\r\nContent-Type: text/html; charset=utf-8\r\n"
                + "Content-Length: \(page.count)\r\nConnection: close\r\nVary: Accept\r\nX-Request-Id: abc\r\n\r\n"))
        guard case .complete(let head, let headLength) = parseResponse(text) else {
            Issue.record("error page response did not parse")
            return
        }
        #expect(head.status == 415)
        #expect(head.framing == .contentLength(UInt64(page.count)))
        #expect(Array(bytes[headLength...]) == page)
    }
}

extension String {
    fileprivate func replacingAll(_ target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
