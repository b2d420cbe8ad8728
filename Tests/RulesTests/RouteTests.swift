import Testing
@testable import Rules

@Suite struct RouteTests {
    static let source = """
        route / { }
        route /api { }
        route /api/avatar { }
        route /api/avatar/big { }
        route /static/ { }
        """

    @Test(arguments: [
        ("/", "/"),
        ("/index.html", "/"),
        ("/api", "/api"),
        ("/api/", "/api"),
        ("/api/x", "/api"),
        ("/apix", "/"),
        ("/api/avatar", "/api/avatar"),
        ("/api/avatar?size=1", "/api/avatar"),
        ("/api/avatar#frag", "/api/avatar"),
        ("/api/avatars", "/api"),
        ("/api/avatar/big/1", "/api/avatar/big"),
        ("/api/avatar/bigger", "/api/avatar"),
        ("//api//avatar", "/api/avatar"),
        ("/api/./avatar", "/api/avatar"),
        ("/x/../api/avatar", "/api/avatar"),
        ("/../../api/avatar", "/api/avatar"),
        ("/api/%61vatar", "/api/avatar"),
        ("/api/%2e%2e/static/a", "/static"),
        ("/api/avatar%2Fbig", "/api"),
        ("/API/avatar", "/"),
        ("/static", "/static"),
        ("http://host:8080/api/avatar?x", "/api/avatar"),
        ("*", "/"),
    ])
    func longestSegmentAwarePrefix(path: String, expected: String) throws {
        let policy = try policy(Self.source)
        #expect(policy.route(for: path)?.prefix == expected)
    }

    @Test func noRouteMeansNilAndTheImplicitFallback() throws {
        let policy = try policy("body-max 2KiB;\nroute /api { }")
        #expect(policy.route(for: "/other") == nil)
        let fallback = policy.effectiveRoute(for: "/other")
        #expect(fallback.location == nil)
        #expect(fallback.unknown == .reject)
        #expect(fallback.limits.bodyMax == 2048)
        #expect(policy.effectiveRoute(for: "/api/x").prefix == "/api")
    }

    @Test func explicitRootRouteIsTheFallback() throws {
        let policy = try policy("route / { unknown allow; }")
        #expect(policy.fallback.location?.line == 1)
        #expect(policy.effectiveRoute(for: "/anything").unknown == .allow)
    }

    @Test func normalize() {
        #expect(Policy.normalize(path: "") == "/")
        #expect(Policy.normalize(path: "/a/b/") == "/a/b")
        #expect(Policy.normalize(path: "/a/%7Eb") == "/a/~b")
        #expect(Policy.normalize(path: "/a/%20b") == "/a/%20b")
        #expect(Policy.normalize(path: "/a/%zz") == "/a/%zz")
    }
}
