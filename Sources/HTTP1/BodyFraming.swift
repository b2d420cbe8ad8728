/// How the body of a message is delimited (RFC 9112 §6.3).
public enum BodyFraming: Hashable, Sendable {
    /// No body at all.
    case none
    /// Exactly this many bytes follow the head.
    case contentLength(UInt64)
    /// The body uses the chunked transfer coding; decode it with `ChunkedDecoder`.
    case chunked
    /// Responses only: the body runs until the upstream closes the connection.
    case closeDelimited
}
