import Foundation
import Glibc
import Inspect

/// Streams one part into the store: bytes go straight to a temporary file while the SHA-256 and
/// size are computed on the fly; nothing is held in memory.
///
/// Owned by one thread. Any failure (including `.storeFull` and `.diskFull`) removes everything the
/// writer created before the error is thrown, so a failed item leaves nothing behind. Dropping an
/// unfinished writer aborts it.
public final class QuarantineWriter {
    private enum State {
        case open
        case finished
        /// A simulated crash: leave the file system exactly as it is.
        case crashed
    }

    /// The item id (32 hex digits).
    public let id: String
    /// Bytes written so far.
    public private(set) var size: Int64 = 0

    private let store: QuarantineStore
    private let meta: QuarantineMeta
    private let itemDirectory: String
    private let dataTemp: String
    private let dataFinal: String
    private let sidecarTemp: String
    private let sidecarFinal: String
    private var fd: Int32 = -1
    private let hasher = SHA256Hasher()
    private var state = State.open
    private var sidecarBytes: Int64 = 0
    /// The sidecar is in place: the item's bytes count as stored, no longer as this writer's.
    private var completed = false

    init(store: QuarantineStore, id: String, directory: String, meta: QuarantineMeta) throws {
        self.store = store
        self.id = id
        self.meta = meta
        self.itemDirectory = directory
        self.dataTemp = "\(directory)/.tmp-\(id).bin"
        self.dataFinal = "\(directory)/\(id).bin"
        self.sidecarTemp = "\(directory)/.tmp-\(id).json"
        self.sidecarFinal = "\(directory)/\(id).json"
        fd = try FileOps.open(dataTemp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0o600)
    }

    deinit {
        if state == .open { abort() }
    }

    /// Appends `bytes` to the item. Throws `.storeFull` past the store's cap, `.diskFull` on ENOSPC,
    /// and so on; after a throw the item is gone and the writer is finished.
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard state == .open else { throw QuarantineError(.misuse, operation: "write after finish", path: dataTemp) }
        guard !bytes.isEmpty else { return }
        try guarded {
            try FileOps.check(.writeData, store.faults, path: dataTemp)
            try store.reserve(Int64(bytes.count), path: dataTemp)
            var accepted = bytes
            var injected: Int32? = nil
            if let limit = store.faults?.failWriteAfterBytes, size + Int64(bytes.count) > Int64(limit) {
                // Simulate a disk that fills mid-write: a short write, then the error.
                accepted = UnsafeRawBufferPointer(rebasing: bytes[..<max(0, limit - Int(size))])
                injected = store.faults?.writeErrno
            }
            do {
                try FileOps.writeAll(fd, accepted, path: dataTemp)
            } catch {
                store.release(Int64(bytes.count))
                throw error
            }
            hasher.update(accepted)
            size += Int64(accepted.count)
            if let injected {
                store.release(Int64(bytes.count - accepted.count))
                throw QuarantineError(errno: injected, operation: "injected write", path: dataTemp)
            }
        }
    }

    /// Appends `bytes` to the item.
    public func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try write($0) }
    }

    /// Makes the item durable and complete, returning it. `finalMeta` replaces the metadata given to
    /// `begin` (for the sniffed type and violations known only at the end); its `time` is ignored,
    /// since the item's day directory is already chosen.
    public func commit(_ finalMeta: QuarantineMeta? = nil) throws -> QuarantineItem {
        guard state == .open else { throw QuarantineError(.misuse, operation: "commit after finish", path: dataTemp) }
        var meta = finalMeta ?? self.meta
        meta.time = self.meta.time
        let sha256 = hasher.finalizeHex()
        let faults = store.faults
        return try guarded {
            try FileOps.check(.syncData, faults, path: dataTemp)
            try FileOps.fsync(fd, path: dataTemp)
            close(fd)
            fd = -1
            try FileOps.check(.renameData, faults, path: dataTemp)
            try FileOps.rename(dataTemp, dataFinal)
            try FileOps.check(.syncDirectoryAfterData, faults, path: itemDirectory)
            try FileOps.fsyncDirectory(itemDirectory)

            try FileOps.check(.writeSidecar, faults, path: sidecarTemp)
            let sidecar = Sidecar.encode(id: id, meta: meta, size: size, sha256: sha256)
            let sfd = try FileOps.open(sidecarTemp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0o600)
            defer { close(sfd) }
            store.account(Int64(sidecar.count))
            sidecarBytes = Int64(sidecar.count)
            try sidecar.withUnsafeBytes { try FileOps.writeAll(sfd, $0, path: sidecarTemp) }
            try FileOps.check(.syncSidecar, faults, path: sidecarTemp)
            try FileOps.fsync(sfd, path: sidecarTemp)
            try FileOps.check(.renameSidecar, faults, path: sidecarTemp)
            try store.complete(itemDirectory, id: id, sidecar: sidecarTemp, bytes: size + sidecarBytes)
            completed = true
            try FileOps.check(.syncDirectoryAfterSidecar, faults, path: itemDirectory)
            try FileOps.fsyncDirectory(itemDirectory)
            state = .finished
            return try Sidecar.decode(sidecar, dataPath: dataFinal, sidecarPath: sidecarFinal)
        }
    }

    /// Abandons the item, removing its temporary file and directory. Safe to call more than once.
    public func abort() {
        guard state == .open else { return }
        state = .finished
        cleanUp()
    }

    /// Runs `body`; on any error removes everything this writer created (unless the error is a
    /// simulated crash, which must leave the file system as it is) and finishes the writer.
    private func guarded<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as QuarantineError where error.code == .simulatedCrash {
            state = .crashed
            if fd >= 0 { close(fd) }
            fd = -1
            throw error
        } catch {
            state = .finished
            cleanUp()
            throw error
        }
    }

    private func cleanUp() {
        if fd >= 0 { close(fd) }
        fd = -1
        if completed {
            // A failure after the sidecar's rename: the item is removed as a complete one.
            try? store.removeItem(itemDirectory, id: id)
        } else {
            store.release(size + sidecarBytes)
        }
        // Sidecar first: once it is gone the item is incomplete, whatever else fails to unlink.
        for path in [sidecarFinal, sidecarTemp, dataFinal, dataTemp] { try? FileOps.unlink(path) }
        _ = try? FileOps.rmdir(itemDirectory)
        size = 0
        sidecarBytes = 0
    }
}
