import Glibc

// The audit module's syscall funnel: EINTR is retried, every other failure becomes an AuditError.
enum AuditSyscall {
    static func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0o600) throws -> Int32 {
        while true {
            let fd = Glibc.open(path, flags, mode)
            if fd >= 0 { return fd }
            if errno != EINTR { throw AuditError(operation: "open", path: path, errno: errno) }
        }
    }

    /// Writes all of `bytes`. On a regular file opened with O_APPEND, Linux never returns a short
    /// count except on ENOSPC/EFBIG or a signal mid-write; the loop only exists for those and for pipes.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws {
        guard var base = bytes.baseAddress else { return }
        var remaining = bytes.count
        while remaining > 0 {
            let n = Glibc.write(fd, base, remaining)
            if n < 0 {
                if errno == EINTR { continue }
                throw AuditError(operation: "write", path: path, errno: errno)
            }
            remaining -= n
            base += n
        }
    }

    static func read(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, path: String) throws -> Int {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            if errno != EINTR { throw AuditError(operation: "read", path: path, errno: errno) }
        }
    }

    /// `stat(path)`, or nil when the path does not exist.
    static func statPath(_ path: String) throws -> stat? {
        var st = stat()
        if stat(path, &st) == 0 { return st }
        if errno == ENOENT { return nil }
        throw AuditError(operation: "stat", path: path, errno: errno)
    }

    static func fstatFD(_ fd: Int32, path: String) throws -> stat {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw AuditError(operation: "fstat", path: path, errno: errno) }
        return st
    }

    /// `flock`; returns false only for a non-blocking request that would block.
    @discardableResult
    static func lock(_ fd: Int32, _ op: Int32, path: String) throws -> Bool {
        while true {
            if flock(fd, op) == 0 { return true }
            if errno == EINTR { continue }
            if errno == EWOULDBLOCK && op & LOCK_NB != 0 { return false }
            throw AuditError(operation: "flock", path: path, errno: errno)
        }
    }

    /// `rename`; returns false when `from` does not exist.
    @discardableResult
    static func rename(_ from: String, _ to: String) throws -> Bool {
        if Glibc.rename(from, to) == 0 { return true }
        if errno == ENOENT { return false }
        throw AuditError(operation: "rename", path: from, errno: errno)
    }

    /// `unlink`; a missing file is not an error.
    static func unlink(_ path: String) throws {
        if Glibc.unlink(path) == 0 || errno == ENOENT { return }
        throw AuditError(operation: "unlink", path: path, errno: errno)
    }

    static func fsync(_ fd: Int32, path: String) throws {
        while Glibc.fsync(fd) != 0 {
            if errno != EINTR { throw AuditError(operation: "fsync", path: path, errno: errno) }
        }
    }

    /// Makes renames inside `directory` durable.
    static func fsyncDirectory(_ directory: String) throws {
        let fd = try open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { Glibc.close(fd) }
        try fsync(fd, path: directory)
    }

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
