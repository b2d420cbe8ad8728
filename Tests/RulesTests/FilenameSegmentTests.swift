import TestRandom
import Testing
@testable import Rules

/// `FilenameCheck.problems` reads a name with no separator byte as its one segment, byte by byte, and splits
/// only names that hold a `/` or `\`. Its separator and dot-dot findings, and the base name the later checks
/// see, must be those of splitting every name into Characters (the reference below, as `problems` did before).
@Suite struct FilenameSegmentTests {
    /// The findings of the Character split, with the base name: the reference.
    private static func referenceSegments(_ bytes: [UInt8]) -> (separators: Bool, dotDot: Bool, base: String) {
        let text = String(decoding: bytes, as: UTF8.self)
        let separators = bytes.contains(UInt8(ascii: "/")) || bytes.contains(UInt8(ascii: "\\"))
        let segments = text.split(omittingEmptySubsequences: false) { $0 == "/" || $0 == "\\" }
        let dotDot = segments.contains { $0.count >= 2 && $0.allSatisfy { $0 == "." } }
        return (separators, dotDot, String(segments.last ?? ""))
    }

    @Test func separatorAndDotDotFindingsMatchTheCharacterSplit() {
        // Dots, separators, a combining acute accent (which makes "." and "/" other Characters), a space, a
        // letter, an invalid byte.
        let pieces: [[UInt8]] = [[0x2E], [0x2E], [0x2F], [0x5C], [0xCC, 0x81], [0x20], [0x61], [0xFF], [0x2E, 0x2E]]
        var rng = SplitMix64(seed: 0x5E6_3E47)
        var seenDotDotWithout = 0
        var seenDotDotWith = 0
        for _ in 0..<20_000 {
            var name: [UInt8] = []
            for _ in 0..<(1 + rng.below(6)) { name += pieces[rng.below(pieces.count)] }
            let found = FilenameCheck.problems(in: name)
            let reference = Self.referenceSegments(name)
            #expect(found.contains(.pathSeparators) == reference.separators, "\(name)")
            #expect(found.contains(.dotDot) == reference.dotDot, "\(name)")
            // The base name decides the extension and reserved-name findings: compare them on the reference's base.
            let baseProblems = FilenameCheck.problems(in: Array(reference.base.utf8))
            #expect(found.contains(.dangerousExtension) == baseProblems.contains(.dangerousExtension), "\(name)")
            #expect(found.contains(.reservedName) == baseProblems.contains(.reservedName), "\(name)")
            if reference.dotDot { if reference.separators { seenDotDotWith += 1 } else { seenDotDotWithout += 1 } }
        }
        // Both paths were exercised with the finding present.
        #expect(seenDotDotWithout > 100 && seenDotDotWith > 100)
    }

    @Test func theExecutableTypesAllRead() {
        #expect(PolicyEvaluator.executableEssences.count == PolicyEvaluator.executableTypes.count)
        #expect(PolicyEvaluator.executableEssences.map { "\($0.type)/\($0.subtype)" } == PolicyEvaluator.executableTypes)
    }
}
