import Foundation
import Glibc
import Inspect
import Synchronization
import Testing

@testable import Quarantine
import TestRandom

@Suite struct QuarantineStoreTests {
    @Test func commitStoresBytesDigestSidecarAndPermissions() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let root = dir.file("q")
        let store = try QuarantineStore(directory: root, maxBytes: 1 << 30, retention: .seconds(86_400 * 30))
        #expect(mode(root) == 0o700 | S_IFDIR)

        var rng = SplitMix64(seed: 1)
        let payload = randomBytes(300_000, &rng)
        let writer = try store.begin(meta())
        var offset = 0
        while offset < payload.count {
            let n = min(Int.random(in: 1...70_000, using: &rng), payload.count - offset)
            try payload[offset..<offset + n].withUnsafeBytes { try writer.write($0) }
            offset += n
        }
        var final = meta()
        final.sniffedType = "application/x-elf"
        let item = try writer.commit(final)

        #expect(item.id == writer.id && QuarantineStore.isValidID(item.id))
        #expect(item.size == Int64(payload.count))
        #expect(item.sha256 == SHA256Hasher.hex(payload))
        #expect(item.dataPath == "\(root)/2026/11/29/\(item.id)/\(item.id).bin")
        #expect(FileManager.default.contents(atPath: item.dataPath) == Data(payload))
        for d in ["2026", "2026/11", "2026/11/29", "2026/11/29/\(item.id)"] {
            #expect(mode("\(root)/\(d)") == 0o700 | S_IFDIR, "\(d)")
        }
        #expect(mode(item.dataPath) == 0o600 | S_IFREG)
        #expect(mode(item.sidecarPath) == 0o600 | S_IFREG)

        let object = try sidecarObject(store, item.id)
        #expect(object["id"] as? String == item.id)
        #expect(object["request_id"] as? String == "req-1")
        #expect(object["route"] as? String == "avatar")
        #expect(object["client"] as? String == "10.0.0.7:51234")
        #expect(object["time"] as? String == "2026-11-29T12:01:02.345Z")
        #expect(object["part_name"] as? String == "avatar")
        #expect(object["filename"] as? String == "../evil name.exe")
        #expect(object["filename_sanitized"] as? String == "evil_name.exe")
        #expect(object["filename_hex"] as? String == Hex.encode(Array("../evil name.exe".utf8)))
        #expect(object["declared_type"] as? String == "image/png")
        #expect(object["sniffed_type"] as? String == "application/x-elf")
        #expect(object["size"] as? Int == payload.count)
        #expect(object["sha256"] as? String == SHA256Hasher.hex(payload))
        let violations = try #require(object["violations"] as? [[String: Any]])
        #expect(violations.count == 1)
        #expect(violations[0]["kind"] as? String == "file_type_mismatch")
        #expect(violations[0]["rule"] as? String == "rules.fw:7")
        #expect(verifyConsistent(root) == [item.id])

        // Usage counts data and sidecar, and a fresh open computes the same by walking.
        let sidecarSize = Int64(try Data(contentsOf: URL(fileURLWithPath: item.sidecarPath)).count)
        #expect(store.usageBytes == Int64(payload.count) + sidecarSize)
        #expect(try QuarantineStore(directory: root, maxBytes: 1 << 30, retention: .seconds(60)).usageBytes
            == store.usageBytes)
    }

    @Test func invalidUTF8FilenameIsKeptExactlyInHex() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let store = try QuarantineStore(directory: dir.path, maxBytes: 1 << 20, retention: .seconds(60))
        let raw: [UInt8] = [0x61, 0xFF, 0x22, 0x0A, 0x2E, 0x70, 0x68, 0x70]
        let writer = try store.begin(meta(filename: raw))
        try writer.write([1, 2, 3])
        let item = try writer.commit()
        let object = try sidecarObject(store, item.id)
        #expect(object["filename"] as? String == "a\u{FFFD}\"\n.php")
        #expect(object["filename_hex"] as? String == Hex.encode(raw))
        #expect(object["filename_sanitized"] as? String == "a___.php")
        #expect(item.filename == "a\u{FFFD}\"\n.php")
    }

    @Test func abortAndDroppingLeaveNothing() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let store = try QuarantineStore(directory: dir.path, maxBytes: 1 << 20, retention: .seconds(60))
        let writer = try store.begin(meta())
        try writer.write(Array(repeating: 7, count: 5000))
        #expect(store.usageBytes == 5000)
        #expect(tree(dir.path).contains { $0.hasSuffix(".tmp-\(writer.id).bin") })
        writer.abort()
        writer.abort()
        #expect(throws: QuarantineError.self) { try writer.write([1]) }
        #expect(store.usageBytes == 0)
        try store.recover()  // removes the now-empty day directories
        #expect(tree(dir.path).isEmpty)

        do {
            let dropped = try store.begin(meta())
            try dropped.write(Array(repeating: 1, count: 100))
        }
        #expect(!tree(dir.path).contains { $0.contains(".tmp-") })
        #expect(store.usageBytes == 0)
        #expect(try store.list().isEmpty)
    }

    @Test func sizeCapFailsClosedAtBeginAndDuringWrites() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let store = try QuarantineStore(directory: dir.path, maxBytes: 10_000, retention: .seconds(60))
        let first = try store.begin(meta("a"))
        try first.write(Array(repeating: 1, count: 6000))
        let kept = try first.commit()
        let afterFirst = store.usageBytes

        let second = try store.begin(meta("b"))
        try second.write(Array(repeating: 2, count: 1000))
        let error = #expect(throws: QuarantineError.self) { try second.write(Array(repeating: 2, count: 5000)) }
        #expect(error?.code == .storeFull)
        #expect(throws: QuarantineError.self) { _ = try second.commit() }
        #expect(store.usageBytes == afterFirst)
        #expect(verifyConsistent(dir.path) == [kept.id])

        // Fill to the cap exactly; then even an empty item is refused at begin.
        let third = try store.begin(meta("c"))
        try third.write(Array(repeating: 3, count: Int(10_000 - afterFirst)))
        _ = try third.commit()
        #expect(store.usageBytes >= 10_000)
        let refused = #expect(throws: QuarantineError.self) { _ = try store.begin(meta("d")) }
        #expect(refused?.code == .storeFull)
        #expect(verifyConsistent(dir.path).count == 2)
    }

    @Test func pruneDeletesOnlyItemsPastRetention() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let day: TimeInterval = 86_400
        let now = Date(timeIntervalSince1970: 1_795_953_662)
        let store = try QuarantineStore(directory: dir.path, maxBytes: 1 << 20, retention: .seconds(3 * 86_400))
        var ids: [String: String] = [:]
        for (label, age) in [("ten", 10 * day), ("fourA", 4 * day), ("boundaryOld", 3 * day + 60),
                             ("boundaryNew", 3 * day - 60), ("two", 2 * day), ("now", 0)] {
            let w = try store.begin(meta(label, time: now.addingTimeInterval(-age)))
            try w.write(Array(label.utf8))
            ids[label] = try w.commit().id
        }
        let inProgress = try store.begin(meta("old-in-progress", time: now.addingTimeInterval(-20 * day)))
        try inProgress.write([1, 2, 3])

        let before = store.usageBytes
        #expect(try store.prune(now: now) == 3)
        let left = try store.list().map(\.requestID)
        #expect(left == ["boundaryNew", "two", "now"])
        #expect(store.usageBytes < before)
        #expect(!FileManager.default.fileExists(atPath: dir.file("2026/11/19")), "empty old day directory removed")
        #expect(tree(dir.path).contains { $0.hasSuffix(".tmp-\(inProgress.id).bin") }, "writers are never pruned")
        _ = try inProgress.commit()
        #expect(try store.list().count == 4)
    }

    @Test func operatorListShowReleaseDelete() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let store = try QuarantineStore(directory: dir.file("q"), maxBytes: 1 << 20, retention: .seconds(60))
        let base = Date(timeIntervalSince1970: 1_795_953_662)
        var items: [QuarantineItem] = []
        for i in [2, 0, 1] {  // committed out of time order
            let w = try store.begin(meta("r\(i)", time: base.addingTimeInterval(Double(i) * 90_000)))
            try w.write(Array("payload \(i)".utf8))
            items.append(try w.commit())
        }
        #expect(try store.list().map(\.requestID) == ["r0", "r1", "r2"])

        let target = items[1]
        #expect(try store.show(target.id).contains("\"id\":\"\(target.id)\""))

        let out = dir.file("released.bin")
        try store.release(target.id, to: out)
        #expect(FileManager.default.contents(atPath: out) == Data("payload 0".utf8))
        #expect(mode(out) == 0o600 | S_IFREG)
        let exists = #expect(throws: QuarantineError.self) { try store.release(target.id, to: out) }
        #expect(exists?.code == .alreadyExists)
        #expect(symlink("/etc/passwd-does-not-matter", dir.file("link")) == 0)
        #expect(throws: QuarantineError.self) { try store.release(target.id, to: dir.file("link")) }

        // Tampered bytes are detected and the copy is not left behind.
        let tampered = items[2]
        let fd = open(tampered.dataPath, O_WRONLY)
        _ = pwrite(fd, "X", 1, 0)
        close(fd)
        let corrupt = #expect(throws: QuarantineError.self) { try store.release(tampered.id, to: dir.file("bad")) }
        #expect(corrupt?.code == .corrupt)
        #expect(!FileManager.default.fileExists(atPath: dir.file("bad")))

        try store.delete(target.id)
        #expect(try store.list().map(\.requestID) == ["r1", "r2"])
        let gone = #expect(throws: QuarantineError.self) { try store.delete(target.id) }
        #expect(gone?.code == .notFound)
        for bad in ["../../etc/passwd", "", String(repeating: "A", count: 32), target.id + "0"] {
            let invalid = #expect(throws: QuarantineError.self) { _ = try store.show(bad) }
            #expect(invalid?.code == .invalidID)
        }
    }

    @Test func concurrentWritersShareOneStore() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let store = try QuarantineStore(directory: dir.path, maxBytes: 1 << 30, retention: .seconds(60))
        let failures = Mutex<[String]>([])
        let group = DispatchGroup()
        for t in 0..<4 {
            group.enter()
            Thread {
                defer { group.leave() }
                var rng = SplitMix64(seed: UInt64(t))
                do {
                    for i in 0..<25 {
                        let w = try store.begin(meta("t\(t)-\(i)"))
                        for _ in 0..<4 { try w.write(randomBytes(Int.random(in: 0...4000, using: &rng), &rng)) }
                        if i % 5 == 4 { w.abort() } else { _ = try w.commit() }
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }.start()
        }
        group.wait()
        #expect(failures.withLock { $0 }.isEmpty)
        #expect(verifyConsistent(dir.path).count == 80)
        #expect(try QuarantineStore(directory: dir.path, maxBytes: 1 << 30, retention: .seconds(60)).usageBytes
            == store.usageBytes)
    }
}
