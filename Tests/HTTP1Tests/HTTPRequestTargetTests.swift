import Testing
@testable import HTTP1

/// Request-target forms (RFC 9112 §3.2). A server reads an absolute-form target's authority and ignores Host
/// (§3.2.2; werkzeug's dev server sets HTTP_HOST from it), so the parser accepts absolute-form only when its
/// authority is the Host field's value, and hands the proxy the origin-form it forwards.
@Suite struct HTTPRequestTargetTests {
    @Test(arguments: [
        // (request line, Host field or nil, the target the head carries)
        ("GET /a/b?c=d HTTP/1.1", "x.example", "/a/b?c=d"),
        ("GET http://x.example/a/b?c=d HTTP/1.1", "x.example", "/a/b?c=d"),
        ("GET HTTPS://X.Example:8443/up HTTP/1.1", "x.example:8443", "/up"),
        ("GET http://x.example HTTP/1.1", "x.example", "/"),
        ("GET http://x.example?q=1 HTTP/1.1", "X.EXAMPLE", "/?q=1"),
        ("GET http://[::1]:8080/v HTTP/1.1", "[::1]:8080", "/v"),
        ("GET http://x.example//double HTTP/1.1", "x.example", "//double"),
        ("OPTIONS * HTTP/1.1", "x.example", "*"),
        ("CONNECT x.example:443 HTTP/1.1", "x.example:443", "x.example:443"),
        ("GET http://x.example/old HTTP/1.0", "x.example", "/old"),
    ] as [(String, String?, String)])
    func acceptedTargets(line: String, host: String?, expected: String) {
        let head = parseRequest(Self.request(line, host: host)).head
        #expect(head?.target == expected)
    }

    @Test(arguments: [
        // Another host than the one Host names, or none to compare with.
        ("GET http://admin.example/upload HTTP/1.1", "public.example", HTTPParseError.hostMismatch),
        ("GET http://x.example:80/ HTTP/1.1", "x.example", .hostMismatch),
        ("GET http://x.example/ HTTP/1.1", "x.example:80", .hostMismatch),
        ("GET http://x.example/ HTTP/1.0", nil, .hostMismatch),
        // Forms the method does not allow, other schemes, userinfo, no authority.
        ("GET * HTTP/1.1", "x.example", .invalidRequestTarget),
        ("GET x.example:443 HTTP/1.1", "x.example:443", .invalidRequestTarget),
        ("GET ftp://x.example/f HTTP/1.1", "x.example", .invalidRequestTarget),
        ("GET http://user@x.example/ HTTP/1.1", "x.example", .invalidRequestTarget),
        ("GET http:///path HTTP/1.1", "x.example", .invalidRequestTarget),
        ("GET http:/x.example/ HTTP/1.1", "x.example", .invalidRequestTarget),
        ("GET a/b HTTP/1.1", "x.example", .invalidRequestTarget),
        ("GET ?q HTTP/1.1", "x.example", .invalidRequestTarget),
        // A fragment, in any form: Go keeps `#x` in the path, werkzeug cuts it.
        ("GET /api#x HTTP/1.1", "x.example", .invalidRequestTarget),
        ("GET /x#/../api HTTP/1.1", "x.example", .invalidRequestTarget),
        ("GET /?q=a#b HTTP/1.1", "x.example", .invalidRequestTarget),
        ("GET http://x.example/a#b HTTP/1.1", "x.example", .invalidRequestTarget),
        ("GET # HTTP/1.1", "x.example", .invalidRequestTarget),
    ] as [(String, String?, HTTPParseError)])
    func refusedTargets(line: String, host: String?, expected: HTTPParseError) {
        let error = parseRequest(Self.request(line, host: host)).error
        #expect(error == expected)
        #expect(error?.status == 400)
    }

    @Test func kindsAreStable() {
        #expect(HTTPParseError.hostMismatch.kind == "host_mismatch")
        #expect(HTTPParseError.invalidRequestTarget.kind == "invalid_request_target")
    }

    private static func request(_ line: String, host: String?) -> String {
        line + "\r\n" + (host.map { "Host: \($0)\r\n" } ?? "") + "\r\n"
    }
}
