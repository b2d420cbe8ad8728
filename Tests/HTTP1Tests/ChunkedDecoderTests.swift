import Testing

@testable import HTTP1

@Suite struct ChunkedDecoderTests {
    func expectRejected(
        _ text: String,
        _ expected: HTTPParseError,
        kind: String,
        limits: HTTPLimits = HTTPLimits(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let error = decodeChunked(text, limits: limits, sourceLocation: sourceLocation).error
        #expect(error == expected, sourceLocation: sourceLocation)
        #expect(error?.kind == kind, sourceLocation: sourceLocation)
        #expect(error?.status == 400, sourceLocation: sourceLocation)
    }

    @Test func decodesChunksAndStopsAfterTheBody() {
        let body = "5\r\nhello\r\nA\r\n, world!!!\r\n0\r\n\r\n"
        let outcome = decodeChunked(body + "GET / HTTP/1.1\r\n")
        #expect(String(decoding: outcome.body, as: UTF8.self) == "hello, world!!!")
        #expect(outcome.endOffset == body.utf8.count)
        #expect(outcome.error == nil)
    }

    @Test func incompleteBodyHasNoEnd() {
        let outcome = decodeChunked("5\r\nhel")
        #expect(outcome.body == Array("hel".utf8))
        #expect(outcome.endOffset == nil)
        #expect(outcome.error == nil)
        #expect(decodeChunked("0\r\n\r").endOffset == nil)
    }

    @Test func acceptsUpperAndLowerHexAndLeadingZeros() {
        let data = String(repeating: "x", count: 0x1f)
        #expect(decodeChunked("1f\r\n\(data)\r\n001F\r\n\(data)\r\n0000\r\n\r\n").body.count == 62)
    }

    /// Sixteen digits, up to the largest size accepted (2^63 - 1): its first bytes are data.
    @Test func sixteenHexDigitsAreAllowed() {
        let outcome = decodeChunked("7FFFFFFFFFFFFFFF\r\nab")
        #expect(outcome.error == nil)
        #expect(outcome.body == Array("ab".utf8))
        #expect(outcome.endOffset == nil)
    }

    @Test(arguments: [
        ";a", ";a=b", ";a=\"quoted \\\" value\"", ";a;b=c;d=\"\"", ";name=tok-en.1", ";a=\"caf\u{e9}\"",
    ])
    func validExtensions(extensions: String) {
        let outcome = decodeChunked("3\(extensions)\r\nabc\r\n0\(extensions)\r\n\r\n")
        #expect(outcome.error == nil)
        #expect(outcome.body == Array("abc".utf8))
        #expect(outcome.endOffset != nil)
    }

    @Test func trailersAreValidatedAndDiscarded() {
        let text = "3\r\nabc\r\n0\r\nX-Checksum: 123\r\nX-Empty:\r\n\r\n"
        let outcome = decodeChunked(text + "rest")
        #expect(outcome.body == Array("abc".utf8))
        #expect(outcome.endOffset == text.utf8.count)
    }

    @Test func decoderReturnsNilAfterEndWithoutConsuming() throws {
        var decoder = ChunkedDecoder()
        let bytes = Array("0\r\n\r\nNEXT".utf8)
        let offsets = try bytes.withUnsafeBytes { input in
            Result { () throws(HTTPParseError) -> [Int] in
                var offset = 0
                guard case .end = try decoder.decode(input, from: &offset) else {
                    return []
                }
                let afterEnd = offset
                let again = try decoder.decode(input, from: &offset)
                return again == nil ? [afterEnd, offset] : []
            }
        }.get()
        #expect(offsets == [5, 5])
        #expect(decoder.isComplete)
    }

    // Past UInt64, and past 2^63 - 1 (what a signed 64-bit parser holds; nginx refuses more too).
    @Test(arguments: ["10000000000000000\r\n", "8000000000000000\r\n", "ffffffffffffffff\r\n"])
    func chunkSizeOverflow(line: String) {
        expectRejected(line, .chunkSizeOverflow, kind: "chunk_size_overflow")
    }

    @Test func chunkSizeWithSeventeenHexDigits() {
        expectRejected("00000000000000001\r\nx\r\n0\r\n\r\n", .chunkSizeOverflow, kind: "chunk_size_overflow")
    }

    @Test(arguments: ["zz\r\n", "\r\n", ";a\r\n", " 5\r\n", "5 \r\n", "5 ;a\r\n", "-5\r\n", "0x5\r\n", "5\t\r\n"])
    func invalidChunkSize(line: String) {
        expectRejected(line, .invalidChunkSize, kind: "invalid_chunk_size")
    }

    @Test(arguments: [
        ";", ";=x", ";a=", "; a", ";a =b", ";a= b", ";a=\"x", ";a=\"x\"y", ";a=b c", ";a=\"\u{1}\"", ";a,b",
    ])
    func badChunkExtension(extensions: String) {
        expectRejected("5\(extensions)\r\nhello\r\n0\r\n\r\n", .invalidChunkExtension, kind: "invalid_chunk_extension")
    }

    @Test func extensionTooLong() {
        let limits = HTTPLimits(maxChunkExtensionBytes: 8)
        #expect(decodeChunked("1;abcdefg\r\nx\r\n0\r\n\r\n", limits: limits).error == nil)
        expectRejected(
            "1;abcdefgh\r\nx\r\n0\r\n\r\n",
            .chunkExtensionTooLong,
            kind: "chunk_extension_too_long",
            limits: limits
        )
        let long = ";" + String(repeating: "e", count: 1024)
        expectRejected("1\(long)\r\nx\r\n0\r\n\r\n", .chunkExtensionTooLong, kind: "chunk_extension_too_long")
    }

    @Test func extensionLimitIsPerChunk() {
        let limits = HTTPLimits(maxChunkExtensionBytes: 4)
        #expect(decodeChunked("1;abc\r\nx\r\n1;abc\r\ny\r\n0;abc\r\n\r\n", limits: limits).error == nil)
    }

    @Test func trailersTooLarge() {
        let trailer = "X-T: 1234\r\n\r\n"
        let limits = HTTPLimits(maxTrailerBytes: trailer.utf8.count)
        #expect(decodeChunked("0\r\n\(trailer)", limits: limits).endOffset != nil)
        let tight = HTTPLimits(maxTrailerBytes: trailer.utf8.count - 1)
        expectRejected("0\r\n\(trailer)", .trailersTooLarge, kind: "trailers_too_large", limits: tight)
    }

    /// The default limit (8 KiB), fed whole and byte by byte only: every split of 9 KiB is too slow.
    @Test func trailersTooLargeWithDefaultLimits() {
        let big = Array(("0\r\n" + (0..<500).map { "X-\($0): 0123456789\r\n" }.joined() + "\r\n").utf8)
        #expect(big.count > 9000)
        #expect(decodeChunked([big]).error == .trailersTooLarge)
        #expect(decodeChunked(big.map { [$0] }).error == .trailersTooLarge)
    }

    @Test(arguments: ["5\r\nhelloX\r\n0\r\n\r\n", "5\r\nhello0\r\n\r\n", "1\r\nab\r\n"])
    func missingCRLFAfterChunkData(body: String) {
        expectRejected(body, .missingChunkCRLF, kind: "missing_chunk_crlf")
    }

    @Test(arguments: ["5\r\nhello\n0\r\n\r\n", "5\n", "5;a\n", "5;a=\"b\"\n", "0\r\n\n", "0\r\nX: 1\n\r\n", "\n"])
    func bareLF(body: String) {
        expectRejected(body, .bareLF, kind: "bare_lf")
    }

    @Test(arguments: ["5\rhello", "5\r\nhello\rX", "0\r\n\rX", "0\r\nX: 1\rY"])
    func bareCR(body: String) {
        expectRejected(body, .bareCR, kind: "bare_cr")
    }

    @Test(arguments: [
        "0\r\n X: 1\r\n\r\n", "0\r\nX : 1\r\n\r\n", "0\r\n: 1\r\n\r\n", "0\r\nX\r\n\r\n", "0\r\nX: \u{0}\r\n\r\n",
    ])
    func invalidTrailer(body: String) {
        expectRejected(body, .invalidTrailer, kind: "invalid_trailer")
    }

    @Test func keepsThrowingAfterAnError() {
        var decoder = ChunkedDecoder()
        for text in ["zz", "5\r\n"] {
            let bytes = Array(text.utf8)
            let result = bytes.withUnsafeBytes { input in
                Result { () throws(HTTPParseError) in
                    var offset = 0
                    return try decoder.decode(input, from: &offset) == nil
                }
            }
            #expect(throws: HTTPParseError.invalidChunkSize) { try result.get() }
        }
    }
}
