import Testing

@testable import HTTP1

/// The byte classes against the grammar, for every byte value: the token test is two bit masks, so a wrong bit
/// would let a byte into (or keep one out of) every field name and method.
@Suite struct HTTPSyntaxTests {
    /// RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" /
    /// "|" / "~" / DIGIT / ALPHA.
    @Test func tokenCharactersAreExactlyTheGrammars() {
        let punctuation = Set("!#$%&'*+-.^_`|~".utf8)
        for value in 0...255 {
            let byte = UInt8(value)
            let alpha = (0x41...0x5A).contains(value) || (0x61...0x7A).contains(value)
            let digit = (0x30...0x39).contains(value)
            let expected = alpha || digit || punctuation.contains(byte)
            #expect(HTTPSyntax.isTokenChar(byte) == expected, "byte \(value)")
        }
    }

    /// Field values: HT, SP, VCHAR and obs-text; request targets: visible ASCII.
    @Test func valueAndTargetBytes() {
        for value in 0...255 {
            let byte = UInt8(value)
            #expect(HTTPSyntax.isFieldValueByte(byte) == (value == 0x09 || (value >= 0x20 && value != 0x7F)))
            #expect(HTTPSyntax.isTargetByte(byte) == (value > 0x20 && value < 0x7F))
        }
    }

    /// The index-loop helpers agree with the standard library's algorithms on every slice of a sample.
    @Test func byteLoopsAgreeWithTheStandardLibrary() {
        let sample = Array("GET /a%20b HTTP/1.1 x\u{7F}y\t".utf8)
        sample.withUnsafeBytes { raw in
            for start in 0...raw.count {
                for end in start...raw.count {
                    let slice = raw[start..<end]
                    #expect(HTTPSyntax.allBytes(slice, are: HTTPSyntax.isTargetByte)
                            == slice.allSatisfy(HTTPSyntax.isTargetByte))
                    #expect(HTTPSyntax.firstIndex(of: HTTPSyntax.sp, in: slice) == slice.firstIndex(of: HTTPSyntax.sp))
                    #expect(HTTPSyntax.validString(slice) == String(validating: Array(slice), as: UTF8.self))
                }
            }
        }
    }
}
