import Glibc

// The quarantine's syscall funnel. EINTR is retried; every other failure throws a classified
// QuarantineError. Tests inject failures and crashes at named durability steps through FaultPlan.

/// The durability steps of storing one item, in order. Faults and simulated crashes are keyed by them.
enum DurabilityStep: Int, CaseIterable, Sendable {
    /// Creating the item directory and the temporary data file.
    case createTemp
    /// Writing data into the temporary file.
    case writeData
    /// fsync of the temporary data file.
    case syncData
    /// rename `.tmp-<id>.bin` → `<id>.bin`.
    case renameData
    /// fsync of the item directory after the data rename.
    case syncDirectoryAfterData
    /// Creating and writing `.tmp-<id>.json`.
    case writeSidecar
    /// fsync of the temporary sidecar.
    case syncSidecar
    /// rename `.tmp-<id>.json` → `<id>.json`: the item becomes complete.
    case renameSidecar
    /// fsync of the item directory after the sidecar rename.
    case syncDirectoryAfterSidecar
}

/// Test-only fault injection (reached with `@testable import`).
struct FaultPlan: Sendable {
    /// Fail the step with this errno instead of performing it.
    var failures: [DurabilityStep: Int32] = [:]
    /// The data file accepts this many bytes in total, then writes fail with `writeErrno` (after a
    /// short write, as a filling disk does).
    var failWriteAfterBytes: Int? = nil
    /// The errno for `failWriteAfterBytes`.
    var writeErrno: Int32 = ENOSPC
    /// Stop just before this step, leaving the file system exactly as a crash there would.
    var crashBefore: DurabilityStep? = nil
    /// Called by `rescan()` without the lock, after it listed a day and after each look at a chunk of items.
    var duringRescan: (@Sendable () -> Void)? = nil
}

enum FileOps {
    static func check(_ step: DurabilityStep, _ faults: FaultPlan?, path: String) throws {
        guard let faults else { return }
        if faults.crashBefore == step {
            throw QuarantineError(.simulatedCrash, operation: "crash before \(step)", path: path)
        }
        if let code = faults.failures[step] {
            throw QuarantineError(errno: code, operation: "injected \(step)", path: path)
        }
    }

    static func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0o600) throws -> Int32 {
        while true {
            let fd = Glibc.open(path, flags, mode)
            if fd >= 0 { return fd }
            if errno != EINTR { throw QuarantineError(errno: errno, operation: "open", path: path) }
        }
    }

    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws {
        guard var base = bytes.baseAddress else { return }
        var remaining = bytes.count
        while remaining > 0 {
            let n = Glibc.write(fd, base, remaining)
            if n < 0 {
                if errno == EINTR { continue }
                throw QuarantineError(errno: errno, operation: "write", path: path)
            }
            remaining -= n
            base += n
        }
    }

    static func read(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, path: String) throws -> Int {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            if errno != EINTR { throw QuarantineError(errno: errno, operation: "read", path: path) }
        }
    }

    static func fsync(_ fd: Int32, path: String) throws {
        while Glibc.fsync(fd) != 0 {
            if errno != EINTR { throw QuarantineError(errno: errno, operation: "fsync", path: path) }
        }
    }

    static func fsyncDirectory(_ path: String) throws {
        let fd = try open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(fd) }
        try fsync(fd, path: path)
    }

    static func rename(_ from: String, _ to: String) throws {
        guard Glibc.rename(from, to) == 0 else { throw QuarantineError(errno: errno, operation: "rename", path: from) }
    }

    /// Creates a directory (0700); returns false if it already existed.
    @discardableResult
    static func mkdir(_ path: String) throws -> Bool {
        if Glibc.mkdir(path, 0o700) == 0 { return true }
        if errno == EEXIST { return false }
        throw QuarantineError(errno: errno, operation: "mkdir", path: path)
    }

    /// Removes a file; a missing file is fine.
    static func unlink(_ path: String) throws {
        guard Glibc.unlink(path) == 0 || errno == ENOENT else {
            throw QuarantineError(errno: errno, operation: "unlink", path: path)
        }
    }

    /// Removes an empty directory; returns false when it is missing or not empty.
    @discardableResult
    static func rmdir(_ path: String) throws -> Bool {
        if Glibc.rmdir(path) == 0 { return true }
        if errno == ENOENT || errno == ENOTEMPTY || errno == EEXIST { return false }
        throw QuarantineError(errno: errno, operation: "rmdir", path: path)
    }

    /// `lstat`, or nil when the path does not exist.
    static func lstat(_ path: String) throws -> stat? {
        var st = stat()
        if Glibc.lstat(path, &st) == 0 { return st }
        if errno == ENOENT { return nil }
        throw QuarantineError(errno: errno, operation: "lstat", path: path)
    }

    /// Names in a directory (without `.` and `..`); empty when the directory is missing.
    static func list(_ path: String) throws -> [String] {
        guard let dir = opendir(path) else {
            if errno == ENOENT { return [] }
            throw QuarantineError(errno: errno, operation: "opendir", path: path)
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Reads a whole small file (sidecars).
    static func readFile(_ path: String, limit: Int = 1 << 20) throws -> [UInt8] {
        let fd = try open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = try chunk.withUnsafeMutableBytes { try read(fd, $0, path: path) }
            if n == 0 { return out }
            out += chunk[..<n]
            if out.count > limit { throw QuarantineError(.corrupt, operation: "read (too large)", path: path) }
        }
    }

    static func isDirectory(_ st: stat) -> Bool { st.st_mode & S_IFMT == S_IFDIR }
    static func isRegular(_ st: stat) -> Bool { st.st_mode & S_IFMT == S_IFREG }
}
