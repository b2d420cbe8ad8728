import CZlib

/// Looks inside a gzip stream: inflates the start of the first member and sniffs what it holds.
///
/// The sniffer calls this once for a prefix that matched gzip, so `SniffResult.inner` says `tar` for
/// a `.tar.gz`. Output is bounded by `outputLimit` (default 4 KiB) whatever the compression ratio,
/// so a gzip bomb costs at most that much; zlib's own state (about 40 KiB) is allocated for the
/// duration of the call only.
public enum GzipSniff {
    /// The default number of inflated bytes sniffed: 4096.
    public static let defaultOutputLimit = 4096

    /// Inflates up to `outputLimit` bytes from the start of `compressed` (a gzip or zlib stream,
    /// possibly cut short) and sniffs them. Returns nil when nothing could be inflated.
    public static func innerKind(of compressed: UnsafeRawBufferPointer, outputLimit: Int = defaultOutputLimit)
        -> SniffKind?
    {
        let limit = min(max(outputLimit, 1), Sniffer.maximumPrefixLimit)
        guard let input = compressed.baseAddress, compressed.count > 0 else { return nil }
        var out = [UInt8](repeating: 0, count: limit)
        var strm = z_stream()
        // 15 + 32: maximum window, and detect a gzip or zlib header automatically.
        guard czlib_inflate_init2(&strm, 15 + 32) == Z_OK else { return nil }
        defer { inflateEnd(&strm) }
        var ended = false
        let produced: Int = out.withUnsafeMutableBytes { dst in
            strm.next_in = UnsafeMutablePointer(mutating: input.assumingMemoryBound(to: Bytef.self))
            strm.avail_in = UInt32(min(compressed.count, Int(UInt32.max)))
            // Cannot fail: `limit` is at least 1, so the buffer has storage.
            strm.next_out = dst.baseAddress!.assumingMemoryBound(to: Bytef.self)
            strm.avail_out = UInt32(limit)
            let rc = inflate(&strm, Z_SYNC_FLUSH)
            // Z_BUF_ERROR means the input was cut short, which is expected for a prefix.
            guard rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR else { return 0 }
            ended = rc == Z_STREAM_END
            return limit - Int(strm.avail_out)
        }
        guard produced > 0 else { return nil }
        return out.withUnsafeBytes { all in
            let view = SniffBytes(UnsafeRawBufferPointer(rebasing: all[0..<produced]))
            // Never look inside a gzip found inside a gzip: one level of inflation per part.
            return SniffClassifier(view, complete: ended && produced < limit, inflatesGzip: false).classify().kind
        }
    }
}
