import Foundation
import Glibc
import Synchronization
import Testing

@testable import Quarantine
import TestRandom

/// Usage as the running proxy sees it when others change the store: `formwall quarantine delete` (another
/// `QuarantineStore` on the same directory), files removed by hand, expiry by another process.
@Suite struct QuarantineRescanTests {
    /// Stores `count` items of `size` bytes each, returning their ids.
    private func fill(_ store: QuarantineStore, count: Int, size: Int, time: Date = Date()) throws -> [String] {
        try (0..<count).map { i in
            let w = try store.begin(meta("fill-\(i)", time: time))
            try w.write(Array(repeating: UInt8(i & 0xFF), count: size))
            return try w.commit().id
        }
    }

    @Test func deletionsByAnotherStoreAndByHandAreSeenAfterRescan() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        // The proxy's store, which never rescans on its own here (the gap is an hour).
        let proxy = try QuarantineStore(directory: dir.path, maxBytes: 10_000, retention: .seconds(86_400),
                                        faults: nil, minimumRescanGap: .seconds(3600))
        let ids = try fill(proxy, count: 2, size: 4000)
        let full = proxy.usageBytes
        #expect(full == treeBytes(dir.path))
        let refused = #expect(throws: QuarantineError.self) { _ = try fill(proxy, count: 1, size: 4000) }
        #expect(refused?.code == .storeFull)
        #expect(proxy.usage == QuarantineUsage(bytes: full, maxBytes: 10_000, full: true))

        // `formwall quarantine delete`: its own store on the same directory.
        let cli = try QuarantineStore(directory: dir.path, maxBytes: 10_000, retention: .seconds(86_400))
        try cli.delete(ids[0])
        #expect(proxy.usageBytes == full, "not seen before a rescan")
        #expect(try proxy.rescan())
        #expect(proxy.usageBytes == treeBytes(dir.path) && proxy.usageBytes < full)
        #expect(!proxy.usage.full, "room came back")
        let third = try fill(proxy, count: 1, size: 4000)

        // By hand: `rm -r` of an item directory, and of only the data file of another (no longer complete).
        let second = try proxy.item(ids[1])
        try FileManager.default.removeItem(atPath: (second.dataPath as NSString).deletingLastPathComponent)
        let last = try proxy.item(third[0])
        try FileManager.default.removeItem(atPath: last.dataPath)
        #expect(try proxy.rescan())
        #expect(proxy.usageBytes == 0)
        #expect(proxy.usage == QuarantineUsage(bytes: 0, maxBytes: 10_000, full: false))
    }

    @Test func aRefusedPartRescansWhenDueAndThenFits() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let proxy = try QuarantineStore(directory: dir.path, maxBytes: 10_000, retention: .seconds(86_400),
                                        faults: nil, minimumRescanGap: .zero)
        let ids = try fill(proxy, count: 2, size: 4000)
        let cli = try QuarantineStore(directory: dir.path, maxBytes: 10_000, retention: .seconds(86_400))
        for id in ids { try cli.delete(id) }
        // No explicit rescan: the write that does not fit by the stale count rescans, then fits.
        let fitted = try fill(proxy, count: 2, size: 4000)
        #expect(proxy.usageBytes == treeBytes(dir.path))
        #expect(try proxy.list().map(\.id).sorted() == fitted.sorted())
    }

    @Test func refusedWithoutARescanWhileNotDue() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let proxy = try QuarantineStore(directory: dir.path, maxBytes: 10_000, retention: .seconds(86_400),
                                        faults: nil, minimumRescanGap: .seconds(3600))
        let ids = try fill(proxy, count: 2, size: 4000)
        let cli = try QuarantineStore(directory: dir.path, maxBytes: 10_000, retention: .seconds(86_400))
        for id in ids { try cli.delete(id) }
        #expect(!proxy.rescanIfDue())
        let refused = #expect(throws: QuarantineError.self) { _ = try fill(proxy, count: 1, size: 4000) }
        #expect(refused?.code == .storeFull)
    }

    @Test func expiryByAnotherProcessIsSeenAfterRescan() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let now = Date(timeIntervalSince1970: 1_795_953_662)
        let proxy = try QuarantineStore(directory: dir.path, maxBytes: 1 << 20, retention: .seconds(86_400),
                                        faults: nil, minimumRescanGap: .seconds(3600))
        _ = try fill(proxy, count: 3, size: 1000, time: now.addingTimeInterval(-5 * 86_400))
        let kept = try fill(proxy, count: 1, size: 1000, time: now)
        let other = try QuarantineStore(directory: dir.path, maxBytes: 1 << 20, retention: .seconds(86_400))
        #expect(try other.prune(now: now) == 3)
        #expect(try proxy.rescan())
        #expect(proxy.usageBytes == treeBytes(dir.path))
        #expect(try proxy.list().map(\.id) == kept)
    }

    /// A failure after the sidecar's rename removes the item, and its bytes leave usage with it.
    @Test func aCompleteItemRemovedOnFailureLeavesUsage() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        var plan = FaultPlan()
        plan.failures[.syncDirectoryAfterSidecar] = EIO
        let store = try QuarantineStore(directory: dir.path, maxBytes: 1 << 20, retention: .seconds(60), faults: plan)
        #expect(throws: QuarantineError.self) { _ = try fill(store, count: 1, size: 3000) }
        #expect(store.usageBytes == 0)
        #expect(try store.rescan())
        #expect(store.usageBytes == 0)
    }

    /// This process's commits and removals while a rescan walks are counted exactly, wherever they fall: in a
    /// day it has walked; in the day it is listing (`pause` 5) or walking (`pause` 6: it has looked at its first
    /// chunk), at items it has or has not looked at yet and at items not listed; in a day it has not reached; in
    /// a day created since it started. With no rescan after them, usage equals the bytes on disk.
    @Test(arguments: [5, 6]) func ownChangesDuringARescanAreCountedExactly(pause: Int) throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let start = Date(timeIntervalSince1970: 1_795_953_662)  // 2026-11-29
        let day: TimeInterval = 86_400
        // Three days of items, 2 chunks and 5 items each: the rescan pauses after listing the first (pause 1),
        // after each of its 3 chunks (2 to 4), after listing the second (5) and after its first chunk (6).
        let perDay = QuarantineStore.rescanChunk * 2 + 5
        let pauses = Atomic<Int>(0)
        let changes = ChangeHook()
        var plan = FaultPlan()
        plan.duringRescan = {
            guard pauses.add(1, ordering: .relaxed).newValue == pause, let change = changes.change else { return }
            do { try change() } catch { Issue.record("change during the rescan: \(error)") }
        }
        var rng = SplitMix64(seed: 7)
        let days = try (1...3).map { d in
            try (0..<perDay).map { _ in try plantItem(dir.path, day: "2026/11/2\(d)", size: 100 + d, &rng) }
        }
        let store = try QuarantineStore(directory: dir.path, maxBytes: 1 << 30, retention: .seconds(86_400),
                                        faults: plan)
        #expect(store.usageBytes == treeBytes(dir.path))
        // Begun before the rescan lists its day, made complete during it.
        let writer = try store.begin(meta("begun", time: start.addingTimeInterval(-7 * day)))
        try writer.write(Array(repeating: 3, count: 5))
        pauses.store(0, ordering: .relaxed)
        let walking = days[1].sorted()  // the second day, in the order the walk looks at it
        changes.change = {
            try store.delete(days[0][0])  // a day walked
            try store.delete(walking[0])  // looked at (pause 6)
            try store.delete(walking[walking.count - 1])  // not looked at yet
            try store.delete(days[2][0])  // a day not reached
            _ = try writer.commit()  // listed
            _ = try self.fill(store, count: 1, size: 7, time: start.addingTimeInterval(-7 * day))  // not listed
            _ = try self.fill(store, count: 1, size: 11, time: start.addingTimeInterval(-6 * day))  // day not reached
            _ = try self.fill(store, count: 1, size: 13, time: start.addingTimeInterval(-9 * day))  // a new day, before
            _ = try self.fill(store, count: 1, size: 17, time: start)  // a new day, after the others
        }
        #expect(try store.rescan())
        #expect(pauses.load(ordering: .relaxed) > pause)
        #expect(tree(dir.path).filter { $0.hasSuffix(".json") }.count == 3 * perDay - 4 + 5)
        #expect(store.usageBytes == treeBytes(dir.path))
    }
}

/// The change a test makes from inside a rescan; set before the rescan, read on the rescanning thread.
private final class ChangeHook: @unchecked Sendable {
    var change: (() throws -> Void)?
}
