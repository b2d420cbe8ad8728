import Testing
@testable import Rules

/// `FilenameCheck.refusal`: what archive members and uploaded filenames are both refused for, and the server-side
/// extensions of the upload-attack lists.
@Suite struct FilenameRefusalTests {
    @Test(arguments: ["php8", "phtm", "pgif", "phpt", "inc", "cfm", "cfml", "cfc", "cer", "asa", "asax"])
    func serverSideExtensionsAreDangerous(ext: String) {
        #expect(FilenameCheck.problems(in: "shell.\(ext)") == [.dangerousExtension])
        #expect(FilenameCheck.problems(in: Array("shell.\(ext.uppercased()).jpg".utf8)) == [.dangerousExtension])
        #expect(FilenameCheck.refusal(of: "shell.\(ext)", restricted: [], allowed: [], extensionAllowed: { _ in false })
            == "dangerous extension .\(ext)")
    }

    @Test func refusalNamesTheFirstProblem() {
        func refusal(_ name: String, allowed: Set<FilenameProblem> = [], restricted: [String] = [],
                     exempt: Set<String> = []) -> String? {
            FilenameCheck.refusal(of: name, restricted: restricted.compactMap { FilenamePattern($0) },
                                  allowed: allowed, extensionAllowed: { exempt.contains($0) })
        }
        #expect(refusal("word/shell.php5") == "dangerous extension .php5")
        #expect(refusal("a.php.jpg") == "dangerous extension .php")
        #expect(refusal("site/.htaccess") == "dangerous extension .htaccess")
        #expect(refusal(".user.ini") == "restricted filename '.user.ini' (a dotfile)")
        #expect(refusal("conf\\web.config") == "restricted filename 'web.config'")
        #expect(refusal("photo.jpg") == nil)
        #expect(refusal("dump.bak", restricted: ["*.bak"]) == "restricted filename 'dump.bak' matches \"*.bak\"")
        #expect(refusal("logo.svg", exempt: ["svg"]) == nil)
        #expect(refusal("shell.php5", allowed: [.dangerousExtension]) == nil)
        #expect(refusal(".env", allowed: [.restrictedName]) == nil)
    }
}
