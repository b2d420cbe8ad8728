// libFuzzer target for the whole request path of one client connection, without sockets:
//
//   raw client bytes (any reads) ─► ConnectionMachine: head parser ─► policy ─► framing ─► form / urlencoded /
//   passthrough stage ─► canonical encoder ─► scripted upstream ─► response relay ─► client bytes, audit records
//
// Built by fuzz/run.sh with `swiftc -sanitize=fuzzer,address` over the library modules and the machine's files
// in Sources/Proxy (ConnectionMachine, Exchange, ExchangeRig, the body stages), so any trap is a finding.
//
// Input layout: byte 0 picks the policy (one of rules/*.rules, or one generated from the byte's bits), byte 1
// the upstream script (connect, when it answers, which response, what it does after), byte 2 the read size
// (0: all at once); the rest is what the client sends. Checks, besides "no trap":
//   - the rig's invariants: one record per request, no action after close, pooling only after a clean
//     keep-alive exchange, a rejected request never upstream complete, liveness past every deadline;
//   - split invariance: the same answers and records whole and in reads of the chosen size;
//   - every complete forwarded multipart body parses back, with the re-encode boundary, to exactly as many
//     parts as the record lists as forwarded.
//
// Mutations: fuzz/ExchangeMutator.swift's structure-aware LLVMFuzzerCustomMutator for half of them, libFuzzer's own
// for the rest (FORMWALL_FUZZ_NO_MUTATOR=1: libFuzzer's only); see docs/fuzzing.md.

import Foundation
import HTTP1
import Multipart
import Rules

/// Policies from the repository's rules/ (read once), then generated ones.
let repositoryPolicies: [Policy] = {
    let dir = ProcessInfo.processInfo.environment["FORMWALL_RULES_DIR"] ?? "../../rules"
    let files = (try? FileManager.default.contentsOfDirectory(atPath: dir))?.filter { $0.hasSuffix(".rules") }.sorted()
    return (files ?? []).compactMap { RuleChecker.compile(paths: ["\(dir)/\($0)"]).policy }
}()

/// A policy generated from one byte: body mode, unknown parts, a file limit, the epilogue anomaly, monitor mode.
func generatedPolicy(_ bits: UInt8) -> Policy? {
    let mode = ["chunked", "hold", "spool", "chunked"][Int(bits & 3)]
    let unknown = ["reject", "strip", "allow", "reject"][Int((bits >> 2) & 3)]
    let fileMax = ["max 64;", "max 1KiB;", "", "max 0;"][Int((bits >> 4) & 3)]
    let dataAfter = bits & 0x40 != 0 ? "reject" : "log"
    let monitor = bits & 0x80 != 0 ? "mode monitor;\n" : ""
    let text = """
    \(monitor)anomaly data-after \(dataAfter);
    route / {
        upstream-body \(mode);
        unknown \(unknown);
        body-max 16KiB;
        compression-ratio-max 8;
        field title { max 32; }
        field note { max 8; action strip; pattern "^[0-9]+$"; }
        file doc { \(fileMax) action strip; }
        file photo { types image/png; \(fileMax) }
    }
    """
    return RuleChecker.compile(source: text, file: "generated.rules").policy
}

let responses: [[UInt8]] = [
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 1\r\n\r\nn",
    "HTTP/1.0 200 OK\r\n\r\nclose-delimited",
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
    "not http at all\r\n\r\n",
    "HTTP/1.1 413 Too Large\r\nContent-Length: 0\r\n\r\n",
].map { Array($0.utf8) }

func script(_ byte: UInt8) -> ExchangeRig.UpstreamScript {
    var s = ExchangeRig.UpstreamScript()
    s.connect = [.accept, .accept, .refuse, .ignore][Int(byte & 3)]
    s.answer = [.atEnd, .atHead, .afterBodyBytes(64), .never][Int((byte >> 2) & 3)]
    s.response = responses[Int((byte >> 4) & 7)]
    s.then = byte & 0x80 != 0 ? .close : .stayOpen
    if byte == 0xFF { s.readLimit = 100 }
    if byte == 0xFE { s.window = 1500 }   // short upstream writes: lent part data is settled
    s.firstIsPooled = byte & 0x03 == 1
    s.firstIsStale = s.firstIsPooled && byte & 0x40 != 0
    return s
}

/// The parts of a complete chunked request body re-parsed with the rig's boundary; nil if it was not re-encoded.
/// Re-encoded means the forwarded head names the re-encode boundary: a head that merely contains
/// "multipart/form-data" may be a passthrough (e.g. a first `Content-Type: text/plain` and a second multipart one,
/// which the proxy judges by the first), whose body was never re-encoded and need not parse with that boundary.
func reparsedPartCount(_ received: [UInt8]) -> Int? {
    guard let headEnd = ExchangeRig.find([13, 10, 13, 10], in: received),
          ExchangeRig.contains(Array("multipart/form-data".utf8), in: Array(received[..<headEnd])),
          ExchangeRig.contains(Array("boundary=RigBoundary0123456789abcdefXYZ".utf8), in: Array(received[..<headEnd])),
          ExchangeRig.contains(Array("chunked".utf8), in: Array(received[..<headEnd])) else { return nil }
    let body = Array(ExchangeRig.dechunked(received)[(headEnd + 4)...])
    let parser = MultipartParser(boundary: Array("RigBoundary0123456789abcdefXYZ".utf8))
    var parts = 0
    let failure: MultipartError? = body.withUnsafeBytes { bytes in
        do throws(MultipartError) {
            var consumed = 0
            while let event = try parser.next(bytes, consumed: &consumed) {
                if case .partBegin = event { parts += 1 }
            }
            try parser.finish()
            return nil
        } catch {
            return error
        }
    }
    if let failure { fatalError("a forwarded body does not parse back: \(failure)") }
    return parts
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 3 else { return 0 }
    let policyByte = data[0]
    let policy: Policy?
    if policyByte < 0x20 && !repositoryPolicies.isEmpty {
        policy = repositoryPolicies[Int(policyByte) % repositoryPolicies.count]
    } else if policyByte == 0x20 {
        policy = nil
    } else {
        policy = generatedPolicy(policyByte)
    }
    var upstream = script(data[1])
    let piece = Int(data[2])
    // An upstream group of 1 to 3 servers (from the read size), whose first may refuse and second never answer
    // the connect: requests move on to the next server before any byte went up.
    let servers = 1 + piece % 3
    if servers > 1 {
        if data[1] & 0x20 != 0 { upstream.refuseServers = [0] }
        if data[1] & 0x10 != 0 { upstream.ignoreServers = [1] }
    }
    let client = Array(UnsafeBufferPointer(start: data + 3, count: size - 3))

    guard var config = try? ExchangeRig.fuzzConfiguration() else {
        fatalError("the harness cannot resolve 127.0.0.1")   // the harness's environment, not a finding
    }
    config.buffers.decodeBlock = 1024   // block ends (where compression-ratio-max is judged) within 4 KiB inputs
    if servers > 1, let first = config.upstreams.first?.servers.first {
        config.upstreams[0].servers = Array(repeating: first, count: servers)
    }
    let whole = ExchangeRig(config: config, policy: policy, script: upstream)
    whole.run(client: client)
    let problems = whole.violations()
    if !problems.isEmpty { fatalError("invariants broken (whole): \(problems)") }

    if piece > 0 {
        let split = ExchangeRig(config: config, policy: policy, script: upstream)
        split.run(client: client, pieces: [piece])
        let splitProblems = split.violations()
        if !splitProblems.isEmpty { fatalError("invariants broken (reads of \(piece)): \(splitProblems)") }
        // Timing-dependent scripts (a refused connect, an answer at the head or after n bytes) race the body
        // legitimately: which comes first depends on the reads. Compare only scripts that accept and answer at
        // the end.
        if case .atEnd = upstream.answer, case .accept = upstream.connect, upstream.readLimit == nil,
           !upstream.firstIsStale, upstream.refuseServers.isEmpty, upstream.ignoreServers.isEmpty,
           split.recordSummary != whole.recordSummary {
            fatalError("outcome depends on reads: \(whole.recordSummary) vs \(split.recordSummary) (reads of \(piece))")
        }
    }

    // A complete forwarded body parses back to the parts recorded as forwarded.
    if whole.records.count == 1, let record = whole.records[0], record.decision == .allow || record.decision == .modified,
       let conn = whole.connections.last, ExchangeRig.isCompleteRequest(conn.received),
       let parts = reparsedPartCount(conn.received) {
        let forwarded = record.parts.filter { $0.action == "forward" || $0.action == "sanitize" }.count
        if parts != forwarded { fatalError("forwarded \(parts) parts, recorded \(forwarded) as forwarded") }
    }
    return 0
}
