import Testing
import TestRandom

@testable import Multipart

/// `canonicalContentType` returns a plain lowercase `type/subtype` as it is, without the parameter parser: for
/// random declared types over the bytes that matter (letters of both cases, slashes, separators, whitespace,
/// quotes, `charset`), it must answer exactly as the parser path does.
@Suite struct CanonicalContentTypeTests {
    @Test func fastPathAgreesWithTheParser() {
        var random = SplitMix64(seed: 0xC0_17E7)
        let pieces: [[UInt8]] = ["a", "Z", "x", "-", "+", ".", "/", ";", " ", "\t", "=", "\"", "<", "0",
                                 "image", "PNG", "charset", "utf-8", "\u{e9}"].map { Array($0.utf8) }
        let tokens: [[UInt8]] = ["image", "png", "x-y", "a+b", "v.1", "PNG", "Text", "*"].map { Array($0.utf8) }
        var plain = 0
        for _ in 0..<50_000 {
            let count = Int(random.next() % 9)
            var declared = (0..<count).flatMap { _ in pieces[Int(random.next() % UInt64(pieces.count))] }
            if random.next() % 2 == 0 {
                // Half of them shaped as `type/subtype` from token pieces (some uppercase), often plain.
                let token = { tokens[Int(random.next() % UInt64(tokens.count))] }
                declared = token() + Array("/".utf8) + token() + (random.next() % 4 == 0 ? declared : [])
            }
            if MultipartEncoder.isPlainLowercaseMediaType(declared) { plain += 1 }
            #expect(MultipartEncoder.canonicalContentType(declared) == MultipartEncoder.parsedContentType(declared),
                    "\(String(decoding: declared, as: UTF8.self))")
        }
        #expect(plain > 10_000, "the fast path was taken only \(plain) times")
    }

    @Test func plainMediaTypes() {
        #expect(MultipartEncoder.isPlainLowercaseMediaType(Array("image/png".utf8)))
        #expect(MultipartEncoder.isPlainLowercaseMediaType(Array("application/vnd.ms-excel".utf8)))
        for text in ["image/PNG", "image/png; charset=x", "/png", "image/", "image", "image/png/x", "image /png", ""] {
            #expect(!MultipartEncoder.isPlainLowercaseMediaType(Array(text.utf8)), "\(text)")
        }
    }
}
