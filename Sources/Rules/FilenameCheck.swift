/// Pure checks and sanitising for uploaded file names. Nothing here touches a file system.
public enum FilenameCheck {
    /// The longest name accepted, in UTF-8 bytes.
    public static let maximumLength = 255

    /// Extensions judged dangerous by default, lowercased without the dot: executables and
    /// installers, shell and script files, server-side scripts a web server might execute, and
    /// browser-rendered formats that can carry script (HTML, SVG) and so enable stored XSS.
    public static let dangerousExtensions: Set<String> = [
        "exe", "dll", "bat", "cmd", "com", "scr", "msi", "msp", "pif", "cpl", "hta", "lnk", "reg",
        "ps1", "vbs", "vbe", "js", "jse", "mjs", "wsf", "wsh", "jar", "sh", "bash",
        "php", "phtml", "php3", "php4", "php5", "php6", "php7", "phps", "pht", "phar",
        "asp", "aspx", "ashx", "asmx", "jsp", "jspx", "cgi", "pl", "py", "rb",
        "htaccess", "htpasswd", "svg", "svgz", "html", "htm", "xhtml", "shtml",
        // Further server-side extensions from the extension lists of PayloadsAllTheThings' "Upload Insecure Files"
        // and OWASP's unrestricted file upload page: PHP handlers (php8 phtm pgif phpt, and inc, which PHP
        // applications include and misconfigured servers run), ColdFusion (cfm cfml cfc) and classic ASP/ASP.NET
        // on IIS (cer and asa map to asp.dll; asax is the ASP.NET application file).
        "php8", "phtm", "pgif", "phpt", "inc", "cfm", "cfml", "cfc", "cer", "asa", "asax",
    ]

    /// Windows device names, which open a device whatever the extension.
    static let reservedStems: Set<String> = {
        var names: Set<String> = ["con", "prn", "aux", "nul"]
        for digit in 1...9 {
            names.insert("com\(digit)")
            names.insert("lpt\(digit)")
        }
        return names
    }()

    /// Every problem in `filename`, in `FilenameProblem` declaration order.
    ///
    /// An empty name (a browser's "no file chosen") has no problems. `extensionAllowed` can exempt
    /// an extension from the dangerous list, for a rule whose `extensions` names it explicitly.
    public static func problems(in filename: some Collection<UInt8>, restricted: [FilenamePattern] = [],
                                extensionAllowed: (String) -> Bool = { _ in false }) -> [FilenameProblem] {
        let bytes = Array(filename)
        if let ascii = bytes.withUnsafeBufferPointer({
            asciiProblems(of: $0, restricted: restricted, extensionAllowed: extensionAllowed)
        }) {
            return ascii
        }
        return problemsOfAnyName(bytes, restricted: restricted, extensionAllowed: extensionAllowed)
    }

    /// `problems(in:restricted:extensionAllowed:)` for a name held as a String (valid UTF-8 by construction).
    public static func problems(in filename: String, restricted: [FilenamePattern] = [],
                                extensionAllowed: (String) -> Bool = { _ in false }) -> [FilenameProblem] {
        let ascii = filename.utf8.withContiguousStorageIfAvailable {
            asciiProblems(of: $0, restricted: restricted, extensionAllowed: extensionAllowed)
        }
        if let found = ascii ?? nil { return found }
        return problemsOfAnyName(Array(filename.utf8), restricted: restricted, extensionAllowed: extensionAllowed)
    }

    /// `problems(in:)` for any name, decoded to Characters and scalars: the reference the ASCII fast path
    /// (`asciiProblems`) is tested against.
    static func problemsOfAnyName(_ bytes: [UInt8], restricted: [FilenamePattern],
                                  extensionAllowed: (String) -> Bool) -> [FilenameProblem] {
        let dangerous = dangerousExtensions
        guard !bytes.isEmpty else { return [] }
        var found = Set<FilenameProblem>()
        let text: String
        if let valid = String(validating: bytes, as: UTF8.self) {
            text = valid
        } else {
            found.insert(.invalidUTF8)
            text = String(decoding: bytes, as: UTF8.self)
        }
        let hasSeparator = bytes.contains(UInt8(ascii: "/")) || bytes.contains(UInt8(ascii: "\\"))
        let base: String
        if hasSeparator {
            found.insert(.pathSeparators)
            let segments = text.split(omittingEmptySubsequences: false) { $0 == "/" || $0 == "\\" }
            if segments.contains(where: { $0.count >= 2 && $0.allSatisfy { $0 == "." } }) { found.insert(.dotDot) }
            base = String(segments.last ?? "")
        } else {
            // No separator byte, so no separator Character: the name is its one segment, checked byte by byte
            // (a segment of Characters that are all "." is a run of "." bytes, and the other way round). The
            // Character split took some 4,000 instructions for a short name.
            if bytes.count >= 2 && bytes.allSatisfy({ $0 == UInt8(ascii: ".") }) { found.insert(.dotDot) }
            base = text
        }
        for scalar in text.unicodeScalars {
            if isControl(scalar) { found.insert(.controlCharacters) }
            if isBidiControl(scalar) { found.insert(.bidiControls) }
        }
        if let last = bytes.last, last == UInt8(ascii: ".") || last == UInt8(ascii: " ") {
            found.insert(.trailingDotsSpaces)
        }
        if bytes.count > maximumLength { found.insert(.tooLong) }
        if firstDangerousExtension(of: base, dangerous: dangerous, extensionAllowed: extensionAllowed) != nil {
            found.insert(.dangerousExtension)
        }
        if isReserved(base) { found.insert(.reservedName) }
        if restriction(of: base, patterns: restricted) != nil { found.insert(.restrictedName) }
        return FilenameProblem.allCases.filter(found.contains)
    }

    /// The last extension of a base name, lowercased, without the dot; nil when there is none.
    ///
    /// The name is first cut at the first `:` (an NTFS stream, `shell.php::$DATA`), then trailing
    /// dots and spaces are dropped, as Windows does: `invoice.pdf.exe` → `exe`, `shell.php. .` → `php`,
    /// `.htaccess` → `htaccess`.
    public static func lastExtension(of name: String) -> String? {
        var base = Substring(name)
        if let colon = base.firstIndex(of: ":") { base = base[..<colon] }
        while let last = base.last, last == "." || last == " " { base.removeLast() }
        guard let dot = base.lastIndex(of: ".") else { return nil }
        let ext = base[base.index(after: dot)...]
        return ext.isEmpty ? nil : ext.lowercased()
    }

    /// Every extension of a base name after its stem, in order, lowercased, without dots; what
    /// `dangerous-extension` judges.
    ///
    /// The name is cut at the first `:` (an NTFS stream: `shell.php::$DATA` writes `shell.php`). The rest is split
    /// at every `.` and every `;` (IIS 6 maps `shell.asp;.jpg` to the ASP handler, Apache to JPEG, so both count;
    /// `shell&amp;.php` is `php`); the first segment is the stem (`php.jpg` has the one extension `jpg`), except
    /// for a leading dot (`.htaccess` → `htaccess`). Each
    /// segment is trimmed of surrounding whitespace (Windows drops trailing spaces; `photo. php` is read as
    /// `photo.php` by careless code) and empty segments are skipped: `a.php . jpg` → `php`, `jpg`;
    /// `shell.php.jpg` → `php`, `jpg` (Apache's mod_mime runs it as PHP).
    public static func extensions(of name: String) -> [String] {
        if let ascii = asciiExtensions(of: name) { return ascii }
        return extensionsOfAnyName(name)
    }

    /// `extensions(of:)` for any name, Character by Character.
    static func extensionsOfAnyName(_ name: String) -> [String] {
        var base = Substring(name)
        if let cut = base.firstIndex(of: ":") { base = base[..<cut] }
        let segments = base.split(omittingEmptySubsequences: false) { $0 == "." || $0 == ";" }
        let stemIsEmpty = segments.first.map { $0.allSatisfy(\.isWhitespace) } ?? true
        return segments.dropFirst(stemIsEmpty ? 0 : 1).compactMap { segment in
            let trimmed = segment.trimming(while: \.isWhitespace)
            return trimmed.isEmpty ? nil : trimmed.lowercased()
        }
    }

    /// The part of a name after its last `/` or `\\`.
    public static func baseName(of name: String) -> String {
        guard let separator = name.lastIndex(where: { $0 == "/" || $0 == "\\" }) else { return name }
        return String(name[name.index(after: separator)...])
    }

    /// Why `name` may not land on a server whatever its content, less the problems `allowed`: its first dangerous
    /// extension (`dangerous-extension`, every extension of the base name) or its restriction (`restricted-name`:
    /// built-in names, session files, dotfiles, the `restricted` globs); nil when neither applies. The detail is
    /// the one an uploaded filename's violation carries; archive members are judged by this (docs/rules.md,
    /// "Archives").
    public static func refusal(of name: String, restricted: [FilenamePattern], allowed: Set<FilenameProblem>,
                               extensionAllowed: (String) -> Bool) -> String? {
        let base = baseName(of: name)
        if !allowed.contains(.dangerousExtension),
           let ext = firstDangerousExtension(of: base, extensionAllowed: extensionAllowed) {
            return "dangerous extension .\(ext)"
        }
        if !allowed.contains(.restrictedName), let why = restriction(of: base, patterns: restricted) { return why }
        return nil
    }

    /// The first of `extensions(of:)` on the `dangerous` list and not exempted by `extensionAllowed`.
    public static func firstDangerousExtension(of name: String, dangerous: Set<String> = dangerousExtensions,
                                               extensionAllowed: (String) -> Bool = { _ in false }) -> String? {
        extensions(of: name).first { dangerous.contains($0) && !extensionAllowed($0) }
    }

    /// Reduces a name to a safe base name.
    ///
    /// Invalid UTF-8 is dropped; everything up to the last `/` or `\` is dropped; control and bidi
    /// characters are dropped; leading dots and spaces and trailing dots and spaces are trimmed; a
    /// Windows device stem gets a `_` prefix; names over 255 bytes are cut on a UTF-8 boundary,
    /// keeping an extension of up to 16 bytes. An empty result becomes `file`.
    public static func sanitize(_ filename: some Collection<UInt8>) -> String {
        let decoded = String(decoding: Array(filename), as: UTF8.self)
        var base = Substring(decoded)
        if let separator = base.lastIndex(where: { $0 == "/" || $0 == "\\" }) {
            base = base[base.index(after: separator)...]
        }
        var scalars = String.UnicodeScalarView()
        for scalar in base.unicodeScalars where !isControl(scalar) && !isBidiControl(scalar) && scalar != "\u{FFFD}" {
            scalars.append(scalar)
        }
        var name = trimmed(String(scalars))
        if isReserved(name) { name = "_" + name }
        if name.utf8.count > maximumLength {
            var ext = ""
            if let dot = name.lastIndex(of: "."), name.utf8[dot...].count <= 17, dot != name.startIndex {
                ext = String(name[dot...])
                name = String(name[..<dot])
            }
            name = trimmed(truncated(name, toBytes: maximumLength - ext.utf8.count)) + ext
        }
        return name.isEmpty || name.allSatisfy({ $0 == "." }) ? "file" : name
    }

    /// Convenience for a `String` name.
    public static func sanitize(_ filename: String) -> String { sanitize(Array(filename.utf8)) }

    private static func trimmed(_ name: String) -> String {
        var result = Substring(name)
        while let first = result.first, first == "." || first == " " { result.removeFirst() }
        while let last = result.last, last == "." || last == " " { result.removeLast() }
        return String(result)
    }

    private static func truncated(_ name: String, toBytes limit: Int) -> String {
        var result = String.UnicodeScalarView()
        var used = 0
        for scalar in name.unicodeScalars {
            let size = String(scalar).utf8.count
            if used + size > limit { break }
            used += size
            result.append(scalar)
        }
        return String(result)
    }

    static func isReserved(_ base: String) -> Bool {
        if let ascii = asciiIsReserved(base) { return ascii }
        return isReservedAnyName(base)
    }

    /// `isReserved` for any name, Character by Character.
    static func isReservedAnyName(_ base: String) -> Bool {
        let stem = base.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return reservedStems.contains(String(stem.trimmingASCIISpaces()).lowercased())
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    static func isBidiControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C: return true
        default: return false
        }
    }
}

extension Substring {
    /// The substring without leading and trailing characters matching `predicate`.
    func trimming(while predicate: (Character) -> Bool) -> Substring {
        var result = self
        while let first = result.first, predicate(first) { result.removeFirst() }
        while let last = result.last, predicate(last) { result.removeLast() }
        return result
    }
}
