import Multipart
import Rules
import TestRandom
import Testing
@testable import Proxy

/// The form stage's part state is one object per request, kept by the worker's pools between requests
/// (`RequestPools.partStates`). A state handed from part to part and from request to request must carry nothing
/// over: every request's records are those of a stage that started from nothing, and what the pool keeps holds
/// no part's files, buffers, sniffer or hasher.
@Suite struct PartStatePoolTests {
    static let policy = try! Policy.parse("""
        route /up {
            content-types multipart/form-data;
            unknown strip;
            field title { max 64; pattern "^[a-z]*$"; }
            field note { max 256; }
            file doc { max 1m; extensions .txt .zip; types text/plain application/zip; }
        }
        """)

    /// Bodies that leave different state behind: a held value, invalid UTF-8, a sniffed and hashed file, an
    /// archive probe, a stripped part, a rejection mid-body.
    static let bodies: [[UInt8]] = [
        b("--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n--B--\r\n"),
        b("--B\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\n") + [0xC3, 0x28] + b("\r\n--B--\r\n"),
        b("--B\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\n"
          + "plain text body\r\n--B\r\nContent-Disposition: form-data; name=\"junk\"\r\n\r\nx\r\n--B--\r\n"),
        b("--B\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"a.zip\"\r\nContent-Type: application/zip\r\n\r\n")
            + [0x50, 0x4B, 0x03, 0x04, 0x14, 0x00] + b("\r\n--B--\r\n"),
        b("--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nNOT LOWER\r\n--B\r\n"
          + "Content-Disposition: form-data; name=\"note\"\r\n\r\nn\r\n--B--\r\n"),
        b("--B\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nfirst\r\n--B\r\n"
          + "Content-Disposition: form-data; name=\"title\"\r\n\r\nabc\r\n--B--\r\n"),
    ]

    /// Runs `body` through a stage given `pools`' part state (nil: none), gives the state back, and returns what
    /// the records say.
    static func run(_ body: [UInt8], pools: RequestPools?) -> [String] {
        var evaluator = PolicyEvaluator(policy: policy)
        _ = evaluator.begin(method: "POST", path: "/up", contentType: "multipart/form-data; boundary=B",
                            contentLength: UInt64(body.count))
        let stage = FormStage(boundary: b("B"), limits: MultipartLimits(), anomalies: MultipartAnomalies(),
                              reencodeBoundary: b("fresh-boundary"), evaluator: evaluator, quarantine: nil,
                              hashing: .all, partState: pools?.takePartState())
        let out = RecordingOutput()
        var error: FormStageError?
        do {
            try body.withUnsafeBytes { p in Result { () throws(FormStageError) in try stage.feed(p, out: out) } }.get()
            try stage.finish(out: out)
        } catch let thrown {
            error = thrown
        }
        let lines = stage.records.map { r in
            "\(r.index) \(r.part.nameString ?? "-") \(r.size) \(r.sha256 ?? "-") \(r.sniffedType ?? "-") \(r.action) "
                + "\(r.part.anomalies.bits) \(r.preview ?? "-")"
        } + ["error: \(error.map { "\($0)" } ?? "none")", "out: \(out.bytes.count)"]
        if let pools { stage.giveBack(to: pools) }
        return lines
    }

    @Test func aPooledPartStateCarriesNothingOver() {
        let pools = RequestPools(replayLimit: 1 << 16)
        let expected = Self.bodies.map { Self.run($0, pools: nil) }
        var random = SplitMix64(seed: 0x5057_4F4F_4C)
        for round in 0..<60 {
            let pick = Int(random.next() % UInt64(Self.bodies.count))
            #expect(Self.run(Self.bodies[pick], pools: pools) == expected[pick], "round \(round), body \(pick)")
            let kept = pools.takePartState()
            #expect(kept?.isClear == true, "round \(round): the pool keeps a cleared state")
            if let kept { pools.recyclePartState(kept) }
        }
    }
}
