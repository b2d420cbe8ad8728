import TestRandom
import Testing
@testable import Rules

/// The policy's byte-by-byte paths for ASCII names against their Character and scalar forms, on seeded random
/// inputs: `CharacterRule.firstRefused` (a table of the ASCII bytes) and `PartRule.allowsExtension` (suffixes
/// compared as bytes).
@Suite struct ASCIIFastPathTests {
    /// Bytes the lists and checks treat specially, and a few non-ASCII scalars that send a text to the general form.
    static let alphabet: [Unicode.Scalar] = Array("aZ09 ._-\"';=\\/%\t\r\n\u{7F}\u{1F}\u{202E}é\u{301}K".unicodeScalars)

    static func randomText(_ generator: inout SplitMix64, maxLength: Int = 10) -> String {
        var text = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...maxLength, using: &generator) {
            // Mostly ASCII, so that the fast path runs on most texts.
            let pool = Int.random(in: 0..<8, using: &generator) == 0 ? alphabet.count : alphabet.count - 4
            text.append(alphabet[Int.random(in: 0..<pool, using: &generator)])
        }
        return String(text)
    }

    @Test func firstRefusedAgreesWithTheScalarLoop() throws {
        var generator = SplitMix64(seed: 0xC4A2_5E7)
        var refused = 0
        for round in 0..<3_000 {
            var rule = CharacterRule(mode: round % 2 == 0 ? .deny : .allow)
            let ranges = try #require(CharacterRule.parseRanges(round % 3 == 0 ? "a-z0-9._-" : "\"';=\\%"))
            rule.ranges = ranges
            rule.controls = Bool.random(using: &generator)
            rule.bidi = Bool.random(using: &generator)
            let skips: [(Unicode.Scalar) -> Bool] = [{ _ in false }, PolicyEvaluator.ownedByFilenameProblems]
            for skip in skips {
                for _ in 0..<5 {
                    let text = Self.randomText(&generator)
                    let fast = rule.firstRefused(in: text, skip: skip)
                    let reference = rule.firstRefusedByScalars(in: text, skip: skip)
                    #expect(fast?.scalar == reference?.scalar && fast?.position == reference?.position,
                            "\(rule) \(text.debugDescription)")
                    if reference != nil { refused += 1 }
                }
            }
        }
        #expect(refused > 5_000)
    }

    /// `asciiTable.allowsAll(text)` lets the evaluator skip the list only when the list refuses nothing in
    /// `text`, whatever `skip` says; and for an ASCII text it says exactly that (a non-ASCII one always goes to
    /// the list).
    @Test func asciiTableAllowsAllOnlyWhatTheListAllows() throws {
        var generator = SplitMix64(seed: 0xA5C1_7AB1)
        var (allowed, sent) = (0, 0)
        for round in 0..<3_000 {
            var rule = round % 5 == 0
                ? CharacterRule.defaultNames : CharacterRule(mode: round % 2 == 0 ? .deny : .allow)
            if round % 5 != 0 {
                rule.ranges = try #require(CharacterRule.parseRanges(round % 3 == 0 ? "a-z0-9._-" : "\"';=\\%"))
                rule.controls = Bool.random(using: &generator)
                rule.bidi = Bool.random(using: &generator)
            }
            for _ in 0..<5 {
                let text = Self.randomText(&generator)
                let table = rule.asciiTable.allowsAll(text)
                let reference = rule.firstRefusedByScalars(in: text, skip: { _ in false })
                if table {
                    #expect(reference == nil, "\(rule) \(text.debugDescription)")
                    allowed += 1
                } else {
                    sent += 1
                }
                if text.unicodeScalars.allSatisfy(\.isASCII) {
                    #expect(table == (reference == nil), "\(rule) \(text.debugDescription)")
                } else {
                    #expect(!table, "\(rule) \(text.debugDescription)")
                }
            }
        }
        #expect(allowed > 1_000 && sent > 1_000, "allowed \(allowed), sent to the list \(sent)")
    }

    @Test func allowsExtensionAgreesWithTheCharacterSuffix() throws {
        var generator = SplitMix64(seed: 0xE47E_5105)
        let lists = [[".bin"], [".png", ".jpg", ".jpeg"], [".k"], [".tar.gz", ".gz"], [".é"], []]
        var allowed = 0
        var refused = 0
        for round in 0..<20_000 {
            var rule = PartRule(kind: .file, name: "f", location: SourceLocation(file: "t", line: 1, column: 1))
            rule.extensions = lists[round % lists.count]
            var name = Self.randomText(&generator, maxLength: 4)
            if Bool.random(using: &generator), let ext = rule.extensions.randomElement(using: &generator) {
                name += Bool.random(using: &generator) ? ext.uppercased() : ext
            }
            let fast = rule.allowsExtension(of: name)
            #expect(fast == rule.allowsExtensionByCharacters(of: name), "\(rule.extensions) \(name.debugDescription)")
            if fast { allowed += 1 } else { refused += 1 }
        }
        #expect(allowed > 4_000 && refused > 4_000)
    }
}
