extension PolicyEvaluator {
    /// Characters a built-in filename problem already reports (`control-characters`, `bidi-controls`,
    /// `path-separators`, and U+FFFD standing for `invalid-utf8`): `filename_character` never reports them again.
    static func ownedByFilenameProblems(_ scalar: Unicode.Scalar) -> Bool {
        FilenameCheck.isControl(scalar) || FilenameCheck.isBidiControl(scalar)
            || scalar == "/" || scalar == "\\" || scalar == "\u{FFFD}"
    }

    /// `name_character`: the part's name (a multipart part's `name`, a urlencoded field's decoded name) against
    /// the context's name character list (`NameChecks.nameCharacters`, passed alone: passing the whole `NameChecks`
    /// copied all its lists), a `;` ending a character reference exempt when `references` says so. A part without
    /// a name has nothing to judge.
    mutating func checkName(_ part: Part, _ characters: CharacterRule, references: NameChecks.CharacterReferences,
                            rule: Shared<PartRule>?, outcome: Finding.Outcome) -> Action {
        guard let name = part.name else { return .forward }
        return checkCharacters(name, characters, references: references, kind: .nameCharacter, part: part,
                               rule: rule, outcome: outcome, skip: { _ in false })
    }

    /// The first character of `text` that `list` refuses, as a violation of `kind` handled with `outcome`.
    mutating func checkCharacters(_ text: String, _ list: CharacterRule, references: NameChecks.CharacterReferences,
                                  kind: ViolationKind, part: Part, rule: Shared<PartRule>?, outcome: Finding.Outcome,
                                  skip: (Unicode.Scalar) -> Bool) -> Action {
        guard let (scalar, position) = list.firstRefused(in: text, references: references == .allow, skip: skip)
        else { return .forward }
        let subject = kind == .nameCharacter ? "name" : "filename"
        let verdict = list.mode == .deny ? "is denied" : "is not in the allowed characters"
        let detail = "\(subject) character \(CharacterRule.display(scalar)) at position \(position) \(verdict)"
        let route = self.routeBox?.value.location
        return violate(partViolation(kind, part, rule: rule?.value.location ?? route, detail: detail), outcome)
    }
}
