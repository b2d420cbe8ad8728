import Multipart
import Testing
@testable import Rules

// The evaluator's request body and current part are objects (moved through its state without copying their
// strings and collections), yet the evaluator is a value: a copy taken mid-request goes its own way. These
// tests change a copy and check the original did not see it, and the other way round.

@Suite struct EvaluatorCopyTests {
    let source = """
        route /up {
            parts-max 2;
            field title { max 4; }
            field note { max 100; }
        }
        """

    func started() throws -> PolicyEvaluator {
        var ev = PolicyEvaluator(policy: try policy(source))
        _ = ev.begin(method: "POST", path: "/up", contentType: "multipart/form-data; boundary=x", contentLength: nil)
        return ev
    }

    @Test func aCopyInsideAPartKeepsItsOwnSize() throws {
        for crossing in ["copy", "original"] {
            var original = try started()
            #expect(original.partBegin(index: 0, name: "title", filename: nil, declaredType: nil,
                                       anomalies: MultipartAnomalies()).action == .forward)
            #expect(original.partData(count: 3) == .forward)
            let copy = original
            var (first, second) = crossing == "copy" ? (copy, original) : (original, copy)
            // One crosses `max 4` by 2 bytes; the other, still at 3 bytes, must not have seen them: one more byte
            // is within its `max`, and the next crosses it in its own right.
            #expect(first.partData(count: 2).violation?.kind == .fieldTooLarge, "\(crossing)")
            #expect(second.partData(count: 1) == .forward, "\(crossing)")
            #expect(second.partData(count: 1).violation?.kind == .fieldTooLarge, "\(crossing)")
        }
    }

    @Test func aCopyBetweenPartsKeepsItsOwnCounts() throws {
        var original = try started()
        _ = original.partBegin(index: 0, name: "title", filename: nil, declaredType: nil,
                               anomalies: MultipartAnomalies())
        #expect(original.partEnd() == .forward)
        var copy = original
        // Each takes the second and last part `parts-max 2` allows: counted once in each, not twice in both.
        for ev in [0, 1] {
            var current = ev == 0 ? copy : original
            #expect(current.partBegin(index: 1, name: "note", filename: nil, declaredType: nil,
                                      anomalies: MultipartAnomalies()).action == .forward, "evaluator \(ev)")
            #expect(current.partEnd() == .forward)
            if ev == 0 { copy = current } else { original = current }
        }
        // A third part is one too many for each.
        #expect(copy.partBegin(index: 2, name: "note", filename: nil, declaredType: nil,
                               anomalies: MultipartAnomalies()).action.violation?.kind == .tooManyParts)
        #expect(original.partBegin(index: 2, name: "note", filename: nil, declaredType: nil,
                                   anomalies: MultipartAnomalies()).action.violation?.kind == .tooManyParts)
    }

    /// `Body.copy()` and `Part.copy()` list the fields by hand: every field is set to something other than its
    /// default, and the copy must show the same. The counts make this test fail when a field is added, so that the
    /// field is added to `copy()` and here.
    @Test func copiesCarryEveryField() throws {
        let body = PolicyEvaluator.Body()
        body.bodyBytes = 7
        body.bodyExceeded = true
        body.parts = 3
        body.files = 1
        body.fields = 2
        body.repeats = ["field:a": 2]
        _ = body.ruleRepeats.increment(ObjectIdentifier(body))
        _ = body.ruleRepeats.increment(ObjectIdentifier(body))
        _ = body.names.register(["a"], isFile: false)
        body.satisfied.insert(ObjectIdentifier(body))
        body.checkRequired = true
        let rule = try #require(PolicyEvaluator.rule(in: RouteBox(try policy(source).routes[0]), forPart: "title",
                                                     isFile: false))
        let part = PolicyEvaluator.Part(index: 4, name: "n", filename: "f", declaredType: "t/x")
        part.rule = rule
        part.size = 9
        part.sizeExceeded = true
        part.sniffed = true
        part.valueChecked = true
        part.action = .strip(Violation(kind: .fieldTooLarge, detail: "d"))
        expectSameFields(body, body.copy(), count: 10)
        expectSameFields(part, part.copy(), count: 10)
    }

    func expectSameFields(_ original: AnyObject, _ copy: AnyObject, count: Int) {
        #expect(ObjectIdentifier(copy) != ObjectIdentifier(original))
        let mine = Array(Mirror(reflecting: original).children)
        let theirs = Array(Mirror(reflecting: copy).children)
        #expect(mine.count == count, "\(type(of: original)) has a field this test and copy() may not know")
        #expect(mine.map(\.label) == theirs.map(\.label))
        for (a, b) in zip(mine, theirs) {
            #expect(String(describing: a.value) == String(describing: b.value), "\(a.label ?? "?")")
        }
    }
}
