/// A problem with an uploaded file's name, as found by `FilenameCheck.problems(in:)`.
///
/// The kebab-case `name` is used in rule files (`allow-filename path-separators;`); the violation
/// kind is `filename_` followed by the name with underscores.
public enum FilenameProblem: String, Sendable, Hashable, CaseIterable {
    /// `/` or `\` anywhere: a path, not a name (old IE sends `C:\Users\…\photo.jpg`).
    case pathSeparators = "path-separators"
    /// A path segment made only of two or more dots (`..`, `../x`, `a\..\b`).
    case dotDot = "dot-dot"
    /// NUL, another C0 control, DEL or a C1 control character.
    case controlCharacters = "control-characters"
    /// A bidirectional control (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C) that can
    /// make `invoice\u{202E}fdp.exe` display as `invoiceexe.pdf`.
    case bidiControls = "bidi-controls"
    /// The name ends in `.` or a space, which Windows silently drops (`shell.php.` becomes `shell.php`).
    case trailingDotsSpaces = "trailing-dots-spaces"
    /// More than 255 bytes of UTF-8, the usual file-system limit.
    case tooLong = "too-long"
    /// An extension after the stem is on the dangerous list (`invoice.pdf.exe`, `shell.php.jpg`, `a.asp;.jpg`).
    case dangerousExtension = "dangerous-extension"
    /// A Windows device name as the stem (`CON`, `NUL`, `COM1`, `LPT1.txt`, …).
    case reservedName = "reserved-name"
    /// The bytes are not valid UTF-8.
    case invalidUTF8 = "invalid-utf8"
    /// A name a server or runtime reads as configuration or state: a built-in name (`.htaccess`, `web.config`,
    /// `php.ini`…), a PHP session file (`sess_*`), a dotfile, or a `restricted-filenames` glob.
    case restrictedName = "restricted-name"

    /// The stable kebab-case name.
    public var name: String { rawValue }

    /// Whether `FilenameCheck.sanitize` removes this problem.
    /// A dangerous extension or a restricted name is refused, never rewritten: a rewritten name would hide
    /// what the client tried.
    public var isSanitizable: Bool { self != .dangerousExtension && self != .restrictedName }
}
