import Foundation
import Glibc

extension QuarantineStore {
    /// What `recover()` removed.
    public struct RecoveryReport: Sendable, Equatable {
        /// `.tmp-*` files removed.
        public var temporaryFiles = 0
        /// Item directories removed because their sidecar was missing.
        public var incompleteItems = 0
        /// Empty directories removed.
        public var emptyDirectories = 0
    }

    /// Removes what interrupted writes left behind: temporary files, items without a sidecar and
    /// empty directories; then rescans.
    ///
    /// Call once at start-up, before any writer begins: an item being written right now looks
    /// exactly like a crash leftover.
    @discardableResult
    public func recover() throws -> RecoveryReport {
        var report = RecoveryReport()
        try state.withLock { _ in
            for day in try dayDirectories() {
                for name in try FileOps.list(day) {
                    let item = "\(day)/\(name)"
                    guard let st = try FileOps.lstat(item) else { continue }
                    if !FileOps.isDirectory(st) {
                        if name.hasPrefix(".tmp-") {
                            try FileOps.unlink(item)
                            report.temporaryFiles += 1
                        }
                        continue
                    }
                    try recoverItem(item, id: name, report: &report)
                }
            }
            try removeEmptyDirectories(olderThanDay: nil, report: &report)
        }
        try rescan()
        return report
    }

    private func recoverItem(_ item: String, id: String, report: inout RecoveryReport) throws {
        let names = try FileOps.list(item)
        for name in names where name.hasPrefix(".tmp-") {
            try FileOps.unlink("\(item)/\(name)")
            report.temporaryFiles += 1
        }
        let sidecar = "\(item)/\(id).json"
        let data = "\(item)/\(id).bin"
        let complete = try FileOps.lstat(sidecar) != nil && FileOps.lstat(data) != nil
        if !complete {
            // Sidecar first, so a crash during recovery still leaves an incomplete item.
            try FileOps.unlink(sidecar)
            try FileOps.unlink(data)
            if names.contains(where: { $0 == "\(id).json" || $0 == "\(id).bin" }) { report.incompleteItems += 1 }
        }
        if try FileOps.rmdir(item) { report.emptyDirectories += 1 }
    }

    /// Deletes complete items that arrived before `now - retention`. Returns how many were deleted.
    ///
    /// Safe to run periodically while workers write: it never touches items without a sidecar.
    @discardableResult
    public func prune(now: Date = Date()) throws -> Int {
        let cutoff = now.addingTimeInterval(-Self.seconds(retention))
        let (cy, cm, cd) = Sidecar.dayComponents(cutoff)
        let cutoffDay = "\(cy)/\(cm)/\(cd)"
        var removed = 0
        for day in try dayDirectories() {
            let dayKey = String(day.dropFirst(directory.count + 1))
            if dayKey > cutoffDay { break }  // days are sorted: everything later is too young
            for id in try FileOps.list(day) where Self.isValidID(id) {
                let item = "\(day)/\(id)"
                let sidecarPath = "\(item)/\(id).json"
                guard let bytes = try? FileOps.readFile(sidecarPath) else { continue }  // in progress or gone
                if dayKey == cutoffDay {
                    // The cutoff falls inside this day: decide item by item.
                    guard let parsed = try? Sidecar.decode(bytes, dataPath: "", sidecarPath: sidecarPath),
                          parsed.time < cutoff
                    else { continue }
                }
                try removeItem(item, id: id)
                removed += 1
            }
        }
        var report = RecoveryReport()
        try state.withLock { _ in try removeEmptyDirectories(olderThanDay: cutoffDay, report: &report) }
        return removed
    }

    /// Removes one complete item's files and directory, taking its bytes off usage.
    func removeItem(_ item: String, id: String) throws {
        try state.withLock { s in
            let freed = try itemBytes(item, id: id)
            // Sidecar first: from then on the item is incomplete, never half-visible, and counts for nothing.
            try FileOps.unlink("\(item)/\(id).json")
            s.itemChanged(day: dayKey(ofItem: item, id: id), id: id, by: -freed)
        }
        try FileOps.unlink("\(item)/\(id).bin")
        try FileOps.rmdir(item)
    }

    /// Removes empty day, month and year directories (only days up to `olderThanDay`, `YYYY/MM/DD`,
    /// when given). Caller holds the store's lock, which `begin` holds while creating directories.
    private func removeEmptyDirectories(olderThanDay: String?, report: inout RecoveryReport) throws {
        for day in try dayDirectories() {
            let dayKey = String(day.dropFirst(directory.count + 1))
            if let limit = olderThanDay, dayKey >= limit { continue }
            if try FileOps.rmdir(day) { report.emptyDirectories += 1 }
        }
        for y in try FileOps.list(directory).filter({ Self.isNumeric($0, digits: 4) }) {
            for m in try FileOps.list("\(directory)/\(y)").filter({ Self.isNumeric($0, digits: 2) }) {
                if try FileOps.rmdir("\(directory)/\(y)/\(m)") { report.emptyDirectories += 1 }
            }
            if try FileOps.rmdir("\(directory)/\(y)") { report.emptyDirectories += 1 }
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        let (s, atto) = duration.components
        return Double(s) + Double(atto) / 1e18
    }
}
