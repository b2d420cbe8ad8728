import Foundation

/// A subcommand of `formwall`: a name, a one-line summary, help text, and a runner returning the exit code.
protocol Command {
    static var name: String { get }
    static var summary: String { get }
    static var help: String { get }
    static func run(_ args: [String]) -> Int32
}

/// Minimal option parsing: `--flag`, `--key value`, `--key=value`, positionals; `--` ends options.
struct Arguments {
    var options: [String: [String]] = [:]
    var flags: Set<String> = []
    var positionals: [String] = []

    /// Parses `args`; `valued` lists options that take a value. Throws a one-line usage error.
    init(_ args: [String], valued: Set<String>, flags known: Set<String>) throws {
        var i = 0
        var onlyPositionals = false
        while i < args.count {
            let a = args[i]
            i += 1
            if onlyPositionals || !a.hasPrefix("--") || a == "-" {
                positionals.append(a)
                continue
            }
            if a == "--" { onlyPositionals = true; continue }
            var key = String(a.dropFirst(2))
            var value: String?
            if let eq = key.firstIndex(of: "=") {
                value = String(key[key.index(after: eq)...])
                key = String(key[..<eq])
            }
            if valued.contains(key) {
                if value == nil {
                    guard i < args.count else { throw UsageError("option --\(key) needs a value") }
                    value = args[i]
                    i += 1
                }
                options[key, default: []].append(value!)
            } else if known.contains(key) {
                guard value == nil else { throw UsageError("option --\(key) takes no value") }
                flags.insert(key)
            } else {
                throw UsageError("unknown option --\(key)")
            }
        }
    }

    func value(_ key: String) -> String? { options[key]?.last }
    func values(_ key: String) -> [String] { options[key] ?? [] }
}

/// A command-line mistake, printed as one line with a pointer to `--help`.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = message }
}

/// Writes one line to stderr.
func printError(_ message: String) {
    FileHandle.standardError.write(("formwall: " + message + "\n").data(using: .utf8)!)
}
