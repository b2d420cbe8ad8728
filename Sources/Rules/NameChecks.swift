/// The character lists and restricted filename patterns of a context: main, route, field or file rule. A route
/// starts from the main context's and a rule from its route's; a character list set in a context replaces the
/// outer one, `restricted-filenames` adds up (docs/rules.md, *Name and filename characters*).
public struct NameChecks: Sendable, Hashable {
    /// The directives that set these checks.
    static let directives: Set<String> = [
        "name-deny-chars", "name-allow-chars", "filename-deny-chars", "filename-allow-chars", "restricted-filenames",
        "character-references",
    ]

    /// Characters of field and part names (multipart and urlencoded): `name_character`.
    public var nameCharacters = CharacterRule.defaultNames
    /// Characters of filenames: `filename_character`.
    public var filenameCharacters = CharacterRule.defaultFilenames
    /// `restricted-filenames` globs, added to the built-in restricted names.
    public var restrictedFilenames: [FilenamePattern] = []
    /// `character-references`: whether a `;` that ends a well-formed HTML character reference (`&auml;`,
    /// `&#228;`, `&#xE4;`) in a name or filename is exempt from both character lists.
    public var characterReferences = CharacterReferences.allow

    /// The `character-references` setting.
    public enum CharacterReferences: String, Sendable, Hashable, CaseIterable {
        /// A `;` ending a reference is not judged by the character lists (the default, as CRS 920120).
        case allow
        /// Every `;` is judged like any other character.
        case reject
    }

    /// The defaults.
    public init() {}
}
