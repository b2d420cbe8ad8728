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

    /// `problems(in:)`'s one-pass ASCII form against the general form, on seeded random names built from the
    /// words and bytes the checks look for, with and without `restricted-filenames` globs and an exempted
    /// extension.
    @Test func asciiProblemsAgreeWithTheGeneralForm() throws {
        let words = ["php", "PHP", "exe", "htaccess", "con", "COM1", "lpt9", "nul", "web", "config", "web.config",
                     "Php.Ini", "sess_", "SESS_x", "jpg", "bin", "svg", "a", "id_rsa", "x"]
        let bytes = Array(". .:;/\\\t\r\n\u{0B}\u{1F}\u{7F}_-".utf8)
        let globs = [[], [try #require(FilenamePattern("*.bak"))], [try #require(FilenamePattern("?ess*")),
                                                                    try #require(FilenamePattern("WEB*"))]]
        var generator = SplitMix64(seed: 0xA5C1_1F11)
        var fast = 0
        var found = 0
        for round in 0..<40_000 {
            var name = ""
            for _ in 0..<Int.random(in: 0...5, using: &generator) {
                if Bool.random(using: &generator) {
                    name += words[Int.random(in: 0..<words.count, using: &generator)]
                } else {
                    name += String(UnicodeScalar(bytes[Int.random(in: 0..<bytes.count, using: &generator)]))
                }
            }
            if round % 997 == 0 { name += String(repeating: "a", count: 250) }
            let restricted = globs[round % globs.count]
            let exempt: (String) -> Bool = round % 2 == 0 ? { _ in false } : { $0 == "php" }
            let general = FilenameCheck.problemsOfAnyName(Array(name.utf8), restricted: restricted,
                                                          extensionAllowed: exempt)
            let ascii = Array(name.utf8).withUnsafeBufferPointer {
                FilenameCheck.asciiProblems(of: $0, restricted: restricted, extensionAllowed: exempt)
            }
            #expect(FilenameCheck.problems(in: name, restricted: restricted, extensionAllowed: exempt) == general,
                    "\(name)")
            guard let ascii else {
                #expect(name.contains("/") || name.contains("\\"), "\(name)")
                continue
            }
            fast += 1
            if !ascii.isEmpty { found += 1 }
            #expect(ascii == general, "\(Array(name.utf8))")
        }
        // Both paths ran, and the fast one found problems as well as none.
        #expect(fast > 20_000 && found > 5_000 && fast - found > 5_000)
    }

    /// The word tables hold every built-in word (a word the table cannot hold is left out, not trapped on), and
    /// find each in any ASCII case, and not a word next to one.
    @Test func wordTablesHoldEveryBuiltInWord() {
        let tables = [(FilenameCheck.dangerousTable, FilenameCheck.dangerousExtensions),
                      (FilenameCheck.reservedTable, FilenameCheck.reservedStems),
                      (FilenameCheck.restrictedTable, FilenameCheck.restrictedNames)]
        for (table, words) in tables {
            #expect(table.count == words.count)
            for word in words {
                for variant in [word, word.uppercased(), word + "x", String(word.dropLast())] {
                    let found = Array(variant.utf8).withUnsafeBufferPointer { table.contains(caseless: $0[...]) }
                    #expect(found == words.contains(variant.lowercased()), "\(variant)")
                }
            }
        }
        #expect(ASCIIWordTable(["ok", "Upper", "é", "", String(repeating: "a", count: 256)]).count == 1)
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
