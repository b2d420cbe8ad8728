/// One token of a rule file.
public struct RuleToken: Sendable, Hashable {
    /// What a token is.
    public enum Kind: Sendable, Hashable {
        /// A bare word: a directive name or an unquoted argument (`route`, `/api`, `10MiB`, `*`).
        case word
        /// A double-quoted string; `text` holds the unescaped value.
        case string
        /// `;`
        case semicolon
        /// `{`
        case openBrace
        /// `}`
        case closeBrace
        /// End of the file.
        case end
    }

    /// The kind.
    public var kind: Kind
    /// The word, the unescaped string, or the punctuation itself (empty at `end`).
    public var text: String
    /// Where the token starts.
    public var location: SourceLocation
    /// The column just past the token's last character, on `location.line`.
    public var endColumn: Int

    /// Creates a token.
    public init(kind: Kind, text: String, location: SourceLocation, endColumn: Int) {
        self.kind = kind
        self.text = text
        self.location = location
        self.endColumn = endColumn
    }

    /// The token for messages: a word as is, a string quoted, punctuation quoted, "end of file".
    var display: String {
        switch kind {
        case .word: return "'\(text)'"
        case .string: return "\"\(text)\""
        case .semicolon, .openBrace, .closeBrace: return "'\(text)'"
        case .end: return "end of file"
        }
    }
}
