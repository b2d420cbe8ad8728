import Foundation
import Glibc
import Inspect

// Operator access: list, show, release (copy out) and delete.

extension QuarantineStore {
    /// Every complete item, oldest first (ties broken by id). Items being written, and items whose
    /// sidecar cannot be parsed (see them with `show`), are not listed.
    public func list() throws -> [QuarantineItem] {
        var items: [QuarantineItem] = []
        for day in try dayDirectories() {
            for id in try FileOps.list(day) where Self.isValidID(id) {
                let item = "\(day)/\(id)"
                let sidecarPath = "\(item)/\(id).json"
                guard let bytes = try? FileOps.readFile(sidecarPath),
                      let parsed = try? Sidecar.decode(bytes, dataPath: "\(item)/\(id).bin", sidecarPath: sidecarPath)
                else { continue }
                items.append(parsed)
            }
        }
        return items.sorted { ($0.time, $0.id) < ($1.time, $1.id) }
    }

    /// The item's sidecar JSON, as stored.
    public func show(_ id: String) throws -> String {
        let item = try locate(id)
        return String(decoding: try FileOps.readFile("\(item)/\(id).json"), as: UTF8.self)
    }

    /// The item's metadata.
    public func item(_ id: String) throws -> QuarantineItem {
        let item = try locate(id)
        let sidecarPath = "\(item)/\(id).json"
        return try Sidecar.decode(try FileOps.readFile(sidecarPath), dataPath: "\(item)/\(id).bin",
                                  sidecarPath: sidecarPath)
    }

    /// Copies the item's bytes to a new file at `path` (0600), verifying the SHA-256 on the way.
    ///
    /// Refuses to overwrite (`.alreadyExists`) or follow a symlink at `path`; on a digest mismatch the
    /// copy is removed and `.corrupt` is thrown.
    public func release(_ id: String, to path: String) throws {
        let meta = try item(id)
        let input = try FileOps.open(meta.dataPath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        defer { close(input) }
        let output = try FileOps.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        var ok = false
        defer {
            close(output)
            if !ok { try? FileOps.unlink(path) }
        }
        let hasher = SHA256Hasher()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        var copied: Int64 = 0
        while true {
            let n = try FileOps.read(input, buffer, path: meta.dataPath)
            if n == 0 { break }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[..<n])
            hasher.update(chunk)
            try FileOps.writeAll(output, chunk, path: path)
            copied += Int64(n)
        }
        guard copied == meta.size, hasher.finalizeHex() == meta.sha256 else {
            throw QuarantineError(.corrupt, operation: "release (digest or size mismatch)", path: meta.dataPath)
        }
        try FileOps.fsync(output, path: path)
        ok = true
    }

    /// Deletes the item.
    public func delete(_ id: String) throws {
        let item = try locate(id)
        try removeItem(item, id: id)
    }
}
