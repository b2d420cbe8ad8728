/// One step of chunked decoding. Not `Sendable`: `.data` borrows the caller's input.
public enum ChunkedEvent {
    /// Body bytes: a span into the input passed to `ChunkedDecoder.decode`, valid as long as that input is.
    case data(UnsafeRawBufferPointer)
    /// The last chunk and the trailer section were consumed; the body is complete.
    case end
}

/// An incremental, strict decoder of the chunked transfer coding (RFC 9112 §7.1).
///
/// It never copies body bytes: `.data` spans point into the caller's input. Any split point works.
///
/// ```swift
/// var decoder = ChunkedDecoder()
/// var offset = 0
/// while let event = try decoder.decode(chunk, from: &offset) {
///     switch event {
///     case .data(let span): inspect(span)
///     case .end: finish(leftover: chunk[offset...])   // the next pipelined message
///     }
/// }
/// // nil: `chunk` is exhausted, read more and start again at offset 0.
/// ```
///
/// Choices where the RFC allows several:
/// - No whitespace anywhere on the chunk-size line: not around the size, not the optional BWS
///   before `;` or around `=` in extensions. Senders do not emit it and it is a known desync vector.
/// - Extensions must be `;token` or `;token=token` or `;token="quoted-string"`; they are
///   discarded, and bounded by `HTTPLimits.maxChunkExtensionBytes` per chunk (from `;` to CR).
/// - Trailer fields are syntax-checked like header fields and discarded; the trailer section
///   (CRLFs included) is bounded by `HTTPLimits.maxTrailerBytes`.
/// - Every line ends in CRLF; a bare LF or bare CR is an error.
public struct ChunkedDecoder: Sendable {
    enum State: Sendable {
        /// Start of a chunk-size line: one hex digit required. Next: `.size`.
        case sizeStart
        /// In the hex digits. Next: `.size`, `.extensions` (`;`) or `.sizeLF` (CR).
        case size
        /// After `;` on the chunk-size line. Next: `.extensions` or `.sizeLF` (CR).
        case extensions(ExtensionState)
        /// Saw the CR ending a chunk-size line. Next: `.data`, or `.trailers(.lineStart)` after size 0.
        case sizeLF
        /// Inside chunk data, `remaining` bytes to go. Next: `.dataCR`.
        case data
        /// Chunk data done; CR required. Next: `.dataLF`.
        case dataCR
        /// LF required. Next: `.sizeStart`.
        case dataLF
        /// In the trailer section after the last chunk. Next: `.trailers` or `.end`.
        case trailers(TrailerState)
        /// The body is complete; `decode` returns nil without consuming. Terminal until `reset()`.
        case end
        /// Rejected input; terminal.
        case failed(HTTPParseError)
    }

    enum ExtensionState: Sendable {
        case nameStart
        case name
        case valueStart
        case token
        case quoted
        case quotedEscape
        case afterQuoted
    }

    enum TrailerState: Sendable {
        case lineStart
        case name
        case value
        case lineLF
        case endLF
    }

    private let limits: HTTPLimits
    private var state: State = .sizeStart
    private var size: UInt64 = 0
    private var sizeDigits = 0
    private var remaining: UInt64 = 0
    private var extensionBytes = 0
    private var trailerBytes = 0

    /// Creates a decoder positioned at the first chunk-size line.
    public init(limits: HTTPLimits = HTTPLimits()) {
        self.limits = limits
    }

    /// Whether `.end` has been returned.
    public var isComplete: Bool {
        if case .end = self.state {
            return true
        }
        return false
    }

    /// Prepares the decoder for a new body.
    public mutating func reset() {
        self.state = .sizeStart
        self.size = 0
        self.sizeDigits = 0
        self.remaining = 0
        self.extensionBytes = 0
        self.trailerBytes = 0
    }

    /// Decodes from `input[offset...]`, advancing `offset` past what it consumed.
    ///
    /// Returns `.data` as soon as body bytes are available, `.end` once after the trailer section, and
    /// nil when the input is exhausted (or the body already ended). After an error it keeps throwing it.
    public mutating func decode(
        _ input: UnsafeRawBufferPointer,
        from offset: inout Int
    ) throws(HTTPParseError) -> ChunkedEvent? {
        do throws(HTTPParseError) {
            return try self.step(input, from: &offset)
        } catch {
            self.state = .failed(error)
            throw error
        }
    }

    private mutating func step(
        _ input: UnsafeRawBufferPointer,
        from offset: inout Int
    ) throws(HTTPParseError) -> ChunkedEvent? {
        // Unreachable from input: `offset` is the caller's cursor into its own buffer, advanced only by decode.
        precondition(offset >= 0 && offset <= input.count, "offset outside the input")
        while offset < input.count {
            switch self.state {
            case .data:
                let available = UInt64(input.count - offset)
                let take = Int(min(self.remaining, available))
                let span = UnsafeRawBufferPointer(rebasing: input[offset..<(offset + take)])
                offset += take
                self.remaining -= UInt64(take)
                if self.remaining == 0 {
                    self.state = .dataCR
                }
                return .data(span)
            case .end:
                return nil
            case .failed(let error):
                throw error
            case .sizeStart, .size, .extensions, .sizeLF, .dataCR, .dataLF, .trailers:
                let byte = input[offset]
                offset += 1
                if try self.consumeFraming(byte) {
                    return .end
                }
            }
        }
        if case .failed(let error) = self.state {
            throw error
        }
        return nil
    }

    /// Advances over one byte outside chunk data; true when that byte completed the body.
    private mutating func consumeFraming(_ byte: UInt8) throws(HTTPParseError) -> Bool {
        switch self.state {
        case .sizeStart:
            guard let digit = HTTPSyntax.hexValue(byte) else {
                throw byte == HTTPSyntax.lf ? .bareLF : .invalidChunkSize
            }
            self.size = UInt64(digit)
            self.sizeDigits = 1
            self.state = .size
        case .size:
            if let digit = HTTPSyntax.hexValue(byte) {
                self.sizeDigits += 1
                guard self.sizeDigits <= 16 else {
                    throw .chunkSizeOverflow
                }
                self.size = self.size << 4 | UInt64(digit)
                // The Content-Length ceiling: a size no signed 64-bit parser holds.
                guard self.size <= HTTPHeaders.maxContentLength else {
                    throw .chunkSizeOverflow
                }
            } else if byte == UInt8(ascii: ";") {
                self.extensionBytes = 0
                try self.countExtension()
                self.state = .extensions(.nameStart)
            } else {
                try self.endSizeLine(byte, invalid: .invalidChunkSize)
            }
        case .extensions(let extensionState):
            if byte != HTTPSyntax.cr {
                try self.countExtension()
            }
            try self.consumeExtension(byte, extensionState)
        case .sizeLF:
            guard byte == HTTPSyntax.lf else {
                throw .bareCR
            }
            if self.size == 0 {
                self.trailerBytes = 0
                self.state = .trailers(.lineStart)
            } else {
                self.remaining = self.size
                self.state = .data
            }
        case .dataCR:
            guard byte == HTTPSyntax.cr else {
                throw byte == HTTPSyntax.lf ? .bareLF : .missingChunkCRLF
            }
            self.state = .dataLF
        case .dataLF:
            guard byte == HTTPSyntax.lf else {
                throw .bareCR
            }
            self.state = .sizeStart
        case .trailers(let trailerState):
            self.trailerBytes += 1
            guard self.trailerBytes <= self.limits.maxTrailerBytes else {
                throw .trailersTooLarge
            }
            return try self.consumeTrailer(byte, trailerState)
        case .data, .end, .failed:
            // Unreachable: step() handles .data, .end and .failed itself and calls this only for framing states.
            preconditionFailure("consumeFraming called outside framing bytes")
        }
        return false
    }

    /// `;` `token` [ `=` ( `token` / `quoted-string` ) ], repeated, then CR.
    private mutating func consumeExtension(_ byte: UInt8, _ state: ExtensionState) throws(HTTPParseError) {
        switch state {
        case .nameStart:
            guard HTTPSyntax.isTokenChar(byte) else {
                throw .invalidChunkExtension
            }
            self.state = .extensions(.name)
        case .name, .token:
            if HTTPSyntax.isTokenChar(byte) {
                return
            } else if byte == UInt8(ascii: "=") && state == .name {
                self.state = .extensions(.valueStart)
            } else if byte == UInt8(ascii: ";") {
                self.state = .extensions(.nameStart)
            } else {
                try self.endSizeLine(byte, invalid: .invalidChunkExtension)
            }
        case .valueStart:
            if HTTPSyntax.isTokenChar(byte) {
                self.state = .extensions(.token)
            } else if byte == UInt8(ascii: "\"") {
                self.state = .extensions(.quoted)
            } else {
                throw .invalidChunkExtension
            }
        case .quoted:
            if byte == UInt8(ascii: "\"") {
                self.state = .extensions(.afterQuoted)
            } else if byte == UInt8(ascii: "\\") {
                self.state = .extensions(.quotedEscape)
            } else if !HTTPSyntax.isFieldValueByte(byte) {
                throw .invalidChunkExtension
            }
        case .quotedEscape:
            guard HTTPSyntax.isFieldValueByte(byte) else {
                throw .invalidChunkExtension
            }
            self.state = .extensions(.quoted)
        case .afterQuoted:
            if byte == UInt8(ascii: ";") {
                self.state = .extensions(.nameStart)
            } else {
                try self.endSizeLine(byte, invalid: .invalidChunkExtension)
            }
        }
    }

    /// CR ends the chunk-size line; LF alone is bare; anything else is `invalid`.
    private mutating func endSizeLine(_ byte: UInt8, invalid: HTTPParseError) throws(HTTPParseError) {
        switch byte {
        case HTTPSyntax.cr: self.state = .sizeLF
        case HTTPSyntax.lf: throw .bareLF
        default: throw invalid
        }
    }

    private mutating func countExtension() throws(HTTPParseError) {
        self.extensionBytes += 1
        guard self.extensionBytes <= self.limits.maxChunkExtensionBytes else {
            throw .chunkExtensionTooLong
        }
    }

    /// `*( field-line CRLF ) CRLF`; true after the final LF.
    private mutating func consumeTrailer(_ byte: UInt8, _ state: TrailerState) throws(HTTPParseError) -> Bool {
        switch state {
        case .lineStart:
            if byte == HTTPSyntax.cr {
                self.state = .trailers(.endLF)
            } else if byte == HTTPSyntax.lf {
                throw .bareLF
            } else if HTTPSyntax.isTokenChar(byte) {
                self.state = .trailers(.name)
            } else {
                throw .invalidTrailer
            }
        case .name:
            if byte == HTTPSyntax.colon {
                self.state = .trailers(.value)
            } else if !HTTPSyntax.isTokenChar(byte) {
                throw .invalidTrailer
            }
        case .value:
            if byte == HTTPSyntax.cr {
                self.state = .trailers(.lineLF)
            } else if byte == HTTPSyntax.lf {
                throw .bareLF
            } else if !HTTPSyntax.isFieldValueByte(byte) {
                throw .invalidTrailer
            }
        case .lineLF:
            guard byte == HTTPSyntax.lf else {
                throw .bareCR
            }
            self.state = .trailers(.lineStart)
        case .endLF:
            guard byte == HTTPSyntax.lf else {
                throw .bareCR
            }
            self.state = .end
            return true
        }
        return false
    }
}
