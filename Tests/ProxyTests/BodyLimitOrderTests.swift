import Multipart
import Rules
import Testing
@testable import Proxy

// A body's verdict must not depend on how it was cut into reads. `body-max` is judged after the bytes before it
// (`FormStage.feedBody`, `UrlencodedStage.feedBody`): a body malformed within its first `body-max` bytes is
// `malformed_body`, a longer one with nothing wrong in them `body_too_large`, whole, byte by byte or cut anywhere.
// Before, a read's bytes were counted before they were parsed, and fuzz/RequestPathFuzz.swift found the same
// chunked body answered `body_too_large` in one read and `malformed_body` byte by byte.

@Suite struct BodyLimitOrderTests {
    static let limit = 1024
    static let rules = "route /up { body-max 1KiB; unknown allow; }"
    static let monitorHold = """
    mode monitor;
    route /up { body-max 1KiB; unknown allow; file doc { types text/plain; } }
    """

    static func part(_ name: String, filename: String? = nil, extraHeader: String = "", _ data: String) -> String {
        let file = filename.map { "; filename=\"\($0)\"" } ?? ""
        return "--B\r\nContent-Disposition: form-data; name=\"\(name)\"\(file)\r\n\(extraHeader)\r\n\(data)\r\n"
    }

    /// A malformed part header (a line without a colon) at about byte 150, in a body of about 2.2 KiB.
    static let malformedWithin = b(part("title", "hello") + part("doc", filename: "a.txt", extraHeader: "Bad Header\r\n",
                                                                 String(repeating: "x", count: 2000)) + "--B--\r\n")
    /// Well formed throughout, 2.2 KiB.
    static let wellFormedLong = b(part("title", "hello") + part("doc", filename: "a.txt", String(repeating: "x", count: 2000))
                                  + "--B--\r\n")
    /// Well formed for its first 1.6 KiB, then the same malformed header.
    static let malformedAfter = b(part("doc", filename: "a.txt", String(repeating: "x", count: 1500))
                                  + part("note", extraHeader: "Bad Header\r\n", "n") + "--B--\r\n")

    /// Feeds `body` in the pieces `cuts` delimits through `feedBody`, completing replays as they come; the error
    /// kind (as the fuzzer names it) and what the upstream got.
    static func drive(_ body: [UInt8], cuts: [Int], rules: String = rules, hold: Bool = false)
        throws -> (error: String?, out: [UInt8]) {
        var evaluator = PolicyEvaluator(policy: try Policy.parse(rules))
        _ = evaluator.begin(method: "POST", path: "/up", contentType: "multipart/form-data; boundary=B",
                            contentLength: nil)   // chunked: a declared length past body-max is refused at once
        let stage = FormStage(boundary: b("B"), limits: MultipartLimits(), anomalies: MultipartAnomalies(),
                              reencodeBoundary: b("fresh-boundary-0123456789"), evaluator: evaluator,
                              quarantine: nil, holdPending: hold)
        let out = RecordingOutput()
        let bounds = [0] + cuts + [body.count]
        do throws(FormStageError) {
            for k in 0..<(bounds.count - 1) {
                while stage.isBlocked {
                    out.completeReplay()
                    try stage.resume(out: out)
                }
                let piece = Array(body[bounds[k]..<bounds[k + 1]])
                try piece.withUnsafeBytes { p in Result { () throws(FormStageError) in try stage.feedBody(p, out: out) } }
                    .get()
            }
            try stage.finish(out: out)
            while stage.isBlocked {
                out.completeReplay()
                try stage.resume(out: out)
            }
        } catch {
            return (name(error), out.bytes)
        }
        return (nil, out.bytes)
    }

    /// An error as the request path fuzzer names it.
    static func name(_ error: FormStageError) -> String {
        switch error {
        case .malformed(let e): return "malformed:\(e.kind)"
        case .rejected(let v): return "rejected:\(v.kind.name)"
        default: return "\(error)"
        }
    }

    /// Whole, byte by byte, and cut once at every position.
    static func everyCut(_ body: [UInt8]) -> [[Int]] {
        [[], Array(1..<body.count)] + (1..<body.count).map { [$0] }
    }

    @Test(arguments: [
        ("malformed within the limit", malformedWithin, "malformed:malformedPartHeader"),
        ("well formed, too long", wellFormedLong, "rejected:body_too_large"),
        ("malformed only past the limit", malformedAfter, "rejected:body_too_large"),
    ])
    func theVerdictIsTheSameHoweverTheBodyIsCut(label: String, body: [UInt8], expected: String) throws {
        #expect(body.count > Self.limit)
        for cuts in Self.everyCut(body) {
            let (error, _) = try Self.drive(body, cuts: cuts)
            #expect(error == expected, "\(label), cut at \(cuts.count > 1 ? "every byte" : "\(cuts)")")
            if error != expected { break }
        }
    }

    /// Monitor mode counts past the limit and parses on: the upstream gets the same bytes however the body is
    /// cut, also when the read that passes the limit ends a held part first (its rest waits for the replay).
    @Test func monitoredBodiesPastTheLimitAreForwardedWhole() throws {
        let body = b(Self.part("doc", filename: "a.txt", String(repeating: "t", count: 500))
                     + Self.part("note", String(repeating: "n", count: 900)) + "--B--\r\n")
        #expect(body.count > Self.limit)
        let whole = try Self.drive(body, cuts: [], rules: Self.monitorHold, hold: true)
        #expect(whole.error == nil)
        #expect(String(decoding: whole.out, as: UTF8.self).contains(String(repeating: "n", count: 900)))
        for cuts in Self.everyCut(body) {
            let run = try Self.drive(body, cuts: cuts, rules: Self.monitorHold, hold: true)
            #expect(run.error == nil && run.out == whole.out, "cut at \(cuts.count > 1 ? "every byte" : "\(cuts)")")
            if run.error != nil || run.out != whole.out { break }
        }
    }

    /// The urlencoded stage likewise: a bad escape within the limit is malformed however the body is cut.
    @Test func urlencodedBadEscapeWithinTheLimit() throws {
        let body = b("a=1&b=%zz&c=" + String(repeating: "y", count: 1500))
        var results: Set<String> = []
        for cuts in Self.everyCut(body) where cuts.count <= 1 || cuts.count == body.count - 1 {
            var evaluator = PolicyEvaluator(policy: try Policy.parse(Self.rules))
            _ = evaluator.begin(method: "POST", path: "/up", contentType: "application/x-www-form-urlencoded",
                                contentLength: nil)   // chunked: a declared length past body-max is refused at once
            let stage = UrlencodedStage(evaluator: evaluator)
            let out = RecordingOutput()
            let bounds = [0] + cuts + [body.count]
            do throws(FormStageError) {
                for k in 0..<(bounds.count - 1) {
                    let piece = Array(body[bounds[k]..<bounds[k + 1]])
                    try piece.withUnsafeBytes { p in
                        Result { () throws(FormStageError) in try stage.feedBody(p, out: out) }
                    }.get()
                }
                try stage.finish(out: out)
                results.insert("forwarded")
            } catch {
                results.insert(Self.name(error))
            }
        }
        #expect(results == ["rejected:malformed_body"])
    }
}
