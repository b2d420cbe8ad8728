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
