// `formwall tail`: the audit log, filtered, as human lines or raw JSON, optionally followed.
//
//   argv ──▶ AuditTail.Options (decisions, route prefix, since, format) ──▶ AuditTail(path:)
//        ──▶ pollOnce() once            (default: print the backlog and exit)
//        ──▶ follow(every:until:emit:)  (--follow: until SIGINT or SIGTERM is pending)
//
// Signals are blocked, not handled: the follow loop asks `sigtimedwait` with a zero timeout whether one is
// pending between polls, so nothing runs inside an asynchronous signal handler.

import Audit
import Foundation
import Glibc

/// `formwall tail`: print and optionally follow the audit log, filtered by decision, route and age.
enum TailCommand: Command {
    static let name = "tail"
    static let summary = "print or follow the audit log, filtered, as human lines or JSON"
    static let defaultPath = "/var/log/formwall/audit.log"
    static let help = """
    Usage: formwall tail [FILE] [--follow] [--decision D]... [--route PREFIX] [--since AGE] [--json]
                         [--color | --no-color]

    Prints the audit log FILE (default \(defaultPath)), one line per request that passes
    the filters (time of day in UTC, decision, status, method, path, reason, part, detail, request id):

      12:01:02.345 REJECT 413 POST /api/avatar file_too_large avatar (7.2 MiB > 5 MiB) req=abc123

    Text taken from requests is made terminal-safe (control characters are shown as \\xNN). Lines that are
    not JSON objects are skipped when a filter or the human format needs to parse them (their count is
    reported on stderr at exit); `--json` with no filter passes every line through.

    Options:
      --follow               keep reading as records are appended, following the file across rotation
                             (rename and re-create, or truncation) like `tail -F`; a FILE that does not
                             exist yet is waited for. Stops with exit status 0 on SIGINT or SIGTERM
      --decision D           show only requests with decision D: reject, modified, allow, monitor, error
                             or aborted;
                             repeat the option (or separate with commas) to show several
      --route PREFIX         show only requests whose matched route starts with PREFIX
                             (requests that matched no route are never shown)
      --since AGE            show only requests from the last AGE: a number with unit s, m, h or d, or
                             several run together (45s, 10m, 1h30m, 7d); also reads the rotated
                             generations that may hold such records, oldest first: numbered (FILE.1,
                             FILE.2.gz) and logrotate's dateext (FILE-20261207, FILE-20261207-1796674244.gz)
      --json                 print the matching audit lines unchanged, byte for byte, instead of human lines
      --color, --no-color    force ANSI colours on or off in human lines (default: on only when stdout
                             is a terminal)
      --help                 show this help

    Exit status: 0 on success (and after SIGINT or SIGTERM with --follow), 1 when FILE cannot be read,
    2 for a usage error.
    """

    /// How long `--follow` waits between reads; also the longest delay before a signal is noticed.
    static let followInterval: Duration = .milliseconds(200)

    static func run(_ args: [String]) -> Int32 {
        let options: AuditTail.Options
        let path: String
        let following: Bool
        do {
            let parsed = try Arguments(args, valued: ["decision", "route", "since"],
                                       flags: ["follow", "json", "color", "no-color"])
            (options, path) = try parse(parsed)
            following = parsed.flags.contains("follow")
        } catch {
            printError("\(error). Run `formwall tail --help`.")
            return 2
        }

        if !following {
            var st = stat()
            if stat(path, &st) != 0 {
                printError("cannot read \(path): \(String(cString: strerror(errno)))")
                return 1
            }
        }
        let tail = AuditTail(path: path, options: options)
        var output = StandardOutput()
        do {
            if following {
                let signals = try StopSignals()
                try tail.follow(every: followInterval, until: { output.failed || signals.pending() }, emit: {
                    output.line($0)
                    output.flush()
                })
            } else {
                for line in try tail.pollOnce() { output.line(line) }
                output.flush()
            }
        } catch {
            output.flush()
            printError("\(error)")
            return 1
        }
        if output.failed { return 1 }
        if tail.malformedLines > 0 {
            printError("skipped \(tail.malformedLines) line\(tail.malformedLines == 1 ? "" : "s") of \(path) "
                + "that \(tail.malformedLines == 1 ? "is" : "are") not a complete JSON object")
        }
        return 0
    }

    /// Builds the tail options and the file path from parsed arguments; throws a `UsageError`.
    static func parse(_ parsed: Arguments) throws -> (AuditTail.Options, String) {
        guard parsed.positionals.count <= 1 else { throw UsageError("at most one FILE") }
        var decisions: Set<AuditRecord.Decision> = []
        for value in parsed.values("decision") {
            for word in value.split(separator: ",", omittingEmptySubsequences: false) {
                guard let decision = AuditRecord.Decision(rawValue: String(word)) else {
                    let known = AuditRecord.Decision.allCases.map(\.rawValue).joined(separator: ", ")
                    throw UsageError("unknown decision '\(word)' (expected one of \(known))")
                }
                decisions.insert(decision)
            }
        }
        var since: Int64?
        if let text = parsed.value("since") {
            guard let ms = AuditTail.parseDuration(text) else {
                throw UsageError("bad --since '\(text)': expected a positive duration such as 45s, 10m, 1h30m or 7d")
            }
            since = ms
        }
        if parsed.flags.contains("color") && parsed.flags.contains("no-color") {
            throw UsageError("--color and --no-color contradict each other")
        }
        let color = parsed.flags.contains("color") || (!parsed.flags.contains("no-color") && isatty(1) == 1)
        let options = AuditTail.Options(
            decisions: decisions, routePrefix: parsed.value("route"), sinceMilliseconds: since,
            format: parsed.flags.contains("json") ? .json : .human(color: color))
        return (options, parsed.positionals.first ?? defaultPath)
    }
}

/// SIGINT and SIGTERM blocked for the process, so they stay pending until `pending()` collects them.
struct StopSignals {
    private var set = sigset_t()

    /// Blocks SIGINT and SIGTERM on the calling (main, only) thread.
    init() throws {
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        let rc = pthread_sigmask(SIG_BLOCK, &set, nil)
        guard rc == 0 else { throw UsageError("cannot block SIGINT and SIGTERM: \(String(cString: strerror(rc)))") }
    }

    /// Whether SIGINT or SIGTERM has arrived since the last call; consumes it without waiting.
    func pending() -> Bool {
        var set = self.set
        var zero = timespec(tv_sec: 0, tv_nsec: 0)
        return sigtimedwait(&set, nil, &zero) > 0
    }
}

/// Lines for standard output, written with `write(2)` so nothing waits in a stdio buffer while following.
struct StandardOutput {
    private var buffer: [UInt8] = []
    /// Set when a write failed (the error was already printed); stop producing output.
    private(set) var failed = false

    /// Queues `text` and a newline.
    mutating func line(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        buffer.append(0x0A)
        if buffer.count >= 64 * 1024 { flush() }
    }

    /// Writes everything queued.
    mutating func flush() {
        defer { buffer.removeAll(keepingCapacity: true) }
        guard !failed else { return }
        var offset = 0
        while offset < buffer.count {
            let n = buffer.withUnsafeBytes { write(1, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                printError("write to standard output: \(String(cString: strerror(errno)))")
                failed = true
                return
            }
            offset += n
        }
    }
}
