import Testing
@testable import Proxy
import Rules
import TestRandom
import TestZlib

// A compressed body can break two rules at once: its decoded bytes outgrow `compression-ratio-max`, and, further
// on, the stream (bad_content_encoding) or the form inside it (malformed_body, a part's limits) is wrong. Which
// one the request is refused for must not depend on how the client's bytes were cut into reads. Before
// 2026-12-05 it did: the ratio was judged at the end of each decoded piece against the compressed bytes zlib had
// taken so far (pieces follow the reads, and zlib reads a few bytes ahead), and output zlib produced in the call
// that found a corrupt byte was dropped rather than judged. The fuzz harnesses had no gzip bodies for that reason.
// Now the ratio is judged at decoded offsets fixed by the stream alone (compressed input counted in whole blocks,
// StreamInflater.block), and output before a corrupt byte is always judged first.

@Suite struct CompressedVerdictOrderTests {
    /// A random multipart body: one file whose data alternates random bytes and runs of zeros (so that it
    /// compresses from a few times to hundreds of times), then maybe a field, a part with a broken header, or no
    /// close delimiter.
    static func decodedBody(_ rng: inout SplitMix64) -> [UInt8] {
        var data: [UInt8] = []
        for _ in 0..<(1 + rng.below(6)) {
            for _ in 0..<rng.below(400) { data.append(UInt8(truncatingIfNeeded: rng.next())) }
            data += [UInt8](repeating: 0, count: rng.below(40_000))
        }
        var body = Array("--B\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"a.bin\"\r\n\r\n".utf8) + data
        switch rng.below(4) {
        case 0: body += Array("\r\n--B--\r\n".utf8)
        case 1: body += Array("\r\n--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n--B--\r\n".utf8)
        case 2: body += Array("\r\n--B\r\nContent-Disposition: form-data; name=\"title\"\r\nno colon here\r\n\r\nx\r\n--B--\r\n".utf8)
        default: body += Array("\r\n--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nunterminated".utf8)
        }
        return body
    }

    /// The body gzipped, then maybe cut short, given a wrong byte in its second half, or followed by garbage.
    static func encodedBody(_ decoded: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
        var gz = deflateBytes(decoded, windowBits: 31)
        guard gz.count > 32 else { return gz }
        switch rng.below(4) {
        case 0: break
        case 1: gz.removeLast(1 + rng.below(rng.below(2) == 0 ? 8 : gz.count / 2))   // the trailer, or more
        case 2:
            let at = gz.count / 2 + rng.below(gz.count / 2 - 8)
            gz[at] ^= UInt8(1 + rng.below(255))
        default: gz += [0x1f, 0x8b, UInt8(truncatingIfNeeded: rng.next())]
        }
        return gz
    }

    /// What the request ended with: each record's decision, status, reason and violations (kind and detail,
    /// which for the ratio names the decoded offset of the cut).
    static func verdict(_ rig: ExchangeRig) -> [String] {
        rig.records.map { record in
            guard let record else { return "-" }
            return "\(record.decision.rawValue) \(record.status) \(record.reason ?? "-") "
                + record.violations.map { "\($0.kind): \($0.detail)" }.joined(separator: "; ")
        }
    }

    /// A route with the ratio, and a body mode: streamed, held whole (the form stage blocks while a held part
    /// is replayed), or the file stripped.
    static func policy(ratio: Int, mode: Int) throws -> Policy {
        try Policy.parse("""
        route / {
            compression-ratio-max \(ratio);
            encodings-max 2;
            unknown allow;
            \(["", "upstream-body hold;", ""][mode])
            file doc { max 1MiB; \(["", "", "action strip;"][mode]) }
        }
        """)
    }

    @Test(arguments: 0..<8)
    func theVerdictOfACompressedBodyDoesNotDependOnItsReads(seedBlock: Int) throws {
        var config = try ExchangeRig.configuration()
        config.buffers.clientRead = 4096
        config.buffers.outputHighWater = 2048
        // Small blocks put many block ends (where the ratio can be crossed) inside these bodies.
        config.buffers.decodeBlock = seedBlock % 2 == 0 ? 1024 : 256
        var rng = SplitMix64(seed: 0xC0DE_0000 + UInt64(seedBlock))
        var verdicts: Set<String> = []
        for _ in 0..<16 {
            let ratio = [2, 3, 10, 50, 100][rng.below(5)]
            let policy = try Self.policy(ratio: ratio, mode: rng.below(3))
            let decoded = Self.decodedBody(&rng)
            var body = Self.encodedBody(decoded, &rng)
            // One body in four is deflated again (`Content-Encoding: gzip, deflate`): the ratio compares the
            // outer layer's compressed bytes with the inner layer's decoded ones.
            let stacked = rng.below(4) == 0
            if stacked { body = deflateBytes(body, windowBits: 15) }
            let request = Array(("POST / HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\n"
                + "Content-Encoding: \(stacked ? "gzip, deflate" : "gzip")\r\nContent-Length: \(body.count)\r\n\r\n").utf8)
                + body
            let whole = ExchangeRig(config: config, policy: policy)
            whole.run(client: request)
            #expect(whole.violations() == [])
            let expected = Self.verdict(whole)
            verdicts.insert(expected.joined())
            for reads in [1, 3, 64, 1000, 1023, 1025] {
                let split = ExchangeRig(config: config, policy: policy)
                split.run(client: request, pieces: [reads])
                #expect(split.violations() == [])
                #expect(Self.verdict(split) == expected,
                        "ratio \(ratio), \(body.count) bytes (\(decoded.count) decoded) in reads of \(reads)")
            }
        }
        // The bodies reach more than one outcome (allowed, ratio, bad encoding, malformed), so the comparison
        // is between different kinds of refusal, not only between identical successes.
        #expect(verdicts.count >= 3, "\(verdicts)")
    }

    /// The ratio's limit falls inside a decoded piece: the piece's bytes up to the limit are judged, those after it
    /// are not. A gzip of zeros exceeds `compression-ratio-max 2` in its first compressed block (1 KiB), so the
    /// limit is the 2,048th decoded byte; a file limit that those bytes already break is the verdict, one that only later
    /// bytes would break is not (whole, and in reads of any size).
    @Test func aFileLimitJustBeforeTheRatioLimitWinsAndOneJustAfterItDoesNot() throws {
        let head = Array("--B\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"z\"\r\n\r\n".utf8)
        let body = head + [UInt8](repeating: 0, count: 200_000) + Array("\r\n--B--\r\n".utf8)
        let gz = deflateBytes(body, windowBits: 31)
        let request = Array(("POST / HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\n"
            + "Content-Encoding: gzip\r\nContent-Length: \(gz.count)\r\n\r\n").utf8) + gz
        let before = 2 * 1024 - head.count    // file bytes decoded before the ratio's limit
        for fileMax in [before - 1, before, before + 1, before + 500] {
            let policy = try Policy.parse("""
            route / {
                compression-ratio-max 2;
                file doc { max \(fileMax); }
            }
            """)
            for reads in [0, 1, 5, 1000] {
                let rig = ExchangeRig(config: try ExchangeRig.configuration(), policy: policy)
                rig.run(client: request, pieces: reads == 0 ? [] : [reads])
                let kinds = rig.records.compactMap { $0?.violations.first?.kind }
                #expect(kinds.count == 1, "file max \(fileMax), reads of \(reads)")
                let ratio = kinds.first == "compression_ratio_exceeded"
                #expect(ratio == (fileMax >= before), "file max \(fileMax), reads of \(reads): \(kinds)")
            }
        }
    }
}
