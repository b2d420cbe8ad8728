import Foundation
import Glibc
import Testing

@testable import Audit

@Suite struct AuditLogTests {
    @Test func createsTheFileWithMode0600AndWritesOneLinePerRecord() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let log = try AuditLog(path: path)
        try log.write(sampleRecord(id: "r1"))
        try log.write(sampleRecord(id: "r2", decision: .reject))
        var st = stat()
        #expect(stat(path, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o600)
        let lines = try readLines(path)
        #expect(lines.count == 2)
        #expect(lines.compactMap { parseObject($0)?["request_id"] as? String } == ["r1", "r2"])
    }

    /// `append` batches: nothing reaches the file until `flush` (or a full batch, or `close`), and then every line
    /// arrives whole and in order.
    @Test func appendedLinesWaitForFlushAndArriveInOrder() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let log = try AuditLog(path: path)
        for i in 0..<5 { try log.append(sampleRecord(id: "b\(i)")) }
        #expect(log.hasPending)
        #expect(try readLines(path).isEmpty, "appended lines were written before the flush")
        try log.flush()
        #expect(!log.hasPending)
        #expect(requestIDs(try readLines(path)) == (0..<5).map { "b\($0)" })
        // `write` is append-then-flush: a batched line goes out before it, in order.
        try log.append(sampleRecord(id: "b5"))
        try log.write(sampleRecord(id: "b6"))
        #expect(requestIDs(try readLines(path)) == (0...6).map { "b\($0)" })
        // Closing writes what is pending.
        try log.append(sampleRecord(id: "b7"))
        log.close()
        #expect(requestIDs(try readLines(path)).last == "b7")
    }

    @Test func aFullBatchIsWrittenWithoutAFlush() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let log = try AuditLog(path: path)
        var appended = 0
        while try readLines(path).isEmpty {
            try log.append(sampleRecord(id: "f\(appended)"))
            appended += 1
            try #require(appended < 10_000, "the batch was never written")
        }
        // The batch went out when the next line would have taken it past `batchBytes`; that line waits.
        let lines = try readLines(path)
        let written = lines.reduce(0) { $0 + $1.utf8.count + 1 }
        #expect(written <= AuditLog.batchBytes)
        #expect(written > AuditLog.batchBytes - 2048, "written before the batch was full (a line is under 2 KiB)")
        #expect(requestIDs(lines) == (0..<(appended - 1)).map { "f\($0)" })
        #expect(log.hasPending)
        try log.flush()
        #expect(requestIDs(try readLines(path)) == (0..<appended).map { "f\($0)" })
    }

    @Test func concurrentWritersNeverInterleave() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let failures = Failures()
        runOnThreads(8) { t in
            do {
                let log = try AuditLog(path: path)
                for i in 0..<2000 { try log.write(sampleRecord(id: "t\(t)-\(i)")) }
            } catch {
                failures.add("thread \(t): \(error)")
            }
        }
        #expect(failures.all.isEmpty, "\(failures.all)")
        let lines = try readLines(path)
        #expect(lines.count == 16_000)
        let ids = lines.compactMap { parseObject($0)?["request_id"] as? String }
        #expect(ids.count == 16_000, "every line must be one complete JSON object")
        #expect(Set(ids).count == 16_000)
        // Each writer's own records stay in its order.
        for t in 0..<8 {
            let mine = ids.filter { $0.hasPrefix("t\(t)-") }
            #expect(mine == (0..<2000).map { "t\(t)-\($0)" })
        }
    }

    @Test func rotationUnderConcurrentWritesLosesAndDuplicatesNothing() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let rotation = AuditLog.Rotation(maxBytes: 128 * 1024, keep: 500)
        let failures = Failures()
        runOnThreads(8) { t in
            do {
                let log = try AuditLog(path: path, rotation: rotation)
                for i in 0..<2000 { try log.write(sampleRecord(id: "t\(t)-\(i)")) }
            } catch {
                failures.add("thread \(t): \(error)")
            }
        }
        #expect(failures.all.isEmpty, "\(failures.all)")

        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        let generations = names.filter { $0.hasPrefix("audit.log.") && $0.hasSuffix(".gz") }
        // Several rotations happened (how many depends on how the writers interleave with the gzip of each
        // generation, so under load fewer, larger generations are normal); the point is that none lost a line.
        #expect(generations.count >= 3, "expected several rotations, got \(names.sorted())")
        #expect(!names.contains("audit.log.1"), "an uncompressed generation was left behind")
        #expect(!names.contains { $0.hasSuffix(".tmp") })

        var ids: [String] = []
        for name in generations {
            var st = stat()
            #expect(stat(dir.file(name), &st) == 0 && st.st_mode & 0o777 == 0o600)
            let lines = try gunzipLines(dir.file(name))
            #expect(!lines.isEmpty)
            ids += lines.compactMap { parseObject($0)?["request_id"] as? String }
        }
        ids += try readLines(path).compactMap { parseObject($0)?["request_id"] as? String }
        #expect(ids.count == 16_000)
        #expect(Set(ids).count == 16_000)
        // The generations are contiguous 1...n.
        #expect(Set(generations) == Set((1...generations.count).map { "audit.log.\($0).gz" }))
    }

    @Test func rotationKeepsOnlyTheNewestGenerations() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let log = try AuditLog(path: path, rotation: AuditLog.Rotation(maxBytes: 2000, keep: 3))
        for i in 0..<200 { try log.write(sampleRecord(id: "s\(i)")) }
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: dir.path))
        #expect(names == ["audit.log", "audit.log.lock", "audit.log.1.gz", "audit.log.2.gz", "audit.log.3.gz"])
        // Newest generations hold the newest records, in order.
        var ids: [String] = []
        for n in [3, 2, 1] { ids += requestIDs(try gunzipLines(dir.file("audit.log.\(n).gz"))) }
        ids += try readLines(path).compactMap { parseObject($0)?["request_id"] as? String }
        #expect(ids.last == "s199")
        #expect(ids == (200 - ids.count..<200).map { "s\($0)" })
    }

    @Test func anInterruptedRotationIsFinishedByTheNextOne() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        // State a crash between `rename FILE → FILE.1` and compression leaves behind.
        try Data((sampleRecord(id: "orphan").jsonLine)).write(to: URL(fileURLWithPath: dir.file("audit.log.1")))
        try Data("partial".utf8).write(to: URL(fileURLWithPath: dir.file("audit.log.1.gz.tmp")))
        let log = try AuditLog(path: path, rotation: AuditLog.Rotation(maxBytes: 1500, keep: 5))
        for i in 0..<3 { try log.write(sampleRecord(id: "n\(i)")) }
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: dir.path))
        #expect(!names.contains("audit.log.1") && !names.contains("audit.log.1.gz.tmp"))
        var all: [String] = []
        for name in names where name.hasSuffix(".gz") {
            all += try gunzipLines(dir.file(name)).compactMap { parseObject($0)?["request_id"] as? String }
        }
        all += try readLines(path).compactMap { parseObject($0)?["request_id"] as? String }
        #expect(Set(all) == ["orphan", "n0", "n1", "n2"])
        #expect(all.count == 4)
    }

    @Test func reopenFollowsAnExternalRename() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let log = try AuditLog(AuditLog.Configuration(path: path, inodeCheckInterval: 0))
        try log.write(sampleRecord(id: "before"))
        #expect(rename(path, dir.file("audit.log.rotated")) == 0)
        try log.write(sampleRecord(id: "between"))  // still the old inode, as with logrotate before postrotate
        try log.reopen()
        try log.write(sampleRecord(id: "after"))
        let old = try readLines(dir.file("audit.log.rotated")).compactMap { parseObject($0)?["request_id"] as? String }
        let new = try readLines(path).compactMap { parseObject($0)?["request_id"] as? String }
        #expect(old == ["before", "between"])
        #expect(new == ["after"])
    }

    @Test func periodicInodeCheckReopensWithoutASignal() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let log = try AuditLog(AuditLog.Configuration(path: path, inodeCheckInterval: 4))
        #expect(rename(path, dir.file("moved")) == 0)
        for i in 0..<10 { try log.write(sampleRecord(id: "\(i)")) }
        #expect(try readLines(dir.file("moved")).count == 3)
        #expect(requestIDs(try readLines(path)) == (3..<10).map { "\($0)" })
    }

    @Test func ownModuleGunzipReadsWhatItWrote() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        var text = ""
        for i in 0..<5000 { text += "line \(i) \(String(repeating: "z", count: i % 97))\n" }
        try Data(text.utf8).write(to: URL(fileURLWithPath: dir.file("plain")))
        try Gzip.compressFile(dir.file("plain"), to: dir.file("plain.gz"))
        var out: [UInt8] = []
        try Gzip.decompressFile(dir.file("plain.gz")) { out += $0 }
        #expect(out == Array(text.utf8))
        #expect(try gunzipLines(dir.file("plain.gz")).count == 5000)
    }
}
