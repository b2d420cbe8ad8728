// The durable quarantine store.
//
//   DIR/                                           0700
//     2026/11/29/                                  0700 each, UTC day of the part's arrival
//       <id>/                                      0700, id = 32 hex digits from the CSPRNG
//         .tmp-<id>.bin   ─fsync─rename─▶ <id>.bin     0600, the bytes exactly as received
//         .tmp-<id>.json  ─fsync─rename─▶ <id>.json    0600, the sidecar, written only after <id>.bin
//
// An item is complete iff its sidecar exists: the sidecar is renamed into place after the data
// file is durable, and the directory is fsynced after each rename. A crash at any point leaves
// either a complete item or leftovers (temp files, a .bin without sidecar, empty directories)
// that `recover()` removes at start-up.

import Foundation
import Glibc
import Inspect
import Synchronization

/// A directory of quarantined parts with a size cap and a retention period.
///
/// Thread-safe: share one store among all worker threads of a process. Each stored part is
/// written through its own `QuarantineWriter`, owned by one thread. Usage is what the last `rescan()`
/// found on disk, kept up to date with this process's own writes and removals; what others do to the
/// directory (`formwall quarantine delete`, files removed by hand, another process's items) is seen at the
/// next rescan (`rescanIfDue()`).
public final class QuarantineStore: Sendable {
    /// The store's root directory.
    public let directory: String
    /// The cap on bytes stored (data plus sidecars); writes that would pass it fail with `.storeFull`.
    public let maxBytes: Int64
    /// How long items are kept before `prune(now:)` deletes them.
    public let retention: Duration
    let faults: FaultPlan?
    /// `rescanIfDue()` waits at least this long after the end of the last rescan.
    let minimumRescanGap: Duration
    /// Usage and rescans (see `Accounting`). Also serialises creating and removing the day directories, so
    /// `prune` never removes one a writer is entering, and making an item complete or incomplete, so a rescan
    /// sees each of this process's items either before or after the change, never half-way.
    let state: Mutex<Accounting>

    /// Opens (creating 0700 if missing) the store at `directory`, computing usage with a first `rescan()`.
    public convenience init(directory: String, maxBytes: Int64, retention: Duration) throws {
        try self.init(directory: directory, maxBytes: maxBytes, retention: retention, faults: nil)
    }

    init(directory: String, maxBytes: Int64, retention: Duration, faults: FaultPlan?,
         minimumRescanGap: Duration = QuarantineStore.minimumRescanGap) throws {
        // Configuration, not input: validated by the CLI before the store is opened.
        precondition(maxBytes > 0, "maxBytes must be positive")
        var root = directory
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        self.directory = root
        self.maxBytes = maxBytes
        self.retention = retention
        self.faults = faults
        self.minimumRescanGap = minimumRescanGap
        self.state = Mutex(Accounting())
        try Self.makeDirectories(root)
        try rescan()
    }

    /// Bytes of complete items plus bytes reserved by this process's writers in progress.
    public var usageBytes: Int64 { state.withLock { $0.bytes } }

    /// Starts storing one part. Fails with `.storeFull` when the store is already at its cap.
    ///
    /// The returned writer belongs to the calling thread; finish it with `commit` or `abort`.
    public func begin(_ meta: QuarantineMeta) throws -> QuarantineWriter {
        // Without random bytes the part is not stored, and fails closed like any store failure.
        guard let id = SecureRandom.hexID(bytes: 16) else {
            throw QuarantineError(.io, operation: "draw a random item id (RAND_bytes failed)", path: directory)
        }
        let (y, m, d) = Sidecar.dayComponents(meta.time)
        let itemDirectory = "\(directory)/\(y)/\(m)/\(d)/\(id)"
        try retryingWhenFull {
            try state.withLock { s in
                guard s.bytes < maxBytes else {
                    s.refused()
                    let operation = "begin (\(s.bytes) of \(maxBytes) bytes used)"
                    throw QuarantineError(.storeFull, operation: operation, path: directory)
                }
                try FileOps.check(.createTemp, faults, path: itemDirectory)
                // Under the lock: prune removes empty day directories, and a rescan lists them, under the same lock.
                var parent = directory
                for component in [y, m, d, id] {
                    let child = "\(parent)/\(component)"
                    if try FileOps.mkdir(child) { try FileOps.fsyncDirectory(parent) }
                    parent = child
                }
            }
        }
        do {
            return try QuarantineWriter(store: self, id: id, directory: itemDirectory, meta: meta)
        } catch {
            _ = try? FileOps.rmdir(itemDirectory)
            throw error
        }
    }

    // MARK: Accounting

    /// Reserves `bytes` against the cap for a writer in progress, or throws `.storeFull`.
    func reserve(_ bytes: Int64, path: String) throws {
        try retryingWhenFull {
            try state.withLock { s in
                guard s.bytes + bytes <= maxBytes else {
                    s.refused()
                    throw QuarantineError(.storeFull, operation: "write (cap \(maxBytes) bytes)", path: path)
                }
                s.pending += bytes
            }
        }
    }

    /// Adds bytes of a writer in progress that are not subject to the cap (sidecars).
    func account(_ bytes: Int64) {
        state.withLock { $0.pending += bytes }
    }

    /// Returns a writer's reserved bytes (abort, failure).
    func release(_ bytes: Int64) {
        state.withLock { $0.pending = max(0, $0.pending - bytes) }
    }

    /// Makes a writer's item complete: renames its sidecar into place and moves its `bytes` from the writer's
    /// reservation to the stored items, in one step as far as a rescan can tell.
    func complete(_ item: String, id: String, sidecar temporary: String, bytes: Int64) throws {
        try state.withLock { s in
            try FileOps.rename(temporary, "\(item)/\(id).json")
            s.pending = max(0, s.pending - bytes)
            s.itemChanged(day: dayKey(ofItem: item, id: id), id: id, by: bytes)
        }
    }

    // MARK: Layout

    /// Whether `id` is 32 lowercase hex digits (so it can never name a path outside the store).
    static func isValidID(_ id: String) -> Bool {
        id.utf8.count == 32 && id.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    static func isNumeric(_ name: String, digits: Int) -> Bool {
        name.utf8.count == digits && name.utf8.allSatisfy { (0x30...0x39).contains($0) }
    }

    /// Every `YYYY/MM/DD` directory path, in ascending date order.
    func dayDirectories() throws -> [String] {
        var days: [String] = []
        for y in try FileOps.list(directory).filter({ Self.isNumeric($0, digits: 4) }).sorted() {
            for m in try FileOps.list("\(directory)/\(y)").filter({ Self.isNumeric($0, digits: 2) }).sorted() {
                for d in try FileOps.list("\(directory)/\(y)/\(m)").filter({ Self.isNumeric($0, digits: 2) }).sorted() {
                    days.append("\(directory)/\(y)/\(m)/\(d)")
                }
            }
        }
        return days
    }

    /// The item directory holding `id`, or `.invalidID` / `.notFound`.
    func locate(_ id: String) throws -> String {
        guard Self.isValidID(id) else { throw QuarantineError(.invalidID, operation: "locate", path: id) }
        for day in try dayDirectories().reversed() {
            let candidate = "\(day)/\(id)"
            if let st = try FileOps.lstat("\(candidate)/\(id).json"), FileOps.isRegular(st) { return candidate }
        }
        throw QuarantineError(.notFound, operation: "locate", path: id)
    }

    /// Creates the store directory itself (0700) if it is missing, but never its parents: a missing parent is
    /// most likely a typo, and a silently created tree would hide it.
    private static func makeDirectories(_ path: String) throws {
        if Glibc.mkdir(path, 0o700) != 0 && errno != EEXIST {
            let code = errno
            if code == ENOENT {
                let parent = (path as NSString).deletingLastPathComponent
                throw QuarantineError(.notFound, operation: "parent directory \(parent.isEmpty ? "." : parent) does "
                                      + "not exist (only the store directory itself is created)")
            }
            throw QuarantineError(errno: code, operation: "mkdir", path: path)
        }
        guard let st = try FileOps.lstat(path), FileOps.isDirectory(st) else {
            throw QuarantineError(.io, operation: "store directory is not a directory", path: path, errno: ENOTDIR)
        }
    }
}
