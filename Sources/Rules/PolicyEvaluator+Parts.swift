import Multipart

extension PolicyEvaluator {
    /// Starts part number `index` (0-based): counts, anomalies, rule lookup, repeat, filename,
    /// extension and declared type checks.
    ///
    /// `filename` is nil for a field (and for every urlencoded field); an empty filename is a
    /// browser's "no file chosen" and never satisfies `required`.
    public mutating func partBegin(index: Int, name: String?, filename: String?, declaredType: String?,
                                   anomalies: MultipartAnomalies) -> PartDecision {
        switch state {
        case .idle: return PartDecision(action: outOfOrder("partBegin before begin"), pending: [], mustHold: false)
        case .finished: return PartDecision(action: outOfOrder("partBegin after end"), pending: [], mustHold: false)
        case .inPart: return PartDecision(action: outOfOrder("partBegin inside a part"), pending: [], mustHold: false)
        case .rejected(let violation): return PartDecision(action: .reject(violation), pending: [], mustHold: false)
        case .receiving: break
        }
        guard let route = routeBox else {
            // Unreachable: `begin` sets the route before it leaves `.idle`.
            return PartDecision(action: outOfOrder("partBegin without a route"), pending: [], mustHold: false)
        }
        // Moved, not copied (`takeState`): a copy alive past this line would share the body's collections, and
        // the checks below that update them in place would copy them instead (a cost growing with the parts).
        var taken = takeState()
        guard case .receiving(let body) = taken else {
            state = taken
            return PartDecision(action: outOfOrder("partBegin lost its body"), pending: [], mustHold: false)
        }
        taken = .idle
        var part = Part(index: index, name: name, filename: filename, declaredType: declaredType)
        part.rule = Self.rule(in: route, forPart: name, isFile: filename != nil)
        state = .inPart(consume body, part)
        var decision = PartDecision(action: .forward, pending: [], filename: nil, mustHold: false)
        decision.flags = semanticFlags(of: part, route: route)
        let action = checkPartStart(route: route, part: &part, decision: &decision, anomalies: anomalies)
        if case .reject = action {
            return PartDecision(action: action, pending: [], mustHold: false, flags: decision.flags)
        }
        part.action = action
        replaceCurrentPart(with: part)
        decision.action = action
        decision.pending = pendingChecks(for: part, route: route)
        let laterAction = part.rule?.value.action ?? .reject
        // A `_charset_` field that `anomaly charset-field strip` may still leave out is held for its value too.
        decision.mustHold = !isMonitoring && decision.action == .forward && !decision.pending.isEmpty
            && (laterAction == .strip || laterAction == .quarantine
                || judgesCharsetValue(part, route: route) && route.value.anomalies[.charsetField] == .strip)
        return decision
    }

    /// Counts `count` data bytes of the current part; strips, quarantines or rejects once `max` is crossed.
    public mutating func partData(count: Int) -> Action {
        withPart("partData") { evaluator, part in
            part.size = part.size.addingSaturating(UInt64(clamping: count))
            guard !evaluator.isStripped(part) else { return .forward }
            guard let rule = part.rule, let max = rule.value.max, part.size > max, !part.sizeExceeded else { return .forward }
            part.sizeExceeded = true
            let violation = evaluator.partViolation(rule.value.kind == .file ? .fileTooLarge : .fieldTooLarge, part,
                                                    detail: ByteSize.exceeds(part.size, max), limit: max)
            return evaluator.violate(violation, Finding.Outcome(rule.value.action))
        }
    }

    /// Reports the type sniffed from the part's first bytes: checks `types` and the declared type.
    ///
    /// A type reported while the part has no data byte (`partData` not yet called, the sniffer's
    /// `application/x-empty` for an empty part) describes no content and is ignored: an empty file has
    /// nothing to match `types` against and nothing to contradict its declared type. The part stays
    /// unsniffed, so `partEnd` lets it pass only if it is still empty (see docs/rules.md, "Empty file parts").
    ///
    /// A stripped part (an `unknown strip` part, or one an earlier check stripped) goes nowhere, so its type
    /// is not checked: the type is recorded as sniffed and nothing else happens.
    public mutating func partSniffed(type sniffed: String) -> Action {
        partSniffed(SniffedContent(mimeType: sniffed))
    }

    /// Reports what was sniffed from the part's first bytes: checks `types`, `categories`, `labels`,
    /// `deny-embedded-markup` and the declared type. Missing facts (nil `label` or `category`) fail closed
    /// against a rule that names them. See `partSniffed(type:)` for empty and stripped parts.
    public mutating func partSniffed(_ content: SniffedContent) -> Action {
        let sniffed = content.mimeType
        guard let route = routeBox else { return outOfOrder("partSniffed before begin") }
        return withPart("partSniffed") { evaluator, part in
            guard part.size > 0 else { return .forward }
            part.sniffed = true
            guard part.isFile, !evaluator.isStripped(part) else { return .forward }
            let rule = part.rule
            let outcome = rule.map { Finding.Outcome($0.value.action) } ?? .reject
            var action = Action.forward
            if let rule, !rule.value.types.isEmpty, !Self.typesAllow(rule.value.types, sniffed) {
                let allowed = rule.value.types.map(\.description).joined(separator: " ")
                let violation = evaluator.partViolation(.typeNotAllowed, part,
                                                        detail: "sniffed \(Self.display(sniffed)) not in \(allowed)")
                action = evaluator.violate(violation, outcome)
                if case .reject = action { return action }
            }
            if let rule, let found = evaluator.sniffedContentViolation(rule, content, part) {
                let next = evaluator.violate(found, outcome)
                if case .reject = next { return next }
                if next.rank > action.rank { action = next }
            }
            let tolerated = rule?.value.allowTypeMismatch ?? route.value.allowTypeMismatch
            if !tolerated, let declared = part.declaredType,
               !MediaTypeCompatibility.compatible(declared: declared, sniffed: sniffed) {
                let violation = evaluator.partViolation(
                    .typeMismatch, part, rule: rule == nil ? route.value.location : nil,
                    detail: "declared \(Self.display(declared)), sniffed \(Self.display(sniffed))")
                let next = evaluator.violate(violation, outcome)
                if next.rank > action.rank { action = next }
            }
            return action
        }
    }

    /// The archive settings for the current file part: its rule's, else the route's (nil outside a file part). A
    /// rule whose `types` name an executable type (`application/x-elf`, `application/x-dosexec`,
    /// `application/x-mach-binary`) allows executable members too.
    public var currentArchiveSettings: ArchiveSettings? {
        guard case .inPart(_, let part) = state, part.isFile, let route = routeBox else { return nil }
        var settings = part.rule?.value.archive ?? route.value.archive
        if part.rule?.value.namesExecutable == true { settings.allowExecutables = true }
        return settings
    }

    /// The sniffed types of executables, as `types` names them.
    static let executableTypes = ["application/x-elf", "application/x-dosexec", "application/x-mach-binary"]
    /// `executableTypes` read once (`MediaTypePattern.essence`), not again for every file part.
    static let executableEssences = executableTypes.compactMap(MediaTypePattern.essence(of:))

    /// Reports what inspecting an archive file part found: a violation `archive_<problem>`, handled with the
    /// rule's action (a file without a rule: rejected).
    public mutating func partArchive(_ problem: ArchiveProblemKind, detail: String) -> Action {
        guard let route = routeBox else { return outOfOrder("partArchive before begin") }
        return withPart("partArchive") { evaluator, part in
            guard part.isFile, !evaluator.isStripped(part) else { return .forward }
            let outcome = part.rule.map { Finding.Outcome($0.value.action) } ?? .reject
            let violation = evaluator.partViolation(.archive(problem), part,
                                                    rule: part.rule == nil ? route.value.location : nil, detail: detail)
            return evaluator.violate(violation, outcome)
        }
    }

    /// Whether the current file part's content is scanned whole for markup, and how: nil when its rule does not
    /// say `deny-embedded-markup` (or outside a file part); else whether `<?` + whitespace counts as PHP
    /// (`php-short-tags`).
    public var currentMarkupScanShortTags: Bool? {
        guard case .inPart(_, let part) = state, part.isFile, let rule = part.rule, rule.value.denyEmbeddedMarkup
        else { return nil }
        return rule.value.phpShortTags
    }

    /// The whole-part scan found markup in the current file part (`deny-embedded-markup`): a violation
    /// `embedded_markup`, handled with the rule's action. `detail` names the sniffed type and the markup.
    public mutating func partMarkup(detail: String) -> Action {
        withPart("partMarkup") { evaluator, part in
            guard part.isFile, !evaluator.isStripped(part), let rule = part.rule, rule.value.denyEmbeddedMarkup else {
                return .forward
            }
            let violation = evaluator.partViolation(.embeddedMarkup, part, detail: detail)
            return evaluator.violate(violation, Finding.Outcome(rule.value.action))
        }
    }

    /// How the current file part's archive members' names are judged: by the filename checks its uploaded name gets
    /// (`FilenameCheck.refusal`), with the rule's (else the route's) `allow-filename`, `restricted-filenames` and
    /// `extensions` exemptions; nil outside a file part or under `filename allow`.
    public var currentMemberNameCheck: (@Sendable (String) -> String?)? {
        guard case .inPart(_, let part) = state, part.isFile, let route = routeBox else { return nil }
        let rule = part.rule
        guard (rule?.value.filename ?? route.value.filename) != .allow else { return nil }
        let allowed = rule?.value.allowedFilenameProblems ?? route.value.allowedFilenameProblems
        let restricted = rule?.value.nameChecks.restrictedFilenames ?? route.value.nameChecks.restrictedFilenames
        let extensions = rule?.value.extensions ?? []
        return { name in
            FilenameCheck.refusal(of: name, restricted: restricted, allowed: allowed,
                                  extensionAllowed: { extensions.contains("." + $0) })
        }
    }

    /// `max` on the current part's rule (nil: no rule, no `max`, or outside a part): the rule `partBegin` found,
    /// not looked up again.
    public var currentRuleMax: UInt64? {
        guard case .inPart(_, let part) = state else { return nil }
        return part.rule?.value.max
    }

    /// `disarm` on the current file part's rule (nil: none, or not a file).
    public var currentDisarm: DisarmMode? {
        guard case .inPart(_, let part) = state, part.isFile else { return nil }
        return part.rule?.value.disarm
    }

    /// A file to `disarm` could not be rewritten: a violation `disarm_failed`, handled with the rule's action.
    public mutating func partDisarmFailed(detail: String) -> Action {
        guard let route = routeBox else { return outOfOrder("partDisarmFailed before begin") }
        return withPart("partDisarmFailed") { evaluator, part in
            let outcome = part.rule.map { Finding.Outcome($0.value.action) } ?? .reject
            let violation = evaluator.partViolation(.disarmFailed, part, rule: part.rule == nil ? route.value.location : nil,
                                                    detail: detail)
            return evaluator.violate(violation, outcome)
        }
    }

    /// The antivirus found `signature` in the current file part: a violation `malware`, handled with the rule's
    /// action (reject or quarantine; `strip` drops the part). A file without a rule is rejected.
    public mutating func partMalware(signature: String) -> Action {
        guard let route = routeBox else { return outOfOrder("partMalware before begin") }
        return withPart("partMalware") { evaluator, part in
            let outcome = part.rule.map { Finding.Outcome($0.value.action) } ?? .reject
            let violation = evaluator.partViolation(.malware, part, rule: part.rule == nil ? route.value.location : nil,
                                                    detail: "\(signature) FOUND")
            return evaluator.violate(violation, outcome)
        }
    }

    /// Checks a complete field value against the rule's `pattern` (the proxy buffers it, bounded by `max`), a
    /// `_method` field's against the route's `methods` and a `_charset_` field's against its `part-charsets`.
    public mutating func fieldValue(_ value: some Collection<UInt8>) -> Action {
        withPart("fieldValue") { evaluator, part in
            part.valueChecked = true
            guard !evaluator.isStripped(part) else { return .forward }
            if part.name == PolicyEvaluator.methodParameter, let route = evaluator.routeBox,
               let violation = evaluator.methodFieldViolation(value, part: part, route: route) {
                return evaluator.violate(violation, .reject)
            }
            if let route = evaluator.routeBox, evaluator.judgesCharsetValue(part, route: route),
               !route.value.charsets.allows(value) {
                let shown = PolicyEvaluator.clipped(String(decoding: value, as: UTF8.self), to: 32)
                let action = evaluator.charsetFieldViolation(part, route: route,
                                                             detail: "'\(shown)' not in \(route.value.charsets)")
                if action != .forward { return action }
            }
            guard let rule = part.rule, let pattern = rule.value.pattern else { return .forward }
            return evaluator.checkPattern(pattern, value: Array(value), part: part, rule: rule)
        }
    }

    /// The flags `fieldValue` would raise for the current part's `value`, for the part's record: `charset-field`
    /// for a `_charset_` value outside the route's `part-charsets`.
    public func valueFlags(_ value: some Collection<UInt8>) -> MultipartAnomalies {
        guard case .inPart(_, let part) = state, let route = routeBox, judgesCharsetValue(part, route: route),
              !route.value.charsets.allows(value) else { return MultipartAnomalies() }
        return MultipartAnomalies([MultipartAnomaly.charsetField])
    }

    /// Ends the current part and returns its final action. Checks that could not run (no sniffed
    /// type for a typed file with data, no value for a patterned field) fail closed. An empty file part
    /// has no type to check; an empty filename ("no file chosen") never satisfies `required`.
    public mutating func partEnd() -> Action {
        switch state {
        case .idle, .finished, .receiving: return outOfOrder("partEnd outside a part")
        case .rejected(let violation): return .reject(violation)
        case .inPart: break
        }
        let closing = withPart("partEnd") { evaluator, part in evaluator.checkPartEnd(&part) }
        if case .reject = closing { return closing }
        // Taken (`satisfied` is then updated in place).
        var taken = takeState()
        guard case .inPart(var body, let part) = taken else {
            state = taken
            return outOfOrder("partEnd lost its part")
        }
        taken = .idle
        Self.own(&body)
        if let rule = part.rule, rule.value.required, rule.value.name != nil, part.action == .forward,
           !(part.isFile && part.filename?.isEmpty == true) {
            body.satisfied.insert(ObjectIdentifier(rule))
        }
        state = .receiving(consume body)
        return part.action
    }

    /// `Route.rule(forPart:isFile:)` on the route in its box: calling the method on `route.value` would copy
    /// the whole route first.
    static func rule(in route: RouteBox, forPart name: String?, isFile: Bool) -> Shared<PartRule>? {
        let named = isFile ? route.files : route.fields
        let other = isFile ? route.fields : route.files
        if let name {
            if let index = named.firstIndex(where: { $0.value.name == name }) { return named[index] }
            if other.contains(where: { $0.value.name == name }) { return nil }
        }
        return isFile ? route.otherFiles : route.otherFields
    }

    // MARK: - Checks

    private mutating func checkPartStart(route: RouteBox, part: inout Part, decision: inout PartDecision,
                                         anomalies: MultipartAnomalies) -> Action {
        var action = Action.forward
        func fold(_ next: Action) -> Bool {
            if next.rank > action.rank { action = next }
            if case .reject = next { return true }
            return false
        }
        // Counts: every part counts, whatever later happens to it.
        let limits = route.value.limits
        var counts = (parts: 0, kindCount: 0)
        let isFile = part.isFile
        counts = updateBodyInPart { body in
            body.parts += 1
            if isFile { body.files += 1 } else { body.fields += 1 }
            return (body.parts, isFile ? body.files : body.fields)
        } ?? counts
        if counts.parts > limits.partsMax {
            let violation = partViolation(.tooManyParts, part, rule: route.value.location,
                                          detail: "\(counts.parts) parts > \(limits.partsMax)",
                                          limit: UInt64(limits.partsMax))
            if fold(violate(violation, .reject)) { return action }
        }
        let kindLimit = part.isFile ? limits.filesMax : limits.fieldsMax
        if counts.kindCount > kindLimit {
            let noun = part.isFile ? "files" : "fields"
            let violation = partViolation(part.isFile ? .tooManyFiles : .tooManyFields, part, rule: route.value.location,
                                          detail: "\(counts.kindCount) \(noun) > \(kindLimit)",
                                          limit: UInt64(kindLimit))
            if fold(violate(violation, .reject)) { return action }
        }
        if fold(applyPartAnomalies(anomalies, route: route, part: part)) { return action }

        guard let rule = part.rule else {
            let described = part.name.map { "'\($0)'" } ?? "without a name"
            let noun = part.isFile ? "file" : "field"
            let violation = partViolation(.unknownPart, part, rule: route.value.location,
                                          detail: "no rule for \(noun) \(described)")
            switch route.value.unknownAction(isFile: part.isFile) {
            case .reject: if fold(violate(violation, .reject)) { return action }
            case .strip: _ = fold(violate(violation, .strip))
            case .allow: break
            }
            // A name of allowed ASCII is judged from the list's table alone: passing the list would copy it (see
            // `CharacterRule.asciiTable`).
            if action == .forward, let name = part.name,
               !route.value.nameChecks.nameCharacters.asciiTable.allowsAll(name),
               fold(checkName(part, route.value.nameChecks.nameCharacters,
                              references: route.value.nameChecks.characterReferences, rule: nil, outcome: .reject)) {
                return action
            }
            if part.isFile, action == .forward {
                if fold(checkFilename(part, handling: route.value.filename, allowed: route.value.allowedFilenameProblems,
                                      characters: route.value.nameChecks.filenameCharacters.asciiTable,
                                      fullCharacters: { route.value.nameChecks.filenameCharacters },
                                      references: route.value.nameChecks.characterReferences,
                                      restricted: route.value.nameChecks.restrictedFilenames, rule: nil,
                                      outcome: .reject, decision: &decision)) {
                    return action
                }
            }
            if action == .forward { _ = fold(applyPartAnomalies(decision.flags, route: route, part: part)) }
            return action
        }

        let outcome = Finding.Outcome(rule.value.action)
        // A named rule's parts all have its name: they are counted by the rule's identity, without building a key.
        // A `file *` or `field *` rule counts each name apart.
        let named = rule.value.name != nil
        let key = named ? "" : Self.key(rule.value.kind, part.name ?? "")
        if let seen = updateBodyInPart({ body -> Int in
            if named {
                return body.ruleRepeats.increment(ObjectIdentifier(rule))
            }
            // Room for a typical form's names at the first part (growing from empty resized the table at the
            // second), and one lookup for the count and its update.
            if body.repeats.isEmpty { body.repeats.reserveCapacity(8) }
            return Self.increment(&body.repeats[key, default: 0])
        }) {
            if seen > rule.value.repeatLimit {
                let violation = partViolation(.tooManyRepeats, part,
                                              detail: "'\(part.name ?? "")' given \(seen) times > \(rule.value.repeatLimit)",
                                              limit: UInt64(rule.value.repeatLimit))
                if fold(violate(violation, outcome)) { return action }
            } else if seen > 1, route.value.anomalies[.duplicateName] != .allow {
                // Repetition the rule allows is still recorded: frameworks read a repeated name differently.
                let violation = partViolation(.anomaly(.duplicateName), part, rule: route.value.location,
                                              detail: "'\(part.name ?? "")' given \(seen) times, allowed by repeat "
                                                + "\(rule.value.repeatLimit)")
                _ = violate(violation, .log)
            }
        }
        if let name = part.name, !rule.value.nameChecks.nameCharacters.asciiTable.allowsAll(name),
           fold(checkName(part, rule.value.nameChecks.nameCharacters,
                          references: rule.value.nameChecks.characterReferences, rule: rule, outcome: outcome)) {
            return action
        }
        // The semantic flags come after the name and filename checks, which are the operator's own lists and so
        // report a character first; a part they strip is gone and no later check judges it.
        func semanticChecks() -> Action {
            action == .forward ? applyPartAnomalies(decision.flags, route: route, part: part) : .forward
        }
        guard part.isFile, let filename = part.filename else {
            _ = fold(semanticChecks())
            return action
        }
        if fold(checkFilename(part, handling: rule.value.filename, allowed: rule.value.allowedFilenameProblems,
                              characters: rule.value.nameChecks.filenameCharacters.asciiTable,
                              fullCharacters: { rule.value.nameChecks.filenameCharacters },
                              references: rule.value.nameChecks.characterReferences,
                              restricted: rule.value.nameChecks.restrictedFilenames, rule: rule, outcome: outcome,
                              decision: &decision)) {
            return action
        }
        if fold(semanticChecks()) { return action }
        if case .strip = action { return action }
        let effectiveName = decision.filename ?? filename
        if !filename.isEmpty, !PartRule.allows(rule.value.extensions, effectiveName) {
            let ext = FilenameCheck.lastExtension(of: effectiveName).map { ".\($0)" } ?? "no extension"
            let violation = partViolation(.extensionNotAllowed, part,
                                          detail: "\(ext) not in \(rule.value.extensions.joined(separator: " "))")
            if fold(violate(violation, outcome)) { return action }
        }
        if !rule.value.types.isEmpty, let declared = part.declaredType, !MediaTypeCompatibility.isGeneric(declared),
           !Self.typesAllow(rule.value.types, declared) {
            let allowed = rule.value.types.map(\.description).joined(separator: " ")
            let violation = partViolation(.typeNotAllowed, part,
                                          detail: "declared \(Self.display(declared)) not in \(allowed)")
            if fold(violate(violation, outcome)) { return action }
        }
        return action
    }

    private mutating func applyPartAnomalies(_ flags: MultipartAnomalies, route: RouteBox, part: Part) -> Action {
        for flag in flags {
            guard let outcome = Self.anomalyOutcome(flag, route: route) else { continue }
            let violation = partViolation(.anomaly(flag), part, rule: route.value.location,
                                          detail: "\(flag.canStrip ? "anomaly" : "multipart anomaly") \(flag.name)")
            switch violate(violation, outcome) {
            case .reject(let violation): return .reject(violation)
            case .strip(let violation): return .strip(violation)
            case .forward, .quarantine: continue
            }
        }
        return .forward
    }

    /// The semantic flags of a part beginning: its name, filename and declared type, and whether its name repeats
    /// one seen before in this body. An exact repetition is `duplicate-name` for a part no rule names (a ruled
    /// part's is its rule's `repeat`); `a` meeting `a[b]`, in either order, is `name-collision`.
    ///
    /// A part no rule names that `unknown strip` drops never reaches the upstream: it raises nothing.
    private mutating func semanticFlags(of part: Part, route: RouteBox) -> MultipartAnomalies {
        if part.rule == nil, route.value.unknownAction(isFile: part.isFile) == .strip { return MultipartAnomalies() }
        let reading = part.name.map(FormNameMeaning.read)
        var flags = FormNameMeaning.flags(name: reading, filename: part.filename, contentType: part.declaredType,
                                          charsets: route.value.charsets)
        // The registry grows in place instead of being copied for every part (`updateBodyInPart`).
        let isFile = part.isFile
        guard let reading, let found = updateBodyInPart({ $0.names.register(reading, isFile: isFile) }) else {
            return flags
        }
        if found.collides { flags.insert(.nameCollision) }
        if found.repeated && part.rule == nil { flags.insert(.duplicateName) }
        if !part.isFile, !queryNames.isEmpty,
           queryNames.contains(reading.name) || queryNames.contains(String(reading.base)) {
            flags.insert(.queryCollision)
        }
        return flags
    }

    /// Judges the text of the current field, all of it: `text` says whether it is UTF-8 (else
    /// `invalid-utf8-value`) and whether it starts with a byte order mark (`byte-order-mark`). Files are not
    /// judged.
    public mutating func fieldText(_ text: UTF8Validity) -> Action {
        guard let route = routeBox else { return outOfOrder("fieldText before begin") }
        return withPart("fieldText") { evaluator, part in
            guard !part.isFile, !evaluator.isStripped(part) else { return .forward }
            var action = Action.forward
            for (flag, found) in [(MultipartAnomaly.invalidUTF8Value, !text.isComplete),
                                  (.byteOrderMark, text.startsWithByteOrderMark)] where found {
                guard let outcome = PolicyEvaluator.anomalyOutcome(flag, route: route) else { continue }
                let violation = evaluator.partViolation(.anomaly(flag), part, rule: route.value.location,
                                                        detail: "anomaly \(flag.name)")
                action = evaluator.violate(violation, outcome)
                if case .reject = action { return action }
            }
            return action
        }
    }

    /// The flags `fieldText` would raise for `text`, for the part's record.
    public static func textFlags(_ text: UTF8Validity) -> MultipartAnomalies {
        var flags = MultipartAnomalies()
        if !text.isComplete { flags.insert(.invalidUTF8Value) }
        if text.startsWithByteOrderMark { flags.insert(.byteOrderMark) }
        return flags
    }

    /// The filename checks: the problems `FilenameCheck` finds (less those `allowed`), sanitised or judged, then the
    /// filename character list. The lists come one by one: passing the whole `NameChecks` copied all of them. The
    /// character list comes as its ASCII table, and itself (`fullCharacters`) only for a filename the table cannot
    /// judge alone.
    private mutating func checkFilename(_ part: Part, handling: FilenameHandling, allowed: Set<FilenameProblem>,
                                        characters: CharacterRule.ASCIITable, fullCharacters: () -> CharacterRule,
                                        references: NameChecks.CharacterReferences, restricted: [FilenamePattern],
                                        rule: Shared<PartRule>?, outcome: Finding.Outcome,
                                        decision: inout PartDecision) -> Action {
        guard handling != .allow, let filename = part.filename, !filename.isEmpty else { return .forward }
        func exempt(_ ext: String) -> Bool { rule?.value.extensions.contains("." + ext) ?? false }
        var problems = FilenameCheck.problems(in: filename, restricted: restricted, extensionAllowed: exempt)
        if !allowed.isEmpty { problems.removeAll { allowed.contains($0) } }
        // The name that goes upstream: the sanitised one once sanitising changed something.
        var judged = filename
        if handling == .sanitize {
            let fixable = problems.filter(\.isSanitizable)
            if !fixable.isEmpty {
                let sanitized = FilenameCheck.sanitize(filename.utf8)
                judged = sanitized
                for problem in fixable {
                    let violation = partViolation(.filename(problem), part, rule: rule?.value.location,
                                                  detail: "filename sanitized to '\(sanitized)'")
                    _ = violate(violation, .sanitize)
                }
                if !isMonitoring { decision.filename = sanitized }
                // Sanitising cannot fix a dangerous extension or a restricted name, and may uncover one
                // (`web\u{0}.config` becomes `web.config`).
                let after = FilenameCheck.problems(in: sanitized, restricted: restricted,
                                                   extensionAllowed: exempt)
                problems = problems.filter { !$0.isSanitizable }
                for problem in after where !problem.isSanitizable && !allowed.contains(problem)
                    && !problems.contains(problem) {
                    problems.append(problem)
                }
            }
        }
        var action = Action.forward
        for problem in problems {
            var detail = "filename has \(problem.name)"
            switch problem {
            case .dangerousExtension:
                if let ext = FilenameCheck.firstDangerousExtension(of: FilenameCheck.baseName(of: judged),
                                                                   extensionAllowed: exempt) {
                    detail = "dangerous extension .\(ext)"
                }
            case .restrictedName:
                if let reason = FilenameCheck.restriction(of: judged, patterns: restricted) { detail = reason }
            default:
                break
            }
            let next = violate(partViolation(.filename(problem), part, rule: rule?.value.location, detail: detail), outcome)
            if next.rank > action.rank { action = next }
            if case .reject = next { return next }
        }
        // A filename of allowed ASCII is judged from the list's table alone; only another one reads the list
        // itself (`fullCharacters`: passing the list would copy it, see `CharacterRule.asciiTable`).
        guard !characters.allowsAll(judged) else { return action }
        let next = checkCharacters(judged, fullCharacters(), references: references, kind: .filenameCharacter,
                                   part: part, rule: rule, outcome: outcome, skip: Self.ownedByFilenameProblems)
        if next.rank > action.rank { action = next }
        return action
    }

    private mutating func checkPartEnd(_ part: inout Part) -> Action {
        // A `_charset_` value too long to hold was never judged: it names no charset.
        if !part.valueChecked, !isStripped(part), let route = routeBox, judgesCharsetValue(part, route: route) {
            part.valueChecked = true
            let action = charsetFieldViolation(part, route: route, detail: "value was not checked")
            if action != .forward { return action }
        }
        guard let rule = part.rule, !isStripped(part) else { return .forward }
        let outcome = Finding.Outcome(rule.value.action)
        // `min` / `not-empty`: judged at the end, when the size is known. "No file chosen" (an empty filename and
        // no data) is not a file, so it has no floor; `required` is what insists on a file.
        let noFileChosen = part.isFile && part.filename?.isEmpty == true && part.size == 0
        if let min = rule.value.min, part.size < min, !noFileChosen {
            let detail = part.size == 0 ? "\(rule.value.kind.rawValue) is empty" : "\(part.size) B < \(min) B"
            let violation = partViolation(rule.value.kind == .file ? .fileTooSmall : .fieldTooSmall, part,
                                          detail: min == 1 && part.size == 0 ? detail + " (not-empty)" : detail,
                                          limit: min)
            let action = violate(violation, outcome)
            if action != .forward { return action }
        }
        // An empty file ("no file chosen" or a named 0-byte file) has no content to sniff.
        if part.isFile, rule.value.judgesSniffedContent, !part.sniffed, part.size > 0 {
            let violation = partViolation(.typeNotAllowed, part, detail: "content type was not sniffed")
            return violate(violation, outcome)
        }
        if let pattern = rule.value.pattern, !part.isFile, !part.valueChecked {
            part.valueChecked = true
            guard part.size == 0 else {
                return violate(partViolation(.patternMismatch, part, detail: "value was not checked"), outcome)
            }
            return checkPattern(pattern, value: [], part: part, rule: rule)
        }
        return .forward
    }

    private mutating func checkPattern(_ pattern: FieldPattern, value: [UInt8], part: Part, rule: Shared<PartRule>) -> Action {
        let outcome = Finding.Outcome(rule.value.action)
        guard let text = String(validating: value, as: UTF8.self) else {
            return violate(partViolation(.patternMismatch, part, detail: "value is not valid UTF-8"), outcome)
        }
        let expression = regex(for: pattern)
        let matched: Bool
        do {
            matched = try expression.firstMatch(in: text) != nil
        } catch {
            matched = false
        }
        guard !matched else { return .forward }
        return violate(partViolation(.patternMismatch, part, detail: "value does not match \(pattern.source)"), outcome)
    }

    private func pendingChecks(for part: Part, route: RouteBox) -> PendingChecks {
        var pending: PendingChecks = []
        if !part.isFile, route.value.methods != nil, part.name == PolicyEvaluator.methodParameter {
            pending.insert(.value)
        }
        if judgesCharsetValue(part, route: route) { pending.insert(.value) }
        guard let rule = part.rule else {
            if part.isFile, !route.value.allowTypeMismatch, part.declaredType.map(MediaTypeCompatibility.isGeneric) == false {
                pending.insert(.type)
            }
            return pending
        }
        if rule.value.max != nil || rule.value.min != nil { pending.insert(.size) }
        if part.isFile, rule.value.judgesSniffedContent
            || (!rule.value.allowTypeMismatch && part.declaredType.map(MediaTypeCompatibility.isGeneric) == false) {
            pending.insert(.type)
        }
        if !part.isFile, rule.value.pattern != nil { pending.insert(.value) }
        return pending
    }

    /// A `_method` form field names the method Symfony (with `enableHttpMethodParameterOverride`, which Laravel
    /// turns on) and Rack's MethodOverride (Rails, Sinatra) then route a POST by: its value, uppercased, must be
    /// one of the route's `methods`, like the method-override fields (`overriddenMethodNotAllowed`).
    func methodFieldViolation(_ value: some Collection<UInt8>, part: Part, route: RouteBox) -> Violation? {
        guard let methods = route.value.methods,
              let detail = PolicyEvaluator.unlistedOverride(String(decoding: value, as: UTF8.self),
                                                            from: "the \(PolicyEvaluator.methodParameter) field",
                                                            methods)
        else { return nil }
        return partViolation(.methodNotAllowed, part, rule: route.value.location, detail: detail)
    }

    /// Whether `part` is a `_charset_` field whose value `fieldValue` judges against the route's `part-charsets`
    /// (`charset-field`; not when the route allows the flag).
    func judgesCharsetValue(_ part: Part, route: RouteBox) -> Bool {
        guard !part.isFile, let name = part.name, FormNameMeaning.isCharsetField(name) else { return false }
        return route.value.anomalies[.charsetField] != .allow
    }

    /// A `_charset_` field whose value is not an allowed charset: `charset-field`, handled as the route says.
    private mutating func charsetFieldViolation(_ part: Part, route: RouteBox, detail: String) -> Action {
        guard let outcome = Self.anomalyOutcome(.charsetField, route: route) else { return .forward }
        let violation = partViolation(.anomaly(.charsetField), part, rule: route.value.location,
                                      detail: "anomaly charset-field: _charset_ " + detail)
        return violate(violation, outcome)
    }

    /// How a flag found in a part is handled on `route`; nil when the route allows it.
    static func anomalyOutcome(_ flag: MultipartAnomaly, route: RouteBox) -> Finding.Outcome? {
        switch route.value.anomalies[flag] {
        case .allow: return nil
        case .log: return .log
        case .reject: return .reject
        case .strip: return flag.canStrip ? .strip : .reject
        }
    }

    // MARK: - Helpers

    /// The first `categories`, `labels` or `deny-embedded-markup` violation of `content`, if any.
    private func sniffedContentViolation(_ rule: Shared<PartRule>, _ content: SniffedContent, _ part: Part) -> Violation? {
        if rule.value.denyEmbeddedMarkup, let markup = content.embeddedMarkup {
            let what = content.label ?? Self.display(content.mimeType)
            return partViolation(.embeddedMarkup, part, detail: "sniffed \(what) carrying \(markup)")
        }
        if !rule.value.categories.isEmpty, !(content.category.map(rule.value.categories.contains) ?? false) {
            return partViolation(.sniffedNotAllowed, part,
                                 detail: "sniffed category \(content.category ?? "(none)") not in "
                                     + rule.value.categories.joined(separator: " "))
        }
        if !rule.value.labels.isEmpty, !(content.label.map(rule.value.labels.contains) ?? false) {
            return partViolation(.sniffedNotAllowed, part,
                                 detail: "sniffed label \(content.label ?? "(none)") not in "
                                     + rule.value.labels.joined(separator: " "))
        }
        return nil
    }

    /// Runs `work` on the current part and folds its action into the part's action.
    private mutating func withPart(_ call: String, _ work: (inout PolicyEvaluator, inout Part) -> Action) -> Action {
        switch state {
        case .idle, .finished, .receiving:
            return outOfOrder(call + " outside a part")
        case .rejected(let violation):
            return .reject(violation)
        case .inPart:
            break
        }
        // Moved out and back (`takeState`): the checks see `.idle` and never read the state, except a rejection
        // they set, which stays.
        var taken = takeState()
        guard case .inPart(let body, var part) = taken else {
            state = taken
            return outOfOrder(call + " lost its part")
        }
        taken = .idle
        Self.own(&part)
        let action = work(&self, &part)
        if case .rejected(let violation) = state { return .reject(violation) }
        if action.rank > part.action.rank { part.action = action }
        let result = part.action
        state = .inPart(consume body, part)
        return result
    }

    /// Whether the part is (or, in monitor mode, would be) stripped: it goes nowhere, so later checks on its
    /// size, type and value do not apply.
    func isStripped(_ part: Part) -> Bool {
        if case .strip = part.action { return true }
        return isMonitoring
            && findings.contains { $0.outcome == .strip && $0.violation.partIndex == part.index }
    }

    func partViolation(_ kind: ViolationKind, _ part: Part, rule: SourceLocation? = nil, detail: String,
                               limit: UInt64? = nil) -> Violation {
        // A rule's `status` applies to the violations of that rule, not to route-level ones (counts, anomalies).
        let ownRule = rule == nil || rule == part.rule?.value.location
        return Violation(kind: kind, part: part.name, partIndex: part.index, rule: rule ?? part.rule?.value.location,
                         detail: detail, limit: limit, statusOverride: ownRule ? part.rule?.value.status : nil)
    }

    /// Adds one to `count` and returns it (through `Dictionary`'s defaulted subscript: one lookup).
    static func increment(_ count: inout Int) -> Int {
        count += 1
        return count
    }

    /// Whether `types` allow `mediaType`, as sent or under its canonical alias (`image/jpg` = `image/jpeg`).
    static func typesAllow(_ types: [MediaTypePattern], _ mediaType: String) -> Bool {
        MediaTypePattern.any(types, match: mediaType)
            || MediaTypeCompatibility.canonical(mediaType).map { MediaTypePattern.any(types, match: $0) } == true
    }

    static func display(_ mediaType: String) -> String {
        MediaTypePattern.essence(of: mediaType).map { "\($0.type)/\($0.subtype)" } ?? "'\(mediaType)'"
    }
}

extension PolicyEvaluator.Finding.Outcome {
    init(_ action: RuleAction) {
        switch action {
        case .reject: self = .reject
        case .strip: self = .strip
        case .quarantine: self = .quarantine
        case .log: self = .log
        }
    }
}
