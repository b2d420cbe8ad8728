import Foundation
import Glibc
import Synchronization
import Testing

@testable import Audit


/// A fresh private directory under /tmp, removed by `remove()`.
struct ScratchDirectory {
    let path: String

    init() {
        var template = Array("/tmp/formwall-audit-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs `body(i)` on `count` real threads at once and waits for all of them.
func runOnThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for i in 0..<count {
        group.enter()
        let thread = Thread {
            body(i)
            group.leave()
        }
        thread.start()
    }
    group.wait()
}

/// Collects failures raised on worker threads.
final class Failures: Sendable {
    private let list = Mutex<[String]>([])
    func add(_ message: String) { list.withLock { $0.append(message) } }
    var all: [String] { list.withLock { $0 } }
}

func readLines(_ path: String) throws -> [String] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    return splitLines(data)
}

func splitLines(_ data: Data) -> [String] {
    var text = String(decoding: data, as: UTF8.self)
    if text.hasSuffix("\n") { text.removeLast() }
    return text.isEmpty ? [] : text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
}

/// Decompresses with the system's gzip, independent of the module's own inflater.
func gunzipLines(_ path: String) throws -> [String] {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/gzip")
    process.arguments = ["-dc", path]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "gzip -dc \(path) failed")
    return splitLines(data)
}

/// The `request_id` of each line that parses as a JSON object.
func requestIDs(_ lines: [String]) -> [String] {
    lines.compactMap { parseObject($0)?["request_id"] as? String }
}

func parseObject(_ line: String) -> [String: Any]? {
    guard let data = line.data(using: .utf8) else { return nil }
    return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
}

func sampleRecord(id: String, decision: AuditRecord.Decision = .allow, route: String? = "avatar",
                  millis: Int64 = 1_795_953_662_345, path: AuditText = "/api/avatar") -> AuditRecord {
    AuditRecord(
        timestamp: AuditTimestamp(millisecondsSinceEpoch: millis), requestID: id, client: "10.0.0.7:51234",
        method: "POST", path: path, route: route, decision: decision,
        status: decision == .reject ? 413 : 200, reason: decision == .reject ? "file_too_large" : nil,
        bytesIn: 7_549_747, bytesUpstream: decision == .reject ? 0 : 7_549_747, durationMs: 12.5,
        clientBodyMs: 12.125, upstreamMs: decision == .reject ? nil : 9.25,
        upstreamConnectMs: decision == .reject ? nil : 0.0421, upstreamHeaderMs: decision == .reject ? nil : 9.0006,
        upstreamResponseMs: decision == .reject ? nil : 9.25,
        parts: [
            .init(index: 0, name: "title", kind: .field, size: 5, action: "pass"),
            .init(index: 1, name: "avatar", kind: .file, filename: "me.png", declaredType: "image/png",
                  sniffedType: "image/png", size: 7_549_000, sha256: String(repeating: "ab", count: 32),
                  action: decision == .reject ? "reject" : "pass"),
        ],
        violations: decision == .reject
            ? [.init(kind: "file_too_large", part: 1, rule: "rules.fw:12", detail: "7.2 MiB > 5 MiB")] : [],
        anomalies: ["lf_only_line_endings"]
    )
}
