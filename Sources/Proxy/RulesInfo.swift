import Audit
import Foundation
import Inspect
import Rules

/// What /rules reports about the policy in force: its files, their digest and when it was loaded.
public struct RulesInfo: Sendable, Equatable {
    /// The rule files in load order (a `--rules` directory contributes its `*.rules` files, sorted by name).
    public var files: [String]
    /// Lowercase hex SHA-256 of the files' bytes concatenated in load order.
    public var digest: String
    /// When the policy was loaded (start-up or the last successful SIGHUP reload).
    public var loadedAt: AuditTimestamp

    /// The files `policy` was compiled from, in the order they were read (`include`d files where they were
    /// included), and the SHA-256 of their bytes, as read, concatenated in that order: the digest describes the
    /// policy in force, even if a file changed on disk since.
    public init(policy: Policy, at time: AuditTimestamp = .now()) {
        let hasher = SHA256Hasher()
        for source in policy.sources { hasher.update(source.contents) }
        self.init(files: policy.sources.map(\.path), digest: hasher.finalizeHex(), loadedAt: time)
    }

    public init(files: [String], digest: String, loadedAt: AuditTimestamp) {
        self.files = files
        self.digest = digest
        self.loadedAt = loadedAt
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
