extension RuleCompiler {
    /// One `name-*-chars`, `filename-*-chars`, `character-references` or `restricted-filenames` statement.
    mutating func nameCheckSetting(_ statement: RuleStatement, _ directive: RuleDirective,
                                   into checks: inout NameChecks) {
        switch directive.name {
        case "restricted-filenames":
            for token in statement.arguments {
                guard let pattern = FilenamePattern(token.text) else {
                    error(at: token, "invalid restricted filename pattern '\(token.text)': expected a base name with "
                        + "optional '*' and '?' (\"*.bak\", \"id_rsa*\"), without '/', '\\' or control characters")
                    continue
                }
                if !checks.restrictedFilenames.contains(pattern) { checks.restrictedFilenames.append(pattern) }
            }
        case "name-deny-chars", "name-allow-chars", "filename-deny-chars", "filename-allow-chars":
            let mode: CharacterRule.Mode = directive.name.hasSuffix("-allow-chars") ? .allow : .deny
            guard let list = characterRule(statement, mode: mode) else { return }
            if directive.name.hasPrefix("filename-") {
                checks.filenameCharacters = list
            } else {
                checks.nameCharacters = list
            }
        case "character-references":
            if let setting: NameChecks.CharacterReferences = keyword(statement.arguments[0],
                                                                     what: "character-references setting") {
                checks.characterReferences = setting
            }
        default:
            break
        }
    }

    /// The class words of a character list.
    static let characterClasses = ["controls", "bidi", "none"]

    private mutating func characterRule(_ statement: RuleStatement, mode: CharacterRule.Mode) -> CharacterRule? {
        var rule = CharacterRule(mode: mode)
        var valid = true
        let arguments = statement.arguments
        for token in arguments {
            switch (token.kind, token.text) {
            case (.word, "controls"):
                rule.controls = true
            case (.word, "bidi"):
                rule.bidi = true
            case (.word, "none"):
                if arguments.count > 1 {
                    error(at: token, "'none' empties the list and stands alone in '\(statement.name.text)'")
                    valid = false
                } else if mode == .allow {
                    error(at: token, "'\(statement.name.text) none' would refuse every character; write "
                        + "'\(statement.name.text.hasPrefix("filename-") ? "filename" : "name")-deny-chars none' "
                        + "to turn the check off")
                    valid = false
                }
            case (.string, _):
                guard let ranges = CharacterRule.parseRanges(token.text) else {
                    error(at: token, "invalid character list \"\(token.text)\" for '\(statement.name.text)': "
                        + "expected characters and ranges such as \"a-zA-Z0-9_-\" (a range runs upwards; '-' "
                        + "first or last is itself)")
                    valid = false
                    continue
                }
                rule.ranges += ranges
            default:
                error(at: token, "unknown character class '\(token.text)' for '\(statement.name.text)': expected a "
                    + "quoted list of characters, controls, bidi or none"
                    + Self.suggestion(for: token.text, among: Self.characterClasses))
                valid = false
            }
        }
        return valid ? rule : nil
    }

    /// A deny list and an allow list for the same thing in one block contradict each other.
    mutating func checkCharacterListConflicts(_ block: [RuleStatement]) {
        for subject in ["name", "filename"] {
            let deny = block.first { $0.name.text == subject + "-deny-chars" }
            guard deny != nil, let allow = block.first(where: { $0.name.text == subject + "-allow-chars" }) else {
                continue
            }
            error(at: allow.name, "'\(subject)-allow-chars' and '\(subject)-deny-chars' in the same block: "
                + "choose one (an allow list already refuses everything it does not name)")
        }
    }
}
