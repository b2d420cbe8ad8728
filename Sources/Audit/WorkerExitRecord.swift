// The audit line the supervisor writes when the proxy process dies and is restarted.
//
//   {"ts":"2026-11-29T12:01:02.345Z","event":"worker_exit","pid":4242,"signal":"SIGKILL","exit_status":null,
//    "restarts":1}
//
// Request records have no `event` member; readers (`formwall tail`) tell the two apart by it.

/// A proxy process that exited without being asked to, as one audit line.
public struct WorkerExitRecord: Sendable, Equatable {
    /// The value of the `event` member.
    public static let event = "worker_exit"

    /// When the supervisor noticed the exit.
    public var timestamp: AuditTimestamp
    /// The pid of the process that exited.
    public var pid: Int
    /// The signal that killed it (`SIGKILL`), or nil when it exited by itself.
    public var signal: String?
    /// Its exit status, or nil when a signal killed it.
    public var exitStatus: Int?
    /// How many times the supervisor has restarted the proxy so far, counting the restart this exit causes.
    public var restarts: Int

    /// A record of one exit.
    public init(timestamp: AuditTimestamp = .now(), pid: Int, signal: String?, exitStatus: Int?, restarts: Int) {
        self.timestamp = timestamp
        self.pid = pid
        self.signal = signal
        self.exitStatus = exitStatus
        self.restarts = restarts
    }

    /// Appends this record as one JSON object followed by `\n` to `writer`.
    public func render(into writer: inout JSONLineWriter) {
        writer.beginObject()
        writer.key("ts")
        writer.string(timestamp.rfc3339)
        writer.key("event")
        writer.string(Self.event)
        writer.key("pid")
        writer.int(pid)
        writer.key("signal")
        writer.string(signal)
        writer.key("exit_status")
        writer.int(exitStatus)
        writer.key("restarts")
        writer.int(restarts)
        writer.endObject()
        writer.endLine()
    }

    /// This record as one JSON line including the trailing `\n`.
    public var jsonLine: [UInt8] {
        var writer = JSONLineWriter(capacity: 160)
        render(into: &writer)
        return writer.bytes
    }
}
