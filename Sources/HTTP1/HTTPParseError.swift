/// A typed, stable reason why HTTP/1.1 input was rejected.
///
/// Every error carries the status a server answers with (`status`) and a stable snake_case
/// `kind` used in error bodies, audit records and metrics. The set of errors may grow; compare
/// against the static members rather than switching exhaustively.
///
/// `status` is the answer to a *client* whose request was malformed. When the malformed input came
/// from an upstream response, a proxy answers its client with 502 instead.
public struct HTTPParseError: Error, Hashable, Sendable, CustomStringConvertible {
    enum Code: Hashable, Sendable {
        case headTooLarge
        case tooManyHeaders
        case invalidRequestLine
        case invalidRequestTarget
        case hostMismatch
        case invalidStatusLine
        case unsupportedVersion
        case bareLF
        case bareCR
        case obsFold
        case invalidHeaderName
        case whitespaceBeforeColon
        case invalidHeaderValue
        case missingHost
        case duplicateHost
        case duplicateContentType
        case contentLengthWithTransferEncoding
        case duplicateContentLength
        case contentLengthList
        case invalidContentLength
        case unsupportedTransferEncoding
        case invalidTransferEncoding
        case chunkedNotFinal
        case transferEncodingInHTTP10
        case unsupportedExpectation
        case invalidChunkSize
        case chunkSizeOverflow
        case invalidChunkExtension
        case chunkExtensionTooLong
        case missingChunkCRLF
        case invalidTrailer
        case trailersTooLarge
    }

    let code: Code

    init(_ code: Code) {
        self.code = code
    }

    /// The stable snake_case name of this error.
    public var kind: String {
        switch self.code {
        case .headTooLarge: return "head_too_large"
        case .tooManyHeaders: return "too_many_headers"
        case .invalidRequestLine: return "invalid_request_line"
        case .invalidRequestTarget: return "invalid_request_target"
        case .hostMismatch: return "host_mismatch"
        case .invalidStatusLine: return "invalid_status_line"
        case .unsupportedVersion: return "unsupported_version"
        case .bareLF: return "bare_lf"
        case .bareCR: return "bare_cr"
        case .obsFold: return "obs_fold"
        case .invalidHeaderName: return "invalid_header_name"
        case .whitespaceBeforeColon: return "whitespace_before_colon"
        case .invalidHeaderValue: return "invalid_header_value"
        case .missingHost: return "missing_host"
        case .duplicateHost: return "duplicate_host"
        case .duplicateContentType: return "duplicate_content_type"
        case .contentLengthWithTransferEncoding: return "content_length_with_transfer_encoding"
        case .duplicateContentLength: return "duplicate_content_length"
        case .contentLengthList: return "content_length_list"
        case .invalidContentLength: return "invalid_content_length"
        case .unsupportedTransferEncoding: return "unsupported_transfer_encoding"
        case .invalidTransferEncoding: return "invalid_transfer_encoding"
        case .chunkedNotFinal: return "chunked_not_final"
        case .transferEncodingInHTTP10: return "transfer_encoding_in_http10"
        case .unsupportedExpectation: return "unsupported_expectation"
        case .invalidChunkSize: return "invalid_chunk_size"
        case .chunkSizeOverflow: return "chunk_size_overflow"
        case .invalidChunkExtension: return "invalid_chunk_extension"
        case .chunkExtensionTooLong: return "chunk_extension_too_long"
        case .missingChunkCRLF: return "missing_chunk_crlf"
        case .invalidTrailer: return "invalid_trailer"
        case .trailersTooLarge: return "trailers_too_large"
        }
    }

    /// The HTTP status a server answers a client with for this error.
    public var status: Int {
        switch self.code {
        case .headTooLarge, .tooManyHeaders:
            return 431
        case .unsupportedVersion:
            return 505
        case .unsupportedTransferEncoding:
            return 501
        case .unsupportedExpectation:
            return 417
        case .invalidRequestLine, .invalidRequestTarget, .hostMismatch, .invalidStatusLine, .bareLF, .bareCR,
            .obsFold, .invalidHeaderName, .whitespaceBeforeColon, .invalidHeaderValue, .missingHost, .duplicateHost,
            .duplicateContentType,
            .contentLengthWithTransferEncoding, .duplicateContentLength, .contentLengthList,
            .invalidContentLength, .invalidTransferEncoding, .chunkedNotFinal, .transferEncodingInHTTP10,
            .invalidChunkSize, .chunkSizeOverflow, .invalidChunkExtension, .chunkExtensionTooLong,
            .missingChunkCRLF, .invalidTrailer, .trailersTooLarge:
            return 400
        }
    }

    /// `kind (status)`, for logs.
    public var description: String {
        "\(self.kind) (\(self.status))"
    }

    /// The head exceeded `HTTPLimits.maxHeadBytes` (431).
    public static let headTooLarge = HTTPParseError(.headTooLarge)
    /// The head had more than `HTTPLimits.maxHeaderCount` fields (431).
    public static let tooManyHeaders = HTTPParseError(.tooManyHeaders)
    /// The request line is not `token SP target SP HTTP/d.d` (400).
    public static let invalidRequestLine = HTTPParseError(.invalidRequestLine)
    /// A request-target that is none of the forms its method allows (RFC 9112 §3.2): origin-form (`/path`),
    /// absolute-form with an `http` or `https` scheme and no userinfo, `*` for OPTIONS, authority-form for
    /// CONNECT (400).
    public static let invalidRequestTarget = HTTPParseError(.invalidRequestTarget)
    /// An absolute-form target whose authority is not the Host field's value (RFC 9112 §3.2: a client must send
    /// them identical), or that comes without a Host field. A server reads the authority and ignores Host
    /// (§3.2.2), so a proxy that routed by Host would judge the request by another host's rules (400).
    public static let hostMismatch = HTTPParseError(.hostMismatch)
    /// The status line is not `HTTP/d.d SP 3DIGIT [SP reason]` (400; a proxy answers 502).
    public static let invalidStatusLine = HTTPParseError(.invalidStatusLine)
    /// A well-formed HTTP version other than 1.0 or 1.1 (505).
    public static let unsupportedVersion = HTTPParseError(.unsupportedVersion)
    /// A LF not preceded by CR (400).
    public static let bareLF = HTTPParseError(.bareLF)
    /// A CR not followed by LF (400).
    public static let bareCR = HTTPParseError(.bareCR)
    /// A header line starting with SP or HT: obsolete line folding (400).
    public static let obsFold = HTTPParseError(.obsFold)
    /// A field name that is empty, has a non-token byte, or has no colon (400).
    public static let invalidHeaderName = HTTPParseError(.invalidHeaderName)
    /// Whitespace between a field name and its colon (400).
    public static let whitespaceBeforeColon = HTTPParseError(.whitespaceBeforeColon)
    /// A field value with NUL, another control byte, DEL, or bytes that are not UTF-8 (400).
    public static let invalidHeaderValue = HTTPParseError(.invalidHeaderValue)
    /// An HTTP/1.1 request without a Host field (400).
    public static let missingHost = HTTPParseError(.missingHost)
    /// More than one Host field (400).
    public static let duplicateHost = HTTPParseError(.duplicateHost)
    /// More than one Content-Type field in a request: a singleton field (RFC 9110 §8.3). Which one a server
    /// reads differs (the first, the last, or both joined), so a body could be inspected as one type and
    /// parsed as another: refused.
    public static let duplicateContentType = HTTPParseError(.duplicateContentType)
    /// Both Content-Length and Transfer-Encoding present (400).
    public static let contentLengthWithTransferEncoding = HTTPParseError(.contentLengthWithTransferEncoding)
    /// More than one Content-Length field, even with equal values (400).
    public static let duplicateContentLength = HTTPParseError(.duplicateContentLength)
    /// A Content-Length value that is a comma-separated list, even of equal values (400).
    public static let contentLengthList = HTTPParseError(.contentLengthList)
    /// A Content-Length that is empty, not all digits, or larger than 2^63 − 1 (`HTTPHeaders.maxContentLength`)
    /// (400).
    public static let invalidContentLength = HTTPParseError(.invalidContentLength)
    /// A transfer coding this implementation does not decode, such as gzip (501).
    public static let unsupportedTransferEncoding = HTTPParseError(.unsupportedTransferEncoding)
    /// A malformed Transfer-Encoding: repeated `chunked`, `identity`, parameters, empty elements or several
    /// fields (400).
    public static let invalidTransferEncoding = HTTPParseError(.invalidTransferEncoding)
    /// `chunked` present but not the final transfer coding (400).
    public static let chunkedNotFinal = HTTPParseError(.chunkedNotFinal)
    /// Transfer-Encoding in an HTTP/1.0 message, whose framing is then ambiguous (400).
    public static let transferEncodingInHTTP10 = HTTPParseError(.transferEncodingInHTTP10)
    /// An Expect value other than `100-continue` (417).
    public static let unsupportedExpectation = HTTPParseError(.unsupportedExpectation)
    /// A chunk-size line that does not start with a hex digit or has a stray byte (400).
    public static let invalidChunkSize = HTTPParseError(.invalidChunkSize)
    /// A chunk size with more than 16 hex digits, or past 2^63 − 1 (`HTTPHeaders.maxContentLength`) (400).
    public static let chunkSizeOverflow = HTTPParseError(.chunkSizeOverflow)
    /// A chunk extension that is not `;token[=token|quoted-string]` (400).
    public static let invalidChunkExtension = HTTPParseError(.invalidChunkExtension)
    /// Chunk extensions longer than `HTTPLimits.maxChunkExtensionBytes` (400).
    public static let chunkExtensionTooLong = HTTPParseError(.chunkExtensionTooLong)
    /// Chunk data not followed by CRLF (400).
    public static let missingChunkCRLF = HTTPParseError(.missingChunkCRLF)
    /// A malformed trailer field line (400).
    public static let invalidTrailer = HTTPParseError(.invalidTrailer)
    /// A trailer section longer than `HTTPLimits.maxTrailerBytes` (400).
    public static let trailersTooLarge = HTTPParseError(.trailersTooLarge)
}
