import Testing
@testable import Rules

@Suite struct FilenameTests {
    @Test(arguments: [
        ("photo.png", [FilenameProblem]()),
        ("", []),
        ("a..b.txt", []),
        ("../etc/passwd", [.pathSeparators, .dotDot]),
        ("C:\\Users\\me\\photo.jpg", [.pathSeparators]),
        ("..", [.dotDot, .trailingDotsSpaces]),
        ("a\u{0}.png", [.controlCharacters]),
        ("a\r\nb.png", [.controlCharacters]),
        ("a\u{85}.png", [.controlCharacters]),
        ("invoice\u{202E}fdp.exe", [.bidiControls, .dangerousExtension]),
        ("x\u{2066}y.txt", [.bidiControls]),
        ("x\u{200F}y.txt", [.bidiControls]),
        ("shell.php.", [.trailingDotsSpaces, .dangerousExtension]),
        ("report.pdf ", [.trailingDotsSpaces]),
        ("invoice.pdf.exe", [.dangerousExtension]),
        ("invoice.exe.pdf", [.dangerousExtension]),
        ("SHELL.PHP5", [.dangerousExtension]),
        ("shell.php::$DATA", [.dangerousExtension]),
        (".htaccess", [.dangerousExtension, .restrictedName]),
        ("logo.svg", [.dangerousExtension]),
        ("CON", [.reservedName]),
        ("nul.txt", [.reservedName]),
        ("lpt9.png", [.reservedName]),
        ("console.txt", []),
    ] as [(String, [FilenameProblem])])
    func problems(name: String, expected: [FilenameProblem]) {
        #expect(FilenameCheck.problems(in: name) == expected)
    }

    /// Every extension after the stem is judged, not only the last (CRS 933110/933111/944140 look at the whole
    /// name; Apache's mod_mime runs `shell.php.jpg` as PHP).
    @Test(arguments: [
        ("shell.php.jpg", true),
        ("photo. php", true),
        ("a.php.", true),
        ("a.php ", true),
        ("a.php . jpg", true),
        ("a.asp;.jpg", true),
        ("shell.pHp", true),
        ("a.php::$DATA", true),
        ("a.jpg::$DATA", false),
        ("report.JSP.txt", true),
        ("php.jpg", false),
        ("exe", false),
        ("php .jpg", false),
        ("my.report.v2.pdf", false),
        ("C:\\uploads\\shell.php.png", true),
    ] as [(String, Bool)])
    func everyExtensionIsJudged(name: String, dangerous: Bool) {
        #expect(FilenameCheck.problems(in: name).contains(.dangerousExtension) == dangerous, "\(name)")
    }

    @Test func extensionsAfterTheStem() {
        #expect(FilenameCheck.extensions(of: "a.php . jpg") == ["php", "jpg"])
        #expect(FilenameCheck.extensions(of: "php.jpg") == ["jpg"])
        #expect(FilenameCheck.extensions(of: ".htaccess") == ["htaccess"])
        #expect(FilenameCheck.extensions(of: "a.asp;.jpg") == ["asp", "jpg"])
        #expect(FilenameCheck.extensions(of: "a.PHP::$DATA") == ["php"])
        #expect(FilenameCheck.extensions(of: "README") == [])
        #expect(FilenameCheck.firstDangerousExtension(of: "a.tar.php.gz") == "php")
        #expect(FilenameCheck.firstDangerousExtension(of: "a.php.svg", extensionAllowed: { $0 == "php" }) == "svg")
    }

    @Test func lengthLimitIsBytes() {
        #expect(FilenameCheck.problems(in: String(repeating: "a", count: 251) + ".png") == [])
        #expect(FilenameCheck.problems(in: String(repeating: "a", count: 252) + ".png") == [.tooLong])
        #expect(FilenameCheck.problems(in: String(repeating: "é", count: 128)) == [.tooLong])
    }

    @Test func invalidUTF8() {
        #expect(FilenameCheck.problems(in: [0x61, 0xFF, 0x2E, 0x70, 0x6E, 0x67]) == [.invalidUTF8])
    }

    @Test func extensionAllowlistExemptsDangerousList() {
        #expect(FilenameCheck.problems(in: Array("logo.svg".utf8), extensionAllowed: { $0 == "svg" }) == [])
    }

    @Test func lastExtension() {
        #expect(FilenameCheck.lastExtension(of: "invoice.pdf.exe") == "exe")
        #expect(FilenameCheck.lastExtension(of: "archive.tar.GZ") == "gz")
        #expect(FilenameCheck.lastExtension(of: "shell.php. .") == "php")
        #expect(FilenameCheck.lastExtension(of: "README") == nil)
        #expect(FilenameCheck.lastExtension(of: "trailing.") == nil)
    }

    @Test(arguments: [
        ("photo.png", "photo.png"),
        ("C:\\Users\\me\\photo.jpg", "photo.jpg"),
        ("../../etc/passwd", "passwd"),
        ("a\u{0}b\u{7}.png", "ab.png"),
        ("invoice\u{202E}fdp.exe", "invoicefdp.exe"),
        ("shell.php. . ", "shell.php"),
        ("..", "file"),
        ("", "file"),
        ("/", "file"),
        ("...", "file"),
        (" .hidden", "hidden"),
        ("CON.txt", "_CON.txt"),
        ("日本語.txt", "日本語.txt"),
    ])
    func sanitize(name: String, expected: String) {
        #expect(FilenameCheck.sanitize(name) == expected)
        #expect(FilenameCheck.problems(in: FilenameCheck.sanitize(name)).filter(\.isSanitizable).isEmpty)
    }

    @Test func sanitizeCapsOnAUTF8BoundaryKeepingTheExtension() {
        let long = String(repeating: "é", count: 200) + ".jpeg"
        let result = FilenameCheck.sanitize(long)
        #expect(result.utf8.count <= 255)
        #expect(result.utf8.count >= 254)
        #expect(result.hasSuffix(".jpeg"))
        #expect(result.unicodeScalars.dropLast(5).allSatisfy { $0 == "é" })
        let plain = FilenameCheck.sanitize(String(repeating: "x", count: 300))
        #expect(plain.utf8.count == 255)
    }

    @Test func sanitizeDropsInvalidUTF8() {
        #expect(FilenameCheck.sanitize([0x61, 0xFF, 0x2E, 0x70, 0x6E, 0x67]) == "a.png")
    }
}
