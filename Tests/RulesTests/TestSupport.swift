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
