import Glibc

// Built-in size rotation; the protocol is drawn at the top of AuditLog.swift.

extension AuditLog {
    /// The path of rotated generation `n` (1 is the newest), compressed or not.
    static func generationPath(_ path: String, _ n: Int, compressed: Bool = true) -> String {
        compressed ? "\(path).\(n).gz" : "\(path).\(n)"
    }

    /// The lock file that serialises rotations of `path` across instances and processes.
    static func rotationLockPath(_ path: String) -> String { "\(path).lock" }

    /// Rotates if this instance's file is still the current one and still too large. Returns
    /// without waiting when another instance is already rotating.
    func rotate(_ rotation: Rotation) throws {
        let path = configuration.path
        let lock = try rotationLock()
        guard try AuditSyscall.lock(lock, LOCK_EX | LOCK_NB, path: Self.rotationLockPath(path)) else { return }
        defer { _ = try? AuditSyscall.lock(lock, LOCK_UN, path: Self.rotationLockPath(path)) }

        try Self.finishInterruptedRotation(path)
        guard let before = try AuditSyscall.statPath(path), Int(before.st_size) > rotation.maxBytes else { return }

        // Make room: drop the oldest generation and shift the others up by one.
        try AuditSyscall.unlink(Self.generationPath(path, rotation.keep))
        if rotation.keep > 1 {
            for n in stride(from: rotation.keep - 1, through: 1, by: -1) {
                try AuditSyscall.rename(Self.generationPath(path, n), Self.generationPath(path, n + 1))
            }
        }

        // Retire the live file. Lock whichever inode the path names now, so that in-flight writes to it
        // finish first; writers re-check the path under their shared lock and move to the new file.
        let victim = try AuditSyscall.open(path, O_RDONLY | O_CLOEXEC)
        defer { Glibc.close(victim) }
        try AuditSyscall.lock(victim, LOCK_EX, path: path)
        let victimStat = try AuditSyscall.fstatFD(victim, path: path)
        let current = try AuditSyscall.statPath(path)
        guard let current, current.st_ino == victimStat.st_ino, current.st_dev == victimStat.st_dev else {
            // Renamed away between open and lock (external rotation): nothing of ours to retire.
            return
        }
        let retired = Self.generationPath(path, 1, compressed: false)
        try AuditSyscall.rename(path, retired)
        try AuditSyscall.lock(victim, LOCK_UN, path: path)
        try AuditSyscall.fsyncDirectory(AuditSyscall.directory(of: path))
        try reopen()

        try Self.compressRetired(path)
    }

    /// Completes a rotation that a crash (or a failed compression) left behind: `FILE.1` exists
    /// uncompressed. If `FILE.1.gz` is already complete the plain copy is just removed.
    static func finishInterruptedRotation(_ path: String) throws {
        try AuditSyscall.unlink(generationPath(path, 1) + ".tmp")
        let retired = generationPath(path, 1, compressed: false)
        guard try AuditSyscall.statPath(retired) != nil else { return }
        if try AuditSyscall.statPath(generationPath(path, 1)) != nil {
            try AuditSyscall.unlink(retired)
            try AuditSyscall.fsyncDirectory(AuditSyscall.directory(of: path))
        } else {
            try compressRetired(path)
        }
    }

    /// gzips `FILE.1` into `FILE.1.gz` through a temporary name, then removes `FILE.1`.
    static func compressRetired(_ path: String) throws {
        let retired = generationPath(path, 1, compressed: false)
        let target = generationPath(path, 1)
        let temporary = target + ".tmp"
        try Gzip.compressFile(retired, to: temporary)
        try AuditSyscall.rename(temporary, target)
        try AuditSyscall.unlink(retired)
        try AuditSyscall.fsyncDirectory(AuditSyscall.directory(of: path))
    }

    private func rotationLock() throws -> Int32 {
        if lockFD >= 0 { return lockFD }
        lockFD = try AuditSyscall.open(Self.rotationLockPath(configuration.path), O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        return lockFD
    }
}
