import CLinux
import Multipart

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
    /// The bytes of a line that began in an earlier call, without its CRLF: the completed line when
    /// `nextLine` returned true and `lineInInput` is nil.
    private(set) var line: [UInt8] = []
    /// Where the completed line lies in the input of the call that returned true, when all of it (and its
    /// CRLF) arrived in that call: the usual case, and no byte is copied.
    private(set) var lineInInput: Range<Int>?

    init(maxHeadBytes: Int) {
        self.maxHeadBytes = maxHeadBytes
    }

    /// Whether the scanner is at the start of a head and holds no line storage: `reset` and `releaseLine`
    /// would change nothing.
    var isPristine: Bool {
        if case .sawCR = state { return false }
        return headBytes == 0 && line.capacity == 0 && lineInInput == nil
    }

    /// Consumes bytes from `offset` until a line is complete (true) or the input is exhausted (false).
    ///
    /// Call `clearLine()` after handling a completed line.
    mutating func nextLine(_ input: UnsafeRawBufferPointer, offset: inout Int) throws(HTTPParseError) -> Bool {
        self.lineInInput = nil
        while offset < input.count {
            switch self.state {
            case .inLine:
                let start = offset
                let end = HTTPSyntax.firstLineEnd(input, from: offset)
                try self.count(end - offset)
                offset = end
                guard end < input.count else {
                    self.line.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[start..<end]))
                    return false
                }
                try self.count(1)
                offset += 1
                guard input[end] == HTTPSyntax.cr else {
                    throw .bareLF
                }
                // The whole line and its LF are in this input: hand out its range, copy nothing. The checks are
                // those of `.sawCR` below, in the same order, so the first error does not depend on the chunking.
                if self.line.isEmpty, offset < input.count {
                    try self.count(1)
                    let byte = input[offset]
                    offset += 1
                    guard byte == HTTPSyntax.lf else {
                        throw .bareCR
                    }
                    self.lineInInput = start..<end
                    return true
                }
                self.line.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[start..<end]))
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

    /// Calls `body` with the line `nextLine` completed: `range` of `input` when the line lay whole in it
    /// (`lineInInput`), or else the carried line (the scanner's `line`, passed by value so that `body` may mutate
    /// the scanner's owner). The carried line is asked for only then: passing the array itself retained and
    /// released it for every line.
    @inline(__always)
    static func withLine<R>(
        in input: UnsafeRawBufferPointer, at range: Range<Int>?, carried: @autoclosure () -> [UInt8],
        _ body: (UnsafeRawBufferPointer) throws(HTTPParseError) -> R
    ) throws(HTTPParseError) -> R {
        if let range {
            return try body(UnsafeRawBufferPointer(rebasing: input[range]))
        }
        let result = carried().withUnsafeBytes { raw in
            Result { () throws(HTTPParseError) in try body(raw) }
        }
        return try result.get()
    }

    /// Forgets the completed line, keeping its storage.
    mutating func clearLine() {
        self.lineInInput = nil
        self.line.removeAll(keepingCapacity: true)
    }

    /// Forgets the line and gives its storage back.
    mutating func releaseLine() {
        self.lineInInput = nil
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

extension HTTPHeaders.Storage {
    /// Parses one non-empty header line (without CRLF), `token ":" OWS value OWS`, onto the fields: its name's
    /// and value's bytes, checked, and its name's kind. No String is made.
    mutating func append(parsing line: UnsafeRawBufferPointer) throws(HTTPParseError) {
        guard let first = line.first, !HTTPSyntax.isWhitespace(first) else {
            throw .obsFold
        }
        // The name: a table lookup per byte in the shim (the shift-and-test here took about nine instructions).
        let colon = cl_tchar_span(line.baseAddress, line.count)
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
        let value = UnsafeRawBufferPointer(rebasing: line[start..<end])
        let (valid, ascii) = HTTPSyntax.fieldValueBytes(value)
        // A value with bytes of 0x80 and above must be UTF-8 (it is handed out as a String): checked without
        // making one.
        guard valid, ascii || UTF8Check.isValid(value) else {
            throw .invalidHeaderValue
        }
        let name = UnsafeRawBufferPointer(rebasing: line[..<colon])
        appendParsed(line: line, nameCount: colon, value: start..<end,
                     known: KnownField(tokenBytes: name.assumingMemoryBound(to: UInt8.self)))
    }
}
