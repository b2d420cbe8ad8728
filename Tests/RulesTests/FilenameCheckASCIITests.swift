import TestRandom
import Testing
@testable import Rules

/// The ASCII fast paths of the filename helpers against their general, Character-by-Character forms.
@Suite struct FilenameCheckASCIITests {
    static func agree(_ name: String) {
        #expect(FilenameCheck.asciiExtensions(of: name) == FilenameCheck.extensionsOfAnyName(name), "\(Array(name.utf8))")
        #expect(FilenameCheck.asciiRestrictedKey(of: name) == .some(FilenameCheck.restrictedKeyOfAnyName(name)),
                "\(Array(name.utf8))")
        #expect(FilenameCheck.asciiIsReserved(name) == FilenameCheck.isReservedAnyName(name), "\(Array(name.utf8))")
    }

    /// Every ASCII byte alone and in the places the helpers treat specially.
    @Test func everyASCIIByte() {
        for value in 0..<128 {
            let c = String(UnicodeScalar(UInt8(value)))
            for name in [c, "a\(c)b", "a.\(c)", "a.\(c)b\(c)", "\(c).php", "shell.php\(c)", "con\(c)", "\(c)con.txt",
                         "x.\(c)php\(c).jpg", "dir\(c)file.\(c)ext"] {
                Self.agree(name)
            }
        }
    }

    /// Seeded random ASCII names, biased towards the bytes that matter.
    @Test func randomASCIINames() {
        let special = Array(". .:;/\\\t\r\n\u{0B}\u{0C}\u{1F}\u{7F}".utf8) + Array("aZcomnulLPT1php".utf8)
        var generator = SplitMix64(seed: 0xF11E_0A5C)
        for _ in 0..<30_000 {
            let count = Int.random(in: 0...12, using: &generator)
            let bytes = (0..<count).map { _ -> UInt8 in
                Bool.random(using: &generator) ? special[Int.random(in: 0..<special.count, using: &generator)]
                    : UInt8.random(in: 0..<128, using: &generator)
            }
            Self.agree(String(decoding: bytes, as: UTF8.self))
        }
    }

    /// A name with any byte beyond ASCII takes the general form.
    @Test func otherNamesTakeTheGeneralForm() {
        for name in ["résumé.pdf", "a.PHP\u{0301}", "CON\u{00A0}.txt"] {
            #expect(FilenameCheck.asciiExtensions(of: name) == nil)
            #expect(FilenameCheck.asciiRestrictedKey(of: name) == nil)
            #expect(FilenameCheck.asciiIsReserved(name) == nil)
            #expect(FilenameCheck.extensions(of: name) == FilenameCheck.extensionsOfAnyName(name))
        }
    }
}
