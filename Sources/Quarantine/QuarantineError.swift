import Glibc

/// Why a quarantine operation failed. Every failure is closed: the caller must not forward the part.
///
/// Compare `code` against the static members (`error.code == .diskFull`); new codes may be added
/// without breaking callers.
public struct QuarantineError: Error, Sendable, CustomStringConvertible {
    /// The category of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case diskFull, permission, storeFull, notFound, alreadyExists, invalidID, corrupt, io, misuse
            case simulatedCrash
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The file system has no space (ENOSPC, EDQUOT, EFBIG).
        public static let diskFull = Code(.diskFull)
        /// Access denied (EACCES, EPERM, EROFS).
        public static let permission = Code(.permission)
        /// The store's `maxBytes` cap would be exceeded.
        public static let storeFull = Code(.storeFull)
        /// No such item or file.
        public static let notFound = Code(.notFound)
        /// The destination already exists (release refuses to overwrite).
        public static let alreadyExists = Code(.alreadyExists)
        /// The id is not 32 lowercase hex digits.
        public static let invalidID = Code(.invalidID)
        /// Stored bytes do not match their recorded digest, or the sidecar is unreadable.
        public static let corrupt = Code(.corrupt)
        /// Any other I/O failure (see `errno`).
        public static let io = Code(.io)
        /// The writer was used after commit, abort or a failure.
        public static let misuse = Code(.misuse)
        /// A test-only injected crash: the writer stopped without cleaning up.
        public static let simulatedCrash = Code(.simulatedCrash)

        /// The code's name.
        public var description: String { base.rawValue }
    }

    /// The category.
    public let code: Code
    /// The step that failed, e.g. `fsync` or `rename`.
    public let operation: String
    /// The path involved, if any.
    public let path: String
    /// The errno value, or 0 when the failure is not a system call's.
    public let errno: Int32

    /// Creates an error with an explicit code.
    public init(_ code: Code, operation: String, path: String = "", errno: Int32 = 0) {
        self.code = code
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    /// Classifies a failed system call by its errno.
    public init(errno: Int32, operation: String, path: String) {
        let code: Code = switch errno {
        case ENOSPC, EDQUOT, EFBIG: .diskFull
        case EACCES, EPERM, EROFS: .permission
        case ENOENT: .notFound
        case EEXIST: .alreadyExists
        default: .io
        }
        self.init(code, operation: operation, path: path, errno: errno)
    }

    /// `code: operation path: strerror`.
    public var description: String {
        var text = "\(code): \(operation)"
        if !path.isEmpty { text += " \(path)" }
        if errno != 0 { text += ": " + String(cString: strerror(errno)) }
        return text
    }
}
