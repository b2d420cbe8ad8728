/// The character lists and restricted filename patterns of a context: main, route, field or file rule. A route
/// starts from the main context's and a rule from its route's; a character list set in a context replaces the
/// outer one, `restricted-filenames` adds up (docs/rules.md, *Name and filename characters*).
public struct NameChecks: Sendable, Hashable {
    /// The directives that set these checks.
    static let directives: Set<String> = [
        "name-deny-chars", "name-allow-chars", "filename-deny-chars", "filename-allow-chars", "restricted-filenames",
    ]

    /// Characters of field and part names (multipart and urlencoded): `name_character`.
    public var nameCharacters = CharacterRule.defaultNames
    /// Characters of filenames: `filename_character`.
    public var filenameCharacters = CharacterRule.defaultFilenames
    /// `restricted-filenames` globs, added to the built-in restricted names.
    public var restrictedFilenames: [FilenamePattern] = []

    /// The defaults.
    public init() {}
}
