import Audit
import Foundation
import Inspect

/// What /rules reports about the policy in force: its files, their digest and when it was loaded.
public struct RulesInfo: Sendable, Equatable {
    /// The rule files in load order (a `--rules` directory contributes its `*.rules` files, sorted by name).
    public var files: [String]
    /// Lowercase hex SHA-256 of the files' bytes concatenated in load order.
    public var digest: String
    /// When the policy was loaded (start-up or the last successful SIGHUP reload).
    public var loadedAt: AuditTimestamp

    /// Reads the files named by `paths` (as `--rules` lists them) and hashes them. Files pulled in by `include`
    /// are not part of the list or the digest.
    public static func read(paths: [String], at time: AuditTimestamp = .now()) -> RulesInfo {
        var files: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                let base = path.hasSuffix("/") ? path : path + "/"
                files += names.filter { $0.hasSuffix(".rules") }.sorted().map { base + $0 }
            } else {
                files.append(path)
            }
        }
        let hasher = SHA256Hasher()
        for file in files {
            if let data = FileManager.default.contents(atPath: file) { hasher.update(Array(data)) }
        }
        return RulesInfo(files: files, digest: hasher.finalizeHex(), loadedAt: time)
    }

    /// `{"files":[...],"digest":"...","loaded_at":"..."}`.
    public var json: String {
        let list = files.map { JSONText.quote($0) }.joined(separator: ",")
        return "{\"files\":[\(list)],\"digest\":\"\(digest)\",\"loaded_at\":\"\(loadedAt.rfc3339)\"}"
    }
}

/// Minimal JSON string quoting for the admin listener's small documents.
enum JSONText {
    /// `s` as a JSON string literal, with quotes, backslashes and control characters escaped.
    static func quote(_ s: String) -> String {
        var out = "\""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if c.value < 0x20 {
                    let hex = String(c.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(c)
                }
            }
        }
        return out + "\""
    }
}
