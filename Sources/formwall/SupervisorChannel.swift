import CLinux
import Foundation
import Glibc
import Proxy

/// What the proxy process tells the supervisor, one JSON message a time on a SOCK_SEQPACKET socket pair
/// (`FORMWALL_STATUS_FD` in the proxy process):
///
///   proxy process                                          supervisor
///   started, listening ──── {"event":"ready"} + memfd ───► keeps the memfd (last good), READY=1 to systemd
///   SIGHUP handled ──── {"event":"reloaded","errors":[…]} ─► the reload's outcome: status file, READY=1
///                                  + memfd                   (the memfd replaces the one it kept)
///   exits ───────────────────────── end of file ─────────► (the exit itself comes as SIGCHLD)
struct SupervisorMessage: Codable {
    enum Event: String, Codable {
        case ready
        case reloaded
    }

    var event: Event
    /// For `reloaded`: what failed; empty: the reload succeeded.
    var errors: [String] = []
    /// For `reloaded`: what the reload left as it was (settings that need a restart).
    var warnings: [String] = []

    /// The largest message received: a datagram cannot be longer than the sender's socket buffer (about 200 KiB).
    static let maximumBytes = 262_144

    /// Sends this message on `fd`, with `attached` (a descriptor) unless nil; at most 8 errors of 4,096 characters
    /// and 16 warnings of 512 are sent (`formwall reload` prints the full diagnostics of its own check). Best
    /// effort: a supervisor that is gone cannot be told.
    func send(on fd: Int32, attaching attached: Int32? = nil) {
        var message = self
        message.errors = errors.prefix(8).map { $0.count > 4096 ? $0.prefix(4096) + "…" : $0 }
        message.warnings = warnings.prefix(16).map { $0.count > 512 ? $0.prefix(512) + "…" : $0 }
        func transmit(_ message: SupervisorMessage) -> Bool {
            guard let bytes = try? JSONEncoder().encode(message) else { return false }
            return bytes.withUnsafeBytes { cl_send_message(fd, $0.baseAddress, $0.count, attached ?? -1) } >= 0
        }
        if !transmit(message), errno == EMSGSIZE {
            message.errors = message.errors.isEmpty ? [] : ["the reload failed; the proxy process's log says why"]
            message.warnings = []
            _ = transmit(message)
        }
    }

    /// Every message waiting on `fd` (non-blocking), each with the descriptor sent along; `closed` once the proxy
    /// process has closed its end.
    static func receiveAll(from fd: Int32) -> (messages: [(SupervisorMessage, Int32?)], closed: Bool) {
        var messages: [(SupervisorMessage, Int32?)] = []
        var buffer = [UInt8](repeating: 0, count: maximumBytes)
        while true {
            var attached: Int32 = -1
            let n = buffer.withUnsafeMutableBytes { cl_receive_message(fd, $0.baseAddress, $0.count, &attached) }
            if n < 0 { return (messages, errno != EAGAIN && errno != EWOULDBLOCK) }
            if n == 0 { return (messages, true) }
            guard let message = try? JSONDecoder().decode(SupervisorMessage.self, from: Data(buffer[..<n])) else {
                if attached >= 0 { close(attached) }
                continue
            }
            messages.append((message, attached >= 0 ? attached : nil))
        }
    }
}
