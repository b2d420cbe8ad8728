/// An incremental, strict RFC 9112 response head parser for upstream responses.
///
/// Same loop as `HTTPRequestHeadParser`, plus the request method, which decides the framing:
///
/// ```swift
/// var parser = HTTPResponseHeadParser()
/// loop: while true {
///     switch try parser.parse(chunk, requestMethod: "POST") {
///     case .needMore: chunk = try await read()
///     case .complete(let head, let consumed):
///         chunk = chunk[consumed...]
///         if head.isInformational { forwardInterim(head); continue loop }   // 100, 103: no body
///         forward(head); break loop
///     }
/// }
/// ```
///
/// Framing: a response to HEAD, any 1xx, 204 and 304 have no body; otherwise `Transfer-Encoding:
/// chunked`, then Content-Length, else the body is close-delimited. Content-Length and Transfer-Encoding
/// are validated as strictly as in requests, even where they do not frame the body. Any error here
/// should be answered to the client with 502.
///
/// Leniency: a status line without a reason phrase may omit the space after the code
/// (`HTTP/1.1 204`). No empty lines are skipped before the status line.
public struct HTTPResponseHeadParser: Sendable {
    enum State: Sendable {
        /// Waiting for the status line. Next: `.headerLines` or `.failed`.
        case statusLine
        /// Reading field lines until the empty line. Next: `.statusLine` (head complete) or `.failed`.
        case headerLines
        /// Rejected input; terminal.
        case failed(HTTPParseError)
    }

    private let limits: HTTPLimits
    private var state: State = .statusLine
    private var scanner: HTTPHeadScanner
    private var version = HTTPVersion.http1_1
    private var status = 0
    private var reason = ""
    private var headers = HTTPHeaders.Storage()

    /// Creates a parser with the given limits.
    public init(limits: HTTPLimits = HTTPLimits()) {
        self.limits = limits
        self.scanner = HTTPHeadScanner(maxHeadBytes: limits.maxHeadBytes)
    }

    /// Consumes a chunk of input. `requestMethod` is the method of the request this answers (case-sensitive).
    public mutating func parse(
        _ input: UnsafeRawBufferPointer,
        requestMethod: String
    ) throws(HTTPParseError) -> HTTPHeadParseResult<HTTPResponseHead> {
        if case .failed(let error) = self.state {
            throw error
        }
        var offset = 0
        do throws(HTTPParseError) {
            while try self.scanner.nextLine(input, offset: &offset) {
                let head = try HTTPHeadScanner.withLine(in: input, at: self.scanner.lineInInput,
                                                        carried: self.scanner.line) {
                    line throws(HTTPParseError) in try self.handleLine(line, requestMethod: requestMethod)
                }
                if let head {
                    self.reset()
                    return .complete(head, consumed: offset)
                }
                self.scanner.clearLine()
            }
        } catch {
            self.state = .failed(error)
            throw error
        }
        return .needMore(consumed: input.count)
    }

    /// Whether the parser holds no storage for header fields (a completed head took its array): `adoptStorage`
    /// gives it a recycled one.
    public var needsStorage: Bool { self.headers.isUnallocated }

    /// Parses the next head's fields into `storage` (an empty array, such as an earlier head's
    /// `HTTPHeaders.takeStorage()` emptied) instead of a new array; ignored while the parser holds storage.
    public mutating func adoptStorage(_ storage: HTTPHeaders.Storage) {
        self.headers.adopt(storage)
    }

    /// Forgets any partial head (and any error) and waits for a new status line.
    public mutating func reset() {
        self.state = .statusLine
        self.scanner.reset()
        self.headers.removeAll()
        self.version = .http1_1
        self.status = 0
        self.reason = ""
    }

    private mutating func handleLine(
        _ line: UnsafeRawBufferPointer, requestMethod: String
    ) throws(HTTPParseError) -> HTTPResponseHead? {
        switch self.state {
        case .statusLine:
            try self.parseStatusLine(line)
            self.state = .headerLines
            return nil
        case .headerLines:
            if line.isEmpty {
                return try self.finish(requestMethod: requestMethod)
            }
            guard self.headers.count < self.limits.maxHeaderCount else {
                throw .tooManyHeaders
            }
            try self.headers.append(parsing: line)
            return nil
        case .failed:
            // Unreachable: parse() throws the stored error before it scans in the failed state.
            preconditionFailure("parse() rethrows before scanning in the failed state")
        }
    }

    /// `HTTP-version SP 3DIGIT [SP reason-phrase]`.
    private mutating func parseStatusLine(_ line: UnsafeRawBufferPointer) throws(HTTPParseError) {
        guard line.count >= 12, line[8] == HTTPSyntax.sp, let version = HTTPVersion.parse(line[..<8]) else {
            throw .invalidStatusLine
        }
        let digits = line[9..<12]
        guard HTTPSyntax.allBytes(digits, are: { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw .invalidStatusLine
        }
        let status = Int(line[9] - UInt8(ascii: "0")) * 100 + Int(line[10] - UInt8(ascii: "0")) * 10
            + Int(line[11] - UInt8(ascii: "0"))
        guard (100...599).contains(status) else {
            throw .invalidStatusLine
        }
        var reason = ""
        if line.count > 12 {
            let phrase = line[13...]
            guard line[12] == HTTPSyntax.sp, HTTPSyntax.allBytes(phrase, are: HTTPSyntax.isFieldValueByte) else {
                throw .invalidStatusLine
            }
            reason = HTTPSyntax.string(phrase)
        }
        guard version.isSupported else {
            throw .unsupportedVersion
        }
        self.version = version
        self.status = status
        self.reason = reason
    }

    private mutating func finish(requestMethod: String) throws(HTTPParseError) -> HTTPResponseHead {
        let headers = HTTPHeaders(taking: &self.headers)
        let declared = try headers.declaredFraming(version: self.version)
        let framing: BodyFraming
        if requestMethod == "HEAD" || (100..<200).contains(self.status) || self.status == 204 || self.status == 304 {
            framing = .none
        } else {
            switch declared {
            case .none: framing = .closeDelimited
            case .contentLength(let length): framing = .contentLength(length)
            case .chunked: framing = .chunked
            }
        }
        return HTTPResponseHead(
            version: self.version,
            status: self.status,
            reason: self.reason,
            headers: headers,
            framing: framing,
            keepAlive: framing != .closeDelimited && headers.persists(version: self.version)
        )
    }
}
