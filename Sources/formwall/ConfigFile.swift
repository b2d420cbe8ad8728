import Foundation
import Rules

/// The main configuration file (`formwall serve --config FILE`, `formwall check --config FILE`).
///
/// Same syntax as rule files (docs/rules.md): `directive argument…;`, `#` comments, quoted strings, blocks. Every
/// `serve` long option is a directive of the same name taking the same value, so docs/configuration.md's table
/// is both the command line and the file:
///
/// ```
/// listen 0.0.0.0:8080;
/// admin 127.0.0.1:9901;
/// upstream app;                       # the default upstream: a group below, or http://host:port
/// upstream app {
///     server 10.0.0.5:9000;
///     server 10.0.0.6:9000 weight 2;
///     balance least-conn;
///     max-fails 3;
///     fail-timeout 10;
///     readiness required;             # /readyz fails while no server of the group accepts
/// }
/// trusted-proxies 10.0.0.0/8 172.16.0.0/12;
/// proxy-protocol on;
/// include rules/*.rules;              # rule files, relative to this file
/// ```
///
/// Every path the file names is relative to the file's directory (`include`, `rules`, `audit-log`, the TLS files…:
/// `pathValued`), whatever the working directory, so `check --config` and `serve --config` read the same files.
/// Reading is pure apart from the file itself and `include` globbing: values are checked later, by the same code
/// that checks command-line options, with this file's `file:line:col` in each message.
struct ConfigFile {
    /// One option's values as the file gives them (repeatable options accumulate) and where the first was written.
    struct Setting {
        var values: [String]
        var location: SourceLocation
    }

    /// One `upstream NAME { … }` block, unchecked values.
    struct GroupDeclaration {
        var name: String
        var location: SourceLocation
        var servers: [(address: String, weight: String?, location: SourceLocation)] = []
        var balance: (String, SourceLocation)?
        var maxFails: (String, SourceLocation)?
        var failTimeout: (String, SourceLocation)?
        var readiness: (String, SourceLocation)?

        /// Everything the block says, as text (to notice a change on reload).
        var summary: String {
            ([name] + servers.map { "\($0.address) \($0.weight ?? "1")" }
                + [balance?.0, maxFails?.0, failTimeout?.0, readiness?.0].map { $0 ?? "-" }).joined(separator: ";")
        }
    }

    var path: String
    /// The file's bytes as read: what a restarted proxy process parses again (`LastGoodConfiguration`).
    var contents: [UInt8] = []
    var settings: [String: Setting] = [:]
    var groups: [GroupDeclaration] = []
    /// Rule files from `include` (globs expanded, relative to this file), in order.
    var rules: [String] = []
    var diagnostics: [Diagnostic] = []

    /// Options a file may not set: they only make sense on a command line.
    static let commandLineOnly: Set<String> = ["config", "help"]
    /// Options that may be written more than once; the values accumulate.
    static let repeatable: Set<String> = ["listen", "rules", "audit-field", "tls-certificate", "tls-key"]
    /// Options whose several arguments are one comma-separated value on the command line.
    static let listValued: Set<String> = ["trusted-proxies"]
    /// Options whose value is a path: a relative one is taken relative to the file's directory, like `include`
    /// (`audit-log -`, standard output, stays as it is). `antivirus clamd unix:PATH` is one too (`resolved`).
    static let pathValued: Set<String> = [
        "rules", "audit-log", "quarantine-dir", "pid-file", "spool-dir", "tls-certificate", "tls-key",
        "tls-client-ca", "upstream-ca", "upstream-tls-certificate", "upstream-tls-key",
    ]

    /// Reads and parses `path`. `valued` and `flags` are `serve`'s long options; a flag is written `NAME on;` or
    /// `NAME off;` in the file.
    static func read(_ path: String, valued: Set<String>, flags: Set<String>) -> ConfigFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            var file = ConfigFile(path: path)
            file.diagnostics.append(Diagnostic(file: path, line: 1, column: 1, severity: .error,
                                               message: "cannot read configuration file '\(path)'"))
            return file
        }
        return parse(Array(data), path: path, valued: valued, flags: flags)
    }

    /// Parses `contents` as the file at `path`. With `includes` false, `include` directives are taken as written
    /// and not looked up: the rule files come from elsewhere (a restarted proxy process's last good policy).
    static func parse(_ contents: [UInt8], path: String, valued: Set<String>, flags: Set<String>,
                      includes: Bool = true) -> ConfigFile {
        var file = ConfigFile(path: path)
        file.contents = contents
        let names = valued.union(flags).union(["include", "upstream", "server"])
        let (statements, problems) = RuleParser.parse(String(decoding: contents, as: UTF8.self), file: path,
                                                      directiveNames: names)
        file.diagnostics += problems
        for statement in statements where includes || statement.name.text != "include" {
            file.take(statement, valued: valued, flags: flags)
        }
        return file
    }

    private mutating func error(_ location: SourceLocation, _ message: String) {
        diagnostics.append(Diagnostic(.error, at: location, message))
    }

    private mutating func take(_ statement: RuleStatement, valued: Set<String>, flags: Set<String>) {
        let name = statement.name.text
        let arguments = statement.arguments.map(\.text)
        let location = statement.location
        if name == "upstream", let block = statement.block {
            declareGroup(statement, block)
            return
        }
        guard statement.block == nil else {
            error(location, "'\(name)' takes no block")
            return
        }
        switch name {
        case "include":
            guard arguments.count == 1 else { return error(location, "'include' takes one path or pattern") }
            let found = RuleFiles.expand(arguments[0], relativeTo: directory)
            if found.isEmpty {
                error(statement.arguments[0].location, "include '\(arguments[0])' matches no file")
            }
            rules += found
        case _ where Self.commandLineOnly.contains(name):
            error(location, "'\(name)' is a command-line option only")
        case _ where flags.contains(name):
            guard arguments.count == 1, ["on", "off"].contains(arguments[0]) else {
                return error(location, "'\(name)' takes 'on' or 'off'")
            }
            set(name, [arguments[0]], at: location)
        case _ where valued.contains(name):
            guard !arguments.isEmpty else { return error(location, "'\(name)' needs a value") }
            if Self.listValued.contains(name) {
                set(name, [arguments.joined(separator: ",")], at: location)
            } else if name == "antivirus" {
                // `antivirus clamd unix:/run/clamav/clamd.ctl;` is `--antivirus clamd:unix:/run/clamav/clamd.ctl`.
                set(name, [resolved(name, arguments.joined(separator: ":"))], at: location)
            } else if arguments.count == 1 {
                set(name, [resolved(name, arguments[0])], at: location)
            } else {
                error(statement.arguments[1].location, "'\(name)' takes one value, got \(arguments.count)")
            }
        default:
            let hint = Self.closest(name, in: valued.union(flags).union(["include", "upstream"]))
                .map { "; did you mean '\($0)'?" } ?? ""
            error(location, "unknown directive '\(name)'\(hint) (directives are `formwall serve` long options)")
        }
    }

    /// The directory this file's relative paths start from (empty: the working directory, where a relative
    /// configuration path itself was found).
    private var directory: String { (path as NSString).deletingLastPathComponent }

    /// `value` of option `name` with a relative path made relative to this file's directory.
    private func resolved(_ name: String, _ value: String) -> String {
        let socket = "clamd:unix:"
        if name == "antivirus", value.hasPrefix(socket) {
            return socket + RuleFiles.resolve(String(value.dropFirst(socket.count)), relativeTo: directory)
        }
        guard Self.pathValued.contains(name), !(name == "audit-log" && value == "-") else { return value }
        return RuleFiles.resolve(value, relativeTo: directory)
    }

    private mutating func set(_ name: String, _ values: [String], at location: SourceLocation) {
        if let existing = settings[name] {
            guard Self.repeatable.contains(name) else {
                return error(location, "'\(name)' is already set at \(existing.location.file):\(existing.location.line)")
            }
            settings[name]?.values += values
        } else {
            settings[name] = Setting(values: values, location: location)
        }
    }

    private mutating func declareGroup(_ statement: RuleStatement, _ block: [RuleStatement]) {
        guard statement.arguments.count == 1, let nameToken = statement.arguments.first else {
            return error(statement.location, "'upstream NAME { … }' declares a group: one name, then the block")
        }
        guard UpstreamName.isValid(nameToken.text) else {
            return error(nameToken.location, "upstream group name '\(nameToken.text)': letters, digits, '-', '_' "
                + "and '.', starting with a letter")
        }
        if let other = groups.first(where: { $0.name == nameToken.text }) {
            return error(nameToken.location, "upstream group '\(nameToken.text)' is already declared at "
                + "\(other.location.file):\(other.location.line)")
        }
        var group = GroupDeclaration(name: nameToken.text, location: nameToken.location)
        for inner in block {
            let args = inner.arguments.map(\.text)
            guard inner.block == nil else {
                error(inner.location, "'\(inner.name.text)' takes no block")
                continue
            }
            switch inner.name.text {
            case "server":
                if args.count == 1 {
                    group.servers.append((args[0], nil, inner.location))
                } else if args.count == 3, args[1] == "weight" {
                    group.servers.append((args[0], args[2], inner.location))
                } else {
                    error(inner.location, "'server' takes an address and optionally 'weight N'")
                }
            case "balance", "max-fails", "fail-timeout", "readiness":
                guard args.count == 1 else {
                    error(inner.location, "'\(inner.name.text)' takes one value")
                    continue
                }
                let value = (args[0], inner.arguments[0].location)
                switch inner.name.text {
                case "balance": group.balance = value
                case "max-fails": group.maxFails = value
                case "readiness": group.readiness = value
                default: group.failTimeout = value
                }
            default:
                error(inner.location, "unknown directive '\(inner.name.text)' in an upstream group "
                    + "(server, balance, max-fails, fail-timeout, readiness)")
            }
        }
        if group.servers.isEmpty { error(nameToken.location, "upstream group '\(group.name)' has no 'server'") }
        groups.append(group)
    }

    /// The known name nearest to a misspelt one (edit distance at most 2).
    static func closest(_ name: String, in known: Set<String>) -> String? {
        func distance(_ a: [Character], _ b: [Character]) -> Int {
            guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
            var row = Array(0...b.count)
            for i in 1...a.count {
                var previous = row[0]
                row[0] = i
                for j in 1...b.count {
                    let old = row[j]
                    row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                    previous = old
                }
            }
            return row[b.count]
        }
        let chars = Array(name)
        return known.map { ($0, distance(chars, Array($0))) }.filter { $0.1 <= 2 }
            .min { $0.1 != $1.1 ? $0.1 < $1.1 : $0.0 < $1.0 }?.0
    }
}

/// Where `serve` reads an option: the command line first, then the configuration file.
struct OptionSource {
    let commandLine: Arguments
    let file: ConfigFile?

    /// The last value (command line), or the file's value; nil when neither sets it.
    func value(_ key: String) -> String? {
        if let v = commandLine.value(key) { return v }
        return file?.settings[key]?.values.last
    }

    /// Every value: the command line's when it gives any (they replace the file's), else the file's.
    func values(_ key: String) -> [String] {
        let given = commandLine.values(key)
        return given.isEmpty ? file?.settings[key]?.values ?? [] : given
    }

    /// A flag: set on the command line, or `on` in the file.
    func flag(_ key: String) -> Bool {
        commandLine.flags.contains(key) || file?.settings[key]?.values.last == "on"
    }

    /// How an error message names the option: `--workers` when it came from the command line, else
    /// `formwall.conf:3:1: workers`.
    func label(_ key: String) -> String {
        if commandLine.options[key] != nil || commandLine.flags.contains(key) { return "--\(key)" }
        if let location = file?.settings[key]?.location {
            return "\(location.file):\(location.line):\(location.column): \(key)"
        }
        return "--\(key)"
    }
}
