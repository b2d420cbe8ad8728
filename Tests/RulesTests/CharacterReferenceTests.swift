import Multipart
import Testing
@testable import Rules

private func rejection(_ decision: PolicyEvaluator.PartDecision) -> Violation? {
    if case .reject(let violation) = decision.action { return violation }
    return nil
}

/// The part names of CRS's regression tests for 920120 that CRS lets through (`no_log_contains: id "920120"`):
/// tests 920120-18 to 920120-35 and 920120-38 of `tests/regression/tests/REQUEST-920-PROTOCOL-ENFORCEMENT/
/// 920120.yaml` in the coreruleset repository. Browsers write a character outside the form's encoding this way.
let crs920120PassingNames = [
    "zzz&auml;&euml;&iuml;&ouml;&uuml;&yuml;&Auml;&Euml;&Iuml;&Ouml;&Uuml;&Yuml;zzz",
    "&auml;&euml;&iuml;&ouml;&uuml;&yuml;&Auml;&Euml;&Iuml;&Ouml;&Uuml;&Yuml;zzz",
    "zzz&acirc;&ecirc;&icirc;&ocirc;&ucirc;&ccirc;&gcirc;&hcirc;&jcirc;&scirc;&wcirc;&ycirc;&Acirc;&Ecirc;&Icirc;"
        + "&Ocirc;&Ucirc;&Ccirc;&Gcirc;&Hcirc;&Jcirc;&Scirc;&Wcirc;&Ycirc;zzz",
    "&acirc;&ecirc;&icirc;&ocirc;&ucirc;&ccirc;&gcirc;&hcirc;&jcirc;&scirc;&wcirc;&ycirc;&Acirc;&Ecirc;&Icirc;"
        + "&Ocirc;&Ucirc;&Ccirc;&Gcirc;&Hcirc;&Jcirc;&Scirc;&Wcirc;&Ycirc;zzz",
    "zzz&aacute;&eacute;&iacute;&oacute;&uacute;&cacute;&lacute;&nacute;&racute;&sacute;&zacute;&gacute;&Aacute;"
        + "&Eacute;&Iacute;&Oacute;&Uacute;&Cacute;&Lacute;&Nacute;&Racute;&Sacute;&Zacute;&Gacute;zzz",
    "&aacute;&eacute;&iacute;&oacute;&uacute;&cacute;&lacute;&nacute;&racute;&sacute;&zacute;&gacute;&Aacute;"
        + "&Eacute;&Iacute;&Oacute;&Uacute;&Cacute;&Lacute;&Nacute;&Racute;&Sacute;&Zacute;&Gacute;zzz",
    "zzz&agrave;&egrave;&igrave;&ograve;&ugrave;&Agrave;&Egrave;&Igrave;&Ograve;&Ugrave;zzz",
    "&agrave;&egrave;&igrave;&ograve;&ugrave;&Agrave;&Egrave;&Igrave;&Ograve;&Ugrave;zzz",
    "zzz&ccedil;&gcedil;&kcedil;&lcedil;&ncedil;&rcedil;&scedil;&tcedil;&Ccedil;&Gcedil;&Kcedil;&Lcedil;&Ncedil;"
        + "&Rcedil;&Scedil;&Tcedil;zzz",
    "&ccedil;&gcedil;&kcedil;&lcedil;&ncedil;&rcedil;&scedil;&tcedil;&Ccedil;&Gcedil;&Kcedil;&Lcedil;&Ncedil;"
        + "&Rcedil;&Scedil;&Tcedil;zzz",
    "zzz&atilde;&ntilde;&otilde;&itilde;&Atilde;&Ntilde;&Otilde;&Itilde;zzz",
    "&atilde;&ntilde;&otilde;&itilde;&Atilde;&Ntilde;&Otilde;&Itilde;zzz",
    "zzz&ccaron;&dcaron;&ecaron;&lcaron;&ncaron;&rcaron;&scaron;&tcaron;&zcaron;&Ccaron;&Dcaron;&Ecaron;&Lcaron;"
        + "&Ncaron;&Rcaron;&Scaron;&Tcaron;&Zcaron;zzz",
    "&ccaron;&dcaron;&ecaron;&lcaron;&ncaron;&rcaron;&scaron;&tcaron;&zcaron;&Ccaron;&Dcaron;&Ecaron;&Lcaron;"
        + "&Ncaron;&Rcaron;&Scaron;&Tcaron;&Zcaron;zzz",
    "zzz&aring;&uring;&Aring;&Uring;zzz",
    "&aring;&uring;&Aring;&Uring;zzz",
    "zzz&oslash;&Oslash;&amp;&AMP;&nbsp;&apos;zzz",
    "&oslash;&Oslash;&amp;&AMP;&nbsp;&apos;zzz",
    "zzz&amp;zzz",
]

/// The part names of the same file's tests that CRS refuses for a `;` (920120-3 and 920120-5 to 920120-17, and
/// 920120-36): a `;` that does not end a reference.
let crs920120RefusedNames = [
    "fi;le", ";zzzz", "amp;zzz", "mp;zzz", "p;zzz", "Zamp;zzz", "Zmp;zzz", "Zp;zzz", "Z;zzz", "ZZZamp;zzz",
    "ZZZmp;zzz", "ZZZp;zzz", "ZZZ;zzz", "mZ;zzz", "&amp;fi;zzz",
]

/// A `;` that ends a well-formed HTML character reference is not a `;` to the name and filename character lists
/// (`character-references allow`, the default), as CRS 920120 lets entities through.
@Suite struct CharacterReferenceTests {
    @Test(arguments: ["zzz&auml;&euml;zzz", "&amp;", "&#228;", "&#xE4;", "&#XE4;", "a&frac12;b", "&lt;",
                      "x&CounterClockwiseContourIntegral;", "&#1114111;", "&#x10FFFF;"] + crs920120PassingNames)
    func referencesPass(name: String) {
        #expect(CharacterRule.defaultNames.firstRefused(in: name, references: true) == nil, "\(name)")
        #expect(CharacterRule.defaultFilenames.firstRefused(in: name, references: true) == nil, "\(name)")
        #expect(CharacterRule.defaultNames.firstRefusedByScalars(in: name, references: true, skip: { _ in false })
            == nil, "\(name)")
    }

    @Test(arguments: [("a;b", 2), ("&;", 2), ("&#;", 3), ("&#x;", 4), ("& amp;", 6), (";", 1), ("&a;", 3),
                      ("&1a;", 4), ("&#12345678;", 11), ("&#x1234567;", 11), ("&#xG1;", 6), ("&#12a;", 6),
                      ("&amp;;", 6), ("&x\u{E9}a;", 5), ("&" + String(repeating: "a", count: 33) + ";", 35)]
                     + crs920120RefusedNames.map { ($0, Array($0.unicodeScalars).lastIndex(of: ";")! + 1) })
    func otherSemicolonsAreRefused(name: String, position: Int) {
        let found = CharacterRule.defaultNames.firstRefused(in: name, references: true)
        #expect(found?.scalar == ";" && found?.position == position, "\(name): \(String(describing: found))")
        let scalars = CharacterRule.defaultNames.firstRefusedByScalars(in: name, references: true, skip: { _ in false })
        #expect(scalars?.scalar == ";" && scalars?.position == position, "\(name)")
    }

    @Test func withoutReferencesEverySemicolonIsRefused() {
        #expect(CharacterRule.defaultNames.firstRefused(in: "zzz&auml;zzz")?.position == 9)
        #expect(CharacterRule.defaultNames.firstRefused(in: "&amp;", references: false)?.position == 5)
    }

    @Test func referencesBeyondASCIITakeTheScalarPath() {
        #expect(CharacterRule.defaultNames.firstRefused(in: "é&auml;", references: true) == nil)
        #expect(CharacterRule.defaultNames.firstRefused(in: "é;&auml;", references: true)?.position == 2)
        #expect(CharacterRule.defaultNames.firstRefused(in: "&é;", references: true)?.position == 3)
    }

    @Test func otherDeniedCharactersStillCount() {
        // A reference exempts its `;` only: the quote in `&apos;'` is a quote.
        #expect(CharacterRule.defaultNames.firstRefused(in: "&apos;'", references: true)?.position == 7)
        #expect(CharacterRule.defaultNames.firstRefused(in: "&amp;=", references: true)?.scalar == "=")
        // What follows a reference's `;` cannot be a parameter to a parser that splits at every `;`: no `=`.
        for list in [CharacterRule.defaultNames, CharacterRule.defaultFilenames] {
            let found = list.firstRefused(in: "a&amp;filename=x.php", references: true)
            #expect(found?.scalar == "=" && found?.position == 15)
        }
    }

    @Test func namesAndFilenamesWithReferencesPassThePolicy() throws {
        var request = try PolicyRequest("route /up { field *; file *; }")
        for name in crs920120PassingNames {
            #expect(request.decision(name).action == .forward, "\(name)")
        }
        for filename in ["r&eacute;sum&eacute;.pdf", "caf&#233;.txt"] {
            var files = try PolicyRequest("route /up { file *; }")
            #expect(files.decision("doc", filename: filename).action == .forward, "\(filename)")
        }
        var name = try PolicyRequest("route /up { field *; }")
        #expect(rejection(name.decision("a;b"))?.kind == .nameCharacter)
        var filename = try PolicyRequest("route /up { file *; }")
        #expect(rejection(filename.decision("doc", filename: "a;b.txt"))?.kind == .filenameCharacter)
    }

    @Test(arguments: crs920120RefusedNames)
    func crsRefusedNamesAreRefused(name: String) throws {
        var request = try PolicyRequest("route /up { field *; }")
        #expect(rejection(request.decision(name))?.kind == .nameCharacter, "\(name)")
    }

    @Test func urlencodedNamesTooAndTheSettingTurnsItOff() throws {
        var urlencoded = try PolicyRequest("route /up { field *; }", type: "application/x-www-form-urlencoded")
        #expect(urlencoded.decision("a&#228;b").action == .forward)
        var strict = try PolicyRequest("character-references reject; route /up { field *; file *; }")
        #expect(rejection(strict.decision("zzz&auml;zzz"))?.detail
            == "name character U+003B ';' at position 9 is denied")
        var strictFile = try PolicyRequest("character-references reject; route /up { field *; file *; }")
        #expect(rejection(strictFile.decision("doc", filename: "a&amp;b.txt"))?.kind == .filenameCharacter)
        // A route, then a rule, beats the context around it.
        var route = try PolicyRequest("character-references reject; route /up { character-references allow; field *; }")
        #expect(route.decision("&amp;").action == .forward)
        var rule = try PolicyRequest("route /up { field * { character-references reject; } }")
        #expect(rejection(rule.decision("&amp;"))?.kind == .nameCharacter)
    }

    @Test func theSettingIsValidated() {
        #expect(rendered("character-references maybe;")
            == ["t.rules:1:22: error: unknown character-references setting 'maybe': expected allow or reject"])
        #expect(rendered("character-references allow; character-references reject;").count == 1)
        #expect(rendered("route /up { file f { character-references reject; } }").isEmpty)
    }

    @Test func aSemicolonEndsAnExtensionLikeADot() {
        // IIS 6 reads `a.asp;.jpg` as ASP, Apache as JPEG: both are judged. A reference cannot hide `.php` behind
        // the `;` it ends.
        #expect(FilenameCheck.extensions(of: "a.asp;.jpg") == ["asp", "jpg"])
        #expect(FilenameCheck.extensions(of: "evil&amp;.php") == ["php"])
        #expect(FilenameCheck.extensionsOfAnyName("évil&amp;.php") == ["php"])
        #expect(FilenameCheck.problems(in: "evil&amp;.php") == [.dangerousExtension])
        #expect(FilenameCheck.problems(in: "r&eacute;sum&eacute;.pdf").isEmpty)
    }

    @Test func aReferenceDoesNotHideADangerousExtension() throws {
        var request = try PolicyRequest("route /up { file img { extensions .jpg; } }")
        #expect(rejection(request.decision("img", filename: "shell&amp;.php"))?.kind == .filename(.dangerousExtension))
        var other = try PolicyRequest("route /up { file img; }")
        #expect(rejection(other.decision("img", filename: "shell&amp;.php"))?.kind == .filename(.dangerousExtension))
        #expect(rejection(other.decision("img", filename: "shell.php&#59;.jpg"))?.kind
            == .filename(.dangerousExtension))
    }
}
