import Foundation

// Finding the rotated generations of the audit log that `formwall tail --since` reads, however they were named:
//
//   audit.log.3.gz  audit.log.2.gz  audit.log.1         numbered: formwall's own rotation, logrotate without dateext
//   audit.log-20261205-1796500000.gz  audit.log-20261206  dated: logrotate's dateext with any dateformat
//
// Each may be gzip-compressed (`.gz`) or not (delaycompress leaves the newest rotation plain).

extension AuditTail {
    /// One rotated generation of the log.
    struct Generation: Equatable {
        /// The file to read.
        var path: String
        /// Whether `path` is gzip-compressed.
        var compressed: Bool
        /// The same generation compressed, when both exist (a compression in progress): read if `path` is gone
        /// by the time it is opened.
        var compressedCopy: String?
    }

    /// The rotated generations of the log at `path`, oldest first.
    ///
    /// A file in `path`'s directory is a generation when its name is `path`'s name followed by a suffix made of
    /// digits and the separators `.`, `-` and `_`, starting with a separator and holding a digit, and optionally
    /// `.gz`: `FILE.1`, `FILE.2.gz` (numbered; a higher number is older) and `FILE-20261207`,
    /// `FILE-20261207-1796674244.gz` (logrotate's `dateext`; ordered by name, which logrotate requires of its
    /// `dateformat`). Numbered generations come before dated ones: a log switched from one naming to the other
    /// switches from numbers (formwall's rotation, logrotate's default) to dates. Lock and temporary files
    /// (`FILE.lock`, `FILE.1.gz.tmp`) do not match.
    static func generations(of path: String) throws -> [Generation] {
        let directory = AuditSyscall.directory(of: path)
        guard try AuditSyscall.statPath(directory) != nil else { return [] }  // --follow waits for it
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
            throw AuditError(operation: "list the directory", path: directory, errno: 0)
        }
        let base = Array((path.split(separator: "/", omittingEmptySubsequences: false).last ?? "").utf8)
        var plain: Set<String> = []
        var compressed: Set<String> = []
        for name in names where name.utf8.starts(with: base) {
            var suffix = Substring(name.utf8.dropFirst(base.count))
            let isCompressed = suffix.hasSuffix(".gz")
            if isCompressed { suffix = suffix.dropLast(3) }
            guard isRotationSuffix(suffix) else { continue }
            if isCompressed { compressed.insert(String(suffix)) } else { plain.insert(String(suffix)) }
        }
        let ordered = plain.union(compressed).sorted { a, b in
            switch (generationNumber(a), generationNumber(b)) {
            case let (x?, y?): return x != y ? x > y : a < b
            case (_?, nil): return true
            case (nil, _?): return false
            case (nil, nil): return a < b
            }
        }
        return ordered.map { suffix in
            let gz = compressed.contains(suffix) ? path + suffix + ".gz" : nil
            guard plain.contains(suffix) else { return Generation(path: path + suffix + ".gz", compressed: true) }
            return Generation(path: path + suffix, compressed: false, compressedCopy: gz)
        }
    }

    /// Whether `suffix` (after the log's name, without `.gz`) names a rotation: a separator first, then digits
    /// and separators, at least one digit.
    private static func isRotationSuffix(_ suffix: Substring) -> Bool {
        guard let first = suffix.utf8.first, first == UInt8(ascii: ".") || first == UInt8(ascii: "-")
                || first == UInt8(ascii: "_") else { return false }
        var digit = false
        for c in suffix.utf8 {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = true
            case UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"): continue
            default: return false
            }
        }
        return digit
    }

    /// N for a numbered generation's suffix `.N`; nil for a dated one.
    private static func generationNumber(_ suffix: String) -> Int? {
        guard suffix.hasPrefix(".") else { return nil }
        return Int(suffix.dropFirst())
    }
}
