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

    @Test func boundariesAreFreshAndValid() throws {
        let a = try #require(SecureRandom.boundary()), b = try #require(SecureRandom.boundary())
        #expect(a != b)
        #expect(a.count >= 32 + 9 && a.count <= 70)
        let allowed = Set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-".utf8)
        #expect(a.allSatisfy { allowed.contains($0) })
    }

    /// The boundary reads the random bytes as 6-bit values (four per three bytes, most significant first), maps each
    /// value below 62 to `alphabet[value]` and skips 62 and 63 (rejection sampling), drawing 30 bytes at a time
    /// until it has 32 characters.
    @Test func boundaryMapsRandomBitsByRejectionSampling() {
        let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
        for seed in 0..<64 {
            var draws: [[UInt8]] = []
            var state = UInt64(seed)
            let boundary = SecureRandom.boundary { count, body in
                // Bytes full of ones at times, so that some 6-bit values are 62 or 63 and must be skipped (seed
                // 0 draws only 0xFF at first: no value is kept from the first draw).
                let bytes = (0..<count).map { _ -> UInt8 in
                    state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                    return seed == 0 && draws.isEmpty ? 0xFF : UInt8(truncatingIfNeeded: state >> 56) | (state & 1 == 0 ? 0xF8 : 0)
                }
                draws.append(bytes)
                bytes.withUnsafeBytes(body)
                return true
            }
            var values: [Int] = []
            for draw in draws {
                for i in stride(from: 0, to: draw.count - 2, by: 3) {
                    let v = Int(draw[i]) << 16 | Int(draw[i + 1]) << 8 | Int(draw[i + 2])
                    values += [v >> 18 & 63, v >> 12 & 63, v >> 6 & 63, v & 63]
                }
            }
            let expected = Array(values.filter { $0 < 62 }.prefix(32).map { alphabet[$0] })
            #expect(boundary == Array("formwall-".utf8) + expected, "seed \(seed)")
            #expect(draws.allSatisfy { $0.count == 30 })
            if seed == 0 { #expect(draws.count >= 2, "a draw without a kept value must be followed by another") }
        }
    }

    @Test func poolIdsAndBoundariesAreFreshAndWellFormed() throws {
        let pool = SecureRandomPool(refill: 100)   // a small pool, so draws cross refills
        var seen: Set<String> = []
        for _ in 0..<50 {
            let id = try #require(pool.hexID(bytes: 12))
            #expect(id.utf8.count == 24 && id.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
            #expect(seen.insert(id).inserted)
            let boundary = try #require(pool.boundary())
            #expect(boundary.count == 41 && boundary.starts(with: Array("formwall-".utf8)))
        }
    }

    /// A draw larger than the pool is served on its own (the pool's bytes are not reused for it), and the pool
    /// keeps serving its own draws afterwards; every lent byte is wiped once the draw returns.
    @Test func drawsLargerThanThePoolAreServedAndWiped() throws {
        let pool = SecureRandomPool(refill: 64)
        let small = try #require(pool.bytes(40))
        let large = try #require(pool.bytes(100))
        let again = try #require(pool.bytes(100))
        #expect(small.count == 40 && large.count == 100 && again.count == 100)
        #expect(large != again, "two draws of 100 random bytes agree")
        #expect(try #require(pool.bytes(40)) != small)
        var lent: UnsafeRawBufferPointer?
        for count in [30, 100] {
            let copy = pool.withBytes(count) { bytes -> [UInt8] in
                lent = bytes
                return Array(bytes)
            }
            #expect(copy?.count == count)
            // The lent memory is still the pool's (or freed, for the one-off draw), so only the pool's is read.
            if count <= 64, let lent { #expect(lent.allSatisfy { $0 == 0 }, "lent bytes wiped") }
        }
    }

    /// When the CSPRNG fails, a draw gives nothing (its closure is not called) and lends no byte of the failed
    /// refill; the pool draws again on the next call and serves once the CSPRNG does. A boundary whose source
    /// fails is nil, whatever was drawn before.
    @Test func aFailingCSPRNGFailsTheDrawNotTheProcess() throws {
        var failing = true
        var refills = 0
        let pool = SecureRandomPool(refill: 64) { buffer in
            refills += 1
            if failing { return false }
            for index in buffer.indices { buffer[index] = UInt8(truncatingIfNeeded: index &* 7 &+ refills) }
            return true
        }
        var called = false
        #expect(pool.withBytes(12) { _ in called = true } == nil && !called)
        #expect(pool.hexID(bytes: 12) == nil)
        #expect(pool.boundary() == nil)
        #expect(pool.bytes(100) == nil, "the one-off draw too")
        let failedRefills = refills
        #expect(failedRefills >= 4, "every draw asked the CSPRNG again")
        failing = false
        let id = try #require(pool.hexID(bytes: 12))
        #expect(id.utf8.count == 24)
        #expect(try #require(pool.boundary()).count == 41)
        #expect(try #require(pool.bytes(100)).count == 100)
        #expect(refills > failedRefills)
        // A source that lends once and then fails: the boundary needs a second draw only when the first kept
        // fewer than 32 symbols, so the first draw here is all ones (every value 63, none kept).
        var lends = 0
        let boundary = SecureRandom.boundary { count, body in
            lends += 1
            guard lends == 1 else { return false }
            [UInt8](repeating: 0xFF, count: count).withUnsafeBytes(body)
            return true
        }
        #expect(boundary == nil && lends == 2)
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
