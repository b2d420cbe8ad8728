import Testing
@testable import Rules

// `encodings-max`, `compression-ratio-max` and `unknown-encoding`: defaults, main-context defaults, route overrides
// and the checker's bounds.
@Suite struct EncodingSettingsTests {
    @Test func defaultsAreStrict() throws {
        let policy = try Policy.parse("route /a { unknown allow; }")
        let route = try #require(policy.routes.first)
        #expect(route.encodingsMax == 1 && route.compressionRatioMax == 100 && route.unknownEncoding == .reject)
        #expect(policy.fallback.encodingsMax == 1)
    }

    @Test func mainContextSetsDefaultsAndRoutesOverride() throws {
        let policy = try Policy.parse("""
        compression-ratio-max 300;
        unknown-encoding pass;
        route /a { encodings-max 2; }
        route /b { compression-ratio-max 5; unknown-encoding reject; encodings-max 0; }
        """)
        let a = try #require(policy.routes.first { $0.prefix == "/a" })
        let b = try #require(policy.routes.first { $0.prefix == "/b" })
        #expect(a.encodingsMax == 2 && a.compressionRatioMax == 300 && a.unknownEncoding == .pass)
        #expect(b.encodingsMax == 0 && b.compressionRatioMax == 5 && b.unknownEncoding == .reject)
    }

    @Test func outOfRangeValuesAreErrors() {
        for text in ["route /a { encodings-max 5; }", "route /a { compression-ratio-max 0; }",
                     "route /a { unknown-encoding maybe; }"] {
            let diagnostics = RuleChecker.compile(source: text, file: "t.rules").diagnostics
            #expect(diagnostics.contains { $0.severity == .error }, "\(text)")
        }
    }
}
