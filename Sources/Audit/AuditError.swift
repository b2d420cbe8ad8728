import Glibc

/// A failed system call in the audit sink or tail, with the path and the errno.
public struct AuditError: Error, Sendable, CustomStringConvertible {
    /// The system call or step that failed, e.g. `open` or `rename`.
    public let operation: String
    /// The path involved.
    public let path: String
    /// The errno value (0 for non-syscall failures such as a corrupt gzip stream).
    public let errno: Int32

    /// Creates an error for `operation` on `path`.
    public init(operation: String, path: String, errno: Int32) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    /// `operation path: strerror`.
    public var description: String {
        let reason = errno == 0 ? "failed" : String(cString: strerror(errno))
        return "\(operation) \(path): \(reason)"
    }
}
