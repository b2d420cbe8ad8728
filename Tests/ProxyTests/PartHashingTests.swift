import Rules
import Testing
@testable import Proxy

// SHA-256 costs about as much CPU as relaying a part twice, so the form stage hashes only what is read: the
// proxy's audit log prints a digest for file parts, a policy reads none. These tests feed `sample` (a field
// `title`, a file `doc`, a field `junk`) to stages with each scope and check which records carry a digest, and
// that the digest is the one of the part's bytes, whatever the split of the input.

@Suite struct PartHashingTests {
    let policy: Policy

    init() throws {
        policy = try Policy.parse("""
            route /up {
                unknown allow;
                field title { max 64; }
                file doc { max 1KiB; types text/plain; }
            }
            """)
    }

    func records(_ hashing: PartHashing, policy: Policy?, observe: Bool, cuts: [Int] = []) -> [PartRecord] {
        let run = runStage(sample, cuts: cuts, policy: policy, observe: observe, hashing: hashing)
        #expect(run.error == nil)
        return run.records
    }

    // Digests from Python's hashlib, not from the hasher under test.
    let fileDigest = "9fc5d90c995fdacb82e2cb454025e169a5b94d0cd31051d23e82d51338311da8"  // "plain text body"
    let helloDigest = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"  // "hello"
    let xDigest = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"  // "x"

    @Test func aPolicyAloneHashesNothing() {
        let found = records(.none, policy: policy, observe: false)
        #expect(found.map(\.action) == ["forward", "forward", "forward"])
        #expect(found.map(\.sha256) == [nil, nil, nil])
        // The policy still sees the sniffed type of the file: observing is not hashing.
        #expect(found[1].sniffedType == "text/plain")
    }

    @Test func theAuditScopeHashesFilesOnly() {
        let whole = records(.files, policy: policy, observe: true)
        #expect(whole.map(\.sha256) == [nil, fileDigest, nil])
        for cut in 1..<sample.count {
            #expect(records(.files, policy: nil, observe: true, cuts: [cut]).map(\.sha256) == [nil, fileDigest, nil],
                    "split at \(cut)")
        }
    }

    @Test func inspectHashesEveryPart() {
        let found = records(.all, policy: nil, observe: true, cuts: Array(1..<sample.count))
        #expect(found.map(\.sha256) == [helloDigest, fileDigest, xDigest])
        // `.all` follows `observe`: a stage that does not observe hashes nothing.
        #expect(records(.all, policy: nil, observe: false).map(\.sha256) == [nil, nil, nil])
    }
}
