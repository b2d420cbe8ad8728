// Usage accounting and rescans.
//
// Usage is the bytes of complete items (`<id>.bin` plus `<id>.json`, both present) plus the bytes this process's
// writers have reserved. The complete items' share is what the last rescan found on disk, kept up to date with
// this process's own commits and removals; a rescan sees what anyone else did (`formwall quarantine delete`,
// files removed by hand, items another process stored).
//
// A rescan walks the day directories in order, lists each day's item ids without the store's lock, then looks
// at them in sorted order, `rescanChunk` items (two lstat calls each) per hold of the lock, counting the complete
// ones. This process's own commits and removals take the same lock, so each happens either before the walk looks
// at that item (the walk sees it) or after (the change is added to the walk's count): the rescan's total is
// exact for them (`Walk`). Workers that store parts wait at most one chunk's look for the lock.

import Glibc

extension QuarantineStore {
    /// The least time between two rescans by `rescanIfDue()`.
    public static let minimumRescanGap: Duration = .milliseconds(10)
    /// `rescanIfDue()` also waits this many times the last rescan's duration, so rescans take at most about
    /// 1/20 of one thread's time however large the store.
    public static let rescanGapFactor = 20
    /// How often the proxy's control loop calls `rescanIfDue()` on its own.
    public static let rescanPeriod: Duration = .seconds(10)
    /// After a part did not fit, the store counts as full while less than this is free.
    public static let fullMargin: Int64 = 1 << 20
    /// Items looked at per hold of the lock during a rescan.
    static let rescanChunk = 64

    /// How full the store is now.
    public var usage: QuarantineUsage {
        state.withLock { s in
            let free = maxBytes - s.bytes
            return QuarantineUsage(bytes: s.bytes, maxBytes: maxBytes,
                                   full: free <= 0 || (s.refusedAt != nil && free < Self.fullMargin))
        }
    }

    /// Walks the store and sets usage from the complete items on disk. Returns false, doing nothing, when
    /// another rescan is running. On an error usage stays as it was.
    @discardableResult
    public func rescan() throws -> Bool {
        let started = ContinuousClock.now
        let days: [String]? = try state.withLock { s in
            guard s.walk == nil else { return nil }
            // Under the lock: `begin` creates day directories under it, so none appears half-way.
            let days = try dayDirectories().map { String($0.dropFirst(directory.count + 1)) }
            s.walk = Walk(days: days)
            return days
        }
        guard let days else { return false }
        do {
            for (index, day) in days.enumerated() {
                state.withLock { s in s.walk?.list(day: index) }
                var names = try FileOps.list("\(directory)/\(day)").filter(Self.isValidID).sorted()
                names.removeDuplicates()
                faults?.duringRescan?()
                state.withLock { s in s.walk?.enter(names) }
                var more = !names.isEmpty
                while more {
                    more = try state.withLock { s in
                        try s.walk?.step(Self.rescanChunk) { try itemBytes("\(directory)/\(day)/\($0)", id: $0) }
                            ?? false
                    }
                    faults?.duringRescan?()
                }
            }
        } catch {
            state.withLock { s in
                s.walk = nil
                s.lastRescan = (ContinuousClock.now, ContinuousClock.now - started)
            }
            throw error
        }
        state.withLock { s in
            if let walk = s.walk { s.setStored(walk.counted) }
            s.walk = nil
            s.lastRescan = (ContinuousClock.now, ContinuousClock.now - started)
        }
        return true
    }

    /// Rescans unless one is running or the last one ended less than `minimumRescanGap`, or `rescanGapFactor`
    /// times its duration, ago. Returns whether it rescanned. A failed rescan counts as one (and is not
    /// reported: usage stays as it was, and /readyz's probe of the directory says what is wrong).
    @discardableResult
    public func rescanIfDue() -> Bool {
        let now = ContinuousClock.now
        let due = state.withLock { s in
            guard s.walk == nil else { return false }
            guard let last = s.lastRescan else { return true }
            return now - last.ended >= max(minimumRescanGap, last.took * Self.rescanGapFactor)
        }
        guard due else { return false }
        return (try? rescan()) ?? false
    }

    /// Runs `body`; when it throws `.storeFull`, rescans if due and, if that found room, runs it once more.
    func retryingWhenFull<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as QuarantineError where error.code == .storeFull {
            let before = usageBytes
            guard rescanIfDue(), usageBytes < before else { throw error }
            return try body()
        }
    }

    /// The bytes an item counts for: its data and sidecar sizes when both are regular files, else 0 (an item
    /// being written or removed, or not an item at all).
    func itemBytes(_ item: String, id: String) throws -> Int64 {
        guard let sidecar = try Self.lstatInItem("\(item)/\(id).json"), FileOps.isRegular(sidecar),
              let data = try Self.lstatInItem("\(item)/\(id).bin"), FileOps.isRegular(data)
        else { return 0 }
        return Int64(sidecar.st_size) + Int64(data.st_size)
    }

    /// `YYYY/MM/DD` of an item directory's path.
    func dayKey(ofItem item: String, id: String) -> String {
        String(item.dropFirst(directory.count + 1).dropLast(id.count + 1))
    }

    /// `lstat`, or nil when the path or a parent is missing or a parent is not a directory (a stray file named
    /// like an item).
    private static func lstatInItem(_ path: String) throws -> stat? {
        do { return try FileOps.lstat(path) } catch let error as QuarantineError where error.errno == ENOTDIR {
            return nil
        }
    }
}

/// The store's usage, under its lock.
struct Accounting {
    /// Bytes of complete items: the last rescan's count, plus this process's commits and minus its removals since.
    var stored: Int64 = 0
    /// Bytes reserved by this process's writers in progress.
    var pending: Int64 = 0
    /// The rescan in progress, if any.
    var walk: Walk?
    /// When the last rescan ended and how long it took.
    var lastRescan: (ended: ContinuousClock.Instant, took: Duration)?
    /// `stored` when a part last did not fit; nil once an item was stored or `stored` fell below it.
    var refusedAt: Int64?

    /// What counts against the cap.
    var bytes: Int64 { stored + pending }

    /// This process made an item complete (`delta` > 0) or removed one (`delta` < 0).
    mutating func itemChanged(day: String, id: String, by delta: Int64) {
        if delta > 0 { refusedAt = nil }
        setStored(stored + delta)
        walk?.changed(day: day, id: id, by: delta)
    }

    mutating func setStored(_ value: Int64) {
        stored = max(0, value)
        if let limit = refusedAt, stored < limit { refusedAt = nil }
    }

    /// A part did not fit.
    mutating func refused() {
        refusedAt = stored
    }
}

/// A rescan in progress: the days it listed, where it is, and what it counted so far.
///
/// Each day is listed without the lock, then walked a chunk of items at a time under it. A change this process
/// makes to an item (under the lock) is added to `counted` unless the walk will look at that item afterwards.
struct Walk {
    /// `YYYY/MM/DD` of each day directory at the start, ascending.
    let days: [String]
    /// The index in `days` of the day being listed or walked; -1 before the first.
    private(set) var day = -1
    /// Whether that day is being listed (`names` not known yet).
    private(set) var listing = false
    /// That day's item ids, ascending, as listed.
    private(set) var names: [String] = []
    /// How many of `names` were looked at.
    private(set) var position = 0
    /// Items of that day made complete while it was being listed, with their bytes.
    private var completedWhileListing: [String: Int64] = [:]
    /// Bytes of the complete items looked at, plus this process's changes to items the walk does not look at
    /// after them.
    private(set) var counted: Int64 = 0

    init(days: [String]) { self.days = days }

    /// Starts listing day `index`.
    mutating func list(day index: Int) {
        day = index
        listing = true
        names = []
        position = 0
    }

    /// The day's listing is done: an item made complete meanwhile counts now unless the walk will look at it.
    mutating func enter(_ listed: [String]) {
        listing = false
        names = listed
        for (id, bytes) in completedWhileListing where Self.index(of: id, in: names) == nil { counted += bytes }
        completedWhileListing = [:]
    }

    /// Looks at the next `count` items of the day with `bytes`; returns whether any are left.
    mutating func step(_ count: Int, _ bytes: (String) throws -> Int64) rethrows -> Bool {
        let end = min(names.count, position + count)
        for id in names[position..<end] { counted += try bytes(id) }
        position = end
        return end < names.count
    }

    /// This process made item `id` of `day` complete (`delta` > 0, its bytes) or removed it (`delta` < 0).
    mutating func changed(day key: String, id: String, by delta: Int64) {
        guard let index = Self.index(of: key, in: days) else {
            counted += delta  // a day created since the start, which the walk does not visit
            return
        }
        if index > day { return }  // the walk will list the day and see the change
        if index < day {
            counted += delta
            return
        }
        if listing {
            // Whether the walk will look at the item depends on the listing. A removed item counts for nothing
            // either way: looked at, it is gone; not listed, it was gone or was made complete while listing.
            completedWhileListing[id] = delta > 0 ? delta : nil
            return
        }
        guard let at = Self.index(of: id, in: names), at >= position else {
            counted += delta  // looked at already, or created since the listing
            return
        }
    }

    /// Binary search in an ascending array.
    static func index(of value: String, in sorted: [String]) -> Int? {
        var low = 0
        var high = sorted.count
        while low < high {
            let mid = (low + high) / 2
            if sorted[mid] < value { low = mid + 1 } else { high = mid }
        }
        return low < sorted.count && sorted[low] == value ? low : nil
    }
}

extension [String] {
    /// Removes adjacent repeats (a name a directory listing returned twice, once sorted).
    mutating func removeDuplicates() {
        var kept = 0
        for i in indices where i == 0 || self[i] != self[kept - 1] {
            self[kept] = self[i]
            kept += 1
        }
        removeLast(count - kept)
    }
}
