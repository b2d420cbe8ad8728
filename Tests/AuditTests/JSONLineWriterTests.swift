import Foundation
import Testing

@testable import Audit
import TestRandom

@Suite struct JSONLineWriterTests {
    private func encoded(_ bytes: [UInt8]) -> String {
        var w = JSONLineWriter()
        w.string(bytes: bytes)
        return String(decoding: w.bytes, as: UTF8.self)
    }

    @Test func escapesQuotesBackslashesAndControls() {
        #expect(encoded(Array("a\"b\\c".utf8)) == #""a\"b\\c""#)
        #expect(encoded([0x0A, 0x00, 0x1F, 0x7F, 0x09]) == #""\u000a\u0000\u001f\u007f\u0009""#)
        #expect(encoded(Array("héllo ✓ 𝄞".utf8)) == "\"héllo ✓ 𝄞\"")
        #expect(encoded(Array("/".utf8)) == #""/""#)
    }

    @Test func replacesInvalidUTF8WithReplacementCharacter() {
        // Lone continuation, truncated 3-byte sequence, overlong, surrogate, above U+10FFFF.
        #expect(encoded([0x61, 0x80, 0x62]) == "\"a\u{FFFD}b\"")
        #expect(encoded([0xE2, 0x9C]) == "\"\u{FFFD}\"")
        #expect(encoded([0xC0, 0xAF]) == "\"\u{FFFD}\u{FFFD}\"")
        #expect(encoded([0xED, 0xA0, 0x80]) == "\"\u{FFFD}\u{FFFD}\u{FFFD}\"")
        #expect(encoded([0xF4, 0x90, 0x80, 0x80]) == "\"\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\"")
        #expect(encoded([0xE2, 0x9C, 0x22]) == "\"\u{FFFD}\\\"\"")
    }

    /// Random byte strings biased towards the awkward cases must parse back, through Foundation's
    /// independent JSON parser, to exactly the string Swift's own lossy UTF-8 decoding produces.
    @Test func randomStringsRoundTripThroughJSONSerialization() throws {
        var rng = SplitMix64(seed: 0xF0F0_2026)
        let interesting: [[UInt8]] = [
            [0x22], [0x5C], [0x00], [0x0A], [0x0D], [0x1B], [0x7F], [0x2F],
            Array("é".utf8), Array("✓".utf8), Array("𝄞".utf8), Array("\u{2028}".utf8),
            [0x80], [0xBF], [0xC0], [0xC1], [0xC3], [0xE0, 0x80], [0xE2, 0x82], [0xED, 0xA0, 0x80],
            [0xF0, 0x90], [0xF4, 0x90, 0x80, 0x80], [0xF5], [0xFF], [0xFE],
        ]
        for round in 0..<3000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 0...24, using: &rng) {
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: bytes.append(UInt8.random(in: 0...255, using: &rng))
                case 1: bytes.append(UInt8.random(in: 0x20...0x7E, using: &rng))
                default: bytes += interesting[Int.random(in: 0..<interesting.count, using: &rng)]
                }
            }
            var w = JSONLineWriter()
            w.beginArray()
            w.string(bytes: bytes)
            w.int(round)
            w.endArray()
            w.endLine()
            #expect(w.bytes.last == 0x0A && w.bytes.dropLast().contains(0x0A) == false)
            let parsed = try JSONSerialization.jsonObject(with: Data(w.bytes)) as? [Any]
            let text = parsed?.first as? String
            let expected = String(decoding: bytes, as: UTF8.self)
            #expect(text.map { Array($0.utf8) } == Array(expected.utf8), "bytes \(bytes)")
            #expect(parsed?.last as? Int == round)
        }
    }

    @Test func numbersAndNesting() throws {
        var w = JSONLineWriter()
        w.beginObject()
        w.key("a")
        w.int(Int.min)
        w.key("b")
        w.int(Int.max)
        w.key("c")
        w.beginArray()
        w.milliseconds(12)
        w.milliseconds(12.5)
        w.milliseconds(0.125)
        w.milliseconds(3.0004)
        w.milliseconds(Double.nan)
        w.milliseconds(nil)
        w.beginObject()
        w.endObject()
        w.beginArray()
        w.endArray()
        w.bool(true)
        w.endArray()
        w.key("d")
        w.null()
        w.endObject()
        let text = String(decoding: w.bytes, as: UTF8.self)
        #expect(text == #"{"a":-9223372036854775808,"b":9223372036854775807,"#
            + #""c":[12,12.5,0.125,3,null,null,{},[],true],"d":null}"#)
        #expect(try JSONSerialization.jsonObject(with: Data(w.bytes)) is [String: Any])
    }

    @Test func timestampsAreRFC3339WithMilliseconds() {
        let ts = AuditTimestamp(millisecondsSinceEpoch: 1_795_953_662_345)
        #expect(ts.rfc3339 == "2026-11-29T12:01:02.345Z")
        #expect(AuditTimestamp(rfc3339: ts.rfc3339) == ts)
        #expect(AuditTimestamp(millisecondsSinceEpoch: 5).rfc3339 == "1970-01-01T00:00:00.005Z")
        #expect(AuditTimestamp(rfc3339: "2026-11-29T13:01:02.3+01:00")?.millisecondsSinceEpoch == 1_795_953_662_300)
        #expect(AuditTimestamp(rfc3339: "2026-11-29 12:01:02Z") == nil)
        #expect(AuditTimestamp(rfc3339: "2026-13-29T12:01:02Z") == nil)
    }
}
