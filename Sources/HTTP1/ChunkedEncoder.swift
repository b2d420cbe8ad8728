/// Writers for the chunked transfer coding, appending into a caller-owned buffer.
///
/// A body of chunks `a`, `b` is written as `header(a.count) a trailer() header(b.count) b trailer() last()`.
public enum ChunkedEncoder {
    /// The longest chunk header `writeChunkHeader` writes: 16 hex digits and CRLF.
    public static let maxChunkHeaderLength = 18

    /// Appends `<hex size>\r\n`; false (nothing appended) unless `size` is positive: a zero-size chunk would be
    /// the last chunk.
    @discardableResult
    public static func writeChunkHeader(size: Int, into buffer: inout [UInt8]) -> Bool {
        withUnsafeTemporaryAllocation(byteCount: maxChunkHeaderLength, alignment: 1) { scratch in
            guard let count = writeChunkHeader(size: size, to: scratch) else { return false }
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[..<count]))
            return true
        }
    }

    /// Writes `<hex size>\r\n` at the start of `out` and returns its length; nil (nothing written) unless `size`
    /// is positive and `out` has room for `maxChunkHeaderLength` bytes. Callers never frame an empty write, and
    /// they reserve the room first, so nil means a bug in the caller: it fails that body, not the process.
    public static func writeChunkHeader(size: Int, to out: UnsafeMutableRawBufferPointer) -> Int? {
        guard size > 0, out.count >= maxChunkHeaderLength else { return nil }
        // The digits are written from the last, until no bits are left: a loop whose end depends on the value is
        // not vectorised. The counted loop this replaces (one digit per 4-bit shift, first to last) was, by the
        // profile-guided build, into some 270 instructions of SIMD for a four-digit size (docs/performance.md).
        let n = (Int.bitWidth - size.leadingZeroBitCount + 3) / 4
        var rest = UInt(size)
        var index = n
        repeat {
            index -= 1
            let v = UInt8(truncatingIfNeeded: rest & 0xF)
            out[index] = v < 10 ? 0x30 + v : 0x57 + v
            rest >>= 4
        } while rest != 0
        out[n] = HTTPSyntax.cr
        out[n + 1] = HTTPSyntax.lf
        return n + 2
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
