/// Restricted file names: names a web server, an interpreter or a framework reads as configuration or
/// state, whatever their extension (docs/rules.md, *Restricted filenames*).
///
/// ```
///   "uploads\WEB.CONFIG. "  →  base name  →  trim trailing . and space  →  lowercase  →  "web.config"
///                                                                                         │
///          built-in names ── sess_* ── dotfiles ── restricted-filenames globs  ◀──────────┘
/// ```
extension FilenameCheck {
    /// Server and application configuration files refused whatever the route says, lowercase. The list is this
    /// project's own: each name is read by a server or a runtime from the directory it sits in, or is a
    /// well-known secret of an application that keeps it under its web root.
    public static let restrictedNames: Set<String> = [
        // Apache, PHP, IIS, ASP.NET, Java web apps
        "php.ini", "php5.ini", "web.config", "global.asa", "global.asax", "applicationhost.config", "web.xml",
        // server configuration that a misconfigured include might pick up
        "httpd.conf", "apache2.conf", "nginx.conf", "lighttpd.conf",
        // application secrets commonly kept under the web root
        "wp-config.php", "configuration.php", "localsettings.php", "settings.php",
        // Flash and Silverlight cross-domain policies, served from the site root
        "crossdomain.xml", "clientaccesspolicy.xml",
        // SSH keys
        "authorized_keys", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519",
    ]

    /// The prefix of PHP's session files (`session.save_path`/`sess_<id>`): writing one forges a session.
    public static let sessionPrefix = "sess_"

    /// The name restricted-name judges: the base name cut at the first `:` (an NTFS stream of `web.config` is
    /// `web.config`), trailing dots and spaces trimmed (Windows drops them), lowercased; nil when nothing is left.
    static func restrictedKey(of filename: String) -> String? {
        if let ascii = asciiRestrictedKey(of: filename) { return ascii }
        return restrictedKeyOfAnyName(filename)
    }

    /// `restrictedKey(of:)` for any name, Character by Character.
    static func restrictedKeyOfAnyName(_ filename: String) -> String? {
        var base = Substring(baseName(of: filename))
        if let colon = base.firstIndex(of: ":") { base = base[..<colon] }
        while let last = base.last, last == "." || last == " " { base.removeLast() }
        return base.isEmpty ? nil : base.lowercased()
    }

    /// Why `filename` is restricted (`.htaccess is a dotfile`, `matches "*.bak"`), nil when it is not.
    public static func restriction(of filename: String, patterns: [FilenamePattern] = []) -> String? {
        guard let key = restrictedKey(of: filename) else { return nil }
        if restrictedNames.contains(key) { return "restricted filename '\(key)'" }
        if key.hasPrefix(sessionPrefix) { return "restricted filename '\(key)' (a session file)" }
        if key.hasPrefix(".") { return "restricted filename '\(key)' (a dotfile)" }
        if let pattern = patterns.first(where: { $0.matches(lowercased: key) }) {
            return "restricted filename '\(key)' matches \"\(pattern.source)\""
        }
        return nil
    }
}

/// A `restricted-filenames` glob: `*` for any run of characters, `?` for one, everything else literal,
/// compared case-insensitively with the whole base name.
public struct FilenamePattern: Sendable, Hashable, CustomStringConvertible {
    /// The pattern as written.
    public let source: String
    private let lowered: [Character]

    /// Validates `source`: not empty, no `/` or `\` (patterns judge base names), no control character.
    public init?(_ source: String) {
        guard !source.isEmpty,
              !source.unicodeScalars.contains(where: { $0 == "/" || $0 == "\\" || FilenameCheck.isControl($0) })
        else { return nil }
        self.source = source
        lowered = Array(source.lowercased())
    }

    /// The pattern as written.
    public var description: String { source }

    /// Whether the pattern matches `name` (case-insensitive).
    public func matches(_ name: String) -> Bool { matches(lowercased: name.lowercased()) }

    /// Whether the pattern matches an already lowercased name. Linear backtracking over the last `*`, so a
    /// long name costs at most pattern length × name length steps.
    func matches(lowercased name: String) -> Bool {
        let text = Array(name)
        var (p, t) = (0, 0)
        var star: (pattern: Int, text: Int)?
        while t < text.count {
            if p < lowered.count, lowered[p] == "*" {
                star = (p, t)
                p += 1
            } else if p < lowered.count, lowered[p] == "?" || lowered[p] == text[t] {
                p += 1
                t += 1
            } else if let resume = star {
                star = (resume.pattern, resume.text + 1)
                p = resume.pattern + 1
                t = resume.text + 1
            } else {
                return false
            }
        }
        while p < lowered.count, lowered[p] == "*" { p += 1 }
        return p == lowered.count
    }
}
