// libFuzzer target for the request body path without sockets:
//
//   raw request ─► HTTPRequestHeadParser ─► PolicyEvaluator.begin ─► framing (Content-Length | ChunkedDecoder)
//               ─► FormStage | UrlencodedStage | passthrough ─► PolicyEvaluator ─► canonical encoder ─► bytes
//
// Built by fuzz/run.sh with `swiftc -sanitize=fuzzer,address` over HTTP1, Multipart, Rules, Inspect, Quarantine
// and Reactor (as modules) plus Sources/Proxy/{FormStage,UrlencodedStage}.swift, so any trap is a finding.
//
// Input layout: byte 0 picks the policy, byte 1 the read size (1-255) for the split run; the rest is the raw
// request (head and body). Checks, besides "no trap":
//   - split invariance: the whole input in one read and in reads of the chosen size give the same outcome
//     (the error kind, or the same upstream bytes);
//   - a forwarded multipart body, re-parsed with the re-encode boundary, yields exactly the parts recorded as
//     `forward` or `sanitize`, in order, with their sizes, and nothing after the close delimiter.

import HTTP1
import Multipart
import Reactor
import Rules

let fresh = Array("fuzz-fresh-boundary-0123456789".utf8)

let policies: [Policy] = [
    """
    route /up {
        unknown allow;
        field title { max 64; }
        file doc { max 1KiB; }
    }
    """,
    """
    anomaly data-after reject;
    anomaly delimiter-lookalike reject;
    route /up {
        body-max 2KiB;
        parts-max 4;
        content-types multipart/form-data application/x-www-form-urlencoded;
        field title { max 16; required; pattern "^[a-z]*$"; }
        field note { max 8; action strip; pattern "^[0-9]+$"; }
        file doc { max 512; types text/plain; action strip; }
        unknown strip;
    }
    """,
    """
    mode monitor;
    route /up {
        field title { max 4; required; }
        file doc { types image/png; }
    }
    """,
].map { try! Policy.parse($0) }   // constant rule strings: a failure here is a harness bug, not a finding

/// Output that splices held files in at once (no replay to wait for), like `formwall inspect`.
final class Collect: FormOutput {
    var bytes: [UInt8] = []
    func write(_ chunk: UnsafeRawBufferPointer) { bytes.append(contentsOf: chunk) }
    func enqueue(_ file: TemporaryFile) -> Bool {
        defer { file.close() }
        try? file.forEachChunk { bytes.append(contentsOf: $0) }
        return false
    }
    var isReplaying: Bool { false }
}

struct Outcome: Equatable {
    var error: String?
    var upstream: [UInt8] = []
    var forwarded: [(name: [UInt8]?, size: UInt64)] = []

    static func == (a: Outcome, b: Outcome) -> Bool {
        a.error == b.error && a.upstream == b.upstream
            && a.forwarded.map(\.size) == b.forwarded.map(\.size) && a.forwarded.map(\.name) == b.forwarded.map(\.name)
    }
}

enum Stage {
    case form(FormStage)
    case urlencoded(UrlencodedStage)
    case passthrough(PolicyEvaluator)
}

func kind(_ error: FormStageError) -> String {
    switch error {
    case .malformed(let e): return "malformed:\(e.kind)"
    // Two anomalies flagged by the same bytes may be named in either order: any anomaly is one outcome (400).
    case .rejected(let v): return v.kind.name.hasPrefix("anomaly_") ? "rejected:anomaly" : "rejected:\(v.kind.name)"
    case .quarantineFailed: return "quarantine"
    case .holdFailed: return "hold"
    case .antivirusFailed: return "antivirus"
    }
}

/// Runs the request through the path, `read` bytes at a time; nil when the head never completed.
func run(_ request: UnsafeRawBufferPointer, policy: Policy, read: Int) -> Outcome? {
    var parser = HTTPRequestHeadParser()
    var at = 0
    var head: HTTPRequestHead?
    while head == nil, at < request.count {
        let n = min(read, request.count - at)
        let result: HTTPHeadParseResult<HTTPRequestHead>
        do { result = try parser.parse(UnsafeRawBufferPointer(rebasing: request[at..<(at + n)])) } catch {
            return Outcome(error: "head:\(error)")
        }
        switch result {
        case .needMore(let used): at += used
        case .complete(let parsed, let used): head = parsed; at += used
        }
    }
    guard let head else { return nil }
    var outcome = Outcome()
    var evaluator = PolicyEvaluator(policy: policy)
    let contentType = head.header(named: "content-type")
    let length: UInt64? = {
        switch head.framing {
        case .none, .closeDelimited: return 0
        case .contentLength(let n): return n
        case .chunked: return nil
        }
    }()
    let bodyKind: PolicyEvaluator.BodyKind
    switch evaluator.begin(method: head.method, path: head.target, contentType: contentType, contentLength: length) {
    case .reject(let v): return Outcome(error: "begin:\(v.kind.name)")
    case .proceed(let k): bodyKind = k
    }
    let out = Collect()
    let stage: Stage
    switch bodyKind {
    case .multipart:
        guard let ct = contentType else { return Outcome(error: "no-content-type") }
        let parsed: MultipartBoundary.Parsed
        do { parsed = try MultipartBoundary.parse(contentType: Array(ct.utf8)) } catch {
            return Outcome(error: "boundary:\(error.kind)")
        }
        stage = .form(FormStage(boundary: parsed.boundary, limits: MultipartLimits(), anomalies: parsed.anomalies,
                                reencodeBoundary: fresh, evaluator: evaluator, quarantine: nil,
                                spoolDirectory: "/tmp"))
    case .urlencoded:
        stage = .urlencoded(UrlencodedStage(evaluator: evaluator))
    default:
        stage = .passthrough(evaluator)
    }
    // The body: the rest of the input, cut by the head's framing, delivered `read` bytes at a time.
    var decoder = ChunkedDecoder()
    var remaining: UInt64 = { if case .contentLength(let n) = head.framing { return n }; return 0 }()
    let chunked = head.framing == .chunked
    var ended = !chunked && remaining == 0
    var pass = evaluator
    func deliver(_ span: UnsafeRawBufferPointer) throws(FormStageError) {
        guard !span.isEmpty else { return }
        switch stage {
        case .form(let s): try s.feedBody(span, out: out)
        case .urlencoded(let s): try s.feedBody(span, out: out)
        case .passthrough:
            if case .reject(let v) = pass.bodyData(count: span.count) { throw .rejected(v) }
            out.write(span)
        }
    }
    do throws(FormStageError) {
        while !ended, at < request.count {
            let n = min(read, request.count - at)
            let slice = UnsafeRawBufferPointer(rebasing: request[at..<(at + n)])
            if chunked {
                var offset = 0
                while !ended {
                    let event: ChunkedEvent?
                    do { event = try decoder.decode(slice, from: &offset) } catch {
                        return Outcome(error: "chunked:\(error)")
                    }
                    guard let event else { break }
                    switch event {
                    case .data(let span): try deliver(span)
                    case .end: ended = true
                    }
                }
                at += offset
            } else {
                let take = Int(min(UInt64(n), remaining))
                try deliver(UnsafeRawBufferPointer(rebasing: slice[0..<take]))
                remaining -= UInt64(take)
                ended = remaining == 0
                at += take
            }
        }
        guard ended else { return Outcome(error: "truncated") }
        switch stage {
        case .form(let s): try s.finish(out: out)
        case .urlencoded(let s): try s.finish(out: out)
        case .passthrough:
            if case .reject(let v) = pass.end() { throw .rejected(v) }
        }
    } catch {
        outcome.error = kind(error)
        return outcome
    }
    outcome.upstream = out.bytes
    if case .form(let s) = stage {
        outcome.forwarded = s.records.filter { $0.action == "forward" || $0.action == "sanitize" }
            .map { (MultipartEncoder.canonical($0.part).name, $0.size) }   // names as escaped on the wire
        // The proxy draws a random boundary per request; this one is fixed, so the fuzzer can plant it in part
        // data. A collision is not a finding.
        if !contains(request, fresh) { checkReparse(out.bytes, expected: outcome.forwarded) }
    }
    return outcome
}

func contains(_ haystack: UnsafeRawBufferPointer, _ needle: [UInt8]) -> Bool {
    guard haystack.count >= needle.count else { return false }
    for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
        if (1..<needle.count).allSatisfy({ haystack[start + $0] == needle[$0] }) { return true }
    }
    return false
}

/// The canonical body parses, with the fresh boundary, to exactly the forwarded parts; no preamble or epilogue.
func checkReparse(_ body: [UInt8], expected: [(name: [UInt8]?, size: UInt64)]) {
    let parser = MultipartParser(boundary: fresh)
    var seen: [(name: [UInt8]?, size: UInt64)] = []
    body.withUnsafeBytes { bytes in
        do throws(MultipartError) {
            var consumed = 0
            while let event = try parser.next(bytes, consumed: &consumed) {
                switch event {
                case .partBegin(let p): seen.append((p.name, 0))
                case .partData(let span): seen[seen.count - 1].size += UInt64(span.count)
                case .partEnd, .end: break
                }
            }
            try parser.finish()
        } catch {
            fatalError("the canonical body does not re-parse: \(error)")
        }
    }
    check(parser.anomalies.bits == 0, "the canonical body has anomalies \(parser.anomalies.names)")
    // A part without a name is re-encoded with `name=""`.
    check(seen.map(\.size) == expected.map(\.size) && seen.map { $0.name ?? [] } == expected.map { $0.name ?? [] },
          "re-parsed parts \(seen) differ from the forwarded records \(expected)")
}

/// A finding: fatalError keeps its message in -O builds, unlike precondition.
func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 2 else { return 0 }
    let policy = policies[Int(data[0]) % policies.count]
    let read = max(Int(data[1]), 1)
    let request = UnsafeRawBufferPointer(start: data + 2, count: size - 2)
    let whole = run(request, policy: policy, read: max(request.count, 1))
    let split = run(request, policy: policy, read: read)
    check(whole == split, "split invariance: \(String(describing: whole?.error)) vs \(String(describing: split?.error))")
    return 0
}
