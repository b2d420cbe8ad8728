/// Splits a rule file into tokens.
///
/// ```
/// word     = 1*( any byte except whitespace ; { } " # )
/// string   = '"' *( char | '\' char ) '"'      ; one line only
/// comment  = '#' to end of line                ; only where a token could start
/// ```
/// `\r` is whitespace, so CRLF and LF files give the same tokens at the same positions. A UTF-8
/// byte-order mark is skipped. In strings `\"`, `\\`, `\n` and `\t` are escapes; any other `\x`
/// is kept as both characters so regular expressions read naturally (`"^\d+$"`).
public struct RuleLexer {
    private let bytes: [UInt8]
    private let file: String
    private var index = 0
    private var line = 1
    private var column = 1

    /// Problems found while lexing (unterminated strings, stray control characters).
    public private(set) var diagnostics: [Diagnostic] = []

    /// Prepares to lex `source`, reporting positions in `file`.
    public init(source: String, file: String) {
        var bytes = Array(source.utf8)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        self.bytes = bytes
        self.file = file
    }

    /// Lexes the whole input; the last token is always `.end`.
    public static func tokenize(_ source: String, file: String) -> (tokens: [RuleToken], diagnostics: [Diagnostic]) {
        var lexer = RuleLexer(source: source, file: file)
        var tokens: [RuleToken] = []
        while true {
            let token = lexer.next()
            tokens.append(token)
            if token.kind == .end { break }
        }
        return (tokens, lexer.diagnostics)
    }

    /// The next token, `.end` once the input is exhausted.
    public mutating func next() -> RuleToken {
        skipTrivia()
        let start = here
        guard index < bytes.count else { return RuleToken(kind: .end, text: "", location: start, endColumn: column) }
        switch bytes[index] {
        case UInt8(ascii: ";"): return punctuation(.semicolon, ";", start)
        case UInt8(ascii: "{"): return punctuation(.openBrace, "{", start)
        case UInt8(ascii: "}"): return punctuation(.closeBrace, "}", start)
        case UInt8(ascii: "\""): return string(start)
        default: return word(start)
        }
    }

    private var here: SourceLocation { SourceLocation(file: file, line: line, column: column) }

    private mutating func advance() {
        let byte = bytes[index]
        index += 1
        if byte == UInt8(ascii: "\n") {
            line += 1
            column = 1
        } else if byte & 0xC0 != 0x80 {
            column += 1
        }
    }

    private mutating func skipTrivia() {
        while index < bytes.count {
            let byte = bytes[index]
            if Self.isSpace(byte) {
                advance()
            } else if byte == UInt8(ascii: "#") {
                while index < bytes.count, bytes[index] != UInt8(ascii: "\n") { advance() }
            } else if Self.isControl(byte) {
                diagnostics.append(Diagnostic(.error, at: here, "unexpected control character 0x\(Self.hex(byte))"))
                advance()
            } else {
                return
            }
        }
    }

    private mutating func punctuation(_ kind: RuleToken.Kind, _ text: String, _ start: SourceLocation) -> RuleToken {
        advance()
        return RuleToken(kind: kind, text: text, location: start, endColumn: column)
    }

    private mutating func word(_ start: SourceLocation) -> RuleToken {
        let from = index
        while index < bytes.count, !Self.endsWord(bytes[index]) { advance() }
        let text = String(decoding: bytes[from..<index], as: UTF8.self)
        return RuleToken(kind: .word, text: text, location: start, endColumn: column)
    }

    private mutating func string(_ start: SourceLocation) -> RuleToken {
        advance()
        var value: [UInt8] = []
        while true {
            guard index < bytes.count, bytes[index] != UInt8(ascii: "\n"), bytes[index] != UInt8(ascii: "\r") else {
                diagnostics.append(Diagnostic(.error, at: start, "unterminated string"))
                break
            }
            let byte = bytes[index]
            advance()
            if byte == UInt8(ascii: "\"") { break }
            if byte == UInt8(ascii: "\\"), index < bytes.count, bytes[index] != UInt8(ascii: "\n"),
               bytes[index] != UInt8(ascii: "\r") {
                let escaped = bytes[index]
                advance()
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): value.append(escaped)
                case UInt8(ascii: "n"): value.append(UInt8(ascii: "\n"))
                case UInt8(ascii: "t"): value.append(UInt8(ascii: "\t"))
                default: value.append(contentsOf: [byte, escaped])
                }
            } else {
                value.append(byte)
            }
        }
        return RuleToken(kind: .string, text: String(decoding: value, as: UTF8.self), location: start,
                         endColumn: column)
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D || byte == 0x0C
    }

    private static func isControl(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7F }

    private static func endsWord(_ byte: UInt8) -> Bool {
        isSpace(byte) || isControl(byte) || byte == UInt8(ascii: ";") || byte == UInt8(ascii: "{")
            || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "#")
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }
}
