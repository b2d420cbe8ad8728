import HTTP1
import Multipart
import Reactor
import Rules
import Testing
@testable import Proxy

// The proxy's body stages are pure: fed byte slices, they write canonical bytes to an output. These tests
// drive them with no sockets, at every split point, and check what the upstream would receive.

/// Collects what a stage writes; enqueued files are spliced in when the test says the replay is done.
final class RecordingOutput: FormOutput {
    var bytes: [UInt8] = []
    var pending: TemporaryFile?
    var enqueued = 0

    func write(_ chunk: UnsafeRawBufferPointer) { bytes.append(contentsOf: chunk) }

    func enqueue(_ file: TemporaryFile) -> Bool {
        enqueued += 1
        pending = file
        return true
    }

    var isReplaying: Bool { pending != nil }

    /// Finishes the pending replay: the file's bytes land in order.
    func completeReplay() {
        guard let file = pending else { return }
        try? file.forEachChunk { bytes.append(contentsOf: $0) }
        file.close()
        pending = nil
    }
}

func b(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Feeds `body` to a fresh stage in the chunks `cuts` delimits, completing replays as they come.
func runStage(_ body: [UInt8], cuts: [Int], policy: Policy?, path: String = "/up",
              fresh: [UInt8] = b("fresh-boundary-0123456789abcdefghij"), observe: Bool = true,
              hashing: PartHashing = .all)
    -> (out: [UInt8], error: FormStageError?, records: [PartRecord], enqueued: Int) {
    var evaluator = policy.map { PolicyEvaluator(policy: $0) }
    if evaluator != nil {
        _ = evaluator!.begin(method: "POST", path: path, contentType: "multipart/form-data; boundary=B",
                             contentLength: UInt64(body.count))
    }
    let stage = FormStage(boundary: b("B"), limits: MultipartLimits(), anomalies: MultipartAnomalies(),
                          reencodeBoundary: fresh, evaluator: evaluator, quarantine: nil, observe: observe,
                          hashing: hashing)
    let out = RecordingOutput()
    let bounds = [0] + cuts + [body.count]
    do {
        for k in 0..<(bounds.count - 1) {
            let piece = Array(body[bounds[k]..<bounds[k + 1]])
            while stage.isBlocked {
                out.completeReplay()
                try stage.resume(out: out)
            }
            try piece.withUnsafeBytes { p in Result { () throws(FormStageError) in try stage.feed(p, out: out) } }.get()
        }
        try stage.finish(out: out)
        while stage.isBlocked {
            out.completeReplay()
            try stage.resume(out: out)
        }
    } catch {
        return (out.bytes, error, stage.records, out.enqueued)
    }
    return (out.bytes, nil, stage.records, out.enqueued)
}

let sample = b("--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n"
    + "--B\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\n"
    + "plain text body\r\n--B\r\nContent-Disposition: form-data; name=\"junk\"\r\n\r\nx\r\n--B--\r\n")

@Suite struct FormStageTests {
    @Test func withoutPolicyEveryPartIsReencodedIdenticallyAtEverySplit() {
        let whole = runStage(sample, cuts: [], policy: nil)
        #expect(whole.error == nil)
        let text = String(decoding: whole.out, as: UTF8.self)
        #expect(text.hasPrefix("--fresh-boundary-0123456789abcdefghij\r\nContent-Disposition: form-data; name=\"title\""))
        #expect(text.hasSuffix("\r\n--fresh-boundary-0123456789abcdefghij--\r\n"))
        #expect(whole.records.map(\.action) == ["forward", "forward", "forward"])
        for cut in 1..<sample.count {
            #expect(runStage(sample, cuts: [cut], policy: nil).out == whole.out, "split at \(cut)")
        }
        #expect(runStage(sample, cuts: Array(1..<sample.count), policy: nil).out == whole.out)
    }

    @Test func strippedPartsNeverReachTheOutput() throws {
        let policy = try Policy.parse("""
            route /up {
                unknown strip;
                field title { max 64; }
                file doc { max 1KiB; types text/plain; }
            }
            """)
        let whole = runStage(sample, cuts: [], policy: policy)
        #expect(whole.error == nil)
        let text = String(decoding: whole.out, as: UTF8.self)
        #expect(text.contains("name=\"title\"") && text.contains("plain text body"))
        #expect(!text.contains("junk"))
        #expect(whole.records.map(\.action) == ["forward", "forward", "strip"])
        for cut in stride(from: 1, to: sample.count, by: 3) {
            #expect(runStage(sample, cuts: [cut], policy: policy).out == whole.out, "split at \(cut)")
        }
    }

    @Test func aHeldPartIsReplayedInPlaceOrDropped() throws {
        // `action strip` with a pending type check: the part must be held until its end.
        let keep = try Policy.parse("""
            route /up {
                field title { max 64; }
                field junk { max 64; }
                file doc { max 1KiB; types text/plain; action strip; }
            }
            """)
        let kept = runStage(sample, cuts: [], policy: keep)
        #expect(kept.error == nil)
        #expect(kept.enqueued == 1)
        let keptText = String(decoding: kept.out, as: UTF8.self)
        // Order is preserved: title, then the held document, then junk.
        let title = try #require(keptText.range(of: "hello"))
        let doc = try #require(keptText.range(of: "plain text body"))
        let junk = try #require(keptText.range(of: "name=\"junk\""))
        #expect(title.upperBound < doc.lowerBound && doc.upperBound < junk.lowerBound)
        #expect(runStage(sample, cuts: Array(1..<sample.count), policy: keep).out == kept.out)

        let drop = try Policy.parse("""
            route /up {
                field title { max 64; }
                field junk { max 64; }
                file doc { max 1KiB; types image/png; action strip; }
            }
            """)
        let dropped = runStage(sample, cuts: [], policy: drop)
        #expect(dropped.error == nil)
        #expect(dropped.enqueued == 0)
        #expect(!String(decoding: dropped.out, as: UTF8.self).contains("plain text body"))
        #expect(dropped.records.map(\.action) == ["forward", "strip", "forward"])
    }

    @Test func aRejectionStopsTheStageAndListsThePart() throws {
        let policy = try Policy.parse("""
            route /up {
                field title { max 3; }
                unknown allow;
            }
            """)
        let r = runStage(sample, cuts: [], policy: policy)
        guard case .rejected(let v)? = r.error else {
            Issue.record("expected a rejection, got \(String(describing: r.error))")
            return
        }
        #expect(v.kind == .fieldTooLarge && v.status == 413)
        #expect(r.records.last?.action == "reject")
        #expect(!String(decoding: r.out, as: UTF8.self).contains("--fresh-boundary-0123456789abcdefghij--"))
    }
}

/// What Chromium sends for a typed file input left empty ("no file chosen") and an empty chosen file.
let emptyFiles = b("--B\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"\"\r\n"
    + "Content-Type: application/octet-stream\r\n\r\n\r\n"
    + "--B\r\nContent-Disposition: form-data; name=\"attachments\"; filename=\"leer.txt\"\r\n"
    + "Content-Type: text/plain\r\n\r\n\r\n--B--\r\n")

@Suite struct EmptyFileStageTests {
    /// By default "no file chosen" is left out (`empty-filename strip`): frameworks read it as a file, a field or an
    /// upload error, and all read an absent part alike.
    @Test func noFileChosenIsStrippedByDefaultAtEverySplit() throws {
        let policy = try Policy.parse("""
            route /up {
                file photo { max 1MiB; types image/png; }
                file attachments { max 1MiB; repeat 5; }
            }
            """)
        let whole = runStage(emptyFiles, cuts: [], policy: policy)
        #expect(whole.error == nil)
        #expect(whole.records.map(\.action) == ["strip", "forward"])
        let text = String(decoding: whole.out, as: UTF8.self)
        #expect(!text.contains("name=\"photo\"") && text.contains("filename=\"leer.txt\""))
        for cut in 1..<emptyFiles.count {
            #expect(runStage(emptyFiles, cuts: [cut], policy: policy).out == whole.out, "split at \(cut)")
        }
    }

    @Test(arguments: ["reject", "strip"])
    func emptyFilePartsAreForwardedAtEverySplit(action: String) throws {
        let policy = try Policy.parse("""
            route /up {
                anomaly empty-filename allow;
                file photo { max 1MiB; types image/png; action \(action); }
                file attachments { max 1MiB; repeat 5; }
            }
            """)
        let whole = runStage(emptyFiles, cuts: [], policy: policy)
        #expect(whole.error == nil)
        #expect(whole.records.map(\.action) == ["forward", "forward"])
        #expect(whole.records.map(\.sniffedType) == ["application/x-empty", "application/x-empty"])
        let text = String(decoding: whole.out, as: UTF8.self)
        #expect(text.contains("name=\"photo\"; filename=\"\"") && text.contains("filename=\"leer.txt\""))
        for cut in 1..<emptyFiles.count {
            #expect(runStage(emptyFiles, cuts: [cut], policy: policy).out == whole.out, "split at \(cut)")
        }
    }

    @Test func aRequiredInputLeftEmptyIsMissing() throws {
        let policy = try Policy.parse("""
            route /up {
                file photo { types image/png; required; }
                file attachments { repeat 5; }
            }
            """)
        let r = runStage(emptyFiles, cuts: [], policy: policy)
        guard case .rejected(let v)? = r.error else {
            Issue.record("expected a rejection, got \(String(describing: r.error))")
            return
        }
        #expect(v.kind == .missingRequired && v.part == "photo")
    }
}

@Suite struct UrlencodedStageTests {
    func run(_ body: String, policy: Policy, cuts: [Int] = []) -> (String, FormStageError?) {
        var ev = PolicyEvaluator(policy: policy)
        _ = ev.begin(method: "POST", path: "/up", contentType: "application/x-www-form-urlencoded",
                     contentLength: UInt64(body.utf8.count))
        let stage = UrlencodedStage(evaluator: ev)
        let out = RecordingOutput()
        let bytes = b(body)
        let bounds = [0] + cuts + [bytes.count]
        do {
            for k in 0..<(bounds.count - 1) {
                let piece = Array(bytes[bounds[k]..<bounds[k + 1]])
                try piece.withUnsafeBytes { p in Result { () throws(FormStageError) in try stage.feed(p, out: out) } }.get()
            }
            try stage.finish(out: out)
        } catch {
            return (String(decoding: out.bytes, as: UTF8.self), error)
        }
        return (String(decoding: out.bytes, as: UTF8.self), nil)
    }

    @Test func fieldsAreDecodedCheckedAndReencodedAtEverySplit() throws {
        let policy = try Policy.parse("""
            route /up {
                content-types application/x-www-form-urlencoded;
                unknown strip;
                field name { max 64; }
                field note { max 64; }
            }
            """)
        let body = "name=J%C3%BCrgen+M%C3%BCller&evil=%3Cscript%3E&note=a%26b%3Dc"
        let (out, error) = run(body, policy: policy)
        #expect(error == nil)
        #expect(out == "name=J%C3%BCrgen+M%C3%BCller&note=a%26b%3Dc")
        for cut in 1..<body.utf8.count {
            #expect(run(body, policy: policy, cuts: [cut]).0 == out, "split at \(cut)")
        }
    }

    @Test func patternAndRequiredAreEnforced() throws {
        let policy = try Policy.parse("""
            route /up {
                content-types application/x-www-form-urlencoded;
                field id { max 16; required; pattern "^[0-9]+$"; }
            }
            """)
        #expect(run("id=123", policy: policy).1 == nil)
        if case .rejected(let v)? = run("id=12a", policy: policy).1 { #expect(v.kind == .patternMismatch) } else {
            Issue.record("pattern mismatch not rejected")
        }
        if case .rejected(let v)? = run("", policy: policy).1 { #expect(v.kind == .missingRequired) } else {
            Issue.record("missing required not rejected")
        }
        // A bad escape is a malformed body, rejected through the policy so the client and the log share its detail.
        for (body, detail) in [("id=%G1", "invalid percent escape: 'G' is not a hex digit (body byte 5)"),
                               ("id=1%", "truncated percent escape at the end of the body")] {
            if case .rejected(let v)? = run(body, policy: policy).1 {
                #expect(v.kind == .malformedBody && v.status == 400 && v.detail == detail)
            } else {
                Issue.record("bad escape \(body) accepted")
            }
        }
    }
}

@Suite struct RequestBodyStageTests {
    /// A chunked client body through the multipart stage: the upstream gets the same canonical chunked body
    /// whatever the client's chunking and whatever the read splits.
    @Test func chunkedMultipartBodyGivesTheSameUpstreamBytes() {
        func chunked(_ body: [UInt8], size: Int) -> [UInt8] {
            var out: [UInt8] = []
            var at = 0
            while at < body.count {
                let n = min(size, body.count - at)
                out += b(String(n, radix: 16) + "\r\n") + body[at..<(at + n)] + b("\r\n")
                at += n
            }
            return out + b("0\r\n\r\n")
        }
        func upstreamBytes(_ wire: [UInt8], split: Int) -> [UInt8]? {
            let stage = FormStage(boundary: b("B"), limits: MultipartLimits(), anomalies: MultipartAnomalies(),
                                  reencodeBoundary: b("fresh-boundary-0123456789abcdefghij"), evaluator: nil,
                                  quarantine: nil)
            let buffer = OutputQueue(maxCapacity: 1 << 20)
            let body = RequestBodyStage(framing: .chunked, limits: HTTPLimits(), transform: .form(stage),
                                        sink: UpstreamSink(kind: .chunked, buffer: buffer))
            var consumed = 0
            for piece in [Array(wire[..<split]), Array(wire[split...])] {
                var pending = piece
                while !pending.isEmpty {
                    let n = pending.withUnsafeBytes { p in
                        Result { () throws(RequestBodyError) in try body.process(p) }
                    }
                    guard case .success(let used) = n else { return nil }
                    if used == 0 { break }
                    consumed += used
                    pending.removeFirst(used)
                }
            }
            guard body.isComplete, consumed == wire.count else { return nil }
            var out: [UInt8] = []
            buffer.copyPrefix(buffer.pendingBytes, into: &out)
            return out
        }
        let reference = upstreamBytes(chunked(sample, size: sample.count), split: 0)
        #expect(reference != nil)
        for size in [1, 7, 64] {
            let wire = chunked(sample, size: size)
            for split in stride(from: 0, to: wire.count, by: 5) {
                // The upstream framing groups bytes as they were parsed, so compare the de-chunked payloads.
                #expect(dechunk(upstreamBytes(wire, split: split)) == dechunk(reference), "size \(size) split \(split)")
            }
        }
    }
}

/// The payload of a chunked byte stream (nil stays nil).
func dechunk(_ bytes: [UInt8]?) -> [UInt8]? {
    guard let bytes else { return nil }
    var decoder = ChunkedDecoder()
    var out: [UInt8] = []
    var offset = 0
    var ended = false
    bytes.withUnsafeBytes { p in
        while let event = try? decoder.decode(p, from: &offset) {
            switch event {
            case .data(let span): out.append(contentsOf: span)
            case .end: ended = true
            }
            if ended { break }
        }
    }
    return ended ? out : nil
}
