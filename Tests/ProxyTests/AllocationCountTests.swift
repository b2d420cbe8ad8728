import Audit
import CAllocCount
import Rules
import Testing
@testable import Proxy

// Heap allocations per request through the whole pure request path: ConnectionMachine driven by ExchangeRig
// (no sockets, no event loop), one keep-alive connection, one request after the other, each answered 200 by
// the scripted upstream. Tests/CAllocCount replaces malloc in the test executable and counts each allocating
// call on the calling thread; a test body is synchronous, so every count taken here is this test's own.
//
// Each request is measured alone: the count just before `run` and just after it, so the checks between
// requests (and `forgetHistory`, which keeps the rig's logs from growing) are outside every window. What is
// inside: the machine, its body stages and the rig's own bookkeeping for that request (it appends the
// actions, the bytes each side saw and the record), about 20 allocations that are the same for every
// request. The rig's `meter` also reports the machine's share alone: what happened inside
// `ConnectionMachine.handle`.

private let uploadRules = """
route /upload {
    field title;
    file doc { max 64KiB; }
}
"""

private func policy() throws -> Policy {
    let (policy, diagnostics) = RuleChecker.compile(source: uploadRules, file: "alloc.rules")
    return try #require(policy, "\(diagnostics)")
}

/// A 10 KiB multipart upload like bench/proxy/run.py's small workload, plus one text field.
private let upload: [UInt8] = {
    let boundary = "formwallalloc0123456789abcdef"
    let file = String(repeating: "0123456789abcdef", count: 640)  // 10 KiB
    let body = "--\(boundary)\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n"
        + "--\(boundary)\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"a.txt\"\r\n"
        + "Content-Type: text/plain\r\n\r\n\(file)\r\n--\(boundary)--\r\n"
    return Array(("POST /upload HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=\(boundary)\r\n"
        + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)").utf8)
}()

private let get: [UInt8] = Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)

private let ok200: [UInt8] = Array("HTTP/1.1 200 ".utf8)

private struct Run {
    /// Allocations of each measured request, in order: everything (machine and rig), and the machine's share
    /// (inside `ConnectionMachine.handle`).
    var counts: [UInt64] = []
    var machineCounts: [UInt64] = []
    /// Requests that did not get a 200 and an `allow` record.
    var failed = 0
    var violations: [String] = []
    var perRequest: Double { mean(counts) }
    var machinePerRequest: Double { mean(machineCounts) }
    private func mean(_ values: [UInt64]) -> Double {
        values.isEmpty ? 0 : Double(values.reduce(0, +)) / Double(values.count)
    }
}

/// Sends `warmUp` requests, then `n` measured ones, on one keep-alive connection.
private func measure(_ request: [UInt8], policy: Policy?, requests n: Int, warmUp: Int = 5) throws -> Run {
    let rig = ExchangeRig(config: try ExchangeRig.configuration(), policy: policy)
    rig.meter = fw_alloc_count_thread
    var run = Run()
    run.counts.reserveCapacity(n)
    run.machineCounts.reserveCapacity(n)
    for i in 0..<(warmUp + n) {
        let machineBefore = rig.metered
        let before = fw_alloc_count_thread()
        rig.run(client: request, clientEOF: false, advanceTime: false)
        let after = fw_alloc_count_thread()
        if i >= warmUp {
            run.counts.append(after - before)
            run.machineCounts.append(rig.metered - machineBefore)
        }
        if rig.closed || rig.records.count != 1 || rig.records[0]?.decision != .allow
            || !ExchangeRig.startsWith(ok200, rig.clientReceived) {
            run.failed += 1
        }
        rig.forgetHistory()
    }
    run.violations = rig.violations()
    return run
}

/// The cases measured, each with its budget: allocations per request in steady state, all of them and the
/// machine's share. Budgets are the figures measured on 2026-12-01 (Swift 6.3.1, debug build as `swift test`
/// builds it, x86_64, glibc 2.36), rounded up with about 10 % headroom:
///
///   case                    all   machine   (all = machine + the rig's own bookkeeping)
///   GET /                    71      53     (80 and 60 before the rig's context kept a worker's RequestPools
///   10 KiB upload            511     490      and the head arrays, part-header copies, parameter lists and
///   10 KiB upload + rules    852     830      small buffers were pooled or removed: 671/647 and 1037/1012)
///
/// The size of the file part hardly matters (1 KiB instead of 10: two allocations fewer); the upload's extra
/// ~590 over a GET are per request, not per byte. Most are the debug build's: generic algorithms over slices
/// (`allSatisfy`, `firstIndex`) allocate per element there, which is why the head and part-header parsers use
/// index loops. A change that makes a request allocate more than its
/// budget fails here; one that makes it allocate less should lower the budget. The figures are for the debug
/// build `swift test` makes; an optimized build allocates differently.
///
/// 2026-12-02: with header fields kept as bytes (two arrays per head instead of one array of String pairs) the
/// debug build measures GET 78/60, upload 338/317, upload + rules 682/660, two more per request than before
/// (the release build's mallocs per upload are unchanged at 15, and fall from 26 to 16 for a browser's head of 20
/// fields: bench/proxy/instructions.py). The GET budget's machine share rose from 59 to 62 with them.
///
/// Later that day: upload 200/179, upload + rules 544/522, GET unchanged (78/60). The boundary is written on the
/// stack instead of through the random pool's closures (which allocated per symbol in a debug build), and the
/// client's and the upstream's Content-Type are read and written as bytes; the release build went from 15 to 13
/// mallocs per upload. Budgets lowered to match.
enum AllocationCase: String, CaseIterable, Sendable {
    case get, upload, uploadWithPolicy

    var budget: (all: Double, machine: Double) {
        switch self {
        case .get: (80, 62)
        case .upload: (220, 197)
        case .uploadWithPolicy: (600, 575)
        }
    }
}

/// Per-request figures of a run of N and one of 10 × N agree within 1 % (or one allocation).
private func same(_ a: Double, _ b: Double) -> Bool { abs(a - b) <= max(1, 0.01 * min(a, b)) }

@Suite struct AllocationCountTests {
    /// The counter counts: interposition is active, and five allocations made from Swift (libswiftCore's
    /// swift_slowAlloc calling malloc) raise the count by at least five. If the replacement malloc is not
    /// the one the process uses, this fails, and so does every measurement below: none of them is skipped.
    @Test func counterSeesAllocations() throws {
        try #require(fw_alloc_counting_active() == 1, "malloc is not interposed: the counts would be zero")
        // Run twice and judge the second: the first pays once for the runtime's lazy metadata.
        var readings: (reserved: UInt64, allocated: UInt64, freed: UInt64) = (0, 0, 0)
        for _ in 0..<2 {
            let before = fw_alloc_count_thread()
            var blocks: [UnsafeMutableRawPointer] = []
            blocks.reserveCapacity(5)
            let reserved = fw_alloc_count_thread()
            for _ in 0..<5 { blocks.append(.allocate(byteCount: 100, alignment: 8)) }
            // Over-aligned: swift_slowAlloc takes its aligned path.
            let aligned = UnsafeMutableRawPointer.allocate(byteCount: 100, alignment: 64)
            let after = fw_alloc_count_thread()
            aligned.deallocate()
            // By index: a debug build's unspecialized `for in` over an Array allocates once per element.
            for i in blocks.indices { blocks[i].deallocate() }
            let freed = fw_alloc_count_thread()
            readings = (reserved - before, after - reserved, freed - after)
        }
        #expect(readings.reserved >= 1, "the array's storage was not counted")
        #expect(readings.allocated >= 6, "six blocks allocated")
        #expect(readings.freed == 0, "freeing is not allocating")
    }

    /// One keep-alive connection, 5 warm-up requests, then N = 10 and N = 100 measured ones (two rigs): the
    /// allocations per request are the same for both N, the same at the end of the long run as at its
    /// start, and within the budget.
    @Test(arguments: AllocationCase.allCases)
    func allocationsPerRequestDoNotGrow(_ kind: AllocationCase) throws {
        try #require(fw_alloc_counting_active() == 1, "malloc is not interposed: the counts would be zero")
        let request = kind == .get ? get : upload
        let rules = kind == .uploadWithPolicy ? try policy() : nil
        let short = try measure(request, policy: rules, requests: 10)
        let long = try measure(request, policy: rules, requests: 100)
        for run in [short, long] {
            #expect(run.failed == 0, "requests without a 200 and an allow record")
            #expect(run.violations == [])
        }
        let figures = "all \(short.perRequest) / \(long.perRequest), machine \(short.machinePerRequest) / "
            + "\(long.machinePerRequest) per request for N = 10 / 100"
        #expect(short.perRequest > 0, "nothing counted: \(figures)")
        #expect(same(short.perRequest, long.perRequest), "\(figures)")
        #expect(same(short.machinePerRequest, long.machinePerRequest), "\(figures)")
        let first = Double(long.counts.prefix(10).reduce(0, +)) / 10
        let last = Double(long.counts.suffix(10).reduce(0, +)) / 10
        #expect(same(first, last), "first ten \(first), last ten \(last) per request")
        #expect(long.perRequest <= kind.budget.all, "\(figures); budget \(kind.budget.all)")
        #expect(long.machinePerRequest <= kind.budget.machine, "\(figures); budget \(kind.budget.machine)")
    }

    /// A request's policy work per part must not grow with the parts before it. The evaluator keeps every name
    /// seen (for `duplicate-name` and `name-collision`) in collections that one part at a time updates; if a
    /// second reference to them is alive when that happens (a copy of the evaluator, a local left over), each
    /// part copies them all, and the bytes allocated per part grow with the part count. Measured as bytes per
    /// part of one request of 200 fields against one of 2,000 (a copy per part makes the second about ten times
    /// the first; updating in place keeps them level).
    @Test func policyBytesPerPartDoNotGrowWithTheParts() throws {
        try #require(fw_alloc_counting_active() == 1, "malloc is not interposed: the counts would be zero")
        let rules = """
            route /many {
                parts-max 100000;
                fields-max 100000;
                unknown allow;
            }
            """
        let (compiled, diagnostics) = RuleChecker.compile(source: rules, file: "many.rules")
        let policy = try #require(compiled, "\(diagnostics)")
        func bytesPerPart(_ parts: Int) throws -> Double {
            let boundary = "formwallmany0123456789"
            var body = ""
            for i in 0..<parts { body += "--\(boundary)\r\nContent-Disposition: form-data; name=\"f\(i)\"\r\n\r\nx\r\n" }
            body += "--\(boundary)--\r\n"
            let request = Array(("POST /many HTTP/1.1\r\nHost: a\r\n"
                + "Content-Type: multipart/form-data; boundary=\(boundary)\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)").utf8)
            let rig = ExchangeRig(config: try ExchangeRig.configuration(), policy: policy)
            let before = fw_alloc_bytes_thread()
            rig.run(client: request, clientEOF: false, advanceTime: false)
            let after = fw_alloc_bytes_thread()
            #expect(rig.records.count == 1 && rig.records[0]?.decision == .allow, "the request was not allowed")
            #expect(ExchangeRig.startsWith(ok200, rig.clientReceived), "no 200")
            return Double(after - before) / Double(parts)
        }
        _ = try bytesPerPart(50)   // warm-up: lazily created runtime metadata
        let small = try bytesPerPart(200)
        let large = try bytesPerPart(2000)
        #expect(large < 2 * small, "\(small) bytes per part for 200 parts, \(large) for 2,000")
    }
}
