/// Writers for the chunked transfer coding, appending into a caller-owned buffer.
///
/// A body of chunks `a`, `b` is written as `header(a.count) a trailer() header(b.count) b trailer() last()`.
public enum ChunkedEncoder {
    /// Appends `<hex size>\r\n`. `size` must be positive: a zero-size chunk is the last chunk.
    public static func writeChunkHeader(size: Int, into buffer: inout [UInt8]) {
        // Unreachable from input: callers never frame an empty write (UpstreamSink skips it; held files are non-empty).
        precondition(size > 0, "a zero-size chunk would end the body; use writeLastChunk")
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var shift = (Int.bitWidth - size.leadingZeroBitCount - 1) / 4 * 4
        while shift >= 0 {
            buffer.append(digits[(size >> shift) & 0xF])
            shift -= 4
        }
        buffer.append(HTTPSyntax.cr)
        buffer.append(HTTPSyntax.lf)
    }

    /// Appends the CRLF that follows a chunk's data.
    public static func writeChunkTrailer(into buffer: inout [UInt8]) {
        buffer.append(HTTPSyntax.cr)
        buffer.append(HTTPSyntax.lf)
    }

    /// Appends the last chunk with an empty trailer section: `0\r\n\r\n`.
    public static func writeLastChunk(into buffer: inout [UInt8]) {
        buffer.append(contentsOf: "0\r\n\r\n".utf8)
    }
}
