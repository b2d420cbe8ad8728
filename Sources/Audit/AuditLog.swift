// The audit sink: one JSON line per request, appended with a single write(2).
//
//   worker 1 ─ AuditLog ─┐
//   worker 2 ─ AuditLog ─┼─ O_APPEND write(2) per record ─▶ FILE ─rotate─▶ FILE.1 ─gzip─▶ FILE.1.gz ─▶ FILE.2.gz …
//   worker N ─ AuditLog ─┘        (flock LOCK_SH around the write when built-in rotation is on)
//
// Each worker thread (and each process) owns its own AuditLog; instances share nothing but the
// file. O_APPEND makes every write(2) land atomically at the end, so lines never interleave.
//
// Built-in rotation, with any number of instances and processes on one path:
//
//   writer:   flock(fd, SH) → stat(FILE) is still my inode? → write → flock(fd, UN)
//             (inode changed or FILE missing → reopen and retry)
//   rotator:  flock(FILE.lock, EX|NB)          only one rotation at a time; busy → skip
//             shift FILE.k.gz → FILE.k+1.gz    oldest beyond `keep` is dropped
//             flock(fd, EX)                    waits for in-flight writes to the old inode
//             rename FILE → FILE.1             later writers see the new inode and reopen
//             flock(fd, UN), reopen
//             gzip FILE.1 → FILE.1.gz.tmp, fsync, rename → FILE.1.gz, unlink FILE.1
//
// After the rename under the exclusive lock no writer can append to the old inode (every write
// re-checks the path under a shared lock), so compressing it cannot miss a record; and since a
// record is written once to whichever inode the path named at that moment, nothing is duplicated.

import Glibc

/// Appends audit records as JSON lines to a file or standard output.
///
/// Not thread-safe: give each worker thread (and each process) its own instance on the same
/// path. Instances coordinate through `O_APPEND` and, when rotation is on, `flock(2)`.
/// See `docs/operations.md` for rotation and logrotate set-up.
public final class AuditLog {
    /// Built-in size rotation.
    public struct Rotation: Sendable, Equatable {
        /// Rotate once the file grows past this many bytes.
        public var maxBytes: Int
        /// How many compressed generations (`FILE.1.gz` … `FILE.<keep>.gz`) to keep; at least 1.
        public var keep: Int

        /// Rotates past `maxBytes`, keeping `keep` gzip generations.
        public init(maxBytes: Int, keep: Int) {
            // Configuration, not input: validated by the CLI before the log is opened.
            precondition(maxBytes > 0 && keep >= 1, "rotation needs maxBytes > 0 and keep >= 1")
            self.maxBytes = maxBytes
            self.keep = keep
        }
    }

    /// Where and how to write.
    public struct Configuration: Sendable {
        /// The log file, or `-` for standard output.
        public var path: String
        /// Built-in size rotation, or nil when an external tool (logrotate) rotates. Every instance
        /// writing to one path must use the same setting: it selects the locking protocol.
        public var rotation: Rotation?
        /// Without built-in rotation, check every this many records whether the path now names a
        /// different file (renamed or deleted externally) and reopen if so. 0 disables the check.
        public var inodeCheckInterval: Int

        /// Writes to `path` (`-` is standard output).
        public init(path: String, rotation: Rotation? = nil, inodeCheckInterval: Int = 256) {
            self.path = path
            self.rotation = rotation
            self.inodeCheckInterval = inodeCheckInterval
        }
    }

    /// The configuration this sink was opened with.
    public let configuration: Configuration
    private var fd: Int32 = -1
    private var device: UInt = 0
    private var inode: UInt = 0
    var lockFD: Int32 = -1
    private var writesSinceCheck = 0
    private var scratch = JSONLineWriter(capacity: 2048)
    /// Lines rendered by `append` and not yet written by `flush`.
    private var pending: [UInt8] = []
    /// The most a batch holds (about a hundred typical lines): the line that would take it past is held for the
    /// next batch, which is written first.
    public static let batchBytes = 64 * 1024

    /// Whether this sink writes to standard output.
    public var isStandardOutput: Bool { configuration.path == "-" }

    /// Opens (creating 0600 if needed) the log file for appending.
    public init(_ configuration: Configuration) throws {
        self.configuration = configuration
        try open()
    }

    /// Opens `path` (`-` is standard output), with optional built-in rotation.
    public convenience init(path: String, rotation: Rotation? = nil) throws {
        try self.init(Configuration(path: path, rotation: rotation))
    }

    deinit { close() }

    /// Renders `record` and appends it as one line with one `write(2)` (after any batched lines).
    public func write(_ record: AuditRecord) throws {
        try append(record)
        try flush()
    }

    /// Renders `record` into the batch that `flush()` writes with one `write(2)`; a batch that would grow past
    /// `batchBytes` is written first. The proxy's workers flush at the end of every event-loop iteration.
    /// On standard output a batch stays within `PIPE_BUF` (4096 bytes), the most a pipe takes atomically, so
    /// several processes writing one pipe interleave no more than single lines would.
    public func append(_ record: AuditRecord) throws {
        scratch.reset()
        record.render(into: &scratch)
        let limit = isStandardOutput ? Int(PIPE_BUF) : Self.batchBytes
        if !pending.isEmpty && pending.count + scratch.bytes.count > limit { try flush() }
        pending.append(contentsOf: scratch.bytes)
        if pending.count >= limit { try flush() }
    }

    /// Whether lines are waiting for `flush()`.
    public var hasPending: Bool { !pending.isEmpty }

    /// Writes the batched lines, whole, with one `write(2)`. If the write fails the batch is dropped, as a single
    /// line was before batching: a retry could repeat lines a partial write had already put in the file, and an
    /// unwritable log must not make the proxy's memory grow.
    public func flush() throws {
        guard !pending.isEmpty else { return }
        defer { pending.removeAll(keepingCapacity: pending.capacity <= 2 * Self.batchBytes) }
        try pending.withUnsafeBytes { try write(line: $0) }
    }

    /// Appends pre-rendered bytes (one or more complete lines ending in `\n`) with one `write(2)`.
    public func write(line: UnsafeRawBufferPointer) throws {
        if isStandardOutput {
            try AuditSyscall.writeAll(1, line, path: "-")
            return
        }
        if fd < 0 { try open() }
        guard let rotation = configuration.rotation else {
            if configuration.inodeCheckInterval > 0 {
                writesSinceCheck += 1
                if writesSinceCheck >= configuration.inodeCheckInterval {
                    writesSinceCheck = 0
                    if try !pathNamesOpenFile() { try reopen() }
                }
            }
            try AuditSyscall.writeAll(fd, line, path: configuration.path)
            return
        }
        var sizeAfter = 0
        while true {
            try AuditSyscall.lock(fd, LOCK_SH, path: configuration.path)
            guard let st = try AuditSyscall.statPath(configuration.path),
                  UInt(st.st_dev) == device, UInt(st.st_ino) == inode
            else {
                // Rotated (or removed) under us: follow the path to the new file.
                try AuditSyscall.lock(fd, LOCK_UN, path: configuration.path)
                try reopen()
                continue
            }
            defer { _ = try? AuditSyscall.lock(fd, LOCK_UN, path: configuration.path) }
            try AuditSyscall.writeAll(fd, line, path: configuration.path)
            sizeAfter = Int(st.st_size) + line.count
            break
        }
        if sizeAfter > rotation.maxBytes { try rotate(rotation) }
    }

    /// Closes and reopens the path, for logrotate's `postrotate` (the proxy calls it on SIGHUP/SIGUSR1).
    ///
    /// A no-op for standard output.
    public func reopen() throws {
        guard !isStandardOutput else { return }
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
        try open()
    }

    /// Writes any batched lines, then closes the file (and the rotation lock file). Later writes reopen it.
    public func close() {
        try? flush()
        if fd >= 0 && !isStandardOutput { Glibc.close(fd) }
        fd = -1
        if lockFD >= 0 { Glibc.close(lockFD) }
        lockFD = -1
    }

    // MARK: Internals

    private func open() throws {
        if isStandardOutput {
            fd = 1
            return
        }
        fd = try AuditSyscall.open(configuration.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        let st = try AuditSyscall.fstatFD(fd, path: configuration.path)
        device = UInt(st.st_dev)
        inode = UInt(st.st_ino)
        writesSinceCheck = 0
    }

    /// Whether the path still names the file this instance has open.
    private func pathNamesOpenFile() throws -> Bool {
        guard let st = try AuditSyscall.statPath(configuration.path) else { return false }
        return UInt(st.st_dev) == device && UInt(st.st_ino) == inode
    }
}
