import CLinux
import Foundation
import Glibc
import Proxy

/// `formwall reload`: check, SIGHUP the supervisor, and wait for the outcome it reports in its status file.
enum ReloadCommand: Command {
    static let name = "reload"
    static let summary = "reload a running `serve` (check, SIGHUP, wait for the outcome); exit 1 if it failed"
    static let help = """
    Usage: formwall reload --pid-file FILE [--config FILE] [FILE|DIR...] [--timeout SEC]

    Reloads a running `formwall serve` and says whether the reload worked, which a bare `kill -HUP` cannot.

    With --config, or rule files or directories, it first checks them exactly as `formwall check` does and
    stops there when the check finds an error: nothing is signalled, the diagnostics are on stderr, exit 1.
    Then it sends SIGHUP to the process FILE names (the supervisor `serve --pid-file FILE` started) and waits
    for the supervisor to report the reload's outcome in FILE.status (docs/operations.md, "Reloading"): once
    every worker uses the new rules it prints `formwall reload: reloaded (pid N)` on stdout and exits 0. A
    reload that failed (the previous configuration stays in force) prints its errors on stderr and exits 1.
    Settings of the --config file that changed but need a restart of formwall are printed as warnings; they
    do not fail the reload.

    Exit status: 0 reloaded; 1 the check found an error, the reload failed, no outcome within --timeout, or
    no running supervisor at FILE (--single-process writes no status: send it SIGHUP); 2 for a usage error.

    Options:
      --pid-file FILE        the supervisor's pid file (`serve --pid-file`); required
      --config FILE          check this configuration file and the rule files it includes first
      --timeout SEC          longest wait for the outcome (default 30)
      --help                 show this help
    """

    static func run(_ args: [String]) -> Int32 {
        let parsed: Arguments
        do {
            parsed = try Arguments(args, valued: ["pid-file", "config", "timeout"], flags: [])
        } catch {
            printError("\(error). Run `formwall reload --help`.")
            return 2
        }
        guard let pidFile = parsed.value("pid-file"), !pidFile.isEmpty else {
            printError("--pid-file is required. Run `formwall reload --help`.")
            return 2
        }
        var timeout = 30.0
        if let text = parsed.value("timeout") {
            do { timeout = try ServeCommand.seconds(text, "--timeout") } catch {
                printError("\(error). Run `formwall reload --help`.")
                return 2
            }
        }
        if parsed.value("config") != nil || !parsed.positionals.isEmpty {
            let check = (parsed.value("config").map { ["--config", $0] } ?? []) + parsed.positionals
            guard CheckCommand.run(check) == 0 else {
                printError("not reloaded: the check found errors (nothing was signalled)")
                return 1
            }
        }
        guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
              let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0 else {
            printError("cannot read a pid from \(pidFile): is formwall running?")
            return 1
        }
        let statusPath = SupervisorStatus.path(forPIDFile: pidFile)
        guard SupervisorStatus.read(statusPath)?.pid == pid else {
            printError("\(statusPath) holds no status of pid \(pid): is it `formwall serve --pid-file \(pidFile)` "
                + "(a supervisor, not --single-process)?")
            return 1
        }
        let before = cl_monotonic_ns()
        guard kill(pid, SIGHUP) == 0 else {
            printError("cannot signal pid \(pid): \(String(cString: strerror(errno)))")
            return 1
        }
        let deadline = before + UInt64(timeout * 1e9)
        while cl_monotonic_ns() < deadline {
            if let reload = SupervisorStatus.read(statusPath)?.reload, reload.startedNs >= before,
               reload.finishedNs != nil {
                return report(reload, pid: pid)
            }
            guard kill(pid, 0) == 0 || errno != ESRCH else {
                printError("formwall (pid \(pid)) exited during the reload")
                return 1
            }
            usleep(20_000)   // a poll interval, bounded by the deadline
        }
        printError("no outcome from pid \(pid) within \(timeout) s; its log says what it is doing")
        return 1
    }

    private static func report(_ reload: SupervisorStatus.Reload, pid: pid_t) -> Int32 {
        for warning in reload.warnings { printError("warning: \(warning)") }
        guard reload.errors.isEmpty else {
            printError("reload failed; the previous configuration stays in force:")
            FileHandle.standardError.write(Data((reload.errors.joined(separator: "\n") + "\n").utf8))
            return 1
        }
        print("formwall reload: reloaded (pid \(pid))")
        return 0
    }
}
