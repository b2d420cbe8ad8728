import CLinux
import Foundation
import Glibc
import Proxy

/// What the supervisor tells `formwall reload` (and anyone else reading it): `<pid-file>.status` next to the
/// `--pid-file`, one JSON object, mode 0600, replaced whole (written to a temporary file, then renamed) whenever
/// it changes, removed at exit.
///
/// ```
/// {"pid":4242,"serving":true,"reload":{"started_ns":81234567890,"finished_ns":81240000000,"errors":[],"warnings":[]}}
/// ```
///
/// `serving`: a proxy process has started and accepts connections. `reload`: the latest SIGHUP reload, nil before
/// the first; `started_ns` is when the supervisor took the signal (CLOCK_MONOTONIC), `finished_ns` nil while the
/// proxy process is still at it; `errors` empty when it succeeded.
struct SupervisorStatus: Codable, Equatable {
    struct Reload: Codable, Equatable {
        var startedNs: UInt64
        var finishedNs: UInt64?
        var errors: [String] = []
        var warnings: [String] = []
    }

    var pid: Int32
    var serving = false
    var reload: Reload?

    /// The status file of the supervisor whose pid file is `pidFile`.
    static func path(forPIDFile pidFile: String) -> String { pidFile + ".status" }

    /// Replaces the file at `path` with this status.
    func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        var bytes = [UInt8](try encoder.encode(self))
        bytes.append(UInt8(ascii: "\n"))
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw ConfigurationError("\(temporary): \(String(cString: strerror(errno)))") }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let reason = String(cString: strerror(errno))
        guard fchmod(fd, 0o600) == 0, written == bytes.count, close(fd) == 0 else {
            unlink(temporary)
            throw ConfigurationError("\(temporary): \(reason)")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw ConfigurationError("\(path): \(reason)")
        }
    }

    /// The status at `path`; nil when there is none or it cannot be read.
    static func read(_ path: String) -> SupervisorStatus? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try? decoder.decode(SupervisorStatus.self, from: data)
    }
}

/// systemd's notification protocol for `Type=notify` units: newline-separated `NAME=value` assignments sent as one
/// datagram to the AF_UNIX socket `$NOTIFY_SOCKET` names (a path, or `@name` in the abstract namespace). No
/// library: the supervisor sends `READY=1` once the first proxy process serves, `RELOADING=1` with
/// `MONOTONIC_USEC` when it takes a SIGHUP and `READY=1` when the reload is over, and `STOPPING=1` on SIGTERM.
struct ServiceNotifier {
    static let variable = "NOTIFY_SOCKET"

    /// The socket; nil when not started by systemd with `Type=notify`: nothing is sent.
    let socket: String?

    init(environment: [String: String]) {
        socket = environment[Self.variable].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Sends `assignments` (`READY=1`, `STATUS=…`), one per line. A failure is not an error for the proxy: systemd
    /// then times the start or reload out and says so.
    func send(_ assignments: [String]) {
        guard let socket else { return }
        let text = assignments.map { $0.replacingOccurrences(of: "\n", with: " ") }.joined(separator: "\n") + "\n"
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { cl_unix_datagram_send(socket, $0.baseAddress, $0.count) }
    }

    /// `MONOTONIC_USEC=`: CLOCK_MONOTONIC in microseconds, sent with `RELOADING=1`.
    static func monotonicMicroseconds(_ nanoseconds: UInt64) -> String { "MONOTONIC_USEC=\(nanoseconds / 1000)" }
}
