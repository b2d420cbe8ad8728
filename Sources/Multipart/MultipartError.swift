/// Why a multipart body (or its Content-Type) could not be parsed.
///
/// Errors are fatal for the request; tolerated oddities are `MultipartAnomaly` flags instead.
/// `kind` is a stable snake_case name used in audit records, `formwall inspect` and the JSON
/// error bodies, and `offset` is the body byte offset where the problem was detected, when known.
public struct MultipartError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The stable machine name of the error.
    public let kind: Kind
    /// The body offset at which the error was detected (`nil` for Content-Type errors).
    public let offset: UInt64?

    /// The closed set of error kinds.
    public enum Kind: String, Sendable, CaseIterable {
        /// The request Content-Type is not `multipart/form-data`.
        case notMultipart = "not_multipart"
        /// The Content-Type has no boundary parameter.
        case missingBoundary = "missing_boundary"
        /// The boundary is empty, longer than 70 characters, or uses characters RFC 2046 forbids.
        case invalidBoundary = "invalid_boundary"
        /// Two `boundary=` parameters.
        case duplicateBoundary = "duplicate_boundary"
        /// The Content-Type header is longer than the configured limit.
        case contentTypeTooLong = "content_type_too_long"
        /// The body ended before its first delimiter.
        case missingInitialDelimiter = "missing_initial_delimiter"
        /// The body ended before its close delimiter.
        case truncated = "truncated"
        /// A part's header block exceeds `MultipartLimits.maxPartHeaderBytes`.
        case partHeadersTooLarge = "part_headers_too_large"
        /// A part header line is not `name: value` with a valid token name.
        case malformedPartHeader = "malformed_part_header"
        /// A CR not followed by LF inside a part header block or delimiter line.
        case bareCR = "bare_cr"
        /// More parts than `MultipartLimits.maxParts`.
        case tooManyParts = "too_many_parts"
    }

    /// Creates an error of `kind` detected at body `offset`.
    public init(_ kind: Kind, at offset: UInt64? = nil) {
        self.kind = kind
        self.offset = offset
    }

    /// `kind` followed by the offset when known.
    public var description: String {
        if let offset { return "\(kind.rawValue) at byte \(offset)" }
        return kind.rawValue
    }
}

/// Bounds the parser enforces; every one has a safe default.
public struct MultipartLimits: Sendable, Equatable {
    /// Largest part header block (all header lines of one part, with their line ends). Default 16 KiB.
    public var maxPartHeaderBytes: Int = 16 * 1024
    /// Largest Content-Type request header accepted by `MultipartBoundary.parse`. Default 1024 bytes.
    public var maxContentTypeBytes: Int = 1024
    /// Largest run of transport padding (spaces and tabs) after a delimiter. Default 64 bytes.
    public var maxTransportPadding: Int = 64
    /// Most parts in one body; a hard backstop under the policy's own counts. Default 10,000.
    public var maxParts: Int = 10_000

    /// The defaults.
    public init() {}
}
