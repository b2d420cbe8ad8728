import Testing

@testable import HTTP1
import TestRandom

/// `KnownField` lets header lookups compare one byte instead of a name. It is only right if matching by kind
/// gives exactly what comparing the names ASCII case-insensitively gives, for every pair of names.
@Suite struct KnownFieldTests {
    /// Every name the kinds stand for, lowercase.
    static let knownNames = [
        "accept", "connection", "content-encoding", "content-length", "content-type", "expect", "host", "keep-alive",
        "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "via", "x-forwarded-for",
        "x-forwarded-host", "x-forwarded-proto", "x-request-id", "x-http-method-override", "x-http-method",
        "x-method-override", "x-original-url", "x-rewrite-url",
    ]

    /// A name: a known one in random case, one a byte away from a known one (same length), a random token, or a
    /// name with a non-ASCII letter (U+212A KELVIN SIGN lowercases to "k" in Unicode, never in ASCII).
    static func randomName(_ rng: inout SplitMix64) -> String {
        let known = knownNames[rng.below(knownNames.count)]
        func randomCase(_ text: String) -> String {
            String(text.map { rng.below(2) == 0 ? Character($0.uppercased()) : $0 })
        }
        switch rng.below(5) {
        case 0, 1:
            return randomCase(known)
        case 2:
            var bytes = Array(known.utf8)
            let at = rng.below(bytes.count)
            bytes[at] = bytes[at] == UInt8(ascii: "z") ? UInt8(ascii: "a") : bytes[at] + 1
            return randomCase(String(decoding: bytes, as: UTF8.self))
        case 3:
            let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!#$%&'*+^`|~")
            return String((0..<(1 + rng.below(20))).map { _ in alphabet[rng.below(alphabet.count)] })
        default:
            return String(randomCase(known).map { $0 == "k" || $0 == "K" ? "\u{212A}" : $0 })
        }
    }

    @Test func lookupsByKindMatchNameComparison() {
        var rng = SplitMix64(seed: 0x6B6E_6F77_6E)
        for _ in 0..<20_000 {
            let query = Self.randomName(&rng)
            let field = HTTPHeaderField(name: Self.randomName(&rng), value: "v")
            let byName = HTTPSyntax.equalsIgnoringCase(field.name, query)
            var name = field.name
            let matched = name.withUTF8 { KnownField(query).matches(known: field.known, nameBytes: $0, named: query) }
            #expect(matched == byName, "\(field.name) vs \(query)")
            // The same through the public lookups.
            let headers = HTTPHeaders([field])
            #expect((headers.first(named: query) != nil) == byName)
            #expect(headers.contains(named: query) == byName)
            #expect(headers.values(named: query).count == (byName ? 1 : 0))
        }
    }

    /// `removeAll(named:)` leaves exactly the fields whose names differ from the one removed (ASCII
    /// case-insensitively), in order, over heads of several fields with repeated, near and non-ASCII names.
    @Test func removeAllKeepsExactlyTheOtherFields() {
        var rng = SplitMix64(seed: 0x7265_6D6F_7665)
        for round in 0..<5_000 {
            let fields = (0..<rng.below(7)).map { HTTPHeaderField(name: Self.randomName(&rng), value: "v\($0)") }
            // Half the time the name removed is one of the head's own, in another case.
            let query = !fields.isEmpty && rng.below(2) == 0
                ? String(fields[rng.below(fields.count)].name.map { rng.below(2) == 0 ? Character($0.uppercased()) : $0 })
                : Self.randomName(&rng)
            var headers = HTTPHeaders(fields)
            headers.removeAll(named: query)
            let kept = fields.filter { !HTTPSyntax.equalsIgnoringCase($0.name, query) }
            #expect(headers.fields.map(\.name) == kept.map(\.name) && headers.fields.map(\.value) == kept.map(\.value),
                    "round \(round): removing \(query) from \(fields.map(\.name))")
        }
    }

    @Test func kindsOfKnownNamesAreDistinctAndCaseInsensitive() {
        var seen: [KnownField: String] = [:]
        for name in Self.knownNames {
            let kind = KnownField(name)
            #expect(kind != .other && kind != .nonASCII, "\(name) is not recognised")
            #expect(seen[kind] == nil, "\(name) and \(seen[kind] ?? "") share a kind")
            seen[kind] = name
            #expect(KnownField(name.uppercased()) == kind)
        }
        #expect(KnownField("x-forwarded-fox") == .other)
        #expect(KnownField("X_Original_URL") == .underscored && KnownField("_") == .underscored)
        #expect(KnownField("x-original_url") == .underscored)
        #expect(KnownField("\u{212A}eep-alive") == .nonASCII)
    }

    /// A known name in its usual spellings comes out of the parser as a literal; whichever String it is, it holds
    /// exactly the bytes received, and the lookups by kind find what the lookups by name find.
    @Test func usualSpellingsKeepTheirBytesAndLookupsByKindAgree() throws {
        for lower in Self.knownNames {
            let canonical = lower == "te" ? "TE" : lower.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }
                .joined(separator: "-")
            for name in [lower, canonical, lower.uppercased(), String(canonical.dropLast()) + canonical.suffix(1).uppercased()] {
                let line = Array("\(name): v".utf8)
                let field = try Self.parsed(line)
                #expect(Array(field.name.utf8) == Array(name.utf8), "\(name)")
                #expect(field.known == KnownField(lower))
                let headers = HTTPHeaders([HTTPHeaderField(name: "Other", value: "o"), field])
                #expect(headers.first(field.known) == headers.first(named: lower))
                #expect(headers.values(field.known) == headers.values(named: lower))
            }
        }
    }

    /// A parser's fields carry the kind of their name, and renaming a field recomputes it.
    @Test func parsedAndRenamedFieldsCarryTheirNamesKind() throws {
        var rng = SplitMix64(seed: 42)
        for _ in 0..<2_000 {
            var name = Self.randomName(&rng)
            guard name.utf8.allSatisfy({ $0 < 0x80 }) else { continue }
            name = name.isEmpty ? "x" : name
            let line = Array("\(name): value".utf8)
            let field = try Self.parsed(line)
            #expect(field.known == KnownField(name))
            #expect(field.name == name, "a parsed name keeps its bytes")
            #expect(FieldName(field) == FieldName(field.name), "\(name)")
            var renamed = field
            renamed.name = Self.knownNames[rng.below(Self.knownNames.count)]
            #expect(renamed.known == KnownField(renamed.name))
        }
    }

    /// The one field a head parser makes of `line` (its storage, then the headers taking it).
    static func parsed(_ line: [UInt8]) throws -> HTTPHeaderField {
        var storage = HTTPHeaders.Storage()
        try line.withUnsafeBytes { try storage.append(parsing: $0) }
        let headers = HTTPHeaders(taking: &storage)
        #expect(headers.count == 1 && headers.parsed)
        return headers[0]
    }
}
