import TestRandom
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

    /// The fast path (a target already in normal form comes back as it is) agrees with the full normalisation
    /// on random targets built from the pieces that matter (`/`, `.`, `%` escapes, `?`, `#`, non-ASCII), and it is
    /// taken for ordinary paths.
    @Test func normalizeFastPathAgreesWithTheFullOne() {
        let pieces = ["/", "/", "a", "b", ".", "..", "%2e", "%41", "%2F", "%", "?", "#", "~", "é", "\\", " ", "//"]
        var generator = SplitMix64(seed: 0x5EED_0F_9A7)
        var fast = 0
        for round in 0..<20_000 {
            let count = Int.random(in: 0...8, using: &generator)
            // Half start with `/` and use only `/`, letters and dots: the fast path's own ground.
            let usable = round % 2 == 0 ? pieces : ["/", "a", "b", ".", "..", "~"]
            let target = (round % 2 == 0 ? "" : "/")
                + (0..<count).map { _ in usable[Int.random(in: 0..<usable.count, using: &generator)] }.joined()
            #expect(Policy.normalize(path: target) == Policy.normalizeFully(path: target), "target \(target)")
            if target.utf8.withContiguousStorageIfAvailable(Policy.isNormal) == true { fast += 1 }
        }
        #expect(fast > 1_000, "the fast path was taken \(fast) times")
        for path in ["/", "/upload", "/api/v1/users", "/a.b/c..d/.e"] {
            #expect(path.utf8.withContiguousStorageIfAvailable(Policy.isNormal) == true, "\(path)")
            #expect(Policy.normalizeFully(path: path) == path)
        }
    }

    static let matchSource = """
        route / { }
        route /users { }
        route /users/*/avatar { }
        route /users/*/* { }
        route /users/42/avatar { }
        route = /users/7/avatar { }
        route = /api/login { }
        route /api { }
        route /*/login { }
        """

    /// Exact beats pattern beats prefix; among patterns more literal segments win; `*` is one whole segment.
    @Test(arguments: [
        ("/users/7/avatar", "/users/7/avatar", RouteMatch.exact),
        ("/users/7/avatar/", "/users/7/avatar", .exact),
        ("/users/8/avatar", "/users/*/avatar", .pattern),
        ("/users/42/avatar", "/users/*/avatar", .pattern),
        ("/users/42/avatar/x", "/users/42/avatar", .prefix),
        ("/users/8/banner", "/users/*/*", .pattern),
        ("/users/8", "/users", .prefix),
        ("/users/8/avatar/big", "/users", .prefix),
        ("/users//8/./avatar", "/users/*/avatar", .pattern),
        ("/api/login", "/api/login", .exact),
        ("/api/login?next=/", "/api/login", .exact),
        ("/api/login/x", "/api", .prefix),
        ("/app/login", "/*/login", .pattern),
        ("/app/x/login", "/", .prefix),
        ("/login", "/", .prefix),
    ])
    func exactBeatsPatternBeatsPrefix(path: String, expected: String, match: RouteMatch) throws {
        let route = try policy(Self.matchSource).route(for: path)
        #expect(route?.prefix == expected)
        #expect(route?.match == match)
    }

    @Test func patternsOfEqualLiteralsGoByFileOrder() throws {
        let policy = try policy("route /*/b { mode monitor; }\nroute /a/* { }")
        #expect(policy.route(for: "/a/b")?.mode == .monitor)
        #expect(policy.route(for: "/a/c")?.prefix == "/a/*")
    }

    static let hostSource = """
        route / { }
        route /api { host api.example.com; mode monitor; }
        route /api { }
        route /up { host *.example.com EXAMPLE.org; }
        route = /login { host example.com; }
        route /login { }
        """

    /// A host-matching route beats a host-less one at the same path specificity, never a more specific path.
    @Test(arguments: [
        ("/api/x", "api.example.com", "/api", true),
        ("/api/x", "API.Example.COM:8443", "/api", true),
        ("/api/x", "api.example.com.", "/api", true),
        ("/api/x", "other.example.com", "/api", false),
        ("/api/x", nil, "/api", false),
        ("/up", "a.example.com", "/up", true),
        ("/up", "example.org:80", "/up", true),
        ("/up", "example.com", "/", false),
        ("/up", "a.b.example.com", "/", false),
        ("/up", nil, "/", false),
        ("/login", "example.com", "/login", true),
        ("/login", "www.example.com", "/login", false),
        ("/login/x", "example.com", "/login", false),
    ] as [(String, String?, String, Bool)])
    func hostRoutes(path: String, host: String?, expected: String, hostRoute: Bool) throws {
        let route = try policy(Self.hostSource).route(for: path, host: host)
        #expect(route?.prefix == expected)
        #expect((route?.hosts != nil) == hostRoute)
    }

    @Test func hostRouteNeverBecomesTheFallback() throws {
        let policy = try policy("route / { host a.com; unknown allow; }")
        #expect(policy.fallback.location == nil)
        #expect(policy.effectiveRoute(for: "/x", host: "a.com").unknown == .allow)
        #expect(policy.effectiveRoute(for: "/x", host: "b.com").location == nil)
    }

    @Test func hostPatterns() {
        #expect(HostPattern("Example.COM")?.description == "example.com")
        #expect(HostPattern("*.example.com")?.matches("a.example.com") == true)
        #expect(HostPattern("*.example.com")?.matches("example.com") == false)
        #expect(HostPattern("*.example.com")?.matches("xexample.com") == false)
        #expect(HostPattern("[::1]")?.matches("[::1]") == true)
        #expect(HostPattern("192.0.2.1") != nil)
        for bad in ["example.com:80", "a..b", "*", "*.", "a*.b", "a/b", "", "é.com", "*.*.a"] {
            #expect(HostPattern(bad) == nil, "\(bad)")
        }
        #expect(HostPattern.normalize(host: "[::1]:8080") == "[::1]")
        #expect(HostPattern.normalize(host: " A.com:1 ") == "a.com")
        #expect(HostPattern.normalize(host: ":80") == nil)
    }

    @Test func routeDiagnostics() {
        #expect(rendered("route = /a { }\nroute = /a { }") == [
            "t.rules:2:9: error: duplicate route '= /a' (first defined at t.rules:1)",
        ])
        #expect(rendered("route = /a { }\nroute = /a/ { }") == [
            "t.rules:2:9: error: route '= /a/' is shadowed by route '= /a' at t.rules:1 (both normalise to '= /a')",
        ])
        #expect(rendered("route /u/*/a { }\nroute /u//*/a/ { }") == [
            "t.rules:2:7: error: route '/u//*/a/' is shadowed by route '/u/*/a' at t.rules:1 "
                + "(both normalise to '/u/*/a')",
        ])
        #expect(rendered("route /a { host x.com y.com; }\nroute /a { host Y.com x.com; }") == [
            "t.rules:2:7: error: duplicate route '/a' for host x.com y.com (first defined at t.rules:1)",
        ])
        // Different kinds or hosts are different routes.
        #expect(rendered("route /a { }\nroute = /a { }\nroute /a { host x.com; }\nroute /* { }") == [])
        #expect(rendered("route == /a { }") == [
            "t.rules:1:7: error: expected 'route <path> { … }' or 'route = <path> { … }', got '==' before the path",
        ])
        #expect(rendered("route = /a/* { }") == [
            "t.rules:1:9: error: an exact route cannot hold '*' ('/a/*'): write 'route /a/*' for a pattern",
        ])
        #expect(rendered("route /a/b* { }") == [
            "t.rules:1:7: error: invalid route pattern '/a/b*': '*' must be a whole segment (it stands for exactly one)",
        ])
        #expect(rendered("route /a { host a.com:80; }") == [
            "t.rules:1:17: error: invalid host 'a.com:80': expected a host name without port (example.com), an IP "
                + "address or '*.' and a name for one more label (*.example.com)",
        ])
        #expect(rendered("route /a { host a.com; host b.com; }") == [
            "t.rules:1:24: error: duplicate 'host' (first set at t.rules:1)",
        ])
        #expect(rendered("host a.com;") == [
            "t.rules:1:1: error: 'host' is not allowed in main context (allowed in: route)",
        ])
    }
}
