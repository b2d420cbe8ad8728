import Multipart
import Testing
@testable import Rules

/// The method a backend reads is judged, not only the request line's: Symfony (and so Laravel) and Rack read
/// `X-HTTP-Method-Override` on a POST, and `_method` from the query or the body, as the method; Express's
/// method-override reads the three override fields. `methods` must list each. Tests/e2e/test_method_override.py
/// checks the same against Symfony's own Request.
@Suite struct MethodOverrideTests {
    static let source = """
        route /up { methods POST PUT; content-types */*; unknown allow; }
        route /watch { mode monitor; methods POST; content-types */*; unknown allow; }
        route /any { content-types */*; unknown allow; }
        """

    private func begin(_ path: String, method: String = "POST", _ overrides: [(name: String, value: String)] = [])
        throws -> (PolicyEvaluator.BeginDecision, PolicyEvaluator) {
        var evaluator = PolicyEvaluator(policy: try policy(Self.source))
        let decision = evaluator.begin(method: method, path: path, contentType: "text/plain", contentLength: 1,
                                       methodOverrides: overrides)
        return (decision, evaluator)
    }

    @Test(arguments: [
        ([("X-HTTP-Method-Override", "DELETE")], "/up", "DELETE (X-HTTP-Method-Override) not in POST PUT"),
        ([("X-HTTP-Method", "patch")], "/up", "PATCH (X-HTTP-Method) not in POST PUT"),
        ([("x-method-override", "GET")], "/up", "GET (x-method-override) not in POST PUT"),
        // Every field is judged: one allowed value does not cover another.
        ([("X-HTTP-Method-Override", "PUT"), ("X-HTTP-Method-Override", "DELETE")], "/up",
         "DELETE (X-HTTP-Method-Override) not in POST PUT"),
        ([], "/up?_method=delete", "DELETE (the _method query parameter) not in POST PUT"),
        ([], "/up?a=1&_method=DEL%45TE", "DELETE (the _method query parameter) not in POST PUT"),
        ([("X-HTTP-Method-Override", String(repeating: "x", count: 100))], "/up",
         String(repeating: "X", count: 32) + "… (X-HTTP-Method-Override) not in POST PUT"),
        // Allowed: listed (in any case, as the frameworks uppercase it), or a route without `methods`.
        ([("X-HTTP-Method-Override", "put")], "/up", nil),
        ([], "/up?_method=PUT", nil),
        ([], "/up?method=DELETE&x_method=DELETE", nil),
        ([("X-HTTP-Method-Override", "DELETE")], "/any", nil),
        ([], "/any?_method=DELETE", nil),
    ] as [([(String, String)], String, String?)])
    func overrides(fields: [(String, String)], path: String, detail: String?) throws {
        let (decision, _) = try begin(path, fields.map { (name: $0.0, value: $0.1) })
        switch decision {
        case .proceed:
            #expect(detail == nil)
        case .reject(let violation):
            #expect(violation.kind == .methodNotAllowed)
            #expect(violation.status == 405)
            #expect(violation.detail == detail)
        }
    }

    @Test func monitorModeRecordsAndProceeds() throws {
        let (decision, evaluator) = try begin("/watch", [("X-HTTP-Method-Override", "DELETE")])
        #expect(decision == .proceed(.opaque))
        #expect(evaluator.findings.map(\.violation.detail) == ["DELETE (X-HTTP-Method-Override) not in POST"])
    }

    /// A `_method` form field is judged once its value is whole: the evaluator asks for the value, and refuses a
    /// method the route does not list.
    @Test(arguments: [("delete", "reject"), ("put", "forward"), ("POST", "forward")])
    func methodField(value: String, expected: String) throws {
        var request = try PolicyRequest(Self.source, path: "/up")
        let decision = request.evaluator.partBegin(index: 0, name: "_method", filename: nil, declaredType: nil,
                                                   anomalies: MultipartAnomalies())
        #expect(decision.pending.contains(.value))
        _ = request.evaluator.partData(count: value.utf8.count)
        let action = request.evaluator.fieldValue(Array(value.utf8))
        switch action {
        case .reject(let violation):
            #expect(expected == "reject")
            #expect(violation.kind == .methodNotAllowed)
            #expect(violation.part == "_method")
            #expect(violation.detail == "DELETE (the _method field) not in POST PUT")
        default:
            #expect(expected == "forward", "\(action)")
            #expect(request.evaluator.partEnd() == .forward)
        }
    }

    /// Other fields are not buffered for this, and a route without `methods` does not ask for `_method`'s value.
    @Test func onlyMethodFieldsUnderMethodsAreRead() throws {
        var request = try PolicyRequest(Self.source, path: "/up")
        let other = request.evaluator.partBegin(index: 0, name: "method", filename: nil, declaredType: nil,
                                                anomalies: MultipartAnomalies())
        #expect(!other.pending.contains(.value))
        var anyRoute = try PolicyRequest(Self.source, path: "/any")
        let field = anyRoute.evaluator.partBegin(index: 0, name: "_method", filename: nil, declaredType: nil,
                                                 anomalies: MultipartAnomalies())
        #expect(!field.pending.contains(.value))
    }
}
