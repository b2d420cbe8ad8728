import Glibc
import Testing

@testable import HTTP1

/// Runs `body` with `bytes` placed so that they end exactly at a `PROT_NONE` page: a parser that reads
/// one byte past its input crashes the test instead of passing by luck (the picohttpparser trick).
func withGuardedBytes<R>(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) -> R) -> R {
    let page = Int(sysconf(Int32(_SC_PAGESIZE)))
    let dataPages = max(1, (bytes.count + page - 1) / page)
    let size = (dataPages + 1) * page
    guard let mapping = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
        mapping != MAP_FAILED
    else {
        preconditionFailure("mmap failed: \(errno)")
    }
    defer { munmap(mapping, size) }
    let guardPage = mapping + dataPages * page
    precondition(mprotect(guardPage, page, PROT_NONE) == 0, "mprotect failed")
    let start = guardPage - bytes.count
    bytes.withUnsafeBytes { source in
        if let base = source.baseAddress {
            start.copyMemory(from: base, byteCount: source.count)
        }
    }
    return body(UnsafeRawBufferPointer(start: start, count: bytes.count))
}

/// Every way the parser tests feed an input: whole, byte by byte, and cut in two at every offset.
func chunkings(of bytes: [UInt8]) -> [[[UInt8]]] {
    var result: [[[UInt8]]] = [[bytes], bytes.map { [$0] }]
    for cut in 0...bytes.count {
        result.append([Array(bytes[..<cut]), Array(bytes[cut...])])
    }
    return result
}

/// What a head parser made of a whole input.
enum HeadOutcome<Head: Equatable>: Equatable {
    /// The head ended after `headLength` bytes of the input.
    case complete(Head, headLength: Int)
    /// The input ended before the head did.
    case incomplete
    /// The parser threw.
    case failed(HTTPParseError)

    var error: HTTPParseError? {
        if case .failed(let error) = self {
            return error
        }
        return nil
    }

    var head: Head? {
        if case .complete(let head, _) = self {
            return head
        }
        return nil
    }
}

/// Feeds `chunks` in order until the head completes or fails.
func feedHead<Head>(
    _ chunks: [[UInt8]],
    parse: (UnsafeRawBufferPointer) throws(HTTPParseError) -> HTTPHeadParseResult<Head>
) -> HeadOutcome<Head> {
    var fed = 0
    for chunk in chunks {
        let result = withGuardedBytes(chunk) { buffer in
            Result { () throws(HTTPParseError) in try parse(buffer) }
        }
        switch result {
        case .failure(let error):
            return .failed(error)
        case .success(.needMore(let consumed)):
            #expect(consumed == chunk.count)
            fed += consumed
        case .success(.complete(let head, let consumed)):
            #expect(consumed <= chunk.count)
            return .complete(head, headLength: fed + consumed)
        }
    }
    return .incomplete
}

/// Parses `text` as a request under every chunking, expects one identical outcome and returns it.
func parseRequest(
    _ text: String,
    limits: HTTPLimits = HTTPLimits(),
    sourceLocation: SourceLocation = #_sourceLocation
) -> HeadOutcome<HTTPRequestHead> {
    parseRequest(bytes: Array(text.utf8), limits: limits, sourceLocation: sourceLocation)
}

/// Parses `bytes` as a request under every chunking, expects one identical outcome and returns it.
func parseRequest(
    bytes: [UInt8],
    limits: HTTPLimits = HTTPLimits(),
    sourceLocation: SourceLocation = #_sourceLocation
) -> HeadOutcome<HTTPRequestHead> {
    let outcomes = chunkings(of: bytes).map { chunks in
        var parser = HTTPRequestHeadParser(limits: limits)
        return feedHead(chunks) { (buffer) throws(HTTPParseError) in try parser.parse(buffer) }
    }
    expectAllEqual(outcomes, sourceLocation: sourceLocation)
    return outcomes[0]
}

/// Parses `text` as a response to `method` under every chunking, expects one outcome and returns it.
func parseResponse(
    _ text: String,
    method: String = "GET",
    limits: HTTPLimits = HTTPLimits(),
    sourceLocation: SourceLocation = #_sourceLocation
) -> HeadOutcome<HTTPResponseHead> {
    parseResponse(bytes: Array(text.utf8), method: method, limits: limits, sourceLocation: sourceLocation)
}

/// Parses `bytes` as a response to `method` under every chunking, expects one outcome and returns it.
func parseResponse(
    bytes: [UInt8],
    method: String = "GET",
    limits: HTTPLimits = HTTPLimits(),
    sourceLocation: SourceLocation = #_sourceLocation
) -> HeadOutcome<HTTPResponseHead> {
    let outcomes = chunkings(of: bytes).map { chunks in
        var parser = HTTPResponseHeadParser(limits: limits)
        return feedHead(chunks) { (buffer) throws(HTTPParseError) in
            try parser.parse(buffer, requestMethod: method)
        }
    }
    expectAllEqual(outcomes, sourceLocation: sourceLocation)
    return outcomes[0]
}

/// What a chunked decoder made of a whole input.
struct ChunkedOutcome: Equatable {
    /// The concatenated `.data` spans.
    var body: [UInt8] = []
    /// The input offset just after the body, if `.end` was seen.
    var endOffset: Int?
    /// The error thrown, if any.
    var error: HTTPParseError?
}

/// Feeds `chunks` to a fresh decoder, checking that every span lies inside the chunk it came from.
func decodeChunked(_ chunks: [[UInt8]], limits: HTTPLimits = HTTPLimits()) -> ChunkedOutcome {
    var decoder = ChunkedDecoder(limits: limits)
    var outcome = ChunkedOutcome()
    var fed = 0
    for chunk in chunks {
        let failure: HTTPParseError? = withGuardedBytes(chunk) { input in
            var offset = 0
            while true {
                let event: ChunkedEvent?
                do throws(HTTPParseError) {
                    event = try decoder.decode(input, from: &offset)
                } catch {
                    return error
                }
                switch event {
                case .none:
                    #expect(offset == input.count || outcome.endOffset != nil)
                    return nil
                case .data(let span):
                    #expect(!span.isEmpty)
                    if let base = input.baseAddress, let start = span.baseAddress {
                        #expect(start >= base && start + span.count <= base + input.count)
                    }
                    outcome.body.append(contentsOf: span)
                case .end:
                    #expect(outcome.endOffset == nil)
                    outcome.endOffset = fed + offset
                }
            }
        }
        if let failure {
            outcome.error = failure
            return outcome
        }
        fed += chunk.count
    }
    return outcome
}

/// Decodes `bytes` under every chunking, expects one identical outcome and returns it.
func decodeChunked(
    bytes: [UInt8],
    limits: HTTPLimits = HTTPLimits(),
    sourceLocation: SourceLocation = #_sourceLocation
) -> ChunkedOutcome {
    let outcomes = chunkings(of: bytes).map { decodeChunked($0, limits: limits) }
    expectAllEqual(outcomes, sourceLocation: sourceLocation)
    return outcomes[0]
}

/// Decodes `text` under every chunking, expects one identical outcome and returns it.
func decodeChunked(
    _ text: String,
    limits: HTTPLimits = HTTPLimits(),
    sourceLocation: SourceLocation = #_sourceLocation
) -> ChunkedOutcome {
    decodeChunked(bytes: Array(text.utf8), limits: limits, sourceLocation: sourceLocation)
}

/// Expects every value to equal the first (the whole-input result).
func expectAllEqual<T: Equatable>(_ values: [T], sourceLocation: SourceLocation) {
    let mismatches = values.indices.filter { values[$0] != values[0] }
    #expect(
        mismatches.isEmpty,
        "chunkings \(Array(mismatches.prefix(5))) differ from the whole input",
        sourceLocation: sourceLocation
    )
}


/// The helper itself must notice a parser that depends on chunk boundaries.
@Test func chunkingsCoverWholeBytewiseAndEveryCut() {
    let all = chunkings(of: Array("abc".utf8))
    #expect(all.count == 2 + 4)
    #expect(all[0] == [Array("abc".utf8)])
    #expect(all[1] == [[97], [98], [99]])
    #expect(all[2] == [[], Array("abc".utf8)])
    #expect(all.allSatisfy { $0.flatMap { $0 } == Array("abc".utf8) })
}

/// The guard page really is there: reading one byte past the input kills the process.
@Test func guardPageTrapsOneByteOverRead() async {
    await #expect(processExitsWith: .signal(SIGSEGV)) {
        let byte = withGuardedBytes([1, 2, 3]) { $0.baseAddress!.load(fromByteOffset: 3, as: UInt8.self) }
        print(byte)
    }
    let inBounds = withGuardedBytes([1, 2, 3]) { $0.baseAddress!.load(fromByteOffset: 2, as: UInt8.self) }
    #expect(inBounds == 3)
}
