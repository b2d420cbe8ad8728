import CZlib
import Glibc

// Streaming gzip over zlib (windowBits 31 selects the gzip wrapper). Neither direction holds a
// whole file in memory: both move 64 KiB at a time.

enum Gzip {
    static let chunk = 64 * 1024

    /// Compresses the file at `source` into a new file at `destination` (0600), fsyncing it.
    static func compressFile(_ source: String, to destination: String) throws {
        let input = try AuditSyscall.open(source, O_RDONLY | O_CLOEXEC)
        defer { close(input) }
        let output = try AuditSyscall.open(destination, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { close(output) }
        var strm = z_stream()
        guard czlib_deflate_init2(&strm, Z_DEFAULT_COMPRESSION, 31) == Z_OK else {
            throw AuditError(operation: "deflateInit2", path: destination, errno: 0)
        }
        defer { deflateEnd(&strm) }
        let inBuf = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        let outBuf = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { inBuf.deallocate(); outBuf.deallocate() }
        var finished = false
        while !finished {
            let n = try AuditSyscall.read(input, inBuf, path: source)
            let flush = n == 0 ? Z_FINISH : Z_NO_FLUSH
            strm.next_in = inBuf.baseAddress!.assumingMemoryBound(to: Bytef.self)
            strm.avail_in = uInt(n)
            repeat {
                strm.next_out = outBuf.baseAddress!.assumingMemoryBound(to: Bytef.self)
                strm.avail_out = uInt(chunk)
                let rc = deflate(&strm, flush)
                guard rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR else {
                    throw AuditError(operation: "deflate", path: destination, errno: 0)
                }
                let produced = chunk - Int(strm.avail_out)
                try AuditSyscall.writeAll(output, UnsafeRawBufferPointer(rebasing: outBuf[..<produced]),
                                          path: destination)
                if rc == Z_STREAM_END { finished = true }
            } while strm.avail_out == 0
        }
        try AuditSyscall.fsync(output, path: destination)
    }

    /// Decompresses the gzip file at `path`, handing each decompressed chunk to `body`.
    static func decompressFile(_ path: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        let input = try AuditSyscall.open(path, O_RDONLY | O_CLOEXEC)
        defer { close(input) }
        var strm = z_stream()
        guard czlib_inflate_init2(&strm, 31) == Z_OK else {
            throw AuditError(operation: "inflateInit2", path: path, errno: 0)
        }
        defer { inflateEnd(&strm) }
        let inBuf = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        let outBuf = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { inBuf.deallocate(); outBuf.deallocate() }
        while true {
            let n = try AuditSyscall.read(input, inBuf, path: path)
            if n == 0 { return }  // a truncated stream yields what could be decoded
            strm.next_in = inBuf.baseAddress!.assumingMemoryBound(to: Bytef.self)
            strm.avail_in = uInt(n)
            while strm.avail_in > 0 {
                strm.next_out = outBuf.baseAddress!.assumingMemoryBound(to: Bytef.self)
                strm.avail_out = uInt(chunk)
                let rc = inflate(&strm, Z_NO_FLUSH)
                let produced = chunk - Int(strm.avail_out)
                if produced > 0 { try body(UnsafeRawBufferPointer(rebasing: outBuf[..<produced])) }
                if rc == Z_STREAM_END {
                    // Concatenated members (as `cat a.gz b.gz` makes) continue with a fresh header.
                    guard inflateReset(&strm) == Z_OK else { return }
                    continue
                }
                guard rc == Z_OK || (rc == Z_BUF_ERROR && produced > 0) else {
                    throw AuditError(operation: "inflate", path: path, errno: 0)
                }
                if produced == 0 && strm.avail_in > 0 && rc == Z_BUF_ERROR { break }
            }
        }
    }
}
