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
/// written through its own `QuarantineWriter`, owned by one thread. Usage accounting is per
/// process; give each proxy process its own directory.
public final class QuarantineStore: Sendable {
    /// The store's root directory.
    public let directory: String
    /// The cap on bytes stored (data plus sidecars); writes that would pass it fail with `.storeFull`.
    public let maxBytes: Int64
    /// How long items are kept before `prune(now:)` deletes them.
    public let retention: Duration
    let faults: FaultPlan?
    /// Bytes in the store, plus bytes reserved by writers in progress. Also serialises creating
    /// and removing the day directories, so `prune` never removes one a writer is entering.
    let usage: Mutex<Int64>

    /// Opens (creating 0700 if missing) the store at `directory`, computing usage by walking it.
    public convenience init(directory: String, maxBytes: Int64, retention: Duration) throws {
        try self.init(directory: directory, maxBytes: maxBytes, retention: retention, faults: nil)
    }

    init(directory: String, maxBytes: Int64, retention: Duration, faults: FaultPlan?) throws {
        // Configuration, not input: validated by the CLI before the store is opened.
        precondition(maxBytes > 0, "maxBytes must be positive")
        var root = directory
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        self.directory = root
        self.maxBytes = maxBytes
        self.retention = retention
        self.faults = faults
        try Self.makeDirectories(root)
        self.usage = Mutex(try Self.measure(root))
    }

    /// Bytes currently stored or reserved by writers in progress.
    public var usageBytes: Int64 { usage.withLock { $0 } }

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
        try usage.withLock { used in
            guard used < maxBytes else {
                let operation = "begin (\(used) of \(maxBytes) bytes used)"
                throw QuarantineError(.storeFull, operation: operation, path: directory)
            }
            try FileOps.check(.createTemp, faults, path: itemDirectory)
            // Under the lock: prune removes empty day directories under the same lock.
            var parent = directory
            for component in [y, m, d, id] {
                let child = "\(parent)/\(component)"
                if try FileOps.mkdir(child) { try FileOps.fsyncDirectory(parent) }
                parent = child
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

    /// Reserves `bytes` against the cap, or throws `.storeFull`.
    func reserve(_ bytes: Int64, path: String) throws {
        try usage.withLock { used in
            guard used + bytes <= maxBytes else {
                throw QuarantineError(.storeFull, operation: "write (cap \(maxBytes) bytes)", path: path)
            }
            used += bytes
        }
    }

    /// Adds bytes that are not subject to the cap (sidecars).
    func account(_ bytes: Int64) {
        usage.withLock { $0 += bytes }
    }

    /// Returns bytes to the pool (abort, delete, prune).
    func release(_ bytes: Int64) {
        usage.withLock { $0 = max(0, $0 - bytes) }
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

    /// Sum of regular file sizes under `path`.
    static func measure(_ path: String) throws -> Int64 {
        var total: Int64 = 0
        for name in try FileOps.list(path) {
            let child = "\(path)/\(name)"
            guard let st = try FileOps.lstat(child) else { continue }
            if FileOps.isDirectory(st) {
                total += try measure(child)
            } else if FileOps.isRegular(st) {
                total += Int64(st.st_size)
            }
        }
        return total
    }
}
