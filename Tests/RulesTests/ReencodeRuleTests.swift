import Testing
@testable import Rules

/// `reencode off`: explicit, warned about, and refused where it cannot hold (multipart).
@Suite struct ReencodeRuleTests {
    @Test func checkWarnsAboutTheParserDifferential() throws {
        let source = "route /hook { reencode off; content-types application/x-www-form-urlencoded; }"
        let (policy, diagnostics) = compile(source)
        let route = try #require(policy?.routes.first { $0.prefix == "/hook" })
        #expect(route.reencode == .off)
        #expect(diagnostics.count == 1)
        #expect(diagnostics.first?.description.contains("warning: route '/hook' has 'reencode off'") == true)
        #expect(diagnostics.first?.description.contains("parser differential") == true)
    }

    @Test func multipartRoutesCannotTurnReencodingOff() {
        let lines = rendered("route /hook { reencode off; }")
        #expect(lines.contains { $0.contains("error: route '/hook' has 'reencode off' but accepts multipart/form-data") })
        #expect(rendered("route / { reencode of; }").first?.contains("unknown reencode mode 'of'") == true)
        #expect(rendered("reencode off;").first?.contains("not allowed in main context") == true)
        #expect(compile("route / { }").policy?.routes.first?.reencode == .on)
    }
}
