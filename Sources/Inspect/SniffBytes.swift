import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// A bounds-checked read-only view over the retained prefix, with the small matchers the sniffing
/// table needs. Every accessor returns `false` / `nil` instead of reading past the end, so a rule
/// that needs more bytes than the prefix holds simply does not match.
struct SniffBytes {
    let raw: UnsafeRawBufferPointer

    init(_ raw: UnsafeRawBufferPointer) { self.raw = raw }

    var count: Int { raw.count }

    @inline(__always)
    subscript(_ i: Int) -> UInt8 { raw[i] }

    /// The byte at `i`, or nil past the end.
    @inline(__always)
    func byte(_ i: Int) -> UInt8? { i >= 0 && i < raw.count ? raw[i] : nil }

    /// True when `magic` (an ASCII literal) occurs exactly at `offset`.
    func has(_ magic: StaticString, at offset: Int = 0) -> Bool {
        let n = magic.utf8CodeUnitCount
        guard offset >= 0, offset + n <= raw.count else { return false }
        let p = magic.utf8Start
        for k in 0..<n where raw[offset + k] != p[k] { return false }
        return true
    }

    /// True when `magic` occurs exactly at `offset`.
    func has(_ magic: [UInt8], at offset: Int = 0) -> Bool {
        guard offset >= 0, offset + magic.count <= raw.count else { return false }
        for k in 0..<magic.count where raw[offset + k] != magic[k] { return false }
        return true
    }

    /// True when the bytes at `offset` equal `lower` (a lowercase ASCII literal) ignoring ASCII case.
    func hasCaseless(_ lower: StaticString, at offset: Int) -> Bool {
        let n = lower.utf8CodeUnitCount
        guard offset >= 0, offset + n <= raw.count else { return false }
        let p = lower.utf8Start
        for k in 0..<n where SniffBytes.lowercased(raw[offset + k]) != p[k] { return false }
        return true
    }

    /// The first offset in `from..<to` where `needle` (ASCII literal) starts, if any.
    func find(_ needle: StaticString, from: Int = 0, to: Int? = nil) -> Int? {
        let end = min(to ?? raw.count, raw.count)
        let n = needle.utf8CodeUnitCount
        guard n > 0, from >= 0, end - from >= n, let base = raw.baseAddress else { return nil }
        // A vector scan, not a compare at every offset: memchr for one byte; for more, the shim's first-and-last-byte
        // AVX2 filter (`cl_find_delimiter`). glibc's memmem reads a short needle's haystack a byte at a time (about
        // 3,000 instructions for `%PDF-` in 1 KiB of random bytes, once per sniffed file).
        let hit: UnsafeMutableRawPointer?
        if n == 1 {
            hit = memchr(base + from, Int32(needle.utf8Start.pointee), end - from)
        } else {
            hit = cl_find_delimiter(base + from, end - from, needle.utf8Start, n)
        }
        guard let hit else { return nil }
        return base.distance(to: UnsafeRawPointer(hit))
    }

    /// Little-endian 16-bit value at `i`, or nil past the end.
    func u16le(_ i: Int) -> UInt16? {
        guard i >= 0, i + 2 <= raw.count else { return nil }
        return UInt16(raw[i]) | UInt16(raw[i + 1]) << 8
    }

    /// Little-endian 32-bit value at `i`, or nil past the end.
    func u32le(_ i: Int) -> UInt32? {
        guard i >= 0, i + 4 <= raw.count else { return nil }
        return UInt32(raw[i]) | UInt32(raw[i + 1]) << 8 | UInt32(raw[i + 2]) << 16 | UInt32(raw[i + 3]) << 24
    }

    /// Big-endian 32-bit value at `i`, or nil past the end.
    func u32be(_ i: Int) -> UInt32? {
        guard i >= 0, i + 4 <= raw.count else { return nil }
        return UInt32(raw[i]) << 24 | UInt32(raw[i + 1]) << 16 | UInt32(raw[i + 2]) << 8 | UInt32(raw[i + 3])
    }

    /// ASCII lowercase of `b`; other bytes unchanged.
    @inline(__always)
    static func lowercased(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }

    /// HTML/XML whitespace: space, TAB, LF, FF, CR.
    @inline(__always)
    static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0C || b == 0x0D }
}
