import Foundation
import Proxy
import Rules

/// `formwall check`: validate rule files the way the proxy would load them, and report every problem.
enum CheckCommand: Command {
    static let name = "check"
    static let summary = "validate rule files or a whole configuration file; file:line:col diagnostics"
    static let help = """
    Usage: formwall check FILE|DIR...
           formwall check --config FILE [FILE|DIR...]

    Loads the rule files exactly as the proxy would: all paths together as one policy, a DIR meaning the
    *.rules files directly inside it (sorted by name), `include` followed relative to the including file.
    Every diagnostic, warnings included, goes to stderr as

      file:line:col: error: message
      file:line:col: warning: message

    followed by one summary line on stdout:

      formwall check: 3 files, 0 errors, 1 warning

    The file count is the files named on the command line, with each DIR expanded to its *.rules files;
    files reached through `include` are checked but not counted.

    With --config, the main configuration file (`formwall serve --config`, docs/configuration.md) is checked
    the way `serve` reads it: every directive and value, the upstream groups, and the rule files it includes,
    and that every route's `upstream NAME;` names a declared group. A host name that does not resolve on this
    machine is a warning (it may resolve where formwall runs, e.g. a container network). The file count then
    includes the configuration file and the rule files it names (`include`, `rules`). Paths in the file are
    relative to its directory, as `serve` reads them.

    Exit status: 0 when there are no errors (warnings alone pass), 1 when there is at least one error,
    2 for a usage error (no paths, unknown option).

    Options:
      --config FILE          check this main configuration file and the rule files it includes
      --help                 show this help
    """

    static func run(_ args: [String]) -> Int32 {
        let parsed: Arguments
        do {
            parsed = try Arguments(args, valued: ["config"], flags: [])
        } catch {
            printError("\(error). Run `formwall check --help`.")
            return 2
        }
        guard !parsed.positionals.isEmpty || parsed.value("config") != nil else {
            printError("no rule files given. Run `formwall check --help`.")
            return 2
        }
        var diagnostics: [Diagnostic] = []
        var paths = parsed.positionals
        var files = paths.reduce(0) { $0 + countFiles($1) }
        var lines: [String] = []
        var configErrors = 0
        var configWarnings = 0
        var groups: [String]?
        if let path = parsed.value("config") {
            let file = ConfigFile.read(path, valued: ServeCommand.valuedOptions, flags: ServeCommand.flagOptions)
            diagnostics += file.diagnostics
            files += 1 + file.rules.count + (file.settings["rules"]?.values ?? []).reduce(0) { $0 + countFiles($1) }
            if !file.diagnostics.contains(where: { $0.severity == .error }) {
                do {
                    let config = try ServeCommand.configuration(
                        from: OptionSource(commandLine: try Arguments([], valued: [], flags: []), file: file),
                        resolve: false, warn: { lines.append(located($0, .warning, file: path)); configWarnings += 1 })
                    groups = config.upstreams.map(\.name)
                    paths += config.rules
                    if config.rules.isEmpty {
                        lines.append("\(path): warning: no rules: every well-formed request would be forwarded")
                        configWarnings += 1
                    }
                } catch {
                    lines.append(located("\(error)", .error, file: path))
                    configErrors += 1
                }
            }
        }
        diagnostics += paths.isEmpty ? [] : RuleChecker.check(paths: paths)
        if let groups, !paths.isEmpty, !diagnostics.contains(where: { $0.severity == .error }),
           let policy = try? Policy.load(paths: paths) {
            for route in policy.routes {
                guard let name = route.upstream, !groups.contains(name.name), let at = name.location else { continue }
                diagnostics.append(Diagnostic(.error, at: at, "upstream group '\(name.name)' is not declared in "
                    + "\(parsed.value("config") ?? "the configuration") (declared: \(groups.joined(separator: ", ")))"))
            }
        }
        var report = ""
        for line in lines { report += line + "\n" }
        for diagnostic in diagnostics { report += diagnostic.description + "\n" }
        FileHandle.standardError.write(Data(report.utf8))

        let errors = diagnostics.count { $0.severity == .error } + configErrors
        let warnings = diagnostics.count { $0.severity == .warning } + configWarnings
        print("formwall check: \(plural(files, "file")), \(plural(errors, "error")), \(plural(warnings, "warning"))")
        return errors > 0 ? 1 : 0
    }

    /// 1 for an existing file, the number of `*.rules` files directly inside a directory, 0 for a missing path
    /// (the checker reports that one as an error).
    static func countFiles(_ path: String) -> Int {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return 0 }
        guard isDirectory.boolValue else { return 1 }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.count { $0.hasSuffix(".rules") }
    }

    /// A configuration message as `file:line:col: severity: text`: messages about a file's value start with its
    /// `file:line:col: `; others are about the file as a whole.
    static func located(_ message: String, _ severity: Diagnostic.Severity, file: String) -> String {
        let parts = message.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
        if parts.count == 4, Int(parts[1]) != nil, Int(parts[2]) != nil, parts[3].hasPrefix(" ") {
            return "\(parts[0]):\(parts[1]):\(parts[2]): \(severity.rawValue):\(parts[3])"
        }
        return "\(file):1:1: \(severity.rawValue): \(message)"
    }

    /// `1 file`, `2 files`, `0 errors`.
    static func plural(_ count: Int, _ noun: String) -> String {
        "\(count) \(noun)\(count == 1 ? "" : "s")"
    }
}
