import Foundation
import Multipart
import Testing

/// Inputs found by fuzz/run.sh, kept as regressions (base64 of the whole fuzzer input: byte 0 is the chunk size).
@Suite struct FuzzRegressionTests {
    static let findings = [
        "Aw0KDQotLS0tZnV6ekINCkNvbnRlAAAAAAAAAAAAAAAAAAAAAAAAAG50LURpc3Bvc2l0aW9uOiBmb3JtLWQrKysrKysrKysrKysrKysrKysr"
            + "KysrKysrKysrKythdGE7325hbWU9ImZpZWxkIgotLWZ1enpCDQoNClRoaXMgaXMgYSAKLS1mdXp6QnRlc3QuDQotLS1PcHRpb25hbA==",
    ]

    @Test(arguments: findings) func chunkingDoesNotChangeTheOutcome(_ input: String) {
        let bytes = Array(Data(base64Encoded: input)!)
        let body = Array(bytes.dropFirst())
        _ = parseAllWays(body, boundary: b("fuzzB"))
        let step = Int(bytes[0])
        let cuts = Array(stride(from: step, to: body.count, by: step))
        #expect(parse(body, boundary: b("fuzzB"), cuts: cuts) == parse(body, boundary: b("fuzzB"), cuts: []))
    }
}
