import Testing
@testable import Inspect

@Suite struct HashAndRandomTests {
    @Test func sha256StreamingEqualsOneShot() {
        // FIPS 180-2 vector: "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".
        let msg = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        let expected = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        #expect(SHA256Hasher.hex(msg) == expected)
        for split in 0...msg.count {
            let h = SHA256Hasher()
            h.update(Array(msg[..<split]))
            h.update(Array(msg[split...]))
            #expect(h.finalizeHex() == expected)
        }
    }

    @Test func boundariesAreFreshAndValid() {
        let a = SecureRandom.boundary(), b = SecureRandom.boundary()
        #expect(a != b)
        #expect(a.count >= 32 + 9 && a.count <= 70)
        let allowed = Set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-".utf8)
        #expect(a.allSatisfy { allowed.contains($0) })
    }

    /// The boundary maps each random byte below 248 to `alphabet[b % 62]` and skips the others (rejection
    /// sampling), drawing 48 bytes at a time until it has 32 characters.
    @Test func boundaryMapsRandomBytesByRejectionSampling() {
        let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
        var draws: [[UInt8]] = []
        var counter: UInt8 = 0
        let boundary = SecureRandom.boundary { count, body in
            // Every third byte is one the sampler must reject.
            let bytes = (0..<count).map { i -> UInt8 in
                counter &+= 37
                return i % 3 == 2 ? 248 + counter % 8 : counter
            }
            draws.append(bytes)
            bytes.withUnsafeBytes(body)
        }
        let expected = Array(draws.joined().filter { $0 < 248 }.prefix(32).map { alphabet[Int($0 % 62)] })
        #expect(draws.count == 1, "48 bytes of which 32 are kept: one draw")
        #expect(boundary == Array("formwall-".utf8) + expected)
    }

    @Test func poolIdsAndBoundariesAreFreshAndWellFormed() {
        let pool = SecureRandomPool(refill: 100)   // a small pool, so draws cross refills
        var seen: Set<String> = []
        for _ in 0..<50 {
            let id = pool.hexID(bytes: 12)
            #expect(id.utf8.count == 24 && id.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
            #expect(seen.insert(id).inserted)
            let boundary = pool.boundary()
            #expect(boundary.count == 41 && boundary.starts(with: Array("formwall-".utf8)))
        }
    }

    @Test func hexMatchesTheFormattedDigits() {
        var random = SystemRandomNumberGenerator()
        for count in [0, 1, 7, 16, 33] {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) }
            let formatted = bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
            #expect(Hex.encode(bytes) == formatted)
        }
    }
}

@Suite struct ShebangRegressionTests {
    /// `#!` followed by CR, VT or FF used to spin forever in the shebang word splitter.
    @Test(arguments: [UInt8(0x0D), 0x0B, 0x0C, 0x0A])
    func shebangWithOtherWhitespaceTerminates(_ space: UInt8) {
        let sample: [UInt8] = Array("#!".utf8) + [space] + Array("/bin/sh\n echo hi".utf8)
        let result = Sniffer.sniff(sample)
        #expect(result.category == .script || result.category == .text, "\(result)")
    }
}
