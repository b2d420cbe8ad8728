import Foundation
import Testing
@testable import Rules

@Suite struct DiagnosticTests {
    @Test func unknownDirectiveWithSuggestion() {
        #expect(rendered("route / {\n    metods POST;\n}\n") == [
            "t.rules:2:5: error: unknown directive 'metods'; did you mean 'methods'?",
        ])
        #expect(rendered("frobnicate x;") == ["t.rules:1:1: error: unknown directive 'frobnicate'"])
    }

    @Test func directiveInWrongContext() {
        #expect(rendered("max 5;") == [
            "t.rules:1:1: error: 'max' is not allowed in main context (allowed in: field, file)",
        ])
        #expect(rendered("route / {\n  field a { types image/png; }\n}") == [
            "t.rules:2:13: error: 'types' is not allowed in field context (allowed in: file)",
        ])
        #expect(rendered("route / { route /x { } }") == [
            "t.rules:1:11: error: 'route' is not allowed in route context (allowed in: main)",
        ])
        #expect(rendered("route / { include \"x.rules\"; }") == [
            "t.rules:1:11: error: 'include' is not allowed in route context (allowed in: main)",
        ])
    }

    @Test func argumentCountsAndBlocks() {
        #expect(rendered("mode;") == ["t.rules:1:1: error: 'mode' takes exactly 1 argument, got 0"])
        #expect(rendered("anomaly lf-line;") == ["t.rules:1:1: error: 'anomaly' takes exactly 2 arguments, got 1"])
        #expect(rendered("route / { methods; }") == ["t.rules:1:11: error: 'methods' takes at least 1 argument, got 0"])
        #expect(rendered("route / { field a { required yes; } }") == [
            "t.rules:1:21: error: 'required' takes no arguments, got 1",
        ])
        #expect(rendered("route /;") == ["t.rules:1:1: error: 'route' needs a { … } block"])
        #expect(rendered("mode enforce { }") == ["t.rules:1:1: error: 'mode' does not take a block"])
    }

    @Test func badSizeAndBadNumber() {
        #expect(rendered("route / {\n  body-max 10MB;\n}") == [
            "t.rules:2:12: error: bad size '10MB' for 'body-max': expected a whole number with an optional unit "
                + "B, k/KiB, m/MiB, g/GiB or t/TiB (binary, any case), at most 1 TiB",
        ])
        let fraction = rendered("route / { field a { max 1.5KiB; } }")
        #expect(fraction.first?.hasPrefix("t.rules:1:25: error: bad size '1.5KiB'") == true)
        #expect(rendered("route / { parts-max eight; }") == [
            "t.rules:1:21: error: bad number 'eight' for 'parts-max': expected a whole number",
        ])
        #expect(rendered("route / { parts-max -1; }") == [
            "t.rules:1:21: error: bad number '-1' for 'parts-max': expected a whole number",
        ])
    }

    @Test func missingSemicolon() {
        #expect(rendered("route / {\n    methods POST PUT\n    body-max 1MiB;\n}\n") == [
            "t.rules:2:21: error: missing ';' after 'methods' statement",
        ])
        #expect(rendered("route / { field a { required } }") == [
            "t.rules:1:29: error: missing ';' after 'required' statement",
        ])
        #expect(rendered("mode enforce") == ["t.rules:1:13: error: missing ';' after 'mode' statement"])
        // Arguments may continue on later lines when they are not directive names.
        #expect(rendered("route / { file a { types image/png\n    image/jpeg; } }").isEmpty)
    }

    @Test func unterminatedStringAndBlock() {
        let unterminated = rendered("route / {\n  field a { pattern \"^x; }\n}\n")
        #expect(unterminated.contains("t.rules:2:21: error: unterminated string"))
        #expect(rendered("route /a {\n  field a { max 1; }\n") == [
            "t.rules:1:10: error: unterminated block: '{' has no matching '}'",
        ])
        #expect(rendered("mode enforce;\n}\n") == ["t.rules:2:1: error: unexpected '}' with no open block"])
        #expect(rendered("\"mode\" enforce;") == [
            "t.rules:1:1: error: expected a directive name, found string \"mode\"",
        ])
    }

    @Test func duplicates() {
        #expect(rendered("route /a {\n  field a;\n  field a { max 1; }\n}") == [
            "t.rules:3:9: error: duplicate rule for part 'a' (first defined at t.rules:2)",
        ])
        #expect(rendered("route /a {\n  field a;\n  file a;\n}") == [
            "t.rules:3:8: error: duplicate rule for part 'a' (first defined at t.rules:2)",
        ])
        #expect(rendered("route /a {\n  file *;\n  file *;\n}") == [
            "t.rules:3:8: error: duplicate rule for 'file *' (first defined at t.rules:2)",
        ])
        #expect(rendered("route /a { }\nroute /a { }") == [
            "t.rules:2:7: error: duplicate route '/a' (first defined at t.rules:1)",
        ])
        #expect(rendered("route /a { field x { max 1; max 2; } }") == [
            "t.rules:1:29: error: duplicate 'max' (first set at t.rules:1)",
        ])
        #expect(rendered("mode enforce;\nmode monitor;") == [
            "t.rules:2:1: error: duplicate 'mode' (first set at t.rules:1)",
        ])
        #expect(rendered("anomaly lf-line log;\nanomaly lf-line allow;") == [
            "t.rules:2:1: error: duplicate 'anomaly lf-line' (first set at t.rules:1)",
        ])
    }

    @Test func shadowedRoute() {
        #expect(rendered("route /api { }\nroute /api/ { }") == [
            "t.rules:2:7: error: route '/api/' is shadowed by route '/api' at t.rules:1 (both normalise to '/api')",
        ])
        #expect(rendered("route /a//b { }\nroute /a/./b { }").count == 1)
    }

    @Test func invalidValues() {
        #expect(rendered("route / {\n  field a { pattern \"([a-\"; }\n}") == [
            "t.rules:2:21: error: invalid pattern \"([a-\": expected ']'",
        ])
        #expect(rendered("anomaly header-foldin reject;") == [
            "t.rules:1:9: error: unknown anomaly 'header-foldin'; did you mean 'header-folding'?",
        ])
        #expect(rendered("anomaly lf-line drop;") == [
            "t.rules:1:17: error: unknown action 'drop': expected reject, log, allow or strip",
        ])
        #expect(rendered("route / { field a { action drop; } }") == [
            "t.rules:1:28: error: unknown action 'drop': expected reject, strip, quarantine or log",
        ])
        #expect(rendered("route / { unknown quarantine; }") == [
            "t.rules:1:19: error: unknown action 'quarantine': expected reject, strip or allow",
        ])
        #expect(rendered("mode audit;") == ["t.rules:1:6: error: unknown mode 'audit': expected enforce or monitor"])
        #expect(rendered("route / { file a { types image/png */png; } }") == [
            "t.rules:1:36: error: invalid MIME type pattern '*/png': expected type/subtype, type/* or */*",
        ])
        #expect(rendered("route / { content-types multipart; }") == [
            "t.rules:1:25: error: invalid MIME type pattern 'multipart': expected type/subtype, type/* or */*",
        ])
        #expect(rendered("route / { methods post; }") == [
            "t.rules:1:19: error: invalid method 'post': methods are case-sensitive tokens such as 'POST'",
        ])
        #expect(rendered("route / { file a { extensions png; } }") == [
            "t.rules:1:31: error: invalid extension 'png': write it with its dot, e.g. '.png'",
        ])
        #expect(rendered("route / { filename fix; }") == [
            "t.rules:1:20: error: unknown filename handling 'fix': expected reject, sanitize or allow",
        ])
        #expect(rendered("route / { allow-filename dot-dots; }") == [
            "t.rules:1:26: error: unknown filename problem 'dot-dots'; did you mean 'dot-dot'?",
        ])
        #expect(rendered("route / { field * { required; } }") == [
            "t.rules:1:21: error: 'required' cannot apply to a wildcard rule",
        ])
        #expect(rendered("route api { }") == [
            "t.rules:1:7: error: invalid route path 'api': it must start with '/' and hold no query, fragment, "
                + "space or percent-escape",
        ])
    }

    @Test func warningsDoNotFailTheLoad() throws {
        let (policy, diagnostics) = compile("route / {\n  file a { max 2MiB; }\n}")
        #expect(policy != nil)
        #expect(diagnostics.map(\.description) == [
            "t.rules:2:3: warning: file 'a' max 2 MiB can never be reached: the route's body-max is 1 MiB",
        ])
    }

    @Test func everyErrorIsReportedNotJustTheFirst() {
        let diagnostics = rendered("mode x;\nroute / { parts-max y; bogus; }\nanomaly nope log;")
        #expect(diagnostics.count == 4)
    }

    @Test func loadThrowsWithDiagnostics() {
        do {
            _ = try Policy.parse("mode x;", file: "m.rules")
            Issue.record("expected a load error")
        } catch {
            #expect(error.diagnostics.map(\.description) == [
                "m.rules:1:6: error: unknown mode 'x': expected enforce or monitor",
            ])
            #expect(error.description == "m.rules:1:6: error: unknown mode 'x': expected enforce or monitor")
        }
    }
}

/// `formwall check` warnings for policies that can never pass: valid, so the policy still loads.
@Suite struct NeverPassWarningTests {
    @Test func filesMaxZeroWithAFileRule() throws {
        let source = "route /up {\n    files-max 0;\n    file avatar { max 1MiB; }\n}"
        #expect(rendered(source) == [
            "t.rules:3:5: warning: file 'avatar' can never arrive: the route's files-max is 0",
        ])
        _ = try policy(source)
        #expect(rendered("route /up { files-max 0; file * { } }") == [
            "t.rules:1:26: warning: file '*' can never arrive: the route's files-max is 0",
        ])
    }

    @Test func fewerFieldsAllowedThanRequired() {
        let source = "route /up {\n    fields-max 1;\n    field a { required; }\n    field b { required; }\n    field c;\n}"
        #expect(rendered(source) == [
            "t.rules:1:1: warning: route '/up' can never pass: it requires 2 fields but fields-max is 1",
        ])
        #expect(rendered("route /up { fields-max 2; field a { required; } field b { required; } }").isEmpty)
        #expect(rendered("route /up { files-max 1; file a { required; } file b { required; } }") == [
            "t.rules:1:1: warning: route '/up' can never pass: it requires 2 files but files-max is 1",
        ])
    }

    @Test func disarmWithTypesItDoesNotRewrite() {
        #expect(rendered("route /up {\n  file a { types image/jpeg image/bmp application/pdf; disarm; }\n}") == [
            "t.rules:2:3: warning: file 'a': disarm rewrites only JPEG, PNG, GIF, WebP and SVG; image/bmp "
                + "application/pdf would pass unchanged",
        ])
        #expect(rendered("route /up { file a { types image/*; disarm; } }") == [
            "t.rules:1:13: warning: file 'a': disarm rewrites only JPEG, PNG, GIF, WebP and SVG; image/bmp "
                + "image/tiff image/vnd.microsoft.icon image/heic image/heif image/avif would pass unchanged",
        ])
        #expect(rendered("route /up { file * { types */*; action disarm; } }").count == 1)
        #expect(rendered("route /up { file a { types image/jpg image/png image/gif image/webp image/svg+xml; "
            + "disarm reject; } }").isEmpty)
        #expect(rendered("route /up { file a { types image/bmp; } }").isEmpty)
    }

    @Test func typesAndExtensionsWithoutOverlap() {
        #expect(rendered("route /up {\n  file a { types image/png; extensions .pdf; }\n}") == [
            "t.rules:2:3: warning: file 'a': types image/png and extensions .pdf have no type in common: "
                + "only a file whose name contradicts its content can pass",
        ])
        #expect(rendered("route /up { file a { types image/*; extensions .pdf .docx; } }").count == 1)
        // Overlap, or something the built-in table does not know, is not a warning.
        #expect(rendered("route /up { file a { types image/png application/pdf; extensions .pdf; } }").isEmpty)
        #expect(rendered("route /up { file a { types image/*; extensions .JPG; } }").isEmpty)
        #expect(rendered("route /up { file a { types image/jpg; extensions .jpeg; } }").isEmpty)
        #expect(rendered("route /up { file a { types application/x-custom; extensions .pdf; } }").isEmpty)
        #expect(rendered("route /up { file a { types image/png; extensions .custom; } }").isEmpty)
        #expect(rendered("route /up { file a { types */*; extensions .pdf; } }").isEmpty)
    }

    @Test func bodylessMethodsWithARequiredPart() {
        #expect(rendered("route /up {\n  methods GET HEAD;\n  field q { required; }\n}") == [
            "t.rules:3:3: warning: required field 'q' can never arrive: route '/up' allows only GET HEAD, "
                + "which carry no form body",
        ])
        #expect(rendered("route /up { methods GET POST; field q { required; } }").isEmpty)
        #expect(rendered("route /up { methods GET; field q; }").isEmpty)
    }

    @Test func warningsDoNotChangeTheExitStatusAndAreSortedByPosition() throws {
        let source = """
            route /b {
                files-max 0;
                file x;
            }
            route /a {
                fields-max 0;
                field y { required; }
                file z { types image/png; extensions .pdf; }
            }
            """
        let (policy, diagnostics) = compile(source)
        #expect(policy != nil)
        #expect(diagnostics.allSatisfy { $0.severity == .warning })
        #expect(diagnostics.map { "\($0.line):\($0.column)" } == ["3:5", "5:1", "8:5"])
    }

    @Test func diagnosticsAreSortedByFileThenLineThenColumn() throws {
        // The parser's error on line 3 used to come before the compiler's on line 1.
        let diagnostics = compile("mode x;\nroute / { }\nroute /a { \"\n").diagnostics
        let positions = diagnostics.map { [$0.line, $0.column] }
        #expect(positions.count >= 2)
        #expect(positions == positions.sorted { $0.lexicographicallyPrecedes($1) })
        // A parse error in an included file used to come before the including file's compiler errors.
        let directory = try temporaryDirectory(["b.rules": "route /b { \"\n", "a.rules": "include \"b.rules\";\nmode x;\n"])
        let files = RuleChecker.check(paths: [directory + "/a.rules"]).map { ($0.file as NSString).lastPathComponent }
        #expect(files.first == "a.rules" && files == files.sorted())
    }
}
