import Testing
import TestRandom
@testable import Rules

/// `MediaTypePattern.essence(of:)` reads bytes; it replaced a reading built on `split`, `trimmingASCIISpaces` and
/// `lowercased()`, kept here as the reference. Both must agree on every ASCII input.
@Suite struct MediaTypeEssenceTests {
    static func reference(_ mediaType: String) -> (type: String, subtype: String)? {
        let head = mediaType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let trimmed = head.trimmingASCIISpaces().lowercased()
        let parts = trimmed.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, MediaTypePattern.isToken(String(parts[0])), MediaTypePattern.isToken(String(parts[1]))
        else { return nil }
        return (String(parts[0]), String(parts[1]))
    }

    static func same(_ a: (type: String, subtype: String)?, _ b: (type: String, subtype: String)?) -> Bool {
        a?.type == b?.type && a?.subtype == b?.subtype
    }

    /// Patterns the inputs below can match, for `MediaTypePattern.any`.
    static let patterns = ["*/*", "a/*", "x/*", "text/plain", "az/x", "x/9", "a/a", "image/png", "x-!#$%&'*+-.^_`|~/y"]
        .compactMap(MediaTypePattern.init)

    /// Every reading agrees with the reference: `essence(of:)`, `essenceText(of:)` (`type/subtype` in one), and
    /// `any(_:match:)` (which compares the bytes in place) for each pattern.
    static func agree(_ input: String) -> Bool {
        let expected = reference(input)
        let matching = patterns.map { pattern in expected.map { pattern.matches(essence: $0) } ?? false }
        return same(MediaTypePattern.essence(of: input), expected)
            && MediaTypePattern.essenceText(of: input) == expected.map { "\($0.type)/\($0.subtype)" }
            && patterns.map { MediaTypePattern.any([$0], match: input) } == matching
    }

    @Test(arguments: [
        "image/png", "IMAGE/PNG; q=1", " text/plain ;charset=utf-8", "\ttext/Plain\t", "text/", "/plain", "text",
        "text/plain/x", "multipart/form-data; boundary=a/b", "a b/c", "text/pl ain", "", ";", "text/plain;",
        "application/vnd.api+json", "x-!#$%&'*+-.^_`|~/y", "te\"xt/plain", "text/pl(ain", "é/plain",
    ])
    func handPickedInputsAgree(_ input: String) {
        #expect(Self.agree(input), "\(input)")
    }

    /// The common essences `essenceText` answers with a literal: with parameters, in capitals, and each with one
    /// byte changed, dropped or added (so a near miss is never answered with the literal).
    @Test func commonEssencesAndTheirNearMissesAgree() {
        for essence in MediaTypePattern.commonEssences {
            var inputs = [essence, essence + "; boundary=x", essence.uppercased() + ";a=b", " " + essence + " ",
                          String(essence.dropLast()) + ";x", essence + "x;y"]
            let bytes = Array(essence.utf8)
            for i in bytes.indices {
                var changed = bytes
                changed[i] = changed[i] == UInt8(ascii: "x") ? UInt8(ascii: "y") : UInt8(ascii: "x")
                inputs.append(String(decoding: changed, as: UTF8.self) + "; q=1")
                var dropped = bytes
                dropped.remove(at: i)
                inputs.append(String(decoding: dropped, as: UTF8.self) + "; q=1")
            }
            for input in inputs {
                #expect(Self.agree(input), "\(input.debugDescription)")
            }
        }
    }

    /// The literals the common essences are looked up by are the essences, in the same order.
    @Test func commonEssenceListsAgree() {
        #expect(MediaTypePattern.commonEssenceLiterals.map(\.description) == MediaTypePattern.commonEssences)
    }

    /// Random strings over the characters that matter (separators, spaces, token and non-token bytes).
    @Test(arguments: 0..<20)
    func randomInputsAgree(seed: UInt64) {
        var random = SplitMix64(seed: seed &+ 0xE55E)
        let alphabet = Array("aZ0/;/ \t+.-*\"(,=xX9;é".unicodeScalars)
        for _ in 0..<500 {
            let length = Int(random.next() % 16)
            var input = ""
            for _ in 0..<length { input.unicodeScalars.append(alphabet[Int(random.next() % UInt64(alphabet.count))]) }
            #expect(Self.agree(input), "\(input.debugDescription)")
        }
    }

    /// The one intended difference: Unicode lowercasing maps the Kelvin sign (U+212A) to an ASCII `k`; the byte
    /// reading does not, so a declared type spelled with it is malformed rather than read as another type.
    @Test func aKelvinSignIsNotTheLetterK() {
        let input = "image/\u{212A}tx"
        #expect(Self.reference(input)?.subtype == "ktx")
        #expect(MediaTypePattern.essence(of: input) == nil)
    }
}
