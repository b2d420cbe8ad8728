//  HTTP1: pure HTTP/1.1 parsing and serialization. No I/O; every parser is fed caller-owned bytes.
//
//   client bytes ──▶ HTTPRequestHeadParser ──▶ HTTPRequestHead ──▶ HTTPHeadSerializer ──▶ upstream
//                          │ (framing)
//                          ▼
//                    ChunkedDecoder / Content-Length ──▶ body stages ──▶ ChunkedEncoder ──▶ upstream
//
//   upstream bytes ──▶ HTTPResponseHeadParser ──▶ HTTPResponseHead ──▶ HTTPHeadSerializer ──▶ client
//
//   Any HTTPParseError ──▶ HTTPErrorResponse (JSON body, Connection: close)

/// Size and count bounds applied by the HTTP/1.1 parsers.
///
/// Every bound is checked as bytes arrive, so a peer can never make a parser buffer more than
/// these limits allow. Exceeding a head bound is reported with status 431.
public struct HTTPLimits: Sendable, Hashable {
    /// Maximum bytes of a request or response head: leading empty lines, start line, header lines
    /// and the final empty line, CRLFs included. Default 16 KiB.
    public var maxHeadBytes: Int
    /// Maximum number of header field lines in a head. Default 100.
    public var maxHeaderCount: Int
    /// Maximum bytes of chunk extensions on one chunk-size line, from the first `;` up to the CR.
    /// Default 1 KiB.
    public var maxChunkExtensionBytes: Int
    /// Maximum bytes of the trailer section after the last chunk, CRLFs included. Default 8 KiB.
    public var maxTrailerBytes: Int

    /// Creates limits; every argument defaults to the documented default.
    public init(
        maxHeadBytes: Int = 16 * 1024,
        maxHeaderCount: Int = 100,
        maxChunkExtensionBytes: Int = 1024,
        maxTrailerBytes: Int = 8 * 1024
    ) {
        // Configuration, not input: checked when the server starts.
        precondition(maxHeadBytes > 0 && maxHeaderCount >= 0, "limits must be positive")
        precondition(maxChunkExtensionBytes >= 0 && maxTrailerBytes >= 2, "limits must be positive")
        self.maxHeadBytes = maxHeadBytes
        self.maxHeaderCount = maxHeaderCount
        self.maxChunkExtensionBytes = maxChunkExtensionBytes
        self.maxTrailerBytes = maxTrailerBytes
    }
}
