/// Splits head bytes into CRLF-terminated lines, one byte class at a time, across any chunk boundary.
///
/// ```
///   .inLine ──CR──▶ .sawCR ──LF──▶ line complete (back to .inLine)
///      │              └──other──▶ bare_cr
///      └──LF──▶ bare_lf
/// ```
///
/// Every byte is counted against the head limit before it is classified, so the first error is the
/// same whatever the chunking.
struct HTTPHeadScanner {
    enum State {
        /// Collecting line bytes until CR.
        case inLine
        /// Saw CR; only LF may follow.
        case sawCR
    }

    private var state: State = .inLine
    private var headBytes = 0
    private let maxHeadBytes: Int
    /// The bytes of the current line without its CRLF; valid after `nextLine` returned true.
    private(set) var line: [UInt8] = []

    init(maxHeadBytes: Int) {
        self.maxHeadBytes = maxHeadBytes
    }

    /// Consumes bytes from `offset` until a line is complete (true) or the input is exhausted (false).
    ///
    /// Call `clearLine()` after handling a completed line.
    mutating func nextLine(_ input: UnsafeRawBufferPointer, offset: inout Int) throws(HTTPParseError) -> Bool {
        while offset < input.count {
            switch self.state {
            case .inLine:
                var end = offset
                while end < input.count, input[end] != HTTPSyntax.cr, input[end] != HTTPSyntax.lf {
                    end += 1
                }
                try self.count(end - offset)
                self.line.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset..<end]))
                offset = end
                guard end < input.count else {
                    return false
                }
                try self.count(1)
                offset += 1
                guard input[end] == HTTPSyntax.cr else {
                    throw .bareLF
                }
                self.state = .sawCR
            case .sawCR:
                try self.count(1)
                let byte = input[offset]
                offset += 1
                guard byte == HTTPSyntax.lf else {
                    throw .bareCR
                }
                self.state = .inLine
                return true
            }
        }
        return false
    }

    /// Forgets the completed line, keeping its storage.
    mutating func clearLine() {
        self.line.removeAll(keepingCapacity: true)
    }

    /// Forgets the line and gives its storage back.
    mutating func releaseLine() {
        self.line = []
    }

    /// Starts a new head.
    mutating func reset() {
        self.state = .inLine
        self.headBytes = 0
        self.clearLine()
    }

    private mutating func count(_ bytes: Int) throws(HTTPParseError) {
        self.headBytes += bytes
        if self.headBytes > self.maxHeadBytes {
            throw .headTooLarge
        }
    }
}

extension HTTPHeaderField {
    /// Parses one non-empty header line (without CRLF): `token ":" OWS value OWS`.
    static func parse(line: [UInt8]) throws(HTTPParseError) -> HTTPHeaderField {
        guard let first = line.first, !HTTPSyntax.isWhitespace(first) else {
            throw .obsFold
        }
        var colon = 0
        while colon < line.count, HTTPSyntax.isTokenChar(line[colon]) {
            colon += 1
        }
        guard colon < line.count, colon > 0 else {
            throw .invalidHeaderName
        }
        guard line[colon] == HTTPSyntax.colon else {
            throw HTTPSyntax.isWhitespace(line[colon]) ? .whitespaceBeforeColon : .invalidHeaderName
        }
        var start = colon + 1
        var end = line.count
        while start < end, HTTPSyntax.isWhitespace(line[start]) {
            start += 1
        }
        while end > start, HTTPSyntax.isWhitespace(line[end - 1]) {
            end -= 1
        }
        let valueBytes = line[start..<end]
        guard valueBytes.allSatisfy(HTTPSyntax.isFieldValueByte),
            let value = String(validating: valueBytes, as: UTF8.self)
        else {
            throw .invalidHeaderValue
        }
        return HTTPHeaderField(name: String(decoding: line[..<colon], as: UTF8.self), value: value)
    }
}
