import Multipart
import Testing
@testable import Rules

private func rejection(_ decision: PolicyEvaluator.PartDecision) -> Violation? {
    if case .reject(let violation) = decision.action { return violation }
    return nil
}

/// CRS 933110 / 933111 / 944140: every extension is judged, through the evaluator.
@Suite struct EveryExtensionTests {
    static let rules = """
        route /up {
            allow-filename trailing-dots-spaces;
            file doc { extensions .jpg .png; }
            file logo { extensions .php .jpg; }
        }
        """

    @Test(arguments: ["shell.php.jpg", "photo. php", "a.php.", "a.php ", "a.php . jpg", "a.asp;.jpg", "shell.pHp",
                      "a.php::$DATA", "a.jsp.png"])
    func refused(filename: String) throws {
        var request = try PolicyRequest(Self.rules)
        let violation = rejection(request.decision("doc", filename: filename))
        #expect(violation?.kind == .filename(.dangerousExtension), "\(filename)")
        #expect(violation?.status == 415)
    }

    @Test func detailNamesTheFirstDangerousExtension() throws {
        var request = try PolicyRequest(Self.rules)
        #expect(rejection(request.decision("doc", filename: "a.php5.jpg"))?.detail == "dangerous extension .php5")
    }

    @Test func theStemIsNotAnExtension() throws {
        var request = try PolicyRequest(Self.rules)
        #expect(request.decision("doc", filename: "php.jpg").action == .forward)
    }

    @Test func anExplicitExtensionsListStillExempts() throws {
        var request = try PolicyRequest(Self.rules)
        #expect(request.decision("logo", filename: "a.php.jpg").action == .forward)
        var other = try PolicyRequest(Self.rules)
        #expect(rejection(other.decision("logo", filename: "a.exe.jpg"))?.kind == .filename(.dangerousExtension))
    }

    @Test func sanitizeDoesNotFixADangerousExtension() throws {
        var request = try PolicyRequest("route /up { filename sanitize; file doc; }")
        let violation = rejection(request.decision("doc", filename: "dir/shell.php.jpg"))
        #expect(violation?.kind == .filename(.dangerousExtension))
        #expect(request.kinds == ["filename_path_separators", "filename_dangerous_extension"])
    }
}

/// CRS 932180: restricted file names.
@Suite struct RestrictedNameTests {
    @Test(arguments: [".htaccess", ".user.ini", "sess_abc", "WEB.CONFIG.", "web.config::$DATA", "PHP.INI",
                      "uploads/.env", "wp-config.php", "id_rsa"])
    func builtInNamesAreRefused(filename: String) throws {
        var request = try PolicyRequest("""
            route /up { allow-filename dangerous-extension path-separators trailing-dots-spaces; file doc; }
            """)
        let violation = rejection(request.decision("doc", filename: filename))
        #expect(violation?.kind == .filename(.restrictedName), "\(filename)")
        #expect(violation?.status == 403)
        #expect(violation?.kind.name == "filename_restricted_name")
    }

    @Test(arguments: ["session.txt", "my.htaccess.txt", "config.web", "php.ini.txt", "a.b"])
    func similarNamesPass(filename: String) {
        #expect(FilenameCheck.restriction(of: filename) == nil, "\(filename)")
    }

    @Test func detailSaysWhy() {
        #expect(FilenameCheck.restriction(of: "WEB.CONFIG. ") == "restricted filename 'web.config'")
        #expect(FilenameCheck.restriction(of: "sess_1") == "restricted filename 'sess_1' (a session file)")
        #expect(FilenameCheck.restriction(of: ".env") == "restricted filename '.env' (a dotfile)")
    }

    @Test func patternsAddUpAcrossContexts() throws {
        let rules = """
            restricted-filenames "*.bak";
            route /up {
                restricted-filenames "id_rsa*";
                file doc { restricted-filenames "secret-??.txt"; }
                file other;
            }
            """
        for (part, filename, refused) in [
            ("doc", "DB.BAK", true), ("doc", "id_rsa.pub", true), ("doc", "secret-01.txt", true),
            ("doc", "secret-001.txt", false), ("doc", "backup.bak.txt", false), ("other", "x.bak", true),
            ("other", "secret-01.txt", false),
        ] {
            var request = try PolicyRequest(rules)
            let violation = rejection(request.decision(part, filename: filename))
            #expect((violation?.kind == .filename(.restrictedName)) == refused, "\(part) \(filename)")
        }
        var request = try PolicyRequest(rules)
        #expect(rejection(request.decision("doc", filename: "db.bak"))?.detail
            == "restricted filename 'db.bak' matches \"*.bak\"")
    }

    @Test func globMatching() throws {
        let star = try #require(FilenamePattern("*.bak"))
        #expect(star.matches("A.BAK") && star.matches(".bak") && !star.matches("a.bak.txt"))
        let mixed = try #require(FilenamePattern("a*b?c*"))
        #expect(mixed.matches("axxbyc") && mixed.matches("abzc-tail") && !mixed.matches("abc"))
        #expect(FilenamePattern("") == nil && FilenamePattern("a/b") == nil && FilenamePattern("a\\b") == nil)
        // Linear backtracking: a long name against many stars stays quick.
        let many = try #require(FilenamePattern("*a*a*a*a*a*b"))
        #expect(!many.matches(String(repeating: "a", count: 4000)))
    }

    @Test func allowFilenameToleratesIt() throws {
        var request = try PolicyRequest("route /up { file doc { allow-filename restricted-name dangerous-extension; } }")
        #expect(request.decision("doc", filename: ".htaccess").action == .forward)
    }

    @Test func sanitizeCannotFixOrHideARestrictedName() throws {
        var request = try PolicyRequest("route /up { filename sanitize; file doc; }")
        #expect(rejection(request.decision("doc", filename: "WEB.CONFIG."))?.kind == .filename(.restrictedName))
        #expect(request.kinds == ["filename_trailing_dots_spaces", "filename_restricted_name"])
        var strict = try PolicyRequest("route /up { file doc; }")
        #expect(rejection(strict.decision("doc", filename: "WEB.CONFIG."))?.kind == .filename(.trailingDotsSpaces))
        #expect(strict.kinds == ["filename_trailing_dots_spaces"])
        var uncovered = try PolicyRequest("route /up { filename sanitize; file doc; }")
        let violation = rejection(uncovered.decision("doc", filename: "web\u{0}.config"))
        #expect(violation?.kind == .filename(.restrictedName))
        #expect(uncovered.kinds == ["filename_control_characters", "filename_restricted_name"])
    }
}

/// CRS 920120 / 920121: characters of names and filenames.
@Suite struct CharacterRuleTests {
    @Test(arguments: ["a\"b", "a'b", "a;b", "a=b", "a\\b", "a\u{1}b", "a\u{7F}", "a\u{202E}b"])
    func defaultNameCharactersAreRefused(name: String) throws {
        var request = try PolicyRequest("route /up { field *; }")
        let violation = rejection(request.decision(name))
        #expect(violation?.kind == .nameCharacter, "\(name)")
        #expect(violation?.status == 400)
    }

    @Test func detailNamesTheCharacterAndPosition() throws {
        var request = try PolicyRequest("route /up { field *; }")
        #expect(rejection(request.decision("user;id"))?.detail == "name character U+003B ';' at position 5 is denied")
        var control = try PolicyRequest("route /up { field *; }")
        #expect(rejection(control.decision("ab\u{1}"))?.detail == "name character U+0001 at position 3 is denied")
    }

    @Test func ordinaryNamesPass() throws {
        var request = try PolicyRequest("route /up { field *; }")
        for name in ["user_id", "items[]", "a-b_c", "first-name", "data[0][name]"] {
            #expect(request.decision(name).action == .forward, "\(name)")
        }
    }

    @Test func urlencodedFieldNamesAreJudgedToo() throws {
        var request = try PolicyRequest("route /up { field *; }", type: "application/x-www-form-urlencoded")
        #expect(rejection(request.decision("a'b"))?.kind == .nameCharacter)
    }

    @Test(arguments: [("a\"b.txt", true), ("a;b.txt", true), ("a=b.txt", true), ("John's CV.pdf", false),
                      ("résumé.pdf", false)])
    func defaultFilenameCharacters(filename: String, refused: Bool) throws {
        var request = try PolicyRequest("route /up { file doc; }")
        let violation = rejection(request.decision("doc", filename: filename))
        #expect((violation?.kind == .filenameCharacter) == refused, "\(filename)")
        if refused { #expect(violation?.status == 400) }
    }

    @Test func aCharacterIsReportedOnceByTheBuiltInProblem() throws {
        var request = try PolicyRequest("route /up { file doc; }")
        _ = request.decision("doc", filename: "a\u{0}b.txt")
        #expect(request.kinds == ["filename_control_characters"])
        var bidi = try PolicyRequest("route /up { file doc { filename-allow-chars \"a-z.\"; } }")
        _ = bidi.decision("doc", filename: "a\u{202E}b.txt")
        #expect(bidi.kinds == ["filename_bidi_controls"])
        var tolerated = try PolicyRequest("route /up { file doc { allow-filename control-characters; } }")
        #expect(tolerated.decision("doc", filename: "a\u{1}.txt").action == .forward)
    }

    @Test func routeListReplacesMainAndRuleListReplacesRoute() throws {
        let rules = """
            name-deny-chars "x";
            route /up {
                name-allow-chars "a-z_";
                field keep_it;
                field "Any-Name" { name-deny-chars none; }
                field * { name-deny-chars "!"; }
            }
            route /other { field *; }
            """
        var up = try PolicyRequest(rules)
        #expect(up.decision("keep_it").action == .forward)
        #expect(up.decision("Any-Name").action == .forward)
        #expect(up.decision("mixed'x").action == .forward)
        #expect(rejection(up.decision("bang!"))?.kind == .nameCharacter)
        var other = try PolicyRequest(rules, path: "/other")
        #expect(other.decision("a'b").action == .forward)
        #expect(rejection(other.decision("box"))?.detail == "name character U+0078 'x' at position 3 is denied")
        var allow = try PolicyRequest("route /up { name-allow-chars \"a-z_\"; field *; }")
        #expect(rejection(allow.decision("Upper"))?.detail
            == "name character U+0055 'U' at position 1 is not in the allowed characters")
    }

    @Test func filenameListsAtRouteAndRuleLevel() throws {
        let rules = """
            route /up {
                filename-allow-chars "a-zA-Z0-9._-";
                file strict;
                file loose { filename-deny-chars none; }
            }
            """
        var request = try PolicyRequest(rules)
        #expect(request.decision("strict", filename: "photo_1.png").action == .forward)
        var space = try PolicyRequest(rules)
        #expect(rejection(space.decision("strict", filename: "my photo.png"))?.kind == .filenameCharacter)
        var loose = try PolicyRequest(rules)
        #expect(loose.decision("loose", filename: "a;b=c.png").action == .forward)
    }

    @Test func actionAndStatusOfTheRuleApply() throws {
        var request = try PolicyRequest("route /up { field * { action strip; } file doc { status 422; } }")
        #expect(request.decision("a'b").action == .strip(Violation(kind: .nameCharacter, part: "a'b", partIndex: 0,
            rule: SourceLocation(file: "t.rules", line: 1, column: 13),
            detail: "name character U+0027 ''' at position 2 is denied")))
        #expect(rejection(request.decision("doc", filename: "a;b.txt"))?.status == 422)
    }

    @Test func unknownAllowedPartsUseTheRouteLists() throws {
        var request = try PolicyRequest("route /up { unknown allow; }")
        #expect(rejection(request.decision("a=b"))?.kind == .nameCharacter)
        var stripped = try PolicyRequest("route /up { unknown strip; }")
        _ = stripped.decision("a=b")
        #expect(stripped.kinds == ["unknown_part"])
        var file = try PolicyRequest("route /up { unknown allow; }")
        #expect(rejection(file.decision("f", filename: "a;b.txt"))?.kind == .filenameCharacter)
    }

    @Test func filenameAllowSkipsTheCharacterCheck() throws {
        var request = try PolicyRequest("route /up { filename allow; file doc; }")
        #expect(request.decision("doc", filename: "a;b=.txt").action == .forward)
    }

    @Test func parseRanges() {
        #expect(CharacterRule.parseRanges("a-c_-") == [0x61...0x63, 0x5F...0x5F, 0x2D...0x2D])
        #expect(CharacterRule.parseRanges("-a") == [0x2D...0x2D, 0x61...0x61])
        #expect(CharacterRule.parseRanges("z-a") == nil)
        #expect(CharacterRule.parseRanges("") == nil)
    }
}

@Suite struct CRSDirectiveDiagnosticsTests {
    @Test func mistakesAreReportedWithPositionAndSuggestion() {
        let source = """
            route /up {
                name-deny-chars control;
                filename-allow-chars "z-a";
                restricted-filenames "a/b";
                field x { filename-deny-chars "x"; }
                name-allow-chars none;
            }
            name-deny-chars "a" none;
            name-deny-char "x";
            """
        #expect(rendered(source) == [
            "t.rules:2:21: error: unknown character class 'control' for 'name-deny-chars': expected a quoted list of "
                + "characters, controls, bidi or none; did you mean 'controls'?",
            "t.rules:3:26: error: invalid character list \"z-a\" for 'filename-allow-chars': expected characters and "
                + "ranges such as \"a-zA-Z0-9_-\" (a range runs upwards; '-' first or last is itself)",
            "t.rules:4:26: error: invalid restricted filename pattern 'a/b': expected a base name with optional '*' "
                + "and '?' (\"*.bak\", \"id_rsa*\"), without '/', '\\' or control characters",
            "t.rules:5:15: error: 'filename-deny-chars' is not allowed in field context (allowed in: main, route, file)",
            "t.rules:6:5: error: 'name-allow-chars' and 'name-deny-chars' in the same block: choose one (an allow "
                + "list already refuses everything it does not name)",
            "t.rules:6:22: error: 'name-allow-chars none' would refuse every character; write 'name-deny-chars none' "
                + "to turn the check off",
            "t.rules:8:21: error: 'none' empties the list and stands alone in 'name-deny-chars'",
            "t.rules:9:1: error: unknown directive 'name-deny-char'; did you mean 'name-deny-chars'?",
        ])
    }

    @Test func denyAndAllowInOneBlockConflict() {
        let diagnostics = rendered("""
            route /up {
                name-deny-chars "x";
                name-allow-chars "a-z";
            }
            """)
        #expect(diagnostics == ["t.rules:3:5: error: 'name-allow-chars' and 'name-deny-chars' in the same block: "
            + "choose one (an allow list already refuses everything it does not name)"])
    }

    @Test func uniquePerBlock() {
        #expect(rendered("name-deny-chars \"x\";\nname-deny-chars \"y\";\n")
            == ["t.rules:2:1: error: duplicate 'name-deny-chars' (first set at t.rules:1)"])
    }

    @Test func unknownAllowFilenameProblemSuggestsRestrictedName() {
        #expect(rendered("allow-filename restricted-names;\n") == [
            "t.rules:1:16: error: unknown filename problem 'restricted-names'; did you mean 'restricted-name'?",
        ])
    }
}
