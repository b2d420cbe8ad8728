import Foundation
import Multipart
@testable import Rules

/// Compiles `source` as `t.rules`, returning the policy (nil on errors) and the diagnostics.
func compile(_ source: String, file: String = "t.rules") -> (policy: Policy?, diagnostics: [Diagnostic]) {
    RuleChecker.compile(source: source, file: file)
}

/// The rendered diagnostics of `source`.
func rendered(_ source: String) -> [String] { compile(source).diagnostics.map(\.description) }

/// Compiles `source`, which must be clean.
func policy(_ source: String) throws -> Policy { try Policy.parse(source, file: "t.rules") }

/// Drives an evaluator the way the proxy does (begin, whole parts, end), without any I/O.
struct PolicyRequest {
    var evaluator: PolicyEvaluator
    var index = 0

    init(_ source: String, path: String = "/up", method: String = "POST",
         type: String = "multipart/form-data; boundary=x") throws {
        evaluator = PolicyEvaluator(policy: try policy(source))
        _ = evaluator.begin(method: method, path: path, contentType: type, contentLength: nil)
    }

    /// One whole part; returns its final action.
    @discardableResult
    mutating func part(_ name: String, filename: String? = nil, type: String? = nil, bytes: Int = 0,
                       sniffed: String? = nil) -> PolicyEvaluator.Action {
        let decision = begin(name, filename: filename, type: type)
        if case .reject = decision.action { return decision.action }
        if bytes > 0 { _ = evaluator.partData(count: bytes) }
        if let sniffed { _ = evaluator.partSniffed(type: sniffed) }
        return evaluator.partEnd()
    }

    /// Begins and ends one empty part; returns the begin decision (what the part's head alone decided).
    mutating func decision(_ name: String, filename: String? = nil) -> PolicyEvaluator.PartDecision {
        let decision = begin(name, filename: filename, type: nil)
        if case .reject = decision.action { return decision }
        _ = evaluator.partEnd()
        return decision
    }

    private mutating func begin(_ name: String, filename: String?, type: String?) -> PolicyEvaluator.PartDecision {
        defer { index += 1 }
        return evaluator.partBegin(index: index, name: name, filename: filename, declaredType: type,
                                   anomalies: MultipartAnomalies())
    }

    var kinds: [String] { evaluator.findings.map(\.violation.kind.name) }
}

/// A fresh temporary directory holding `files` (name → contents).
func temporaryDirectory(_ files: [String: String]) throws -> String {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("rules-tests-\(UUID().uuidString)").path
    for (name, contents) in files {
        let path = directory + "/" + name
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
    }
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    return directory
}

/// The repository root, found from this file's path.
func repositoryRoot(_ file: String = #filePath) -> String {
    var url = URL(fileURLWithPath: file)
    while url.path != "/" {
        url.deleteLastPathComponent()
        if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url.path }
    }
    return "."
}

enum MultipartAnomalyNames {
    static var all: [String] { MultipartAnomaly.allCases.map(\.name) }
}
