import Testing
@testable import Rules

@Suite struct RequireHeaderTests {
    static let source = """
        route /up {
            require-header X-Requested-With;
            require-header X-Token "^[0-9a-f]{8}$";
            content-types */*;
        }
        route /watch { mode monitor; require-header X-Token; content-types */*; }
        """

    private func begin(_ path: String, _ headers: [(String, String)]) throws -> (PolicyEvaluator.BeginDecision, PolicyEvaluator) {
        var evaluator = PolicyEvaluator(policy: try policy(Self.source))
        let decision = evaluator.begin(method: "POST", path: path, contentType: "text/plain", contentLength: 1,
                                       headerValues: { name in
            headers.filter { $0.0.lowercased() == name.lowercased() }.map(\.1)
        })
        return (decision, evaluator)
    }

    @Test(arguments: [
        ([("x-requested-with", "x"), ("X-TOKEN", "0123abcd")], nil),
        ([("X-Token", "0123abcd")], "X-Requested-With missing"),
        ([("X-Requested-With", "")], "X-Token missing"),
        ([("X-Requested-With", "x"), ("X-Token", "0123abcg")], "X-Token does not match ^[0-9a-f]{8}$"),
        // Every value must match: a repeated field cannot slip one past the regex.
        ([("X-Requested-With", "x"), ("X-Token", "0123abcd"), ("X-Token", "nope")],
         "X-Token does not match ^[0-9a-f]{8}$"),
    ] as [([(String, String)], String?)])
    func conditions(headers: [(String, String)], detail: String?) throws {
        let (decision, _) = try begin("/up", headers)
        switch decision {
        case .proceed:
            #expect(detail == nil)
        case .reject(let violation):
            #expect(violation.kind == .headerRequired)
            #expect(violation.status == 400)
            #expect(violation.detail == detail)
            #expect(violation.rule?.line == 1)
        }
    }

    @Test func monitorModeRecordsAndProceeds() throws {
        let (decision, evaluator) = try begin("/watch", [])
        #expect(decision == .proceed(.opaque))
        #expect(evaluator.findings.map(\.violation.kind) == [.headerRequired])
    }

    @Test func otherRoutesIgnoreTheConditions() throws {
        let (decision, _) = try begin("/other", [])
        if case .reject(let violation) = decision { #expect(violation.kind != .headerRequired) }
    }

    @Test func diagnostics() {
        #expect(rendered("route / { require-header \"X A\"; }") == [
            "t.rules:1:26: error: invalid header name 'X A': expected a field name such as X-Requested-With",
        ])
        #expect(rendered("route / { require-header X-A \"([a-\"; }").first?.hasPrefix(
            "t.rules:1:30: error: invalid pattern \"([a-\"") == true)
        #expect(rendered("route / { require-header X-A; require-header x-a \"a\"; }") == [
            "t.rules:1:46: error: duplicate 'require-header x-a'",
        ])
        #expect(rendered("route / { require-header; }") == [
            "t.rules:1:11: error: 'require-header' takes 1 to 2 arguments, got 0",
        ])
        #expect(rendered("route / { require-header A b c; }") == [
            "t.rules:1:11: error: 'require-header' takes 1 to 2 arguments, got 3",
        ])
    }
}
