import Foundation
import Glibc
import Inspect
import Testing

@testable import Quarantine
import TestRandom

/// Crash safety and fail-closed behaviour.
///
/// Two complementary approaches:
/// - `crashBeforeEveryDurabilityStep` stops the writer just before each step (via the test-only
///   `FaultPlan.crashBefore`) without any clean-up, which leaves the file system exactly as a
///   crash there would, and proves `recover()` cleans each state deterministically.
/// - `sigkillAtRandomPointsThenRecover` forks a child that stores items in a loop and SIGKILLs it
///   at random moments, many times, then checks the invariant after `recover()`.
///
/// Serialized: a forked child inherits every descriptor open in the test process at that moment, and
/// `diskFullOnATinyTmpfs` needs the space of a file it unlinked back, which a child holding that file's
/// descriptor keeps until it exits (a CI run failed with "No space left on device" on the small item after the
/// big one, while `sigkillAtRandomPointsThenRecover` was forking). Only this suite forks.
@Suite(.serialized) struct QuarantineCrashTests {
    @Test(arguments: DurabilityStep.allCases)
    func crashBeforeEveryDurabilityStep(_ step: DurabilityStep) throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let clean = try QuarantineStore(directory: dir.path, maxBytes: 1 << 24, retention: .seconds(60))
        let survivor = try clean.begin(meta("survivor"))
        try survivor.write(Array(repeating: 9, count: 1234))
        let survivorID = try survivor.commit().id

        var plan = FaultPlan()
        plan.crashBefore = step
        let crashing = try QuarantineStore(directory: dir.path, maxBytes: 1 << 24, retention: .seconds(60),
                                           faults: plan)
        var crashed = false
        var crashedID: String?
        do {
            let w = try crashing.begin(meta("victim"))
            crashedID = w.id
            try w.write(Array(repeating: 5, count: 70_000))
            try w.write(Array(repeating: 6, count: 30_000))
            _ = try w.commit()
        } catch let error as QuarantineError where error.code == .simulatedCrash {
            crashed = true
        }
        #expect(crashed)
        if step != .createTemp {
            // The crash left something on disk for recovery to deal with.
            let id = try #require(crashedID)
            #expect(tree(dir.path).contains { $0.contains(id) }, "crash before \(step) left no trace")
        }

        // "Restart": a fresh store on the same directory, then recovery.
        let restarted = try QuarantineStore(directory: dir.path, maxBytes: 1 << 24, retention: .seconds(60))
        let report = try restarted.recover()
        let ids = verifyConsistent(dir.path)
        if step == .syncDirectoryAfterSidecar {
            // The sidecar was renamed into place: the item is complete and must survive.
            #expect(ids == [survivorID, try #require(crashedID)])
            #expect(report.incompleteItems == 0)
        } else {
            #expect(ids == [survivorID])
            if step.rawValue >= DurabilityStep.writeData.rawValue {
                #expect(report.temporaryFiles + report.incompleteItems >= 1)
            }
        }
        #expect(restarted.usageBytes == treeBytes(dir.path))
        #expect(try restarted.list().count == ids.count)
    }

    @Test(arguments: [
        (DurabilityStep.writeData, ENOSPC, QuarantineError.Code.diskFull),
        (.syncData, EIO, .io),
        (.renameData, EACCES, .permission),
        (.syncDirectoryAfterData, EDQUOT, .diskFull),
        (.writeSidecar, ENOSPC, .diskFull),
        (.syncSidecar, EROFS, .permission),
        (.renameSidecar, EPERM, .permission),
        (.syncDirectoryAfterSidecar, EIO, .io),
        (.createTemp, EACCES, .permission),
    ])
    func injectedFailuresAreTypedAndLeaveNothing(
        _ step: DurabilityStep, _ code: Int32, _ expected: QuarantineError.Code
    ) throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        var plan = FaultPlan()
        plan.failures[step] = code
        let store = try QuarantineStore(directory: dir.path, maxBytes: 1 << 24, retention: .seconds(60), faults: plan)
        let error = #expect(throws: QuarantineError.self) {
            let w = try store.begin(meta())
            try w.write(Array(repeating: 1, count: 10_000))
            _ = try w.commit()
        }
        #expect(error?.code == expected)
        #expect(error?.errno == code)
        #expect(store.usageBytes == 0)
        #expect(!tree(dir.path).contains { $0.split(separator: "/").count >= 4 }, "no item directory or file left")
        #expect(try store.list().isEmpty)
    }

    @Test func diskFullMidWriteLeavesNothing() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        var plan = FaultPlan()
        plan.failWriteAfterBytes = 50_000
        let store = try QuarantineStore(directory: dir.path, maxBytes: 1 << 24, retention: .seconds(60), faults: plan)
        try expectDiskFullThenRecovery(store, root: dir.path, payload: 200_000)
    }

    /// A real full file system: a 64 KiB tmpfs. Falls back to the injected variant when mounting is
    /// impossible (not root, no CAP_SYS_ADMIN, seccomp).
    @Test func diskFullOnATinyTmpfs() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let mountPoint = dir.file("tiny")
        #expect(mkdir(mountPoint, 0o700) == 0)
        guard mount("tmpfs", mountPoint, "tmpfs", 0, "size=64k,mode=0700") == 0 else {
            var plan = FaultPlan()
            plan.failWriteAfterBytes = 60_000
            let store = try QuarantineStore(directory: mountPoint, maxBytes: 1 << 24, retention: .seconds(60),
                                            faults: plan)
            try expectDiskFullThenRecovery(store, root: mountPoint, payload: 200_000)
            return
        }
        defer { umount2(mountPoint, Int32(MNT_DETACH)) }
        let store = try QuarantineStore(directory: "\(mountPoint)/q", maxBytes: 1 << 24, retention: .seconds(60))
        try expectDiskFullThenRecovery(store, root: "\(mountPoint)/q", payload: 200_000)
    }

    private func expectDiskFullThenRecovery(_ store: QuarantineStore, root: String, payload: Int) throws {
        let error = #expect(throws: QuarantineError.self) {
            let w = try store.begin(meta("big"))
            for _ in 0..<(payload / 10_000) { try w.write(Array(repeating: 0xAB, count: 10_000)) }
            _ = try w.commit()
        }
        #expect(error?.code == .diskFull, "\(String(describing: error))")
        #expect(!tree(root).contains { $0.split(separator: "/").count >= 4 }, "nothing partial left: \(tree(root))")
        #expect(store.usageBytes == 0)
        // The space came back: a small item fits.
        let w = try store.begin(meta("small"))
        try w.write(Array(repeating: 1, count: 1000))
        let item = try w.commit()
        #expect(verifyConsistent(root) == [item.id])
    }

    @Test func sigkillAtRandomPointsThenRecover() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let store = try QuarantineStore(directory: dir.path, maxBytes: 1 << 30, retention: .seconds(86_400))
        // Warm up every code path the child will run, so it needs no lazy runtime state after fork.
        do {
            var rng = SplitMix64(seed: 99)
            let w = try store.begin(meta("warm-up"))
            try w.write(randomBytes(1000, &rng))
            _ = try w.commit()
            let a = try store.begin(meta("warm-up-abort"))
            a.abort()
        }
        var rng = SplitMix64(seed: 0xC0FFEE)
        var totals = QuarantineStore.RecoveryReport()
        var committedByChildren: Set<String> = []
        for iteration in 0..<60 {
            var fds: [Int32] = [0, 0]
            #expect(pipe(&fds) == 0)
            let childSeed = rng.next()
            let pid = fork()
            if pid == 0 {
                close(fds[0])
                Self.childStoresForever(store, seed: childSeed, progress: fds[1])
            }
            close(fds[1])
            #expect(pid > 0)
            // Let the child commit 0–2 items, then kill it at a random moment in the next one.
            let wanted = Int.random(in: 0...2, using: &rng)
            var line: [UInt8] = []
            var reported = 0
            while reported < wanted {
                var pfd = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, 20_000) == 1 else {
                    Issue.record("iteration \(iteration): child made no progress within 20 s")
                    break
                }
                var byte: UInt8 = 0
                guard read(fds[0], &byte, 1) == 1 else { break }
                if byte == 0x0A {
                    committedByChildren.insert(String(decoding: line, as: UTF8.self))
                    line.removeAll()
                    reported += 1
                } else {
                    line.append(byte)
                }
            }
            var spin = UInt64(0)
            for i in 0..<UInt64.random(in: 0...150_000, using: &rng) { spin &+= i }
            #expect(spin != 1)  // keep the spin loop
            kill(pid, SIGKILL)
            var status: Int32 = 0
            #expect(waitpid(pid, &status, 0) == pid)
            close(fds[0])

            let restarted = try QuarantineStore(directory: dir.path, maxBytes: 1 << 30, retention: .seconds(86_400))
            let report = try restarted.recover()
            totals.temporaryFiles += report.temporaryFiles
            totals.incompleteItems += report.incompleteItems
            let ids = verifyConsistent(dir.path)
            #expect(committedByChildren.isSubset(of: ids), "a committed item was lost in iteration \(iteration)")
            #expect(restarted.usageBytes == treeBytes(dir.path))
        }
        #expect(committedByChildren.count >= 30)
        // The kills really landed mid-item: recovery had leftovers to remove.
        #expect(totals.temporaryFiles + totals.incompleteItems >= 15, "\(totals)")
    }

    /// The child's whole life: store random items forever, reporting each committed id on `progress`.
    private static func childStoresForever(_ store: QuarantineStore, seed: UInt64, progress: Int32) -> Never {
        var rng = SplitMix64(seed: seed)
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        for i in 0..<10_000 {
            do {
                let w = try store.begin(meta("child-\(i)"))
                for _ in 0..<Int.random(in: 0...16, using: &rng) {
                    let n = Int.random(in: 1...chunk.count, using: &rng)
                    chunk[0] = UInt8(truncatingIfNeeded: rng.next())
                    try chunk[..<n].withUnsafeBytes { try w.write($0) }
                }
                let id = try w.commit().id
                let line = Array((id + "\n").utf8)
                _ = line.withUnsafeBytes { write(progress, $0.baseAddress, $0.count) }
            } catch {
                _exit(3)
            }
        }
        _exit(0)
    }
}
