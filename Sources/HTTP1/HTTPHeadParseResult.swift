/// What an incremental head parser did with one chunk of input.
public enum HTTPHeadParseResult<Head: Sendable>: Sendable {
    /// The head is not complete. All `consumed` bytes (the whole chunk) were taken; feed the next chunk.
    case needMore(consumed: Int)
    /// The head ended after `consumed` bytes of this chunk; the bytes after them belong to the body or
    /// the next message. The parser is ready for the next head.
    case complete(Head, consumed: Int)
}

extension HTTPHeadParseResult: Equatable where Head: Equatable {}
