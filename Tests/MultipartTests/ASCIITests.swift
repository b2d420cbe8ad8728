import Testing
@testable import Multipart

/// The byte classes of `ASCII` against the grammar they encode, for every byte value.
@Suite struct ASCIITests {
    /// RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|"
    /// / "~" / DIGIT / ALPHA.
    static func tchar(_ byte: UInt8) -> Bool {
        let specials = Array("!#$%&'*+-.^_`|~".utf8)
        return (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            || specials.contains(byte)
    }

    @Test func tcharMasksMatchTheGrammarForEveryByte() {
        for value in 0...255 {
            let byte = UInt8(value)
            #expect(ASCII.isTChar(byte) == Self.tchar(byte), "byte \(value)")
        }
    }
}
