/// One statement of a rule file: a directive name, its arguments, and an optional block.
public struct RuleStatement: Sendable, Hashable {
    /// The directive name token (`route`, `max`, …).
    public var name: RuleToken
    /// The argument tokens, words or strings.
    public var arguments: [RuleToken]
    /// The nested statements when the statement carries `{ … }`, nil when it ended in `;`.
    public var block: [RuleStatement]?

    /// Creates a statement.
    public init(name: RuleToken, arguments: [RuleToken], block: [RuleStatement]?) {
        self.name = name
        self.arguments = arguments
        self.block = block
    }

    /// Where the statement starts.
    public var location: SourceLocation { name.location }
}

/// Builds statements from tokens. The grammar is generic (nginx style); which directives exist,
/// where and with which arguments is the checker's business.
///
/// ```
/// file      = *statement
/// statement = word *argument ( ";" | "{" *statement "}" )
/// argument  = word | string
/// ```
/// A missing `;` is reported after the last token of the statement when the statement runs into
/// `}`, the end of the file, or a known directive name at the start of a later line.
public struct RuleParser {
    private let tokens: [RuleToken]
    private let directiveNames: Set<String>
    private var position = 0

    /// Problems found while parsing.
    public private(set) var diagnostics: [Diagnostic] = []

    /// Prepares to parse `tokens` (which must end with `.end`). `directiveNames` drives the
    /// missing-`;` heuristic.
    public init(tokens: [RuleToken], directiveNames: Set<String> = RuleDirective.names) {
        // Unreachable: RuleLexer always ends the stream with `.end` (and this reads rule files, not requests).
        precondition(tokens.last?.kind == .end, "token stream must end with .end")
        self.tokens = tokens
        self.directiveNames = directiveNames
    }

    /// Lexes and parses `source`.
    public static func parse(_ source: String, file: String, directiveNames: Set<String> = RuleDirective.names)
        -> (statements: [RuleStatement], diagnostics: [Diagnostic]) {
        let (tokens, lexed) = RuleLexer.tokenize(source, file: file)
        var parser = RuleParser(tokens: tokens, directiveNames: directiveNames)
        let statements = parser.parseFile()
        return (statements, lexed + parser.diagnostics)
    }

    /// Parses every statement up to the end of the file.
    public mutating func parseFile() -> [RuleStatement] {
        var statements: [RuleStatement] = []
        while true {
            let token = tokens[position]
            switch token.kind {
            case .end:
                return statements
            case .closeBrace:
                error(at: token, "unexpected '}' with no open block")
                position += 1
            default:
                if let statement = parseStatement() { statements.append(statement) }
            }
        }
    }

    private var current: RuleToken { tokens[position] }

    private mutating func error(at token: RuleToken, _ message: String) {
        diagnostics.append(Diagnostic(.error, at: token.location, message))
    }

    /// Parses one statement starting at `current`; nil after reporting a token that cannot start one.
    private mutating func parseStatement() -> RuleStatement? {
        let name = current
        guard name.kind == .word else {
            switch name.kind {
            case .string:
                error(at: name, "expected a directive name, found string \(name.display)")
                position += 1
                skipStatement()
            default:
                error(at: name, "unexpected \(name.display)")
                position += 1
            }
            return nil
        }
        position += 1
        var arguments: [RuleToken] = []
        var last = name
        while true {
            let token = current
            switch token.kind {
            case .semicolon:
                position += 1
                return RuleStatement(name: name, arguments: arguments, block: nil)
            case .openBrace:
                position += 1
                let block = parseBlock(opening: token)
                return RuleStatement(name: name, arguments: arguments, block: block)
            case .closeBrace, .end:
                missingSemicolon(after: last, statement: name)
                return RuleStatement(name: name, arguments: arguments, block: nil)
            case .word where token.location.line > last.location.line && directiveNames.contains(token.text):
                missingSemicolon(after: last, statement: name)
                return RuleStatement(name: name, arguments: arguments, block: nil)
            case .word, .string:
                arguments.append(token)
                last = token
                position += 1
            }
        }
    }

    /// Skips the rest of a statement that cannot be parsed: up to `;`, over a block, or to `}`.
    private mutating func skipStatement() {
        while true {
            let token = current
            switch token.kind {
            case .semicolon:
                position += 1
                return
            case .openBrace:
                position += 1
                _ = parseBlock(opening: token)
                return
            case .closeBrace, .end:
                return
            case .word, .string:
                position += 1
            }
        }
    }

    private mutating func missingSemicolon(after last: RuleToken, statement name: RuleToken) {
        var location = last.location
        location.column = last.endColumn
        diagnostics.append(Diagnostic(.error, at: location, "missing ';' after '\(name.text)' statement"))
    }

    private mutating func parseBlock(opening: RuleToken) -> [RuleStatement] {
        var statements: [RuleStatement] = []
        while true {
            switch current.kind {
            case .closeBrace:
                position += 1
                return statements
            case .end:
                error(at: opening, "unterminated block: '{' has no matching '}'")
                return statements
            default:
                if let statement = parseStatement() { statements.append(statement) }
            }
        }
    }
}
