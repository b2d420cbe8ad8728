import Multipart
import Testing
@testable import Rules

// The evaluator never traps: every call made in the wrong state answers `.reject` with a 500
// `internal_error` violation, and every later call repeats that rejection. Today's proxy bug (`end()` at
// the close delimiter, then `anomalies()` or `bodyData()` for the epilogue) is the first case below.

private let source = """
    route /up {
        unknown allow;
        field title { max 64; }
    }
    """

private let dataAfter: MultipartAnomalies = {
    var flags = MultipartAnomalies()
    flags.insert(.dataAfter)
    return flags
}()

private func internalError(_ action: PolicyEvaluator.Action) -> Bool {
    if case .reject(let violation) = action { return violation.kind == .internalError && violation.status == 500 }
    return false
}

private func begun(_ mode: String = "") throws -> PolicyEvaluator {
    var evaluator = PolicyEvaluator(policy: try policy(mode + source))
    _ = evaluator.begin(method: "POST", path: "/up", contentType: "multipart/form-data; boundary=x",
                        contentLength: nil)
    return evaluator
}

@Suite struct EvaluatorTotalityTests {
    @Test func internalErrorIsAViolationKindWithStatus500() {
        #expect(ViolationKind.internalError.name == "internal_error")
        #expect(ViolationKind.internalError.status == 500)
        #expect(ViolationKind(name: "internal_error") == .internalError)
    }

    @Test func requestCallsAfterEndAnswerInternalError() throws {
        for call in ["anomalies", "bodyData", "malformed", "end", "partBegin", "partData", "partEnd"] {
            var evaluator = try begun()
            #expect(evaluator.end() == .forward)
            let action: PolicyEvaluator.Action
            switch call {
            case "anomalies": action = evaluator.anomalies(dataAfter)
            case "bodyData": action = evaluator.bodyData(count: 10)
            case "malformed": action = evaluator.malformed(detail: "x")
            case "end": action = evaluator.end()
            case "partBegin":
                action = evaluator.partBegin(index: 0, name: "title", filename: nil, declaredType: nil,
                                             anomalies: MultipartAnomalies()).action
            case "partData": action = evaluator.partData(count: 1)
            default: action = evaluator.partEnd()
            }
            #expect(internalError(action), "\(call) after end")
            #expect(evaluator.rejection?.kind == .internalError, "\(call) after end")
            // Every later call repeats the rejection.
            #expect(internalError(evaluator.bodyData(count: 1)))
            #expect(internalError(evaluator.end()))
            #expect(evaluator.findings.last?.violation.kind == .internalError)
        }
    }

    @Test func callsBeforeBeginAnswerInternalError() throws {
        let policy = try policy(source)
        var evaluator = PolicyEvaluator(policy: policy)
        #expect(internalError(evaluator.bodyData(count: 1)))
        for make in [{ (e: inout PolicyEvaluator) in e.anomalies(MultipartAnomalies()) }, { $0.malformed(detail: "x") },
                     { $0.end() }, { $0.partData(count: 1) }, { $0.partSniffed(type: "text/plain") },
                     { $0.fieldValue([UInt8]()) }, { $0.partEnd() },
                     { $0.partBegin(index: 0, name: "a", filename: nil, declaredType: nil, anomalies: MultipartAnomalies()).action }] {
            var fresh = PolicyEvaluator(policy: policy)
            #expect(internalError(make(&fresh)))
        }
        // `begin` after a rejection answers it; `begin` twice is itself out of order.
        if case .reject(let v) = evaluator.begin(method: "POST", path: "/up", contentType: nil, contentLength: 0) {
            #expect(v.kind == .internalError)
        } else {
            Issue.record("begin after an internal error proceeded")
        }
        var twice = try begun()
        if case .reject(let v) = twice.begin(method: "POST", path: "/up", contentType: nil, contentLength: 0) {
            #expect(v.kind == .internalError)
        } else {
            Issue.record("begin twice proceeded")
        }
    }

    @Test func partCallsInTheWrongPlaceAnswerInternalError() throws {
        var outside = try begun()
        #expect(internalError(outside.partData(count: 1)))
        var sniffed = try begun()
        #expect(internalError(sniffed.partSniffed(type: "text/plain")))
        var value = try begun()
        #expect(internalError(value.fieldValue([UInt8]("a".utf8))))
        var partEnd = try begun()
        #expect(internalError(partEnd.partEnd()))

        var nested = try begun()
        _ = nested.partBegin(index: 0, name: "title", filename: nil, declaredType: nil, anomalies: MultipartAnomalies())
        #expect(internalError(nested.partBegin(index: 1, name: "title", filename: nil, declaredType: nil,
                                               anomalies: MultipartAnomalies()).action))
        var endInPart = try begun()
        _ = endInPart.partBegin(index: 0, name: "title", filename: nil, declaredType: nil, anomalies: MultipartAnomalies())
        #expect(internalError(endInPart.end()))
    }

    @Test func monitorModeStillFailsAnOutOfOrderCall() throws {
        var evaluator = try begun("mode monitor;\n")
        #expect(evaluator.end() == .forward)
        #expect(internalError(evaluator.anomalies(dataAfter)))
        #expect(evaluator.findings.last?.enforced == true)
    }

    @Test func hugeCountsSaturateInsteadOfOverflowing() throws {
        var evaluator = try begun()
        _ = evaluator.bodyData(count: Int.max)
        _ = evaluator.bodyData(count: Int.max)
        if case .reject(let v) = evaluator.bodyData(count: Int.max) { #expect(v.kind == .bodyTooLarge) } else {
            Issue.record("body-max not enforced")
        }
        var negative = try begun()
        #expect(negative.bodyData(count: -5) == .forward)
    }
}

@Suite struct HugeNumberTests {
    /// A Content-Length near 2^64 used to overflow while the 413 detail was formatted.
    @Test func hugeContentLengthIsA413() throws {
        var evaluator = PolicyEvaluator(policy: try policy(source))
        let decision = evaluator.begin(method: "POST", path: "/up", contentType: "multipart/form-data; boundary=x",
                                       contentLength: UInt64.max)
        guard case .reject(let v) = decision else { Issue.record("not rejected"); return }
        #expect(v.kind == .bodyTooLarge)
        #expect(ByteSize.format(UInt64.max) == "16777216.0 TiB")
        #expect(ByteSize.format(1536) == "1.5 KiB")
    }
}
