import CLinux
import Glibc

/// An anonymous temporary file: created 0600 in a directory, unlinked at once, so it disappears when closed
/// or when the process dies. Used to spool bodies; reads and writes are blocking regular-file I/O.
public final class TemporaryFile {
    /// The descriptor.
    public private(set) var fd: Int32
    /// Bytes written so far.
    public private(set) var size: UInt64 = 0

    /// Creates the file in `directory` (mode 0600, close-on-exec). It never has a name where the file system
    /// supports O_TMPFILE; elsewhere it is created with a random name that is unlinked at once.
    public init(directory: String) throws {
        let unnamed = cl_open_tmpfile(directory)
        if unnamed >= 0 {
            fd = unnamed
            return
        }
        var template = Array((directory + "/formwall-spool-XXXXXX").utf8CString)
        let named = template.withUnsafeMutableBufferPointer { buffer -> Int32 in
            guard let base = buffer.baseAddress else { return -1 }   // never nil: the array is not empty
            return cl_mkostemp_cloexec(base)
        }
        guard named >= 0 else { throw IOError(errno: errno, reason: "mkostemp(\(directory))") }
        _ = fchmod(named, 0o600)
        template.withUnsafeBufferPointer { buffer in
            if let base = buffer.baseAddress { _ = unlink(base) }
        }
        fd = named
    }

    deinit { close() }

    /// Appends `bytes`; throws on a write error (disk full included).
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        var off = 0
        while off < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + off, bytes.count - off)
            if n < 0 {
                if errno == EINTR { continue }
                throw IOError(errno: errno, reason: "write(spool)")
            }
            off += n
        }
        size += UInt64(bytes.count)
    }

    /// Overwrites bytes already written at `offset` (the file does not grow past `size`); throws on a write error.
    public func overwrite(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws {
        guard offset + UInt64(bytes.count) <= size, let base = bytes.baseAddress else { return }
        var off = 0
        while off < bytes.count {
            let n = pwrite(fd, base + off, bytes.count - off, off_t(offset) + off_t(off))
            if n < 0 {
                if errno == EINTR { continue }
                throw IOError(errno: errno, reason: "pwrite(spool)")
            }
            off += n
        }
    }

    /// Reads up to `buffer.count` bytes at `offset`; returns the count (0 at end).
    public func read(at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while true {
            let n = pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno == EINTR { continue }
            throw IOError(errno: errno, reason: "pread(spool)")
        }
    }

    /// Calls `body` with the file's contents from the start, 64 KiB at a time.
    public func forEachChunk(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { buf.deallocate() }
        var offset: UInt64 = 0
        while true {
            let n = try read(at: offset, into: buf)
            if n == 0 { return }
            try body(UnsafeRawBufferPointer(rebasing: buf[0..<n]))
            offset += UInt64(n)
        }
    }

    /// Closes (and so deletes) the file. Idempotent.
    public func close() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }
}

extension TCPSocket {
    /// Whether an idle socket's peer has closed it (or it has unexpected data): a non-blocking peek.
    /// Used before reusing a pooled upstream connection.
    public var isIdleAndOpen: Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }
}
