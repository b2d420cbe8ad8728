import CZlib

// The test an embedded ICC colour profile passes before `disarm` keeps it (JPEG APP2, PNG iCCP, WebP ICCP).
//
//   0      4                    36     40                128        132              132 + 12n
//   │ size │ …header fields…    │ acsp │ …             │ tag count n │ n × (sig, offset, size) │ tag data … │
//
//   kept:    size field == the profile's length, "acsp" at 36, a tag table that fits, every tag's data inside
//            the profile after the table, and no markup anywhere in it (a PHP open tag or an active HTML tag,
//            the test `deny-embedded-markup` applies to a sniffed prefix)
//   dropped: anything else, and a profile over `maximumSize` (the disarmer holds it while judging it)

/// Judges an ICC profile's bytes for `disarm`.
enum ICCProfile {
    /// The largest profile kept: 1 MiB. A disarmer holds a profile in memory until it has judged all of it
    /// (one disarm runs at a time per worker); larger ones (rare: some printer profiles) are dropped.
    static let maximumSize = 1 << 20

    /// Whether `bytes` is a well-formed ICC profile without markup.
    static func isAcceptable(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let n = bytes.count
        guard n >= 132, n <= maximumSize else { return false }
        func u32(_ at: Int) -> Int {
            Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
        }
        guard u32(0) == n, bytes[36] == 0x61, bytes[37] == 0x63, bytes[38] == 0x73, bytes[39] == 0x70 else {
            return false  // "acsp"
        }
        let tags = u32(128)
        guard tags <= (n - 132) / 12 else { return false }
        let tableEnd = 132 + 12 * tags
        for t in 0..<tags {
            let offset = u32(132 + 12 * t + 4), size = u32(132 + 12 * t + 8)
            guard offset >= tableEnd, size <= n - offset else { return false }
        }
        return !carriesMarkup(bytes)
    }

    /// Whether `bytes` holds markup anywhere: a PHP open tag or an active HTML tag (the sniffer's polyglot scan),
    /// or any server-side markup `deny-embedded-markup` refuses (ASP/JSP, ColdFusion, server-side includes;
    /// `MarkupScanner`, with HTML counted as well, since a colour profile holds none).
    static func carriesMarkup(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let tags = SniffClassifier(SniffBytes(bytes), complete: true).scanTags()
        if tags.php || tags.html { return true }
        var scanner = MarkupScanner()
        scanner.judgeHTML(true)
        scanner.feed(bytes)
        scanner.finish()
        return scanner.finding != nil
    }

    /// Inflates a zlib stream (PNG iCCP) of at most `maximumSize` decoded bytes; nil when it is broken, does
    /// not end, or decodes to more.
    static func inflated(_ compressed: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let input = compressed.baseAddress, compressed.count > 0 else { return nil }
        var strm = z_stream()
        guard czlib_inflate_init2(&strm, 15) == Z_OK else { return nil }
        defer { inflateEnd(&strm) }
        var out = [UInt8](repeating: 0, count: maximumSize + 1)
        let produced: Int? = out.withUnsafeMutableBytes { dst in
            guard let base = dst.baseAddress else { return nil }
            strm.next_in = UnsafeMutablePointer(mutating: input.assumingMemoryBound(to: Bytef.self))
            strm.avail_in = UInt32(min(compressed.count, Int(UInt32.max)))
            strm.next_out = base.assumingMemoryBound(to: Bytef.self)
            strm.avail_out = UInt32(dst.count)
            guard inflate(&strm, Z_FINISH) == Z_STREAM_END, strm.avail_in == 0 else { return nil }
            return dst.count - Int(strm.avail_out)
        }
        guard let produced, produced <= maximumSize else { return nil }
        out.removeLast(out.count - produced)
        return out
    }
}
