import Testing

@testable import Multipart
import TestRandom

/// `MultipartBoundary.parse` reads the usual `multipart/form-data; boundary=…` without the parameter parser
/// (`plainBoundary`). Whatever the Content-Type, the answer must be the parameter parser's: the same boundary and
/// anomalies, or the same error. A collection without contiguous storage takes the parser alone, so the two are
/// compared on generated Content-Types built from the pieces that decide between them.
@Suite struct MultipartBoundaryTests {
    private static let types = ["multipart/form-data", "Multipart/Form-Data", "MULTIPART/FORM-DATA", "multipart/mixed",
                                "multipart/form-dat", " multipart/form-data", "multipart/form-data "]
    private static let separators = [";", "; ", ";  ", " ;", ";\t", "", ",", "; x=1; "]
    private static let names = ["boundary=", "BOUNDARY=", "Boundary=", "boundary =", "boundary= ", "boundar=",
                                "boundary", "boundary=\"", "charset=utf-8; boundary="]
    /// bchars, and bytes that are not (or that the fast path leaves to the parser).
    private static let alphabet = Array("abcXYZ019'()+_,-./:=? ".utf8) + Array("\";\t\\é".utf8)

    private static func answer(_ contentType: some Collection<UInt8>) -> String {
        do {
            let parsed = try MultipartBoundary.parse(contentType: contentType)
            return "ok \(parsed.boundary) \(parsed.anomalies)"
        } catch {
            return "error \(error.kind)"
        }
    }

    @Test func plainFormGivesTheParsersAnswer() {
        var rng = SplitMix64(seed: 20261202)
        var plain = 0
        for _ in 0..<20_000 {
            // Each piece is one of the plain form's in about two cases of three (the first three types, the first
            // two separators and the first three names are), so that both sides of the check are frequent.
            func pick(_ choices: [String], plain: Int) -> [UInt8] {
                Array(choices[rng.below(3) != 0 ? rng.below(plain) : rng.below(choices.count)].utf8)
            }
            var text = pick(Self.types, plain: 3) + pick(Self.separators, plain: 2) + pick(Self.names, plain: 3)
            // Mostly bchars without the space (the first 20 bytes of the alphabet); lengths around the 70-byte
            // limit too.
            let length = rng.below(4) == 0 ? 66 + rng.below(8) : rng.below(40)
            let pool = rng.below(3) == 0 ? Self.alphabet.count : 20
            for _ in 0..<length { text.append(Self.alphabet[rng.below(pool)]) }
            let fast = Self.answer(text)
            let parser = Self.answer(text.lazy.map { $0 })
            #expect(fast == parser, "\(String(decoding: text, as: UTF8.self))")
            if text.withUnsafeBytes({ MultipartBoundary.plainBoundary($0) }) != nil { plain += 1 }
        }
        // Both sides of the comparison were exercised.
        #expect(plain > 2_000 && plain < 18_000, "plain \(plain)")
    }

    /// What `parse` accepts is what `MultipartParser` requires of a boundary (1 to 200 bytes, no CR or LF;
    /// otherwise the body fails with `invalid_boundary`), whatever bytes a client puts in its Content-Type:
    /// quoted, escaped, CR, LF, NUL and non-ASCII bytes included, through both the plain path and the parameter
    /// parser.
    @Test func everyParsedBoundaryIsOneTheParserTakes() {
        var rng = SplitMix64(seed: 0xB0_0D)
        let hostile = Self.alphabet + [0x0D, 0x0A, 0x00, 0x7F, 0xFF, 0x5C, 0x22]
        var accepted = 0
        for _ in 0..<20_000 {
            var text = Array(Self.types[rng.below(3)].utf8) + Array(Self.separators[rng.below(Self.separators.count)].utf8)
                + Array(Self.names[rng.below(Self.names.count)].utf8)
            for _ in 0..<(rng.below(4) == 0 ? 60 + rng.below(20) : rng.below(30)) {
                text.append(rng.below(4) == 0 ? hostile[rng.below(hostile.count)] : Self.alphabet[rng.below(20)])
            }
            // The contiguous array takes the plain path where it applies; the lazy view, the parameter parser.
            for parsed in [try? MultipartBoundary.parse(contentType: text),
                           try? MultipartBoundary.parse(contentType: text.lazy.map { $0 })] {
                guard let parsed else { continue }
                accepted += 1
                let b = parsed.boundary
                #expect(!b.isEmpty && b.count <= 70 && !b.contains(0x0D) && !b.contains(0x0A),
                        "\(String(decoding: text, as: UTF8.self))")
                // An empty input: anything but `invalid_boundary` (here nothing: more input is needed).
                var consumed = 0
                #expect(throws: Never.self) { _ = try MultipartParser(boundary: b).step(UnsafeRawBufferPointer(start: nil, count: 0), consumed: &consumed) }
            }
        }
        #expect(accepted > 2_000, "accepted \(accepted)")
    }

    /// A boundary the parser cannot use (empty, too long, a CR or LF in it) fails the body, not the process:
    /// `step` and `finish` throw `invalid_boundary`.
    @Test func aBoundaryTheParserCannotUseFailsTheBody() {
        let body = Array("--a\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n1\r\n--a--\r\n".utf8)
        for bad in [[], Array(repeating: UInt8(ascii: "a"), count: 201), Array("a\rb".utf8), Array("a\nb".utf8)] as [[UInt8]] {
            let parser = MultipartParser(boundary: bad)
            var consumed = 0
            #expect(throws: MultipartError(.invalidBoundary, at: 0)) {
                _ = try body.withUnsafeBytes { try parser.step($0, consumed: &consumed) }
            }
            #expect(throws: MultipartError(.invalidBoundary, at: 0)) { try parser.finish() }
        }
        // The same body with a usable boundary parses.
        var events = 0
        let good = MultipartParser(boundary: Array("a".utf8))
        #expect(throws: Never.self) { try body.withUnsafeBytes { bytes in try good.feed(bytes) { _ in events += 1 } } }
        #expect(events == 4)
    }

    @Test func plainFormIsRecognised() {
        for text in ["multipart/form-data; boundary=abc", "Multipart/Form-Data;BOUNDARY=----WebKitFormBoundaryx1",
                     "multipart/form-data; boundary=" + String(repeating: "z", count: 70)] {
            #expect(Array(text.utf8).withUnsafeBytes { MultipartBoundary.plainBoundary($0) } != nil, "\(text)")
        }
        for text in ["multipart/form-data; boundary=\"abc\"", "multipart/form-data; boundary=a b",
                     "multipart/form-data; boundary=" + String(repeating: "z", count: 71),
                     "multipart/form-data; boundary=abc; charset=utf-8", "multipart/form-data;  boundary=abc"] {
            #expect(Array(text.utf8).withUnsafeBytes { MultipartBoundary.plainBoundary($0) } == nil, "\(text)")
        }
    }
}
