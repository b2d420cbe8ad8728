import Foundation

/// Reads rule files, follows `include`, checks every statement against the directive table and
/// compiles the result into a `Policy`, reporting every problem as a `Diagnostic`.
///
/// ```
/// paths ──▶ files (a directory means its *.rules, sorted) ──▶ lex + parse each
///       ──▶ expand include (relative to the including file, once per file, cycles reported)
///       ──▶ main-context settings ──▶ routes ──▶ field / file rules ──▶ Policy
/// ```
public enum RuleChecker {
    /// Every diagnostic for the files at `paths`; empty when they form a clean policy.
    public static func check(paths: [String]) -> [Diagnostic] { compile(paths: paths).diagnostics }

    /// Compiles the files at `paths`; `policy` is nil when any diagnostic is an error.
    public static func compile(paths: [String]) -> (policy: Policy?, diagnostics: [Diagnostic]) {
        var loader = RuleLoader()
        let statements = loader.load(paths: paths)
        return finish(statements: statements, diagnostics: loader.diagnostics, sources: loader.sources)
    }

    /// Compiles the files at `paths` as they were when `sources` (a policy's `Policy.sources`) were read: every
    /// file, directory listing and `include` is looked up among them instead of on the disk, so the policy comes
    /// out as it was compiled then, whatever the files hold now.
    public static func compile(paths: [String], from sources: [PolicySource]) -> (policy: Policy?, diagnostics: [Diagnostic]) {
        var loader = RuleLoader()
        loader.stored = Dictionary(sources.map { ($0.path, $0.contents) }, uniquingKeysWith: { first, _ in first })
        let statements = loader.load(paths: paths)
        return finish(statements: statements, diagnostics: loader.diagnostics, sources: loader.sources)
    }

    /// Compiles rule text held in memory; `include` paths resolve relative to `file`'s directory.
    public static func compile(source: String, file: String) -> (policy: Policy?, diagnostics: [Diagnostic]) {
        var loader = RuleLoader()
        let statements = loader.load(source: source, file: file)
        return finish(statements: statements, diagnostics: loader.diagnostics, sources: loader.sources)
    }

    private static func finish(statements: [RuleStatement], diagnostics: [Diagnostic],
                               sources: [PolicySource]) -> (policy: Policy?, diagnostics: [Diagnostic]) {
        var compiler = RuleCompiler()
        var policy = compiler.compile(statements)
        policy.sources = sources
        // Sorted by file, line and column (stable: two at one position keep the order they were found in).
        let all = (diagnostics + compiler.diagnostics).enumerated().sorted { a, b in
            let (x, y) = (a.element, b.element)
            if x.file != y.file { return x.file < y.file }
            if x.line != y.line { return x.line < y.line }
            if x.column != y.column { return x.column < y.column }
            return a.offset < b.offset
        }.map(\.element)
        return (all.contains { $0.severity == .error } ? nil : policy, all)
    }
}

extension Policy {
    /// Loads and compiles the rule files at `paths` (a directory means all its `*.rules`, sorted).
    ///
    /// Throws `PolicyLoadError` carrying every diagnostic when any of them is an error; warnings
    /// alone do not fail the load.
    public static func load(paths: [String]) throws(PolicyLoadError) -> Policy {
        let (policy, diagnostics) = RuleChecker.compile(paths: paths)
        guard let policy else { throw PolicyLoadError(diagnostics: diagnostics) }
        return policy
    }

    /// Compiles the files at `paths` again from the bytes a policy was compiled from (`Policy.sources`), not from
    /// the disk (`RuleChecker.compile(paths:from:)`).
    public static func load(paths: [String], from sources: [PolicySource]) throws(PolicyLoadError) -> Policy {
        let (policy, diagnostics) = RuleChecker.compile(paths: paths, from: sources)
        guard let policy else { throw PolicyLoadError(diagnostics: diagnostics) }
        return policy
    }

    /// Compiles rule text held in memory (`file` names it in diagnostics and anchors `include`).
    public static func parse(_ source: String, file: String = "<string>") throws(PolicyLoadError) -> Policy {
        let (policy, diagnostics) = RuleChecker.compile(source: source, file: file)
        guard let policy else { throw PolicyLoadError(diagnostics: diagnostics) }
        return policy
    }
}

/// Reads files and expands `include`, producing the main-context statements of all files in order.
struct RuleLoader {
    private(set) var diagnostics: [Diagnostic] = []
    /// Every file read, in the order read (includes where they were included), with its bytes.
    private(set) var sources: [PolicySource] = []
    private var loaded: Set<String> = []
    private var stack: [(canonical: String, display: String)] = []
    /// The files to read instead of the disk's, by path (`RuleChecker.compile(paths:from:)`); nil: the disk.
    var stored: [String: [UInt8]]?

    mutating func load(paths: [String]) -> [RuleStatement] {
        var statements: [RuleStatement] = []
        for path in paths {
            guard let isDirectory = kind(of: path) else {
                diagnostics.append(Diagnostic(file: path, line: 1, column: 1, severity: .error,
                                              message: "cannot read '\(path)': no such file or directory"))
                continue
            }
            if isDirectory {
                let files = names(in: path).filter { $0.hasSuffix(".rules") }.sorted().map { Self.join(path, $0) }
                if files.isEmpty {
                    // Most likely a wrong path: a policy of nothing would forward everything without a word.
                    diagnostics.append(Diagnostic(file: path, line: 1, column: 1, severity: .error,
                                                  message: "directory '\(path)' has no *.rules files"))
                }
                for file in files { statements += loadFile(file, from: nil) }
            } else {
                statements += loadFile(path, from: nil)
            }
        }
        return statements
    }

    mutating func load(source: String, file: String) -> [RuleStatement] {
        let canonical = Self.canonical(file)
        loaded.insert(canonical)
        stack.append((canonical, file))
        defer { stack.removeLast() }
        sources.append(PolicySource(path: file, contents: Array(source.utf8)))
        return expand(source: source, file: file)
    }

    /// The `*.rules` files directly inside `directory` on the disk, sorted by name.
    static func ruleFiles(in directory: String) -> [String] {
        RuleLoader().names(in: directory).filter { $0.hasSuffix(".rules") }.sorted().map { join(directory, $0) }
    }

    /// Whether `path` is a directory (true) or a file (false); nil when it is neither.
    private func kind(of path: String) -> Bool? {
        guard let stored else {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return nil }
            return isDirectory.boolValue
        }
        if stored[path] != nil { return false }
        let prefix = Self.join(path, "")
        return stored.keys.contains { $0.hasPrefix(prefix) } ? true : nil
    }

    /// The names directly inside `directory`, in no particular order.
    private func names(in directory: String) -> [String] {
        guard let stored else { return (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] }
        let prefix = Self.join(directory, "")
        return stored.keys.compactMap { path in
            guard path.hasPrefix(prefix) else { return nil }
            let name = path.dropFirst(prefix.count)
            return name.isEmpty || name.contains("/") ? nil : String(name)
        }
    }

    private func contents(_ path: String) -> [UInt8]? {
        guard let stored else { return FileManager.default.contents(atPath: path).map { Array($0) } }
        return stored[path]
    }

    private mutating func loadFile(_ path: String, from include: RuleToken?) -> [RuleStatement] {
        let canonical = Self.canonical(path)
        if let cycleStart = stack.firstIndex(where: { $0.canonical == canonical }) {
            let chain = (stack[cycleStart...].map(\.display) + [path]).joined(separator: " -> ")
            if let include { diagnostics.append(Diagnostic(.error, at: include.location, "include cycle: \(chain)")) }
            return []
        }
        guard !loaded.contains(canonical) else { return [] }
        guard let data = contents(path) else {
            if let include {
                diagnostics.append(Diagnostic(.error, at: include.location, "include file not found: '\(path)'"))
            } else {
                diagnostics.append(Diagnostic(file: path, line: 1, column: 1, severity: .error,
                                              message: "cannot read '\(path)'"))
            }
            return []
        }
        loaded.insert(canonical)
        stack.append((canonical, path))
        defer { stack.removeLast() }
        sources.append(PolicySource(path: path, contents: data))
        return expand(source: String(decoding: data, as: UTF8.self), file: path)
    }

    private mutating func expand(source: String, file: String) -> [RuleStatement] {
        let (parsed, problems) = RuleParser.parse(source, file: file)
        diagnostics += problems
        var statements: [RuleStatement] = []
        for statement in parsed {
            guard statement.name.text == "include" else {
                statements.append(statement)
                continue
            }
            guard statement.arguments.count == 1, statement.block == nil,
                  let argument = statement.arguments.first else {
                diagnostics.append(Diagnostic(.error, at: statement.location,
                                              "'include' takes exactly 1 argument and no block"))
                continue
            }
            let directory = (file as NSString).deletingLastPathComponent
            let target = argument.text.hasPrefix("/") ? argument.text : Self.join(directory, argument.text)
            let lastComponent = (target as NSString).lastPathComponent
            if lastComponent.contains("*") {
                let folder = (target as NSString).deletingLastPathComponent
                for name in names(in: folder).sorted() where Self.glob(lastComponent, matches: name) {
                    statements += loadFile(Self.join(folder, name), from: argument)
                }
            } else {
                statements += loadFile(target, from: argument)
            }
        }
        return statements
    }

    static func join(_ directory: String, _ name: String) -> String {
        guard !directory.isEmpty else { return name }
        return directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    static func canonical(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
    }

    /// `*` matches any run of characters; everything else matches itself.
    static func glob(_ pattern: String, matches name: String) -> Bool {
        let pieces = pattern.split(separator: "*", omittingEmptySubsequences: false)
        var rest = Substring(name)
        guard let first = pieces.first, rest.hasPrefix(first) else { return false }
        rest = rest.dropFirst(first.count)
        for (offset, piece) in pieces.enumerated().dropFirst() {
            if offset == pieces.count - 1 { return rest.hasSuffix(piece) }
            guard let range = rest.range(of: piece) else { return false }
            rest = rest[range.upperBound...]
        }
        return rest.isEmpty
    }
}

/// Paths as an `include` names them, for the main configuration file (`include rules/*.rules;`).
public enum RuleFiles {
    /// `pattern` resolved against `directory` (unless absolute); a `*` in its last component expands to the
    /// matching names, sorted. A pattern without `*` gives itself, whether or not it exists.
    public static func expand(_ pattern: String, relativeTo directory: String) -> [String] {
        let target = resolve(pattern, relativeTo: directory)
        let last = (target as NSString).lastPathComponent
        guard last.contains("*") else { return [target] }
        let folder = (target as NSString).deletingLastPathComponent
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted()
        return names.filter { RuleLoader.glob(last, matches: $0) }.map { RuleLoader.join(folder, $0) }
    }

    /// `path` resolved against `directory`: unchanged when absolute (or when `directory` is empty), else
    /// `directory/path`. No globbing and no check that it exists.
    public static func resolve(_ path: String, relativeTo directory: String) -> String {
        path.hasPrefix("/") ? path : RuleLoader.join(directory, path)
    }
}
