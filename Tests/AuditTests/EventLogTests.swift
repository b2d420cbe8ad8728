import Foundation
import Glibc
import Testing

@testable import Audit

@Suite struct EventLogTests {
    private let ts = AuditTimestamp(millisecondsSinceEpoch: 1_796_040_000_123)  // 2026-11-30T12:00:00.123Z

    private func json(_ level: LogLevel, _ msg: StaticString, _ fields: [LogField]) -> String {
        String(decoding: EventLog().render(level, msg, fields, at: ts, pid: 42), as: UTF8.self)
    }

    /// Lines written through a pipe by a log with minimum level `minimum`.
    private func written(minimum: LogLevel, _ body: (EventLog) -> Void) -> [String] {
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0)
        body(EventLog(level: minimum, fd: fds[1]))
        close(fds[1])
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
            if n <= 0 { break }
            out += buffer[..<n]
        }
        close(fds[0])
        return String(decoding: out, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    @Test func rendersTimestampLevelMessagePidThenFieldsInOrder() {
        let line = json(.info, "listening", [.string("listen", "127.0.0.1:8080"), .int("workers", 2),
                                             .seconds("uptime_s", 1.5), LogField("rules", .strings(["a", "b"]))])
        #expect(line == #"{"ts":"2026-11-30T12:00:00.123Z","level":"info","msg":"listening","pid":42,"#
            + #""listen":"127.0.0.1:8080","workers":2,"uptime_s":1.5,"rules":["a","b"]}"# + "\n")
    }

    @Test func escapesQuotesControlsAndInvalidUTF8SoEveryLineIsOneJSONObject() throws {
        let nasty = "a\"b\\c\nd\re\u{0}f\u{7F}g\u{2028}h ✓"
        let line = json(.error, "rules reload failed", [.error(nasty), LogField("path", .bytes([0x2F, 0xFF, 0x61])),
                                                        .requestID("5d0e")])
        #expect(line.hasSuffix("}\n"))
        #expect(line.dropLast().allSatisfy { $0 != "\n" && $0 != "\r" }, "one physical line")
        let object = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["level"] as? String == "error")
        #expect(object["msg"] as? String == "rules reload failed")
        #expect(object["error"] as? String == nasty)
        #expect(object["path"] as? String == "/\u{FFFD}a")
        #expect(object["request_id"] as? String == "5d0e")
        #expect(object["pid"] as? Int == 42)
    }

    @Test func levelsParseAndOrder() {
        #expect(LogLevel.allCases.map { LogLevel(name: $0.description) } == LogLevel.allCases)
        #expect(LogLevel(name: "warning") == nil && LogLevel(name: "INFO") == nil)
        #expect(LogLevel.debug < .info && LogLevel.info < .warn && LogLevel.warn < .error)
    }

    @Test func linesBelowTheMinimumLevelAreNotWritten() throws {
        for minimum in LogLevel.allCases {
            let lines = written(minimum: minimum) { log in
                for level in LogLevel.allCases { log.write(level, "event", [.string("level_name", "\(level)")]) }
            }
            let levels = try lines.map {
                try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])["level"] as? String
            }
            #expect(levels == LogLevel.allCases.filter { $0 >= minimum }.map(\.description), "minimum \(minimum)")
        }
    }

    @Test func textFormatIsOneReadableLineWithQuotedValuesWhereNeeded() {
        let log = EventLog(format: .text)
        let line = String(decoding: log.render(.error, "upstream unreachable", [
            .requestID("5d0e"), .error("connect: Connection refused\n"), .int("suppressed", 3),
        ], at: ts, pid: 1), as: UTF8.self)
        #expect(line == #"formwall: error: upstream unreachable request_id=5d0e "#
            + #"error="connect: Connection refused\u000a" suppressed=3"# + "\n")
        let info = String(decoding: log.render(.info, "stopped", [], at: ts, pid: 1), as: UTF8.self)
        #expect(info == "formwall: stopped\n")
    }
}
