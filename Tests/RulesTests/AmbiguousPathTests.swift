import TestRandom
import Testing
@testable import Rules

/// `ambiguous-paths` (docs/rules.md, *Ambiguous paths*): each backend reading on its own, the fast check that
/// skips them, and the evaluator's 400 `ambiguous_path`. Tests/e2e/test_ambiguous_paths.py checks the readings
/// against the real routers.
@Suite struct AmbiguousPathTests {
    static let source = """
        route /api { content-types */*; }
        route = /api/login { content-types */*; }
        route /users/*/avatar { content-types */*; }
        route / { unknown allow; content-types */*; }
        """

    private func reading(_ name: String) -> PathReading {
        PathReading.all.first { $0.name == name }!
    }

    /// Each reading, by hand: what werkzeug's PATH_INFO, nginx, Express, Tomcat, `new URL()` and IIS make of a path.
    @Test(arguments: [
        ("decoded", "/api%2Fupload?x=%2F", "/api/upload"),
        ("decoded", "/a/%2e%2e/b", "/a/../b"),
        ("decoded", "/a//b/./c", "/a/b/./c"),
        ("decoded", "/a%zz/%4", "/a%zz/%4"),
        ("decoded", "/A/b", "/A/b"),
        ("decoded-resolved", "/x/..%2Fapi", "/api"),
        ("decoded-resolved", "/../../api", "/api"),
        ("raw", "/%61pi/%2e%2e/x", "/%61pi/%2e%2e/x"),
        ("raw", "/a/../b", "/a/../b"),
        ("path-parameters", "/api;jsessionid=1/upload", "/api/upload"),
        ("path-parameters", "/x/..;/api", "/api"),
        ("path-parameters", "/a;%2F/b", "/a/b"),
        ("url-standard", "//evil.example/api/x", "/api/x"),
        ("url-standard", "/\\host/api", "/api"),
        ("url-standard", "/x\\..\\api", "/api"),
        ("url-standard", "/x/%2E%2e/api/%2Fy", "/api/%2Fy"),
        ("url-standard", "/x/.%2e/api", "/api"),
        ("url-standard", "//", "/"),
        ("windows", "/API\\Upload", "/api/upload"),
        ("windows", "/x%5C..%5CAPI", "/api"),
        ("windows", "no-slash", "/"),
    ])
    func readings(name: String, target: String, expected: String) {
        #expect(reading(name).read(target) == expected)
    }

    /// The check is skipped for paths without the characters that make readings differ: then every reading must
    /// read the path as formwall does. Random targets from the pieces that matter.
    @Test func skippedPathsReadAlikeEverywhere() {
        let pieces = ["/", "/", "a", "b", "api", "A", ".", "..", "%2e", "%2F", "%41", ";", "\\", "//", "?", "#", "~",
                      "é", "-", "x.y"]
        var generator = SplitMix64(seed: 0xA3B1_6005)
        var skipped = 0
        var differing = 0
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...7, using: &generator)
            let target = "/" + (0..<count).map { _ in pieces[Int.random(in: 0..<pieces.count, using: &generator)] }
                .joined()
            let formwall = Policy.normalize(path: target)
            let reads = PathReading.all.map { $0.read(target) }
            if PathReading.mayDiffer(target) {
                if reads.contains(where: { $0 != formwall }) { differing += 1 }
            } else {
                skipped += 1
                #expect(reads.allSatisfy { $0 == formwall }, "\(target): \(reads) against \(formwall)")
            }
        }
        #expect(skipped > 2_000 && differing > 2_000, "skipped \(skipped), differing \(differing)")
        for plain in ["/", "/upload", "/api/v1/users", "/a.b/c..d/.e", "/x?Q=%2F&a=..", "/f#X"] {
            #expect(!PathReading.mayDiffer(plain), "\(plain)")
        }
    }

    @Test(arguments: [
        ("/api%2Fupload", "decoded", "/"),
        ("/x/..%2Fapi/upload", "decoded-resolved", "/"),
        ("/%61pi/upload", "raw", "/api"),
        ("/api/..;/x", "path-parameters", "/api"),
        ("/api;jsessionid=1/upload", "path-parameters", "/"),
        ("//evil.example/api", "url-standard", "/"),
        ("/x\\..\\api", "url-standard", "/"),
        ("/API/upload", "windows", "/"),
        ("/Users/7/Avatar", "windows", "/"),
        ("/users/a%2Fb/avatar", "decoded", "/users/*/avatar"),
        ("/api/LOGIN", "windows", "/api"),
    ])
    func ambiguous(target: String, readingName: String, formwallRoute: String) throws {
        let policy = try policy(Self.source)
        let routed = policy.routeIndex(for: target)
        #expect(routed.map { policy.routes[$0].prefix } == formwallRoute)
        let found = try #require(policy.ambiguity(for: target, host: nil, route: routed))
        #expect(found.reading.name == readingName)
        #expect(found.route != routed)
    }

    @Test(arguments: ["/", "/upload", "/api/upload", "/api/a%20b", "/static/My%20File.txt", "/users/a%20b/avatar",
                      "/api/login?next=%2Fx", "/apix", "/x/api", "/api/%00", "/%20api"])
    func unambiguous(target: String) throws {
        let policy = try policy(Self.source)
        #expect(policy.ambiguity(for: target, host: nil, route: policy.routeIndex(for: target)) == nil)
    }

    /// A policy with one route (or none) can never route two readings apart.
    @Test func oneRouteIsNeverAmbiguous() throws {
        for source in ["route / { }", "body-max 1KiB;"] {
            let policy = try policy(source)
            for target in ["/api%2Fx", "/API", "//h/x", "/a/../b", "/a;b"] {
                #expect(policy.ambiguity(for: target, host: nil, route: policy.routeIndex(for: target)) == nil)
            }
        }
    }

    /// Host routes stay host routes in every reading.
    @Test func hostsAreKept() throws {
        let policy = try policy("route /api { host api.example; }\nroute / { }")
        #expect(policy.ambiguity(for: "/api%2Fx", host: "api.example", route: 1)?.route == 0)
        #expect(policy.ambiguity(for: "/api%2Fx", host: "other.example", route: 1) == nil)
    }

    private func begin(_ source: String, _ path: String) throws -> (PolicyEvaluator.BeginDecision, PolicyEvaluator) {
        var evaluator = PolicyEvaluator(policy: try policy(source))
        let decision = evaluator.begin(method: "GET", path: path, contentType: nil, contentLength: 0)
        return (decision, evaluator)
    }

    @Test func theEvaluatorRefusesWith400() throws {
        let (decision, _) = try begin(Self.source, "/api%2Fupload")
        guard case .reject(let violation) = decision else {
            Issue.record("expected a rejection, got \(decision)")
            return
        }
        #expect(violation.kind == .ambiguousPath)
        #expect(violation.kind.name == "ambiguous_path")
        #expect(violation.status == 400)
        #expect(violation.rule?.line == 4)
        #expect(violation.detail == "the path falls under route / (t.rules:4) here, but WSGI and ASGI "
            + "frameworks (werkzeug, Django, Starlette) read it as '/api/upload', under route /api (t.rules:1)")
        #expect(try begin(Self.source, "/api/upload").0 == .proceed(.none))
    }

    @Test func passRoutesByFormwallsReadingAlone() throws {
        let (decision, evaluator) = try begin("ambiguous-paths pass;\n" + Self.source, "/api%2Fupload")
        #expect(decision == .proceed(.none))
        #expect(evaluator.findings.isEmpty)
    }

    @Test func monitorModeRecordsAndProceeds() throws {
        let (decision, evaluator) = try begin("mode monitor;\n" + Self.source, "//h/api")
        #expect(decision == .proceed(.none))
        #expect(evaluator.findings.map(\.violation.kind) == [.ambiguousPath])
    }

    @Test func theDetailCutsALongPath() throws {
        let long = "/api%2F" + String(repeating: "a", count: 500)
        let (decision, _) = try begin(Self.source, long)
        guard case .reject(let violation) = decision else {
            Issue.record("expected a rejection")
            return
        }
        #expect(violation.detail.utf8.count < 400)
        #expect(violation.detail.contains("…'"))
    }

    @Test func diagnostics() {
        #expect(rendered("ambiguous-paths maybe;") == [
            "t.rules:1:17: error: unknown ambiguous-paths setting 'maybe': expected reject or pass",
        ])
        #expect(rendered("route / { ambiguous-paths pass; }") == [
            "t.rules:1:11: error: 'ambiguous-paths' is not allowed in route context (allowed in: main)",
        ])
        #expect(rendered("ambiguous-paths pass;\nambiguous-paths reject;").count == 1)
        #expect(compile("ambiguous-paths pass;").policy?.ambiguousPaths == .pass)
        #expect(compile("route / { }").policy?.ambiguousPaths == .reject)
    }
}
