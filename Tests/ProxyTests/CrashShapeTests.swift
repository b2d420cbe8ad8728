import HTTP1
import Multipart
import Reactor
import Rules
import Testing
@testable import Proxy

// "No request can crash Formwall": bytes after the multipart close delimiter used to trap the process, because
// the form stage ended the policy at the delimiter and the epilogue then called into a finished evaluator
// (`anomalies()` in the same read, `bodyData()` in a later one). Each shape is fed whole, byte by byte and split
// at every offset, through the form stage alone and through the request body stage with its framing; the
// outcome must be the route's anomaly policy (forward canonically, or 400), never a trap.

private let head = "--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n"
    + "--B\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\n"
    + "plain text body"

/// The crash shapes: what follows the last part's data.
private let shapes: [(name: String, tail: String)] = [
    ("epilogue", "\r\n--B--\r\nepilogue after the close delimiter\r\n"),
    ("extra hyphens", "\r\n--B----\r\n"),
    ("transport padding", "\r\n--B-- \t \r\n"),
    ("data without CRLF", "\r\n--B--x"),
    ("look-alike part after close", "\r\n--B--\r\n--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nsmuggled\r\n--B--\r\n"),
    ("second close delimiter", "\r\n--B--\r\n--B--\r\n"),
]

private let clean = b(head + "\r\n--B--\r\n")

private let logPolicy = """
    route /up {
        unknown allow;
        field title { max 64; }
        file doc { max 1KiB; }
    }
    """

private let rejectPolicy = """
    anomaly data-after reject;
    anomaly delimiter-lookalike reject;
    \(logPolicy)
    """

/// What a run produced: the canonical output, the error, and the evaluator's findings.
private struct Run: Equatable {
    var out: [UInt8]
    var error: String?
    var findings: [String]
}

/// Feeds `body` to a form stage in the pieces `cuts` delimits, with bodyData counted as the proxy does.
private func formStage(_ body: [UInt8], cuts: [Int], policy: Policy) -> Run {
    var evaluator = PolicyEvaluator(policy: policy)
    _ = evaluator.begin(method: "POST", path: "/up", contentType: "multipart/form-data; boundary=B",
                        contentLength: UInt64(body.count))
    let stage = FormStage(boundary: b("B"), limits: MultipartLimits(), anomalies: MultipartAnomalies(),
                          reencodeBoundary: b("fresh"), evaluator: evaluator, quarantine: nil)
    let out = RecordingOutput()
    let bounds = [0] + cuts + [body.count]
    var failure: String?
    do {
        for k in 0..<(bounds.count - 1) {
            let piece = Array(body[bounds[k]..<bounds[k + 1]])
            try piece.withUnsafeBytes { p in
                Result { () throws(FormStageError) in
                    try stage.feedBody(p, out: out)
                }
            }.get()
        }
        try stage.finish(out: out)
    } catch {
        failure = "\(error)"
    }
    return Run(out: out.bytes, error: failure, findings: stage.evaluator?.findings.map(\.violation.kind.name) ?? [])
}

/// Feeds `wire` (a Content-Length or chunked body) through the request body stage in the pieces `cuts` delimits.
private func bodyStage(_ wire: [UInt8], framing: BodyFraming, cuts: [Int], policy: Policy) -> Run {
    var evaluator = PolicyEvaluator(policy: policy)
    _ = evaluator.begin(method: "POST", path: "/up", contentType: "multipart/form-data; boundary=B",
                        contentLength: nil)
    let stage = FormStage(boundary: b("B"), limits: MultipartLimits(), anomalies: MultipartAnomalies(),
                          reencodeBoundary: b("fresh"), evaluator: evaluator, quarantine: nil)
    let buffer = OutputQueue(maxCapacity: 1 << 20)
    let body = RequestBodyStage(framing: framing, limits: HTTPLimits(), transform: .form(stage),
                                sink: UpstreamSink(kind: .chunked, buffer: buffer))
    let bounds = [0] + cuts + [wire.count]
    var failure: String?
    outer: for k in 0..<(bounds.count - 1) {
        var pending = Array(wire[bounds[k]..<bounds[k + 1]])
        while !pending.isEmpty {
            let n = pending.withUnsafeBytes { p in Result { () throws(RequestBodyError) in try body.process(p) } }
            switch n {
            case .failure(let error):
                failure = "\(error)"
                break outer
            case .success(0):
                break outer
            case .success(let used):
                pending.removeFirst(used)
            }
        }
    }
    if failure == nil && !body.isComplete { failure = "incomplete" }
    var queued: [UInt8] = []
    buffer.copyPrefix(buffer.pendingBytes, into: &queued)
    let upstream = dechunk(queued) ?? []
    return Run(out: failure == nil ? upstream : [], error: failure,
               findings: stage.evaluator?.findings.map(\.violation.kind.name) ?? [])
}

private func chunked(_ body: [UInt8], size: Int) -> [UInt8] {
    var out: [UInt8] = []
    var at = 0
    while at < body.count {
        let n = min(size, body.count - at)
        out += b(String(n, radix: 16) + "\r\n") + body[at..<(at + n)] + b("\r\n")
        at += n
    }
    return out + b("0\r\n\r\n")
}

@Suite struct CrashShapeTests {
    /// The canonical body the upstream gets for the two parts, whatever followed them.
    func canonical(_ policy: Policy) -> [UInt8] {
        let reference = formStage(clean, cuts: [], policy: policy)
        #expect(reference.error == nil && reference.findings.isEmpty)
        return reference.out
    }

    @Test(arguments: shapes.map(\.name))
    func shapeIsForwardedCanonicallyWhenTheRouteLogsIt(name: String) throws {
        let policy = try Policy.parse(logPolicy)
        let expected = canonical(policy)
        let body = b(head + shapes.first { $0.name == name }!.tail)
        let whole = formStage(body, cuts: [], policy: policy)
        #expect(whole.error == nil, "\(name): \(whole.error ?? "")")
        #expect(whole.out == expected, "\(name): the epilogue is dropped, the parts re-encoded")
        #expect(!whole.findings.isEmpty, "\(name): the anomaly is recorded")
        #expect(formStage(body, cuts: Array(1..<body.count), policy: policy) == whole, "\(name) byte by byte")
        for cut in 1..<body.count {
            #expect(formStage(body, cuts: [cut], policy: policy) == whole, "\(name) split at \(cut)")
        }
    }

    @Test(arguments: shapes.map(\.name))
    func shapeIsRejectedWhenTheRouteRejectsIt(name: String) throws {
        let policy = try Policy.parse(rejectPolicy)
        let body = b(head + shapes.first { $0.name == name }!.tail)
        let whole = formStage(body, cuts: [], policy: policy)
        #expect(whole.error?.contains("anomaly_") == true, "\(name): \(whole.error ?? "no error")")
        #expect(!String(decoding: whole.out, as: UTF8.self).contains("--fresh--"),
                "\(name): a rejected body never gets its close delimiter")
        #expect(formStage(body, cuts: Array(1..<body.count), policy: policy).error == whole.error, "\(name) bytewise")
        for cut in 1..<body.count {
            #expect(formStage(body, cuts: [cut], policy: policy).error == whole.error, "\(name) split at \(cut)")
        }
    }

    /// Through the framing: Content-Length and chunked, the epilogue in the same read or a later one.
    @Test(arguments: shapes.map(\.name))
    func shapeThroughTheRequestBodyStage(name: String) throws {
        let logging = try Policy.parse(logPolicy)
        let rejecting = try Policy.parse(rejectPolicy)
        let expected = canonical(logging)
        let body = b(head + shapes.first { $0.name == name }!.tail)
        let closeEnd = b(head).count + 7   // just after "\r\n--B--": the epilogue arrives in a later read
        for (framing, wire) in [(BodyFraming.contentLength(UInt64(body.count)), body),
                                (.chunked, chunked(body, size: body.count)), (.chunked, chunked(body, size: 7))] {
            let cuts = [[], [closeEnd], Array(1..<wire.count)] + (1..<wire.count).map { [$0] }
            for cut in cuts {
                let logged = bodyStage(wire, framing: framing, cuts: cut, policy: logging)
                #expect(logged.error == nil && logged.out == expected, "\(name) \(framing) cuts \(cut)")
                let rejected = bodyStage(wire, framing: framing, cuts: cut, policy: rejecting)
                #expect(rejected.error?.contains("anomaly_") == true, "\(name) \(framing) cuts \(cut)")
            }
        }
    }

    /// Found by fuzz/RequestPathFuzz.swift: which violation ends a request must not depend on the reads. Data
    /// before a look-alike is counted before the look-alike is judged, and the Content-Type's anomalies come
    /// before any body byte.
    @Test func theFirstViolationInByteOrderWinsAtEverySplit() throws {
        let policy = try Policy.parse("""
            anomaly delimiter-lookalike reject;
            anomaly boundary-whitespace reject;
            route /up { unknown allow; field title { max 8; } }
            """)
        let body = b("--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\n0123456789\n--B\r\n--B--\r\n")
        for cuts in [[]] + (1..<body.count).map({ [$0] }) + [Array(1..<body.count)] {
            let r = formStage(body, cuts: cuts, policy: policy)
            #expect(r.error?.contains("field_too_large") == true, "cuts \(cuts): \(r.error ?? "no error")")
        }
        var flags = MultipartAnomalies()
        flags.insert(.boundaryWhitespace)
        let junk = b("--X\r\n")
        for cut in 0..<junk.count {
            var ev = PolicyEvaluator(policy: policy)
            _ = ev.begin(method: "POST", path: "/up", contentType: "multipart/form-data; boundary=\"B \"",
                         contentLength: nil)
            let stage = FormStage(boundary: b("B"), limits: MultipartLimits(), anomalies: flags,
                                  reencodeBoundary: b("fresh"), evaluator: ev, quarantine: nil)
            let out = RecordingOutput()
            var failure: FormStageError?
            for piece in [Array(junk[..<cut]), Array(junk[cut...])] where failure == nil {
                do throws(FormStageError) {
                    try piece.withUnsafeBytes { p in
                        Result { () throws(FormStageError) in try stage.feed(p, out: out) }
                    }.get()
                } catch { failure = error }
            }
            guard case .rejected(let v)? = failure else { Issue.record("cut \(cut): \(String(describing: failure))"); continue }
            #expect(v.kind == .anomaly(.boundaryWhitespace), "cut \(cut)")
        }
    }

    /// A held last part whose close delimiter ends the input exactly: the stage blocks on the replay with the
    /// parser still holding `end`; finishing must drain it, not trap.
    @Test func heldLastPartWithTheCloseDelimiterAtTheEndOfTheInput() throws {
        let policy = try Policy.parse("""
            route /up {
                field title { max 64; }
                file doc { max 1KiB; types text/plain; action strip; }
            }
            """)
        let body = b(head + "\r\n--B--")
        for cuts in [[], [body.count - 2], Array(1..<body.count)] {
            let r = runStage(body, cuts: cuts, policy: policy)
            #expect(r.error == nil, "cuts \(cuts)")
            #expect(r.enqueued == 1)
            #expect(String(decoding: r.out, as: UTF8.self).hasSuffix("plain text body\r\n--fresh-boundary-0123456789abcdefghij--\r\n"))
        }
    }

    @Test func feedingAfterFinishOrTwiceFinishingIsAnInternalError() throws {
        let stage = FormStage(boundary: b("B"), limits: MultipartLimits(), anomalies: MultipartAnomalies(),
                              reencodeBoundary: b("fresh"), evaluator: nil, quarantine: nil)
        let out = RecordingOutput()
        try clean.withUnsafeBytes { p in Result { () throws(FormStageError) in try stage.feed(p, out: out) } }.get()
        try stage.finish(out: out)
        #expect(stage.isComplete)
        func kind(_ body: () throws(FormStageError) -> Void) -> ViolationKind? {
            do throws(FormStageError) { try body() } catch {
                if case .rejected(let v) = error { return v.kind }
            }
            return nil
        }
        #expect(kind { () throws(FormStageError) in try stage.finish(out: out) } == .internalError)
        #expect(kind { () throws(FormStageError) in
            try clean.withUnsafeBytes { p in Result { () throws(FormStageError) in try stage.feed(p, out: out) } }.get()
        } == .internalError)

        var ev = PolicyEvaluator(policy: try Policy.parse(logPolicy))
        _ = ev.begin(method: "POST", path: "/up", contentType: "application/x-www-form-urlencoded", contentLength: 3)
        let form = UrlencodedStage(evaluator: ev)
        _ = kind { () throws(FormStageError) in try form.finish(out: out) }
        #expect(kind { () throws(FormStageError) in try form.finish(out: out) } == .internalError)
    }
}
