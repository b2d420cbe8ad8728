/// An incremental, strict RFC 9112 request head parser.
///
/// Feed it chunks as they arrive; it copies what it needs (the head is bounded by `HTTPLimits`), so a
/// chunk may be reused once `parse` returns:
///
/// ```swift
/// var parser = HTTPRequestHeadParser()
/// while true {
///     let chunk = try await read()
///     switch try parser.parse(chunk) {
///     case .needMore: continue
///     case .complete(let head, let consumed): handle(head, body: chunk[consumed...]); return
///     }
/// }
/// ```
///
/// After `.complete` the parser is ready for the next (pipelined) head. After an error it keeps
/// throwing the same error: the connection must be answered with `error.status` and closed.
///
/// Leniency: empty lines (CRLF only) before the request line are skipped, as RFC 9112 §2.2 asks.
/// Nothing else is tolerated.
public struct HTTPRequestHeadParser: Sendable {
    enum State: Sendable {
        /// Waiting for the request line; empty lines are skipped. Next: `.headerLines` or `.failed`.
        case requestLine
        /// Reading field lines until the empty line. Next: `.requestLine` (head complete) or `.failed`.
        case headerLines
        /// Rejected input; terminal.
        case failed(HTTPParseError)
    }

    private let limits: HTTPLimits
    private var state: State = .requestLine
    private var scanner: HTTPHeadScanner
    private var method = ""
    private var target = ""
    private var version = HTTPVersion.http1_1
    private var headers = HTTPHeaders.Storage()

    /// Creates a parser with the given limits.
    public init(limits: HTTPLimits = HTTPLimits()) {
        self.limits = limits
        self.scanner = HTTPHeadScanner(maxHeadBytes: limits.maxHeadBytes)
    }

    /// Consumes a chunk of input; see the type documentation for the loop.
    public mutating func parse(
        _ input: UnsafeRawBufferPointer
    ) throws(HTTPParseError) -> HTTPHeadParseResult<HTTPRequestHead> {
        if case .failed(let error) = self.state {
            throw error
        }
        var offset = 0
        do throws(HTTPParseError) {
            while try self.scanner.nextLine(input, offset: &offset) {
                let head = try HTTPHeadScanner.withLine(in: input, at: self.scanner.lineInInput,
                                                        carried: self.scanner.line) {
                    line throws(HTTPParseError) in try self.handleLine(line)
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

    /// Forgets any partial head (and any error) and waits for a new request line.
    public mutating func reset() {
        self.state = .requestLine
        self.scanner.reset()
        self.headers.removeAll()
        self.method = ""
        self.target = ""
        self.version = .http1_1
    }

    /// `reset()`, and gives the header and line storage back (an idle keep-alive connection holds none).
    public mutating func releaseStorage() {
        // Already released (an idle connection's buffers are released when its exchange ends and again when the
        // answer is flushed): waiting for a request line, which `reset` leaves, so method and target are empty.
        if case .requestLine = self.state, self.headers.isUnallocated, self.scanner.isPristine { return }
        reset()
        self.headers = HTTPHeaders.Storage()
        self.scanner.releaseLine()
    }

    private mutating func handleLine(_ line: UnsafeRawBufferPointer) throws(HTTPParseError) -> HTTPRequestHead? {
        switch self.state {
        case .requestLine:
            if line.isEmpty {
                return nil
            }
            try self.parseRequestLine(line)
            self.state = .headerLines
            return nil
        case .headerLines:
            if line.isEmpty {
                return try self.finish()
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

    /// `method SP request-target SP HTTP-version`, single spaces, nothing else.
    @inline(never)
    private mutating func parseRequestLine(_ line: UnsafeRawBufferPointer) throws(HTTPParseError) {
        guard let firstSpace = HTTPSyntax.firstIndex(of: HTTPSyntax.sp, in: line[...]), firstSpace > 0,
            HTTPSyntax.allBytes(line[..<firstSpace], are: HTTPSyntax.isTokenChar)
        else {
            throw .invalidRequestLine
        }
        let rest = line[(firstSpace + 1)...]
        guard let secondSpace = HTTPSyntax.firstIndex(of: HTTPSyntax.sp, in: rest), secondSpace > rest.startIndex
        else {
            throw .invalidRequestLine
        }
        // No form of request-target carries a fragment (RFC 9112 §3.2), and servers disagree on a `#`: werkzeug and
        // Formwall's route matching cut the path there, Go keeps it (`/api#x` is the path `/api#x` to net/http).
        // `isTargetByte` leaves `#` out, so the usual target is scanned once.
        let plainTarget = HTTPSyntax.allBytes(rest[..<secondSpace], are: HTTPSyntax.isTargetByte)
        guard plainTarget || HTTPSyntax.allBytes(rest[..<secondSpace], are: HTTPSyntax.isVisible) else {
            throw .invalidRequestLine
        }
        guard let version = HTTPVersion.parse(line[(secondSpace + 1)...]) else {
            throw .invalidRequestLine
        }
        guard version.isSupported else {
            throw .unsupportedVersion
        }
        self.method = HTTPSyntax.string(line[..<firstSpace])
        self.target = HTTPSyntax.string(rest[..<secondSpace])
        self.version = version
        guard plainTarget else { throw .invalidRequestTarget }
    }

    /// A request-target that is not origin-form, checked against the forms its method allows (RFC 9112 §3.2).
    ///
    /// - `*` (asterisk-form) only with OPTIONS, and any target with CONNECT (which a proxy refuses) stay as they are.
    /// - absolute-form, `http://authority/path?query` or `https://…`: the authority must be the Host field's value
    ///   (case-insensitively, port included) and carry no userinfo; the result is the origin-form `/path?query`
    ///   (`/` for an empty path), so that what goes upstream names the host that was checked and nothing else.
    ///   A server reads an absolute-form target's authority and ignores Host (§3.2.2): werkzeug, Go and nginx
    ///   do, so forwarding `GET http://a.example/x` with `Host: b.example` would let b.example's rules judge a
    ///   request that a.example serves.
    /// - anything else is `invalidRequestTarget`.
    static func originForm(of target: String, method: String, host: String?) throws(HTTPParseError) -> String {
        if method == "CONNECT" { return target }
        if target == "*" {
            guard method == "OPTIONS" else { throw .invalidRequestTarget }
            return target
        }
        guard let colon = target.firstIndex(of: ":"),
              target[colon...].hasPrefix("://"),
              HTTPSyntax.equalsIgnoringCase(target[..<colon], "http")
                || HTTPSyntax.equalsIgnoringCase(target[..<colon], "https")
        else {
            throw .invalidRequestTarget
        }
        let afterScheme = target[colon...].dropFirst(3)
        let authorityEnd = afterScheme.firstIndex { $0 == "/" || $0 == "?" } ?? afterScheme.endIndex
        let authority = afterScheme[..<authorityEnd]
        guard !authority.isEmpty, !authority.contains("@") else {
            throw .invalidRequestTarget
        }
        guard let host, HTTPSyntax.equalsIgnoringCase(host, authority) else {
            throw .hostMismatch
        }
        let rest = afterScheme[authorityEnd...]
        return rest.first == "/" ? String(rest) : "/" + rest
    }

    /// Applies the whole-head rules once the empty line arrived.
    private mutating func finish() throws(HTTPParseError) -> HTTPRequestHead {
        let headers = HTTPHeaders(taking: &self.headers)
        var hostCount = 0
        var hostIndex: Int?
        var contentTypeCount = 0
        var expectIndex: Int?
        // One index loop (fields read in place, not copied) for the fields the head rules count.
        for index in headers.indices {
            switch headers.known(at: index) {
            case .host:
                hostCount += 1
                hostIndex = index
            case .contentType: contentTypeCount += 1
            case .expect where expectIndex == nil: expectIndex = index
            default: break
            }
        }
        switch hostCount {
        case 0 where self.version == .http1_1:
            throw .missingHost
        case 0, 1:
            break
        default:
            throw .duplicateHost
        }
        guard contentTypeCount <= 1 else { throw .duplicateContentType }
        // Origin-form, nearly every request, is kept as it came; the other forms are checked and an
        // absolute-form target becomes origin-form.
        var target = self.target
        if target.utf8.first != UInt8(ascii: "/") {
            target = try Self.originForm(of: target, method: self.method,
                                         host: hostIndex.map { headers.value(at: $0) })
        }
        let framing: BodyFraming
        switch try headers.declaredFraming(version: self.version) {
        case .none: framing = .none
        case .contentLength(let length): framing = .contentLength(length)
        case .chunked: framing = .chunked
        }
        var expectsContinue = false
        if let first = expectIndex {
            for index in first..<headers.endIndex where headers.known(at: index) == .expect {
                guard HTTPSyntax.equalsIgnoringCase(headers.value(at: index), lowercase: "100-continue") else {
                    throw .unsupportedExpectation
                }
                // RFC 9110 §10.1.1: a 100-continue from an HTTP/1.0 client is ignored.
                expectsContinue = self.version == .http1_1
            }
        }
        return HTTPRequestHead(
            method: self.method,
            target: target,
            version: self.version,
            headers: headers,
            framing: framing,
            keepAlive: headers.persists(version: self.version),
            expectsContinue: expectsContinue
        )
    }
}
