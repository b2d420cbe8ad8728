import Foundation
import Glibc
import Testing

@testable import Audit
import TestRandom

@Suite struct AuditTailTests {
    private let now = AuditTimestamp(millisecondsSinceEpoch: 1_795_953_662_345)  // 2026-11-29T12:01:02.345Z

    @Test func parsesDurations() {
        #expect(AuditTail.parseDuration("10m") == 600_000)
        #expect(AuditTail.parseDuration("2h") == 7_200_000)
        #expect(AuditTail.parseDuration("1d") == 86_400_000)
        #expect(AuditTail.parseDuration("45s") == 45_000)
        #expect(AuditTail.parseDuration("1h30m") == 5_400_000)
        for bad in ["", "10", "m", "10x", "-5m", "0s", "1.5h", "10m5", " 10m", "99999999999999999999d"] {
            #expect(AuditTail.parseDuration(bad) == nil, "\(bad)")
        }
    }

    @Test func formatsAHumanLine() throws {
        let line = String(decoding: sampleRecord(id: "abc123", decision: .reject).jsonLine.dropLast(), as: UTF8.self)
        let object = try #require(parseObject(line))
        #expect(AuditTail.humanLine(object, color: false)
            == "12:01:02.345 REJECT 413 POST /api/avatar file_too_large avatar (7.2 MiB > 5 MiB) req=abc123")
        #expect(AuditTail.humanLine(object, color: true)
            == "\u{1B}[2m12:01:02.345\u{1B}[0m \u{1B}[1;31mREJECT\u{1B}[0m 413 POST /api/avatar file_too_large avatar"
            + " (7.2 MiB > 5 MiB) req=abc123")
        let allowed = try #require(parseObject(String(decoding: sampleRecord(id: "x9").jsonLine, as: UTF8.self)))
        #expect(AuditTail.humanLine(allowed, color: false)
            == "12:01:02.345 ALLOW 200 POST /api/avatar ms=12.5 body=12.1 up=0/9/9.3 req=x9")
    }

    /// A request that never reached the upstream shows no times; one that connected nowhere shows `-` for the
    /// connect and header times.
    @Test func humanLineTimesOnlyForUpstreamRequests() throws {
        var record = sampleRecord(id: "t2")
        record.upstreamConnectMs = nil
        record.upstreamHeaderMs = nil
        record.upstreamResponseMs = 2000
        let failed = try #require(parseObject(String(decoding: record.jsonLine, as: UTF8.self)))
        #expect(AuditTail.humanLine(failed, color: false).hasSuffix(" ms=12.5 body=12.1 up=-/-/2000 req=t2"))
        record.upstreamResponseMs = nil
        let none = try #require(parseObject(String(decoding: record.jsonLine, as: UTF8.self)))
        #expect(AuditTail.humanLine(none, color: false) == "12:01:02.345 ALLOW 200 POST /api/avatar req=t2")
    }

    @Test func humanLinesCannotCarryTerminalEscapes() throws {
        let hostile = sampleRecord(id: "e1", path: AuditText(bytes: Array("/a\u{1B}[2J\u{9B}b".utf8)))
        let object = try #require(parseObject(String(decoding: hostile.jsonLine, as: UTF8.self)))
        let line = AuditTail.humanLine(object, color: false)
        #expect(!line.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x9B })
        #expect(line.contains("/a\\x1b[2J\\x9bb"))
    }

    @Test func filtersByDecisionRouteAndSince() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let log = try AuditLog(path: path)
        let minute: Int64 = 60_000
        func ago(_ minutes: Int64) -> Int64 { now.millisecondsSinceEpoch - minutes * minute }
        let records: [AuditRecord] = [
            sampleRecord(id: "old-reject", decision: .reject, route: "api-avatar", millis: ago(90)),
            sampleRecord(id: "new-reject", decision: .reject, route: "api-avatar", millis: ago(5)),
            sampleRecord(id: "new-allow", decision: .allow, route: "api-avatar", millis: ago(4)),
            sampleRecord(id: "new-modified", decision: .modified, route: "docs", millis: ago(3)),
            sampleRecord(id: "no-route", decision: .reject, route: nil, millis: ago(2)),
        ]
        for r in records { try log.write(r) }
        let fd = open(path, O_WRONLY | O_APPEND)
        _ = "not json\n".withCString { write(fd, $0, 9) }
        close(fd)

        func ids(_ options: AuditTail.Options) throws -> [String] {
            requestIDs(try AuditTail(path: path, options: options).pollOnce())
        }
        #expect(try ids(.init(now: now)).count == 5)
        #expect(try ids(.init(decisions: [.reject], now: now)) == ["old-reject", "new-reject", "no-route"])
        #expect(try ids(.init(decisions: [.allow, .modified], now: now)) == ["new-allow", "new-modified"])
        #expect(try ids(.init(routePrefix: "api", now: now)) == ["old-reject", "new-reject", "new-allow"])
        #expect(try ids(.init(sinceMilliseconds: 10 * minute, now: now))
            == ["new-reject", "new-allow", "new-modified", "no-route"])
        #expect(try ids(.init(decisions: [.reject], routePrefix: "api", sinceMilliseconds: 60 * minute, now: now))
            == ["new-reject"])
        #expect(try ids(.init(decisions: [.reject], now: now, backlogLimit: 2)) == ["new-reject", "no-route"])

        let tail = AuditTail(path: path, options: .init(decisions: [.reject], now: now))
        _ = try tail.pollOnce()
        #expect(tail.malformedLines == 1)
    }

    @Test func workerExitRecordsAreShownAndFilteredAsEvents() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let log = try AuditLog(path: path)
        try log.write(sampleRecord(id: "before", decision: .reject, millis: now.millisecondsSinceEpoch - 1000))
        let killed = WorkerExitRecord(timestamp: now, pid: 4242, signal: "SIGKILL", exitStatus: nil, restarts: 1)
        let exited = WorkerExitRecord(timestamp: now, pid: 4243, signal: nil, exitStatus: 3, restarts: 2)
        #expect(String(decoding: killed.jsonLine, as: UTF8.self) == #"{"ts":"2026-11-29T12:01:02.345Z","#
            + #""event":"worker_exit","pid":4242,"signal":"SIGKILL","exit_status":null,"restarts":1}"# + "\n")
        for record in [killed, exited] { try record.jsonLine.withUnsafeBytes { try log.write(line: $0) } }

        let human = AuditTail(path: path, options: .init(format: .human(color: false), now: now))
        #expect(try human.pollOnce().dropFirst() == [
            "12:01:02.345 WORKER_EXIT pid=4242 signal=SIGKILL restarts=1",
            "12:01:02.345 WORKER_EXIT pid=4243 exit_status=3 restarts=2",
        ])
        #expect(human.malformedLines == 0)
        #expect(try AuditTail(path: path, options: .init(sinceMilliseconds: 60_000, now: now)).pollOnce().count == 3)
        #expect(requestIDs(try AuditTail(path: path, options: .init(decisions: [.reject], now: now)).pollOnce())
            == ["before"])
        #expect(try AuditTail(path: path, options: .init(routePrefix: "av", now: now)).pollOnce().count == 1)
    }

    @Test func jsonPassthroughKeepsTheOriginalBytes() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let lines = [#"{"ts":"2026-11-29T12:01:02.345Z", "decision" : "reject","route":"a","x":[1,2]}"#,
                     #"{"decision":"allow","route":"a"}"#]
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path))
        #expect(try AuditTail(path: path).pollOnce() == lines)
        #expect(try AuditTail(path: path, options: .init(decisions: [.reject])).pollOnce() == [lines[0]])
    }

    @Test func sinceReachesIntoRotatedGenerations() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let log = try AuditLog(path: path, rotation: AuditLog.Rotation(maxBytes: 4000, keep: 50))
        let realNow = AuditTimestamp.now()
        let minute: Int64 = 60_000
        // 60 records one minute apart, the last one a minute ago.
        for i in 0..<60 {
            try log.write(sampleRecord(id: "m\(i)", millis: realNow.millisecondsSinceEpoch - Int64(60 - i) * minute))
        }
        let generations = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".gz") }
        #expect(generations.count >= 3)

        let withoutSince = try AuditTail(path: path, options: .init(now: realNow)).pollOnce()
        #expect(withoutSince.count < 60, "without --since only the live file is read")

        let recent = try AuditTail(path: path, options: .init(sinceMilliseconds: 30 * minute + 30_000, now: realNow))
            .pollOnce().compactMap { parseObject($0)?["request_id"] as? String }
        #expect(recent == (30..<60).map { "m\($0)" })

        let all = try AuditTail(path: path, options: .init(sinceMilliseconds: 2 * 60 * minute, now: realNow))
            .pollOnce().compactMap { parseObject($0)?["request_id"] as? String }
        #expect(all == (0..<60).map { "m\($0)" })

        // A generation whose mtime is before the cutoff is not even opened: make the oldest one
        // corrupt and ancient; the tail must not fail on it.
        let oldest = dir.file("audit.log.\(generations.count).gz")
        try Data("not gzip".utf8).write(to: URL(fileURLWithPath: oldest))
        var times = [timespec(tv_sec: 1000, tv_nsec: 0), timespec(tv_sec: 1000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, oldest, &times, 0) == 0)
        let untouched = try AuditTail(path: path, options: .init(sinceMilliseconds: 5 * minute, now: realNow))
            .pollOnce()
        #expect(untouched.count == 5)  // m55 (exactly at the cutoff) … m59
    }

    @Test func followIsDrivenStepByStepAcrossRotation() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let tail = AuditTail(path: path)
        #expect(try tail.pollOnce().isEmpty, "a missing file is not an error")

        let log = try AuditLog(path: path, rotation: AuditLog.Rotation(maxBytes: 3000, keep: 100))
        var seen: [String] = []
        var written: [String] = []
        var rng = SplitMix64(seed: 7)
        // At most four ~620-byte records per step, so the 3000-byte file rotates at most once between
        // polls: like `tail -F`, a generation that comes and goes entirely between two polls is missed.
        for step in 0..<80 {
            for _ in 0..<Int.random(in: 0...4, using: &rng) {
                let id = "f\(written.count)"
                try log.write(sampleRecord(id: id))
                written.append(id)
            }
            seen += try tail.pollOnce().compactMap { parseObject($0)?["request_id"] as? String }
            #expect(seen == written, "step \(step)")
        }
        let rotations = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".gz") }
        #expect(rotations.count >= 10)
        #expect(tail.malformedLines == 0)
    }

    @Test func followHoldsPartialLinesAndRestartsAfterTruncation() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        defer { close(fd) }
        func append(_ s: String) { _ = s.withCString { write(fd, $0, strlen($0)) } }
        let tail = AuditTail(path: path)
        append(#"{"a":1}"# + "\n" + #"{"a":"#)
        #expect(try tail.pollOnce() == [#"{"a":1}"#])
        #expect(try tail.pollOnce() == [])
        append("2}\n")
        #expect(try tail.pollOnce() == [#"{"a":2}"#])
        #expect(ftruncate(fd, 0) == 0)
        append(#"{"b":3}"# + "\n")
        #expect(try tail.pollOnce() == [#"{"b":3}"#])
    }

    @Test func followSurvivesExternalRenameAndRecreate() throws {
        let dir = ScratchDirectory()
        defer { dir.remove() }
        let path = dir.file("audit.log")
        let log = try AuditLog(AuditLog.Configuration(path: path, inodeCheckInterval: 0))
        let tail = AuditTail(path: path)
        try log.write(sampleRecord(id: "a"))
        #expect(try tail.pollOnce().count == 1)
        #expect(rename(path, dir.file("audit.log.old")) == 0)
        try log.write(sampleRecord(id: "b"))  // lands in the renamed file before postrotate
        #expect(try tail.pollOnce().count == 1, "still draining the renamed file while the path is missing")
        try log.reopen()
        try log.write(sampleRecord(id: "c"))
        #expect(try tail.pollOnce().compactMap { parseObject($0)?["request_id"] as? String } == ["c"])
    }
}
