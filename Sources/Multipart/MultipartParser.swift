import CLinux
import Glibc

// The streaming multipart/form-data parser.
//
//   bytes ──► start ──(no "--boundary" at offset 0)──► scanning (preamble, discarded)
//               │                                        │
//               └──────────► delimiterTail ◄─────────────┘   "\n--boundary" found by cl_find_delimiter
//                              │    │    └──(not "--", padding+CRLF)──► replay ──► scanning (as data)
//                        "--"  │    └── CRLF ──► headers ──(empty line)──► scanning (part data) ─┐
//                              ▼                                                                  │
//                          epilogue ◄────────────────────────────────── delimiterTail ◄──────────┘
//
// Part data is found with one search per chunk for the LF form of the delimiter ("\n--" + boundary): memmem's
// answer, from a SIMD filter on the delimiter's first and last bytes (CLinux's `cl_find_delimiter`);
// a CR just before it makes it a CRLF delimiter. The only bytes the parser keeps across calls are the
// current part's header block (bounded by `maxPartHeaderBytes`), a held-back delimiter prefix at a
// chunk end (shorter than the delimiter, kept as pattern offsets, not copied), and at most
// `maxTransportPadding + 2` bytes after a delimiter candidate.

/// One thing the parser found. `partData` spans are valid only until the next call into the parser:
/// they point into the caller's chunk or into the parser's own pattern storage, never copied.
public enum MultipartEvent {
    /// A part's headers are complete.
    case partBegin(MultipartPart)
    /// Bytes of the current part's body.
    case partData(UnsafeRawBufferPointer)
    /// The current part's body is complete.
    case partEnd
    /// The close delimiter was seen; the body is complete (later bytes are epilogue).
    case end
}

/// `MultipartEvent` without the part: what `MultipartParser.step(_:consumed:)` returns, the begun part waiting in
/// the parser (`takePart()`). Trivial to copy and to drop, unlike the event, whose part holds arrays: a caller
/// looping over events pays for destroying each through the enum's generic value witness.
package enum MultipartStep {
    case partBegin
    case partData(UnsafeRawBufferPointer)
    case partEnd
    case end
}

/// A pure, incremental multipart/form-data parser: fed byte slices, it returns events; it does no I/O.
///
/// Feed any chunking, one byte at a time or the whole body at once: the events are the same (data spans
/// may be split differently). Call `next(_:consumed:)` until it returns `nil` (the chunk is used up), then
/// feed the next chunk; at end of input call `finish()`, which throws when the close delimiter never came.
public final class MultipartParser {
    private enum TailPhase { case start, dash, padding, cr }

    private enum State {
        /// Matching `--boundary` at the very start of the body; `matched` bytes so far.
        case start(matched: Int)
        /// Scanning for a delimiter; `crlfPattern[heldFrom..<heldTo]` is a held-back possible prefix.
        case scanning(heldFrom: Int, heldTo: Int)
        /// After `--boundary`; `from` is where the candidate began in `crlfPattern` (0 CRLF, 1 LF, 2 start).
        case delimiterTail(from: Int, phase: TailPhase)
        /// A candidate was not a delimiter: give its pattern bytes back as data.
        case replay(from: Int)
        /// Then the padding bytes consumed after it.
        case replayTail
        /// Accumulating a part header block.
        case headers
        /// `partEnd` was returned for the last part; `end` comes next.
        case pendingEnd
        /// After the close delimiter; `seen` bytes of an optional final CRLF.
        case epilogue(seen: Int)
    }

    /// The limits in force.
    public let limits: MultipartLimits
    /// Request-level anomalies seen so far (part-level ones are on each `MultipartPart`).
    public private(set) var anomalies: MultipartAnomalies
    /// Body bytes consumed so far.
    public private(set) var offset: UInt64 = 0
    /// Parts begun so far.
    public private(set) var partCount = 0
    /// Whether `end` has been returned.
    public private(set) var isComplete = false

    private let crlfPattern: UnsafeMutableRawBufferPointer   // "\r\n--" + boundary
    private let lfPattern: UnsafeRawBufferPointer            // "\n--" + boundary (a view of crlfPattern)
    private let tail: UnsafeMutableRawBufferPointer          // after the pattern, in its allocation
    private var tailCount = 0
    private var headerBuf: [UInt8] = []
    private var lineStart = 0
    private var state: State = .start(matched: 0)
    /// The part of the last `.partBegin` step, until `takePart()`.
    private var begunPart: MultipartPart?
    private var inPart = false
    private var sawFirstDelimiter = false
    private var preambleBytes: UInt64 = 0
    /// Set when the first delimiter line ends in a bare LF (old IE): such a body may use `\n--boundary`
    /// delimiters throughout. A CRLF body may not: there a bare-LF look-alike is data.
    private var lfBody = false

    /// Before the first delimiter the line-ending style is unknown, so both forms are looked for.
    private var lfDelimitersAllowed: Bool { lfBody || !sawFirstDelimiter }

    /// Whether the boundary given to `init` is usable: 1 to 200 bytes without CR or LF. Every caller passes one
    /// that `MultipartBoundary.parse` validated (1-70 bchars) or that the encoder generated; should one not be,
    /// the body fails (`invalid_boundary`, thrown by `step` and `finish`), not the process.
    private let boundaryIsValid: Bool

    /// Creates a parser for `boundary` (without the leading `--`), e.g. from `MultipartBoundary.parse`.
    public init(boundary: [UInt8], limits: MultipartLimits = MultipartLimits(),
                anomalies: MultipartAnomalies = MultipartAnomalies()) {
        // Two memchr calls: `contains` stepped through the bytes generically, about ten instructions a byte.
        let hasLineBreak = boundary.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress else { return false }
            return memchr(base, Int32(ASCII.lf), bytes.count) != nil || memchr(base, Int32(ASCII.cr), bytes.count) != nil
        }
        boundaryIsValid = !boundary.isEmpty && boundary.count <= 200 && !hasLineBreak
        self.limits = limits
        self.anomalies = anomalies
        // CRLF, `--` and the boundary, written straight into the start of one allocation that also holds the
        // transport-padding tail after it.
        let patternCount = 4 + boundary.count
        let block = UnsafeMutableRawBufferPointer.allocate(
            byteCount: patternCount + max(limits.maxTransportPadding, 0) + 2, alignment: 1)
        crlfPattern = UnsafeMutableRawBufferPointer(rebasing: block[..<patternCount])
        crlfPattern[0] = ASCII.cr
        crlfPattern[1] = ASCII.lf
        crlfPattern[2] = ASCII.hyphen
        crlfPattern[3] = ASCII.hyphen
        UnsafeMutableRawBufferPointer(rebasing: crlfPattern[4...]).copyBytes(from: boundary)
        lfPattern = UnsafeRawBufferPointer(rebasing: crlfPattern[1...])
        tail = UnsafeMutableRawBufferPointer(rebasing: block[patternCount...])
        // headerBuf is reserved when a header block first has to be copied (one split across inputs).
    }

    /// A part's header block lying whole in `count` bytes at `base`: its length (the lines before the blank
    /// line), the bytes up to and including the blank line, and whether that blank line is a bare LF. Nil when
    /// the blank line is not there, or when the block and blank line exceed `limit` (the copying loop then
    /// reports it at the same offset).
    private static func wholeHeaderBlock(_ base: UnsafeRawPointer, count: Int, limit: Int)
        -> (length: Int, consumed: Int, bareBlankLine: Bool)? {
        var cursor = 0
        while cursor < count {
            guard let nl = memchr(base + cursor, Int32(ASCII.lf), count - cursor) else { return nil }
            let end = UnsafeRawPointer(nl) - base + 1
            guard end <= limit else { return nil }
            let lineCount = end - cursor
            if lineCount == 1 || (lineCount == 2 && base.load(fromByteOffset: cursor, as: UInt8.self) == ASCII.cr) {
                return (cursor, end, lineCount == 1)
            }
            cursor = end
        }
        return nil
    }

    /// A complete part header block parsed (its errors reported at `errorOffset`), with `lf-line` when its blank
    /// line was a bare LF.
    private static func part(_ block: UnsafeRawBufferPointer, bareBlankLine: Bool,
                             errorOffset: UInt64) throws(MultipartError) -> MultipartPart {
        var part: MultipartPart
        do {
            part = try MultipartPart.parse(headerBlock: block)
        } catch {
            throw MultipartError(error.kind, at: errorOffset)
        }
        if bareBlankLine { part.anomalies.insert(.lfLine) }
        return part
    }

    /// The part's data follows: the header buffer is emptied and scanning for the next delimiter starts.
    private func begin(_ part: consuming MultipartPart) -> MultipartStep {
        headerBuf.removeAll(keepingCapacity: true)
        lineStart = 0
        inPart = true
        state = .scanning(heldFrom: 0, heldTo: 0)
        begunPart = part
        return .partBegin
    }

    /// The part `step` announced with `.partBegin`, moved out (nil once taken).
    package func takePart() -> MultipartPart? {
        begunPart.take()
    }

    deinit {
        crlfPattern.deallocate()   // the whole block: the pattern starts it, the tail lies inside it
    }

    /// Bytes the parser currently retains between calls: the partial header block, a held-back delimiter
    /// prefix and consumed transport padding. Bounded by `maxPartHeaderBytes + delimiter + padding + 2`.
    public var retainedBytes: Int {
        var held = 0
        if case .scanning(let from, let to) = state { held = to - from }
        if case .start(let matched) = state { held = matched }
        return headerBuf.count + held + tailCount
    }

    /// Calls `handler` for every event in `chunk`. A convenience over `next(_:consumed:)`.
    @inlinable
    public func feed(_ chunk: UnsafeRawBufferPointer,
                     _ handler: (MultipartEvent) throws(MultipartError) -> Void) throws(MultipartError) {
        var consumed = 0
        while let event = try next(chunk, consumed: &consumed) { try handler(event) }
    }

    /// Returns the next event found in `input[consumed...]`, advancing `consumed`, or `nil` once the whole
    /// chunk is used up (`consumed == input.count`) and more input is needed.
    public func next(_ input: UnsafeRawBufferPointer, consumed pos: inout Int) throws(MultipartError)
        -> MultipartEvent?
    {
        switch try step(input, consumed: &pos) {
        case nil: return nil
        case .partBegin?:
            // `step` has just set it.
            guard let part = takePart() else { return nil }
            return .partBegin(part)
        case .partData(let span)?: return .partData(span)
        case .partEnd?: return .partEnd
        case .end?: return .end
        }
    }

    /// How many of the `count` bytes of `input` from `at` equal those of `crlfPattern` from `pattern` before the
    /// first difference. The caller keeps both ranges in bounds. A whole match, the usual case (the body's opening
    /// delimiter), is one `memcmp`; the byte loop it replaces cost about ten instructions a byte, some 450 a request.
    @inline(__always)
    private func commonPrefix(_ input: UnsafeRawBufferPointer, at: Int, pattern: Int, count: Int) -> Int {
        guard count > 0, let base = input.baseAddress, let patternBase = crlfPattern.baseAddress else { return 0 }
        if memcmp(base + at, patternBase + pattern, count) == 0 { return count }
        var m = 0
        while m < count, input[at + m] == crlfPattern[pattern + m] { m += 1 }
        return m
    }

    /// `next(_:consumed:)` with the begun part left in the parser for `takePart()`.
    package func step(_ input: UnsafeRawBufferPointer, consumed pos: inout Int) throws(MultipartError)
        -> MultipartStep?
    {
        guard boundaryIsValid else { throw MultipartError(.invalidBoundary, at: 0) }
        let startPos = pos
        defer { offset &+= UInt64(pos - startPos) }
        while true {
            switch state {
            case .start(let matched):
                let need = crlfPattern.count - 2 - matched
                let avail = input.count - pos
                let k = min(need, avail)
                let m = commonPrefix(input, at: pos, pattern: 2 + matched, count: k)
                if m == need {
                    pos += m
                    tailCount = 0
                    state = .delimiterTail(from: 2, phase: .start)
                } else if m == avail {
                    pos += m
                    state = .start(matched: matched + m)
                    return nil
                } else if matched + m >= 2 {
                    // The body opens with a delimiter line for some other boundary: refuse rather than treat
                    // a whole would-be part as preamble that another parser might read as a part.
                    throw MultipartError(.missingInitialDelimiter, at: offset + UInt64(pos - startPos + m))
                } else {
                    pos += m
                    preambleBytes += UInt64(matched + m)
                    state = .scanning(heldFrom: 0, heldTo: 0)
                }

            case .scanning(let heldFrom, let heldTo) where heldTo > heldFrom:
                let need = crlfPattern.count - heldTo
                let avail = input.count - pos
                let k = min(need, avail)
                let m = commonPrefix(input, at: pos, pattern: heldTo, count: k)
                if m == need {
                    pos += m
                    tailCount = 0
                    if heldFrom == 1 && !lfDelimitersAllowed {
                        // Completed across chunks: the same bare-LF look-alike the search path flags below.
                        anomalies.insert(.delimiterLookalike)
                        state = .replay(from: 1)
                    } else {
                        state = .delimiterTail(from: heldFrom, phase: .start)
                    }
                } else if m == avail {
                    pos += m
                    state = .scanning(heldFrom: heldFrom, heldTo: heldTo + m)
                    return nil
                } else {
                    // Not a delimiter: the held bytes were data after all. The input bytes that matched
                    // contain no LF, so scanning resumes at `pos` without missing a candidate.
                    state = .scanning(heldFrom: 0, heldTo: 0)
                    let held = UnsafeRawBufferPointer(rebasing: crlfPattern[heldFrom..<heldTo])
                    if inPart { return .partData(held) }
                    preambleBytes += UInt64(held.count)
                }

            case .scanning:
                let avail = input.count - pos
                if avail == 0 { return nil }
                let base = input.baseAddress! + pos
                let needleCount = lfPattern.count
                if let found = cl_find_delimiter(base, avail, lfPattern.baseAddress!, needleCount) {
                    let i = UnsafeRawPointer(found) - base
                    let crlf = i > 0 && base.load(fromByteOffset: i - 1, as: UInt8.self) == ASCII.cr
                    if !crlf && !lfDelimitersAllowed {
                        // `\n--boundary` without CR in a CRLF body is data (RFC 2046), but worth a flag. The
                        // look-alike goes out with the data it ends, as when it completes across chunks.
                        anomalies.insert(.delimiterLookalike)
                        pos += i + needleCount
                        if inPart { return .partData(UnsafeRawBufferPointer(start: base, count: i + needleCount)) }
                        preambleBytes += UInt64(i + needleCount)
                        continue
                    }
                    let dataEnd = crlf ? i - 1 : i
                    if dataEnd > 0 {
                        pos += dataEnd
                        if inPart { return .partData(UnsafeRawBufferPointer(start: base, count: dataEnd)) }
                        preambleBytes += UInt64(dataEnd)
                        continue
                    }
                    pos += i + needleCount
                    tailCount = 0
                    state = .delimiterTail(from: crlf ? 0 : 1, phase: .start)
                    continue
                }
                // No whole delimiter: hold back the longest suffix that may begin one.
                var keep = avail
                var heldFrom = 0
                var heldTo = 0
                var k = max(0, avail - (needleCount - 1))
                while k < avail, let nl = memchr(base + k, Int32(ASCII.lf), avail - k) {
                    let j = UnsafeRawPointer(nl) - base
                    let cr = j > 0 && base.load(fromByteOffset: j - 1, as: UInt8.self) == ASCII.cr
                    if memcmp(base + j, lfPattern.baseAddress!, avail - j) == 0 {
                        keep = cr ? j - 1 : j
                        heldFrom = cr ? 0 : 1
                        heldTo = 1 + (avail - j)
                        break
                    }
                    k = j + 1
                }
                if heldTo == 0, base.load(fromByteOffset: avail - 1, as: UInt8.self) == ASCII.cr {
                    keep = avail - 1
                    heldFrom = 0
                    heldTo = 1
                }
                pos += avail
                state = .scanning(heldFrom: heldFrom, heldTo: heldTo)
                if keep > 0 {
                    if inPart { return .partData(UnsafeRawBufferPointer(start: base, count: keep)) }
                    preambleBytes += UInt64(keep)
                }
                return nil

            case .delimiterTail(let from, let phase):
                if pos == input.count { return nil }
                let c = input[pos]
                switch phase {
                case .start, .padding:
                    if phase == .start && c == ASCII.hyphen {
                        appendTail(c); pos += 1
                        state = .delimiterTail(from: from, phase: .dash)
                    } else if c == ASCII.space || c == ASCII.tab, tailCount < limits.maxTransportPadding {
                        appendTail(c); pos += 1
                        state = .delimiterTail(from: from, phase: .padding)
                    } else if c == ASCII.cr {
                        appendTail(c); pos += 1
                        state = .delimiterTail(from: from, phase: .cr)
                    } else if c == ASCII.lf, lfDelimitersAllowed {
                        pos += 1
                        anomalies.insert(.lfLine)
                        if !sawFirstDelimiter { lfBody = true }
                        if let event = try confirmDelimiter(from: from, close: false) { return event }
                    } else {
                        try lookalike(from: from)
                    }
                case .dash:
                    if c == ASCII.hyphen {
                        pos += 1
                        tailCount = 0
                        if let event = try confirmDelimiter(from: from, close: true) { return event }
                    } else {
                        try lookalike(from: from)
                    }
                case .cr:
                    if c == ASCII.lf {
                        pos += 1
                        if let event = try confirmDelimiter(from: from, close: false) { return event }
                    } else {
                        try lookalike(from: from)
                    }
                }

            case .replay(let from):
                state = tailCount > 0 ? .replayTail : .scanning(heldFrom: 0, heldTo: 0)
                let bytes = UnsafeRawBufferPointer(rebasing: crlfPattern[from...])
                if inPart { return .partData(bytes) }
                preambleBytes += UInt64(bytes.count)

            case .replayTail:
                state = .scanning(heldFrom: 0, heldTo: 0)
                let bytes = UnsafeRawBufferPointer(rebasing: tail[0..<tailCount])
                tailCount = 0
                if inPart { return .partData(bytes) }
                preambleBytes += UInt64(bytes.count)

            case .headers:
                let avail = input.count - pos
                if avail == 0 { return nil }
                let base = input.baseAddress! + pos
                if headerBuf.isEmpty, let block = Self.wholeHeaderBlock(base, count: avail, limit: limits.maxPartHeaderBytes) {
                    // The usual case: the whole block and its blank line are in this input, within the limit.
                    // Parsed in place: the same block, lines and result as the copying loop below.
                    pos += block.consumed
                    return begin(try Self.part(UnsafeRawBufferPointer(start: base, count: block.length),
                                               bareBlankLine: block.bareBlankLine,
                                               errorOffset: offset + UInt64(pos - startPos)))
                }
                if headerBuf.capacity == 0 { headerBuf.reserveCapacity(min(1024, limits.maxPartHeaderBytes)) }
                guard let nl = memchr(base, Int32(ASCII.lf), avail) else {
                    guard headerBuf.count + avail <= limits.maxPartHeaderBytes else {
                        throw MultipartError(.partHeadersTooLarge, at: offset + UInt64(pos - startPos))
                    }
                    headerBuf.append(contentsOf: UnsafeRawBufferPointer(start: base, count: avail))
                    pos += avail
                    return nil
                }
                let lineLen = UnsafeRawPointer(nl) - base + 1
                guard headerBuf.count + lineLen <= limits.maxPartHeaderBytes else {
                    throw MultipartError(.partHeadersTooLarge, at: offset + UInt64(pos - startPos))
                }
                headerBuf.append(contentsOf: UnsafeRawBufferPointer(start: base, count: lineLen))
                pos += lineLen
                let lineCount = headerBuf.count - lineStart
                let isBlank = lineCount == 1 || (lineCount == 2 && headerBuf[lineStart] == ASCII.cr)
                if !isBlank {
                    lineStart = headerBuf.count
                    continue
                }
                let errorOffset = offset + UInt64(pos - startPos)
                let blockEnd = lineStart
                let result = headerBuf.withUnsafeBytes { all in
                    Result { () throws(MultipartError) -> MultipartPart in
                        try Self.part(UnsafeRawBufferPointer(rebasing: all[0..<blockEnd]), bareBlankLine: lineCount == 1,
                                      errorOffset: errorOffset)
                    }
                }
                return begin(try result.get())

            case .pendingEnd:
                state = .epilogue(seen: 0)
                isComplete = true
                return .end

            case .epilogue(var seen):
                while pos < input.count {
                    let c = input[pos]
                    if seen < 2, c == (seen == 0 ? ASCII.cr : ASCII.lf) {
                        seen += 1
                    } else {
                        anomalies.insert(.dataAfter)
                        seen = 2
                    }
                    pos += 1
                }
                state = .epilogue(seen: seen)
                return nil
            }
        }
    }

    /// Declares the end of input. Throws `missing_initial_delimiter` or `truncated` unless the close
    /// delimiter was seen.
    public func finish() throws(MultipartError) {
        guard boundaryIsValid else { throw MultipartError(.invalidBoundary, at: 0) }
        switch state {
        case .epilogue:
            return
        case .pendingEnd:
            // The caller stopped draining between the last `partEnd` and `end` (a stage blocked on a replay at
            // the close delimiter). The close delimiter was seen, so the body is complete: no trap.
            state = .epilogue(seen: 0)
            isComplete = true
            return
        case .start, .scanning, .delimiterTail, .replay, .replayTail:
            throw MultipartError(sawFirstDelimiter ? .truncated : .missingInitialDelimiter, at: offset)
        case .headers:
            throw MultipartError(.truncated, at: offset)
        }
    }

    @inline(__always)
    private func appendTail(_ c: UInt8) {
        tail[tailCount] = c
        tailCount += 1
    }

    private func lookalike(from: Int) throws(MultipartError) {
        if from == 2 {
            // `--boundary` followed by junk at the very start of the body (e.g. `--boundary-X`).
            throw MultipartError(.missingInitialDelimiter, at: offset)
        }
        anomalies.insert(.delimiterLookalike)
        state = .replay(from: from)
    }

    private func confirmDelimiter(from: Int, close: Bool) throws(MultipartError) -> MultipartStep? {
        tailCount = 0
        if from == 1 { anomalies.insert(.lfLine) }
        if !sawFirstDelimiter {
            sawFirstDelimiter = true
            if preambleBytes > 0 { anomalies.insert(.dataBefore) }
        }
        let wasInPart = inPart
        inPart = false
        if !close {
            partCount += 1
            if partCount > limits.maxParts { throw MultipartError(.tooManyParts, at: offset) }
            headerBuf.removeAll(keepingCapacity: true)
            lineStart = 0
            state = .headers
            return wasInPart ? .partEnd : nil
        }
        if wasInPart {
            state = .pendingEnd
            return .partEnd
        }
        state = .epilogue(seen: 0)
        isComplete = true
        return .end
    }
}
