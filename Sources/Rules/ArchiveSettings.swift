/// What an archive file part (ZIP and what is built on it, gzip, tar, tar.gz) may hold (docs/rules.md,
/// "Archives"). Every file part sniffed as an archive is inspected with these limits, even when its rule names no
/// archive directive; a route or rule relaxes one only by an explicit directive.
public struct ArchiveSettings: Sendable, Hashable {
    /// The member extensions refused by default: executables, scripts, installers and server-side code.
    public static let defaultDenyExtensions = [
        "exe", "dll", "scr", "com", "bat", "cmd", "ps1", "vbs", "js", "jse", "wsf", "hta", "jar", "msi", "php",
        "phtml", "phar", "sh", "elf", "so", "apk",
    ]

    /// `archive-inspect on|off`: off skips the inspection (explicit, per route or rule).
    public var inspect = true
    /// `archive-entries-max N`: entries in the archive, nested archives' included. Default 1000.
    public var entriesMax = 1000
    /// `archive-size-max SIZE`: total uncompressed bytes, really inflated. Default 1 GiB.
    public var sizeMax: UInt64 = 1 << 30
    /// `archive-ratio-max N`: uncompressed over compressed bytes, per entry and overall (zip bombs). Default 100.
    public var ratioMax = 100
    /// `archive-depth-max N`: 1 allows no archive inside, 2 one level of nesting… Default 2.
    public var depthMax = 2
    /// `archive-deny-extensions EXT…`: member extensions refused (every extension of the name counts, so
    /// `a.php.jpg` is refused for `php`); replaces the default list. `archive-deny-extensions none` empties it.
    public var denyExtensions: [String] = ArchiveSettings.defaultDenyExtensions
    /// `archive-allow encrypted`: encrypted members pass (their content cannot be inspected).
    public var allowEncrypted = false
    /// `archive-allow executables`: members sniffed as executables (ELF, PE, Mach-O, scripts) pass.
    public var allowExecutables = false

    public init() {}
}

/// Why an archive was refused: the violation kind is `archive_` and the snake_case name.
public enum ArchiveProblemKind: String, Sendable, Hashable, CaseIterable {
    case tooManyEntries = "too-many-entries"
    case tooLarge = "too-large"
    case bomb
    case tooDeep = "too-deep"
    case forbiddenMember = "forbidden-member"
    case executableMember = "executable-member"
    case encrypted
    case traversal
    case duplicate
    case mismatch
    case malformed

    public var status: Int {
        switch self {
        case .tooManyEntries, .tooLarge, .bomb, .tooDeep: return 413
        case .forbiddenMember, .executableMember, .encrypted: return 415
        case .traversal, .duplicate, .mismatch, .malformed: return 400
        }
    }
}
