import Foundation
import Rules

/// `formwall check`: validate rule files the way the proxy would load them, and report every problem.
enum CheckCommand: Command {
    static let name = "check"
    static let summary = "validate rule files and print file:line:col diagnostics"
    static let help = """
    Usage: formwall check FILE|DIR...

    Loads the rule files exactly as the proxy would: all paths together as one policy, a DIR meaning the
    *.rules files directly inside it (sorted by name), `include` followed relative to the including file.
    Every diagnostic, warnings included, goes to stderr as

      file:line:col: error: message
      file:line:col: warning: message

    followed by one summary line on stdout:

      formwall check: 3 files, 0 errors, 1 warning

    The file count is the files named on the command line, with each DIR expanded to its *.rules files;
    files reached through `include` are checked but not counted.

    Exit status: 0 when there are no errors (warnings alone pass), 1 when there is at least one error,
    2 for a usage error (no paths, unknown option).

    Options:
      --help                 show this help
    """

    static func run(_ args: [String]) -> Int32 {
        let parsed: Arguments
        do {
            parsed = try Arguments(args, valued: [], flags: [])
        } catch {
            printError("\(error). Run `formwall check --help`.")
            return 2
        }
        guard !parsed.positionals.isEmpty else {
            printError("no rule files given. Run `formwall check --help`.")
            return 2
        }
        let diagnostics = RuleChecker.check(paths: parsed.positionals)
        var report = ""
        for diagnostic in diagnostics { report += diagnostic.description + "\n" }
        FileHandle.standardError.write(Data(report.utf8))

        let errors = diagnostics.count { $0.severity == .error }
        let warnings = diagnostics.count { $0.severity == .warning }
        let files = parsed.positionals.reduce(0) { $0 + countFiles($1) }
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

    /// `1 file`, `2 files`, `0 errors`.
    static func plural(_ count: Int, _ noun: String) -> String {
        "\(count) \(noun)\(count == 1 ? "" : "s")"
    }
}
