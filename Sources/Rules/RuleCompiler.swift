import Multipart

/// Checks statements against `RuleDirective.table` and builds the `Policy`.
///
/// The main context is read first (so its limits are defaults for every route wherever they are
/// written), then each route, its settings first and its part rules second (so rules inherit the
/// route's filename settings wherever they are written).
struct RuleCompiler {
    var diagnostics: [Diagnostic] = []

    mutating func compile(_ statements: [RuleStatement]) -> Policy {
        var policy = Policy()
        var defaults = Route(prefix: "/", location: nil)
        var seen: [String: SourceLocation] = [:]
        var anomalySeen: [MultipartAnomaly: SourceLocation] = [:]
        var routeStatements: [RuleStatement] = []
        for statement in statements {
            guard let directive = validate(statement, in: .main, seen: &seen) else { continue }
            switch directive.name {
            case "route":
                routeStatements.append(statement)
            case "mode":
                if let mode: PolicyMode = keyword(statement.arguments[0], what: "mode") { policy.mode = mode }
            case "anomaly":
                if let (flag, action) = anomaly(statement, seen: &anomalySeen) { policy.anomalies[flag] = action }
            case "ambiguous-paths":
                if let value: AmbiguousPaths = keyword(statement.arguments[0], what: "ambiguous-paths setting") {
                    policy.ambiguousPaths = value
                }
            default:
                routeSetting(statement, directive, into: &defaults)
            }
        }
        checkCharacterListConflicts(statements)
        defaults.anomalies = policy.anomalies
        policy.fallback = Policy.implicitFallback(defaults: defaults)

        var routes: [Route] = []
        var keys: [RouteKey: (text: String, location: SourceLocation)] = [:]
        for statement in routeStatements {
            guard let route = compileRoute(statement, defaults: defaults) else { continue }
            let pathToken = statement.arguments[statement.arguments.count - 1]
            let text = statement.arguments.map(\.text).joined(separator: " ")
            let key = RouteKey(route)
            if let first = keys[key] {
                let hosts = route.hosts.map { " for host " + $0.map(\.description).sorted().joined(separator: " ") } ?? ""
                let message = first.text == text
                    ? "duplicate route '\(text)'\(hosts) (first defined at \(first.location))"
                    : "route '\(text)' is shadowed by route '\(first.text)' at \(first.location) "
                        + "(both normalise to '\(key.description)')\(hosts)"
                diagnostics.append(Diagnostic(.error, at: pathToken.location, message))
                continue
            }
            keys[key] = (text, statement.location)
            routes.append(route)
        }
        policy.routes = routes
        if let root = routes.first(where: { $0.prefix == "/" && $0.match == .prefix && $0.hosts == nil }) {
            policy.fallback = root
        }
        return policy
    }

    // MARK: - Statements

    /// Checks name, context, argument count and block; records unique directives in `seen`.
    private mutating func validate(_ statement: RuleStatement, in context: RuleDirective.Context,
                                   seen: inout [String: SourceLocation]) -> RuleDirective? {
        let name = statement.name.text
        guard let directive = RuleDirective.named(name) else {
            let hint = Self.suggestion(for: name, among: RuleDirective.names)
            error(at: statement.name, "unknown directive '\(name)'" + hint)
            return nil
        }
        guard directive.contexts.contains(context) else {
            let allowed = RuleDirective.Context.allCases.filter(directive.contexts.contains).map(\.rawValue)
            error(at: statement.name, "'\(name)' is not allowed in \(context.rawValue) context "
                + "(allowed in: \(allowed.joined(separator: ", ")))")
            return nil
        }
        let count = statement.arguments.count
        guard directive.arguments.contains(count) else {
            let bounds = directive.arguments
            let expected = bounds.lowerBound == bounds.upperBound
                ? (bounds.lowerBound == 0 ? "takes no arguments" : "takes exactly \(bounds.lowerBound) argument"
                    + (bounds.lowerBound == 1 ? "" : "s"))
                : bounds.upperBound == RuleDirective.many
                    ? "takes at least \(bounds.lowerBound) argument" + (bounds.lowerBound == 1 ? "" : "s")
                    : "takes \(bounds.lowerBound) to \(bounds.upperBound) arguments"
            error(at: statement.name, "'\(name)' \(expected), got \(count)")
            return nil
        }
        switch (directive.block, statement.block) {
        case (.none, .some):
            error(at: statement.name, "'\(name)' does not take a block")
            return nil
        case (.required, .none):
            error(at: statement.name, "'\(name)' needs a { … } block")
            return nil
        default:
            break
        }
        if directive.unique {
            if let first = seen[name] {
                error(at: statement.name, "duplicate '\(name)' (first set at \(first))")
                return nil
            }
            seen[name] = statement.location
        }
        return directive
    }

    /// Settings valid in both the main context (as defaults) and a route.
    /// One `archive-*` directive, in the main context, a route or a file rule.
    private mutating func archiveSetting(_ statement: RuleStatement, _ directive: RuleDirective,
                                         into archive: inout ArchiveSettings) {
        let arguments = statement.arguments
        switch directive.name {
        case "archive-inspect":
            switch arguments[0].text {
            case "on": archive.inspect = true
            case "off": archive.inspect = false
            default: error(at: arguments[0], "archive-inspect takes on or off, got '\(arguments[0].text)'")
            }
        case "archive-entries-max":
            if let value = number(arguments[0], directive) { archive.entriesMax = Int(value) }
        case "archive-size-max":
            if let value = size(arguments[0], directive) { archive.sizeMax = value }
        case "archive-ratio-max":
            if let value = number(arguments[0], directive) { archive.ratioMax = Int(value) }
        case "archive-depth-max":
            if let value = number(arguments[0], directive) { archive.depthMax = Int(value) }
        case "archive-deny-extensions":
            if arguments.count == 1 && arguments[0].text == "none" {
                archive.denyExtensions = []
            } else {
                archive.denyExtensions = arguments.map { $0.text.lowercased().trimmingPrefixDot() }
            }
        case "archive-allow":
            for argument in arguments {
                switch argument.text {
                case "encrypted": archive.allowEncrypted = true
                case "executables": archive.allowExecutables = true
                default: error(at: argument, "archive-allow takes encrypted and/or executables, got '\(argument.text)'")
                }
            }
        default:
            break
        }
    }

    private mutating func routeSetting(_ statement: RuleStatement, _ directive: RuleDirective,
                                       into route: inout Route) {
        let arguments = statement.arguments
        switch directive.name {
        case "body-max":
            if let size = size(arguments[0], directive) { route.limits.bodyMax = size }
        case "parts-max":
            if let value = number(arguments[0], directive) { route.limits.partsMax = Int(value) }
        case "files-max":
            if let value = number(arguments[0], directive) { route.limits.filesMax = Int(value) }
        case "fields-max":
            if let value = number(arguments[0], directive) { route.limits.fieldsMax = Int(value) }
        case "unknown":
            if let action: UnknownAction = keyword(arguments[0], what: "action") { route.unknown = action }
        case "unknown-fields":
            if let action: UnknownAction = keyword(arguments[0], what: "action") { route.unknownFields = action }
        case "unknown-files":
            if let action: UnknownAction = keyword(arguments[0], what: "action") { route.unknownFiles = action }
        case "upstream-body":
            if let mode: UpstreamBodyMode = keyword(arguments[0], what: "upstream body mode") {
                route.upstreamBody = mode
            }
        case "modified-header":
            if arguments[0].text == "off" {
                route.modifiedHeader = nil
            } else if let name = headerName(arguments[0]) {
                route.modifiedHeader = name
            }
        case "preflight":
            if let mode: PreflightMode = keyword(arguments[0], what: "preflight mode") { route.preflight = mode }
        case _ where directive.name.hasPrefix("archive-"):
            archiveSetting(statement, directive, into: &route.archive)
        case _ where NameChecks.directives.contains(directive.name):
            nameCheckSetting(statement, directive, into: &route.nameChecks)
        case "encodings-max":
            if let value = number(arguments[0], directive) { route.encodingsMax = Int(value) }
        case "compression-ratio-max":
            if let value = number(arguments[0], directive) { route.compressionRatioMax = Int(value) }
        case "unknown-encoding":
            if let mode: UnknownEncodingMode = keyword(arguments[0], what: "unknown-encoding mode") {
                route.unknownEncoding = mode
            }
        case "part-charsets":
            if let charsets = partCharsets(arguments) { route.charsets = charsets }
        case "filename":
            if let handling: FilenameHandling = keyword(arguments[0], what: "filename handling") {
                route.filename = handling
            }
        case "allow-filename":
            route.allowedFilenameProblems.formUnion(filenameProblems(arguments))
        case "allow-type-mismatch":
            route.allowTypeMismatch = true
        case "methods":
            route.methods = methods(arguments)
        case "content-types":
            route.contentTypes = mediaTypes(arguments)
        default:
            // Unreachable from requests: rule files only; the directive table and handlers are tested together.
            preconditionFailure("directive '\(directive.name)' validated for a context it has no handler in")
        }
    }

    /// The names of a `part-charsets` statement; nil (after an error) when one cannot name a charset. A charset
    /// that writes ASCII characters as other bytes (UTF-7, UTF-16, EBCDIC…) is a warning.
    private mutating func partCharsets(_ arguments: [RuleToken]) -> PartCharsets? {
        var valid = true
        for token in arguments {
            if !PartCharsets.isValidName(token.text) {
                error(at: token, "invalid charset name '\(token.text)' for 'part-charsets': expected 1 to "
                    + "\(PartCharsets.maximumNameLength) letters, digits or ! # $ % & ' + - ^ _ ` { } ~ "
                    + "(utf-8, iso-8859-1)")
                valid = false
            } else if PartCharsets.writingASCIIOtherwise.contains(token.text.lowercased()) {
                diagnostics.append(Diagnostic(.warning, at: token.location,
                    "'part-charsets' allows \(token.text), which writes ASCII characters as other bytes: a value in it "
                        + "can carry markup or quotes that no check reading ASCII sees"))
            }
        }
        return valid ? PartCharsets(arguments.map(\.text)) : nil
    }

    private mutating func anomaly(
        _ statement: RuleStatement, seen: inout [MultipartAnomaly: SourceLocation]
    ) -> (MultipartAnomaly, AnomalyAction)? {
        let nameToken = statement.arguments[0]
        guard let flag = MultipartAnomaly(name: nameToken.text) else {
            error(at: nameToken, "unknown anomaly '\(nameToken.text)'"
                + Self.suggestion(for: nameToken.text, among: MultipartAnomaly.allCases.map(\.name)))
            return nil
        }
        guard let action: AnomalyAction = keyword(statement.arguments[1], what: "action") else { return nil }
        if action == .strip, !flag.canStrip {
            let strippable = MultipartAnomaly.allCases.filter(\.canStrip).map(\.name).joined(separator: ", ")
            error(at: statement.arguments[1], "'strip' is not an action for anomaly '\(flag.name)': only a part's "
                + "name, filename or type flags can strip it before its data flows (\(strippable))")
            return nil
        }
        if let first = seen[flag] {
            error(at: statement.name, "duplicate 'anomaly \(flag.name)' (first set at \(first))")
            return nil
        }
        seen[flag] = statement.location
        return (flag, action)
    }

    // MARK: - Routes and part rules

    private mutating func compileRoute(_ statement: RuleStatement, defaults: Route) -> Route? {
        let isExact = statement.arguments.count == 2
        if isExact, statement.arguments[0].text != "=" || statement.arguments[0].kind != .word {
            error(at: statement.arguments[0], "expected 'route <path> { … }' or 'route = <path> { … }', "
                + "got '\(statement.arguments[0].text)' before the path")
            return nil
        }
        let prefixToken = statement.arguments[statement.arguments.count - 1]
        let text = prefixToken.text
        guard text.hasPrefix("/"),
              !text.contains(where: { $0 == "?" || $0 == "#" || $0 == " " || $0 == "\t" || $0 == "%" }) else {
            error(at: prefixToken, "invalid route path '\(text)': it must start with '/' and hold no "
                + "query, fragment, space or percent-escape")
            return nil
        }
        let normalised = Policy.normalize(path: text)
        let segments = normalised.split(separator: "/")
        let isPattern = segments.contains { $0.contains("*") }
        if isPattern {
            guard !isExact else {
                error(at: prefixToken, "an exact route cannot hold '*' ('\(text)'): write 'route \(text)' for a pattern")
                return nil
            }
            guard segments.allSatisfy({ $0 == "*" || !$0.contains("*") }) else {
                error(at: prefixToken, "invalid route pattern '\(text)': '*' must be a whole segment "
                    + "(it stands for exactly one)")
                return nil
            }
        }
        var route = defaults
        route.prefix = normalised
        route.match = isExact ? .exact : isPattern ? .pattern : .prefix
        route.location = statement.location
        var seen: [String: SourceLocation] = [:]
        var anomalySeen: [MultipartAnomaly: SourceLocation] = [:]
        var overrides = AnomalyActions()
        var partStatements: [RuleStatement] = []
        checkCharacterListConflicts(statement.block ?? [])
        for inner in statement.block ?? [] {
            guard let directive = validate(inner, in: .route, seen: &seen) else { continue }
            switch directive.name {
            case "field", "file":
                partStatements.append(inner)
            case "anomaly":
                if let (flag, action) = anomaly(inner, seen: &anomalySeen) { overrides[flag] = action }
            case "mode":
                if let mode: PolicyMode = keyword(inner.arguments[0], what: "mode") { route.mode = mode }
            case "host":
                route.hosts = hosts(inner.arguments)
            case "require-header":
                if let condition = headerCondition(inner, seen: route.requiredHeaders) {
                    route.requiredHeaders.append(condition)
                }
            case "reencode":
                if let mode: ReencodeMode = keyword(inner.arguments[0], what: "reencode mode") { route.reencode = mode }
            case "upstream":
                let name = inner.arguments[0]
                if UpstreamName.isValid(name.text) {
                    route.upstream = UpstreamName(name.text, at: name.location)
                } else {
                    error(at: name, "'upstream' in a route names an upstream group declared in the main configuration "
                        + "file (letters, digits, '-', '_', '.'), got '\(name.text)'")
                }
            default:
                routeSetting(inner, directive, into: &route)
            }
        }
        route.anomalies = defaults.anomalies.overridden(by: overrides)
        // A route's `unknown` beats the main context's `unknown-fields` / `unknown-files`: route over main first,
        // then the specific setting over the general one.
        if seen["unknown"] != nil {
            if seen["unknown-fields"] == nil { route.unknownFields = nil }
            if seen["unknown-files"] == nil { route.unknownFiles = nil }
        }

        var names: [String: SourceLocation] = [:]
        for inner in partStatements {
            guard let rule = compilePartRule(inner, in: route) else { continue }
            let key = rule.name ?? "*" + rule.kind.rawValue
            if let first = names[key] {
                let label = rule.name.map { "part '\($0)'" } ?? "'\(rule.kind.rawValue) *'"
                error(at: inner.arguments[0], "duplicate rule for \(label) (first defined at \(first))")
                continue
            }
            names[key] = inner.location
            switch (rule.kind, rule.name) {
            case (.field, .some): route.fields.append(rule)
            case (.file, .some): route.files.append(rule)
            case (.field, .none): route.otherFields = rule
            case (.file, .none): route.otherFiles = rule
            }
        }
        warnNeverPass(route, text: text, location: statement.location)
        warnDisarmedTypes(route)
        if route.reencode == .off {
            if route.contentTypes.contains(where: { $0.matches("multipart/form-data") }) {
                error(at: statement.name, "route '\(text)' has 'reencode off' but accepts multipart/form-data: "
                    + "multipart bodies are always re-encoded; limit its content-types (e.g. "
                    + "application/x-www-form-urlencoded)")
            }
            diagnostics.append(Diagnostic(.warning, at: statement.location,
                "route '\(text)' has 'reencode off': urlencoded bodies reach the upstream byte for byte, so the "
                    + "upstream may parse them differently from Formwall (parser differential) and see fields "
                    + "the rules never judged; use it only for signed bodies (HMAC webhooks)"))
        }
        return route
    }

    private mutating func compilePartRule(_ statement: RuleStatement, in route: Route) -> PartRule? {
        let kind: PartRule.Kind = statement.name.text == "file" ? .file : .field
        let nameToken = statement.arguments[0]
        guard !nameToken.text.isEmpty else {
            error(at: nameToken, "empty part name")
            return nil
        }
        let isWildcard = nameToken.kind == .word && nameToken.text == "*"
        var rule = PartRule(kind: kind, name: isWildcard ? nil : nameToken.text, location: statement.location)
        rule.filename = route.filename
        rule.allowedFilenameProblems = route.allowedFilenameProblems
        rule.allowTypeMismatch = route.allowTypeMismatch
        rule.archive = route.archive
        rule.nameChecks = route.nameChecks
        checkCharacterListConflicts(statement.block ?? [])
        let context: RuleDirective.Context = kind == .file ? .file : .field
        var seen: [String: SourceLocation] = [:]
        for inner in statement.block ?? [] {
            guard let directive = validate(inner, in: context, seen: &seen) else { continue }
            let arguments = inner.arguments
            switch directive.name {
            case "max":
                if let size = size(arguments[0], directive) { rule.max = size }
            case "min":
                if let size = size(arguments[0], directive) { rule.min = Swift.max(rule.min ?? 0, size) }
            case "not-empty":
                rule.min = Swift.max(rule.min ?? 0, 1)
            case "required":
                if isWildcard {
                    error(at: inner.name, "'required' cannot apply to a wildcard rule")
                } else {
                    rule.required = true
                }
            case "pattern":
                do {
                    rule.pattern = try FieldPattern(arguments[0].text)
                } catch {
                    let reason = String(describing: error).split(separator: "\n").first.map(String.init) ?? ""
                    self.error(at: arguments[0], "invalid pattern \"\(arguments[0].text)\": \(reason)")
                }
            case "repeat":
                if let value = number(arguments[0], directive) { rule.repeatLimit = Int(value) }
            case "types":
                rule.types = mediaTypes(arguments)
            case "extensions":
                rule.extensions = extensions(arguments)
            case "categories":
                rule.categories = vocabulary(arguments, SniffVocabulary.categories, what: "category")
            case "labels":
                rule.labels = vocabulary(arguments, SniffVocabulary.labels, what: "label")
            case "deny-embedded-markup":
                rule.denyEmbeddedMarkup = true
                if let argument = arguments.first {
                    if argument.text == "php-short-tags" {
                        rule.phpShortTags = true
                    } else {
                        error(at: argument,
                              "unknown deny-embedded-markup option '\(argument.text)': expected php-short-tags")
                    }
                }
            case "disarm":
                if let argument = arguments.first {
                    if let mode: DisarmMode = keyword(argument, what: "disarm mode") { rule.disarm = mode }
                } else {
                    rule.disarm = .strip
                }
            case _ where directive.name.hasPrefix("archive-"):
                archiveSetting(inner, directive, into: &rule.archive)
            case _ where NameChecks.directives.contains(directive.name):
                nameCheckSetting(inner, directive, into: &rule.nameChecks)
            case "action":
                if arguments[0].text == "disarm" {
                    // `action disarm;` is `disarm;`: it says what happens to a file that passes, not to a violation.
                    rule.disarm = .strip
                } else if let action: RuleAction = keyword(arguments[0], what: "action") {
                    rule.action = action
                }
            case "status":
                if let value = number(arguments[0], directive) { rule.status = Int(value) }
            case "filename":
                if let handling: FilenameHandling = keyword(arguments[0], what: "filename handling") {
                    rule.filename = handling
                }
            case "allow-filename":
                rule.allowedFilenameProblems.formUnion(filenameProblems(arguments))
            case "allow-type-mismatch":
                rule.allowTypeMismatch = true
            default:
                // Unreachable from requests: rule files only; the directive table and handlers are tested together.
                preconditionFailure("directive '\(directive.name)' validated for a context it has no handler in")
            }
        }
        if let min = rule.min, let max = rule.max, min > max {
            diagnostics.append(Diagnostic(.warning, at: statement.location,
                "\(kind.rawValue) '\(nameToken.text)' min \(ByteSize.format(min)) is above its max "
                    + "\(ByteSize.format(max)): it can never pass"))
        }
        if let max = rule.max, max > route.limits.bodyMax {
            diagnostics.append(Diagnostic(.warning, at: statement.location,
                "\(kind.rawValue) '\(nameToken.text)' max \(ByteSize.format(max)) can never be reached: "
                    + "the route's body-max is \(ByteSize.format(route.limits.bodyMax))"))
        }
        return rule
    }

    // MARK: - Arguments

    mutating func error(at token: RuleToken, _ message: String) {
        diagnostics.append(Diagnostic(.error, at: token.location, message))
    }

    private mutating func size(_ token: RuleToken, _ directive: RuleDirective) -> UInt64? {
        guard let value = ByteSize.parse(token.text) else {
            error(at: token, "bad size '\(token.text)' for '\(directive.name)': expected a whole number with an "
                + "optional unit \(ByteSize.unitsDescription), at most \(ByteSize.format(ByteSize.maximum))")
            return nil
        }
        return value
    }

    private mutating func number(_ token: RuleToken, _ directive: RuleDirective) -> UInt64? {
        guard !token.text.isEmpty, token.text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let value = UInt64(token.text) else {
            error(at: token, "bad number '\(token.text)' for '\(directive.name)': expected a whole number")
            return nil
        }
        if let bounds = directive.bounds, !bounds.contains(value) {
            error(at: token, "'\(directive.name)' must be between \(bounds.lowerBound) and \(bounds.upperBound), "
                + "got \(value)")
            return nil
        }
        return value
    }

    /// The case `token` names; nil after an error listing the choices when it names none.
    mutating func keyword<Value: CaseIterable & RawRepresentable>(_ token: RuleToken, what: String) -> Value?
    where Value.RawValue == String {
        guard let value = Value(rawValue: token.text) else {
            error(at: token, "unknown \(what) '\(token.text)': expected \(Value.choices)")
            return nil
        }
        return value
    }

    /// Fields Formwall sets or drops itself: a `modified-header` cannot be one of them.
    static let managedFieldNames: Set<String> = [
        "host", "content-length", "content-type", "transfer-encoding", "expect", "connection", "keep-alive",
        "proxy-connection", "te", "trailer", "upgrade", "via", "x-forwarded-for", "x-forwarded-proto",
        "x-forwarded-host", "x-request-id",
    ]

    /// A field name for `modified-header`: an HTTP token that Formwall does not manage itself.
    private mutating func headerName(_ token: RuleToken) -> String? {
        let name = token.text
        let tokenChars = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        guard !name.isEmpty, name.allSatisfy(tokenChars.contains) else {
            error(at: token, "invalid header name '\(name)': expected a field name such as X-Formwall-Modified, or off")
            return nil
        }
        guard !Self.managedFieldNames.contains(name.lowercased()) else {
            error(at: token, "'\(name)' is a field Formwall sets or drops itself; choose another name")
            return nil
        }
        return name
    }

    private mutating func hosts(_ tokens: [RuleToken]) -> [HostPattern] {
        var result: [HostPattern] = []
        for token in tokens {
            guard let pattern = HostPattern(token.text) else {
                error(at: token, "invalid host '\(token.text)': expected a host name without port "
                    + "(example.com), an IP address or '*.' and a name for one more label (*.example.com)")
                continue
            }
            if !result.contains(pattern) { result.append(pattern) }
        }
        return result
    }

    private mutating func headerCondition(_ statement: RuleStatement, seen: [HeaderCondition]) -> HeaderCondition? {
        let nameToken = statement.arguments[0]
        let name = nameToken.text
        let tokenChars = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        guard !name.isEmpty, name.allSatisfy(tokenChars.contains) else {
            error(at: nameToken, "invalid header name '\(name)': expected a field name such as X-Requested-With")
            return nil
        }
        if seen.contains(where: { $0.name.lowercased() == name.lowercased() }) {
            error(at: nameToken, "duplicate 'require-header \(name)'")
            return nil
        }
        guard statement.arguments.count == 2 else { return HeaderCondition(name: name, pattern: nil) }
        let source = statement.arguments[1]
        do {
            return HeaderCondition(name: name, pattern: try FieldPattern(source.text))
        } catch {
            let reason = String(describing: error).split(separator: "\n").first.map(String.init) ?? ""
            self.error(at: source, "invalid pattern \"\(source.text)\": \(reason)")
            return nil
        }
    }

    private mutating func methods(_ tokens: [RuleToken]) -> [String] {
        var result: [String] = []
        for token in tokens {
            guard MediaTypePattern.isToken(token.text), token.text.uppercased() == token.text else {
                error(at: token, "invalid method '\(token.text)': methods are case-sensitive tokens such as "
                    + "'\(token.text.uppercased())'")
                continue
            }
            if !result.contains(token.text) { result.append(token.text) }
        }
        return result
    }

    private mutating func mediaTypes(_ tokens: [RuleToken]) -> [MediaTypePattern] {
        var result: [MediaTypePattern] = []
        for token in tokens {
            guard let pattern = MediaTypePattern(token.text) else {
                error(at: token, "invalid MIME type pattern '\(token.text)': expected type/subtype, type/* or */*")
                continue
            }
            if !result.contains(pattern) { result.append(pattern) }
        }
        return result
    }

    private mutating func extensions(_ tokens: [RuleToken]) -> [String] {
        var result: [String] = []
        for token in tokens {
            let text = token.text.lowercased()
            let forbidden: (Character) -> Bool = {
                $0 == "/" || $0 == "\\" || $0 == " " || ($0.asciiValue ?? 0x20) < 0x20
            }
            guard text.hasPrefix("."), text.count >= 2, !text.contains(where: forbidden) else {
                error(at: token, "invalid extension '\(token.text)': write it with its dot, e.g. '.png'")
                continue
            }
            if !result.contains(text) { result.append(text) }
        }
        return result
    }

    private mutating func vocabulary(_ tokens: [RuleToken], _ known: [String], what: String) -> [String] {
        var result: [String] = []
        for token in tokens {
            let word = token.text.lowercased()
            guard known.contains(word) else {
                error(at: token, "unknown sniffed \(what) '\(token.text)'" + Self.suggestion(for: word, among: known))
                continue
            }
            if !result.contains(word) { result.append(word) }
        }
        return result
    }

    private mutating func filenameProblems(_ tokens: [RuleToken]) -> Set<FilenameProblem> {
        var result = Set<FilenameProblem>()
        for token in tokens {
            guard let problem = FilenameProblem(rawValue: token.text) else {
                error(at: token, "unknown filename problem '\(token.text)'"
                    + Self.suggestion(for: token.text, among: FilenameProblem.allCases.map(\.name)))
                continue
            }
            result.insert(problem)
        }
        return result
    }

    // MARK: - Suggestions

    /// `; did you mean 'x'?` for the closest candidate within edit distance 2, else empty.
    static func suggestion(for word: String, among candidates: some Sequence<String>) -> String {
        let scored = candidates.map { ($0, editDistance(word, $0)) }.filter { $0.1 <= 2 }
        guard let best = scored.min(by: { $0.1 < $1.1 || ($0.1 == $1.1 && $0.0 < $1.0) }) else { return "" }
        return "; did you mean '\(best.0)'?"
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let (x, y) = (Array(a), Array(b))
        var previous = Array(0...y.count)
        for i in 1...max(x.count, 1) where !x.isEmpty {
            var current = [i] + Array(repeating: 0, count: y.count)
            for j in 1...max(y.count, 1) where !y.isEmpty {
                let substitution = previous[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1)
                current[j] = Swift.min(previous[j] + 1, current[j - 1] + 1, substitution)
            }
            previous = current
        }
        return x.isEmpty ? y.count : previous[y.count]
    }
}

/// What makes two routes the same for duplicate and shadowing diagnostics: match kind, normalised path, hosts.
struct RouteKey: Hashable, CustomStringConvertible {
    let match: RouteMatch
    let path: String
    let hosts: Set<HostPattern>?

    init(_ route: Route) {
        match = route.match
        path = route.prefix
        hosts = route.hosts.map(Set.init)
    }

    var description: String { (match == .exact ? "= " : "") + path }
}

private extension String {
    /// `.php` and `php` name the same extension.
    func trimmingPrefixDot() -> String { hasPrefix(".") ? String(dropFirst()) : self }
}
