import Testing
@testable import Rules

@Suite struct LexerTests {
    @Test func tokensCarryKindsTextAndPositions() {
        let (tokens, diagnostics) = RuleLexer.tokenize("route /api {\n  max 5MiB; # note\n}\n", file: "f")
        #expect(diagnostics.isEmpty)
        let summary = tokens.map { "\($0.kind):\($0.text)@\($0.location.line):\($0.location.column)" }
        #expect(summary == [
            "word:route@1:1", "word:/api@1:7", "openBrace:{@1:12",
            "word:max@2:3", "word:5MiB@2:7", "semicolon:;@2:11",
            "closeBrace:}@3:1", "end:@4:1",
        ])
    }

    @Test func crlfAndLFGiveTheSameTokens() {
        let lf = "mode enforce;\r\nroute / {\n    field \"a b\" { max 1KiB; }  # c\n}\n"
            .replacingOccurrences(of: "\r\n", with: "\n")
        let crlf = lf.replacingOccurrences(of: "\n", with: "\r\n")
        let a = RuleLexer.tokenize(lf, file: "f")
        let b = RuleLexer.tokenize(crlf, file: "f")
        #expect(a.tokens == b.tokens)
        #expect(a.diagnostics.isEmpty && b.diagnostics.isEmpty)
        #expect(a.tokens.count == 15)
    }

    @Test func stringEscapes() {
        let (tokens, _) = RuleLexer.tokenize(#"pattern "a\"b\\c\n\d";"#, file: "f")
        #expect(tokens[1].kind == .string)
        #expect(tokens[1].text == "a\"b\\c\n\\d")
        #expect(tokens[2].kind == .semicolon)
    }

    @Test func unterminatedStringIsReportedAtItsStart() {
        let (_, diagnostics) = RuleLexer.tokenize("mode enforce;\n  pattern \"abc;\nmode x;\n", file: "f")
        #expect(diagnostics.map(\.description) == ["f:2:11: error: unterminated string"])
    }

    @Test func byteOrderMarkIsSkippedAndColumnsCountScalars() {
        let (tokens, _) = RuleLexer.tokenize("\u{FEFF}field \"é\" x;", file: "f")
        #expect(tokens[0].location.column == 1)
        #expect(tokens[2].location.column == 11)
    }

    @Test func controlCharacterIsAnError() {
        let (_, diagnostics) = RuleLexer.tokenize("mode\u{1} enforce;", file: "f")
        #expect(diagnostics.map(\.description) == ["f:1:5: error: unexpected control character 0x01"])
    }
}
