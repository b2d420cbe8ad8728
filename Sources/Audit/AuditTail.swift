// Reading the audit log back, for `formwall tail`.
//
//   FILE.N[.gz], FILE-DATE[.gz] (when --since reaches back) ┐
//   FILE (from the start)                                   ├─▶ split lines ─▶ filter ─▶ format ─▶ [String]
//   FILE appended / rotated / truncated (each pollOnce)     ┘
//
// The tail never sleeps by itself: `pollOnce()` does one non-blocking round of reading and
// returns the new output lines, so tests drive it step by step; `follow(every:until:emit:)`
// is the loop the CLI runs, sleeping `interval` between rounds.

import Foundation
import Glibc

/// Reads, filters and formats audit lines, and follows the file across rotation like `tail -F`.
///
/// Not thread-safe; one instance per reader.
public final class AuditTail {
    /// How output lines look.
    public enum Format: Sendable, Equatable {
        /// The original line, byte for byte (without its `\n`).
        case json
        /// One human line per record; `color` adds ANSI colours (the caller decides if stdout is a TTY).
        case human(color: Bool)
    }

    /// What to show.
    public struct Options: Sendable {
        /// Decisions to show; empty shows all.
        public var decisions: Set<AuditRecord.Decision>
        /// Show only records whose route starts with this prefix (records without a route never match).
        public var routePrefix: String?
        /// Show only records from the last this-many milliseconds (see `AuditTail.parseDuration`); also
        /// makes the first poll read rotated generations that may hold such records.
        public var sinceMilliseconds: Int64?
        /// The output format.
        public var format: Format
        /// "Now" for `sinceMilliseconds`.
        public var now: AuditTimestamp
        /// Keep only the last this-many lines of the first poll's output (the backlog), like `tail -n`.
        public var backlogLimit: Int?

        /// Shows everything as JSON unless narrowed.
        public init(
            decisions: Set<AuditRecord.Decision> = [], routePrefix: String? = nil, sinceMilliseconds: Int64? = nil,
            format: Format = .json, now: AuditTimestamp = .now(), backlogLimit: Int? = nil
        ) {
            self.decisions = decisions
            self.routePrefix = routePrefix
            self.sinceMilliseconds = sinceMilliseconds
            self.format = format
            self.now = now
            self.backlogLimit = backlogLimit
        }
    }

    /// The log file being read.
    public let path: String
    /// The filters and format.
    public let options: Options
    /// Lines that were not a JSON object (skipped when a filter or human format needs parsing).
    public private(set) var malformedLines = 0

    private var fd: Int32 = -1
    private var device: UInt = 0
    private var inode: UInt = 0
    private var offset = 0
    private var pending: [UInt8] = []
    private var startedBacklog = false
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)

    /// Prepares to read `path`; nothing is read until `pollOnce()`.
    public init(path: String, options: Options = Options()) {
        self.path = path
        self.options = options
    }

    deinit {
        if fd >= 0 { close(fd) }
        readBuffer.deallocate()
    }

    /// One round of reading, returning formatted lines that passed the filters.
    ///
    /// The first call returns the backlog: the rotated generations `--since` reaches into, then the
    /// current file. Later calls return lines appended since, following the path to a new file when
    /// it was rotated (after draining the old one) and restarting at 0 when the file was truncated.
    /// A missing file is not an error: the call returns nothing until it appears.
    public func pollOnce() throws -> [String] {
        var out: [String] = []
        if !startedBacklog {
            startedBacklog = true
            // Open the live file before reading history, so a rotation meanwhile is seen as one.
            try openCurrent()
            if let since = options.sinceMilliseconds {
                try readGenerations(newerThan: options.now.millisecondsSinceEpoch - since, into: &out)
            }
            try followRound(into: &out)
            if let limit = options.backlogLimit, out.count > limit { out.removeFirst(out.count - limit) }
            return out
        }
        try followRound(into: &out)
        return out
    }

    /// Runs `pollOnce()` every `interval` until `shouldStop()` returns true, handing each line to `emit`.
    public func follow(every interval: Duration, until shouldStop: () -> Bool, emit: (String) -> Void) throws {
        let (seconds, attoseconds) = interval.components
        var pause = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        while !shouldStop() {
            for line in try pollOnce() { emit(line) }
            var remaining = timespec()
            while nanosleep(&pause, &remaining) != 0 && errno == EINTR { pause = remaining }
            pause = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        }
    }

    // MARK: Following

    private func openCurrent() throws {
        let newFD = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard newFD >= 0 else {
            if errno == ENOENT { return }
            throw AuditError(operation: "open", path: path, errno: errno)
        }
        if fd >= 0 { close(fd) }
        fd = newFD
        let st = try AuditSyscall.fstatFD(fd, path: path)
        device = UInt(st.st_dev)
        inode = UInt(st.st_ino)
        offset = 0
        pending.removeAll()
    }

    private func followRound(into out: inout [String]) throws {
        if fd < 0 {
            try openCurrent()
            if fd < 0 { return }
        }
        try drain(into: &out)
        // At most a few switches per round: the path can only move on so fast.
        for _ in 0..<4 {
            guard let st = try AuditSyscall.statPath(path) else { return }  // mid-rotation: keep the old file
            if UInt(st.st_dev) != device || UInt(st.st_ino) != inode {
                try drain(into: &out)  // whatever reached the old file before the rename
                if !pending.isEmpty {
                    malformedLines += 1  // an unterminated last line in a retired file
                    pending.removeAll()
                }
                try openCurrent()
                try drain(into: &out)
                continue
            }
            let current = try AuditSyscall.fstatFD(fd, path: path)
            if Int(current.st_size) < offset {
                // Truncated (copytruncate): start over from the beginning.
                guard lseek(fd, 0, SEEK_SET) == 0 else {
                    throw AuditError(operation: "lseek", path: path, errno: errno)
                }
                offset = 0
                pending.removeAll()
                try drain(into: &out)
                continue
            }
            return
        }
    }

    /// Reads `fd` to its current end, emitting complete lines and keeping a partial one pending.
    private func drain(into out: inout [String]) throws {
        while true {
            let n = try AuditSyscall.read(fd, readBuffer, path: path)
            if n == 0 { return }
            offset += n
            consume(UnsafeRawBufferPointer(rebasing: readBuffer[..<n]), into: &out)
        }
    }

    private func consume(_ chunk: UnsafeRawBufferPointer, into out: inout [String]) {
        var start = 0
        while let newline = chunk[start...].firstIndex(of: 0x0A) {
            if pending.isEmpty {
                emit(UnsafeRawBufferPointer(rebasing: chunk[start..<newline]), into: &out)
            } else {
                pending.append(contentsOf: chunk[start..<newline])
                pending.withUnsafeBytes { emit($0, into: &out) }
                pending.removeAll(keepingCapacity: true)
            }
            start = newline + 1
        }
        if start < chunk.count { pending.append(contentsOf: chunk[start...]) }
    }

    // MARK: Rotated generations

    private func readGenerations(newerThan cutoff: Int64, into out: inout [String]) throws {
        var generations: [(path: String, compressed: Bool)] = []
        for generation in try Self.generations(of: path) {
            var (file, compressed) = (generation.path, generation.compressed)
            var found = try AuditSyscall.statPath(file)
            if found == nil, let copy = generation.compressedCopy {
                // The plain copy was being compressed, and is gone now: the compressed copy is complete.
                (file, compressed) = (copy, true)
                found = try AuditSyscall.statPath(file)
            }
            // A generation is written after its last record (and logrotate keeps that time when it compresses
            // one): older than the cutoff means all of it is.
            guard let st = found, (Int64(st.st_mtim.tv_sec) + 1) * 1000 >= cutoff else { continue }
            generations.append((file, compressed))
        }
        var partial: [UInt8] = []
        for (generation, compressed) in generations {
            func sink(_ chunk: UnsafeRawBufferPointer) {
                var start = 0
                while let newline = chunk[start...].firstIndex(of: 0x0A) {
                    partial.append(contentsOf: chunk[start..<newline])
                    partial.withUnsafeBytes { emit($0, into: &out) }
                    partial.removeAll(keepingCapacity: true)
                    start = newline + 1
                }
                if start < chunk.count { partial.append(contentsOf: chunk[start...]) }
            }
            if compressed {
                try Gzip.decompressFile(generation, sink)
            } else {
                let file = try AuditSyscall.open(generation, O_RDONLY | O_CLOEXEC)
                defer { close(file) }
                while true {
                    let got = try AuditSyscall.read(file, readBuffer, path: generation)
                    if got == 0 { break }
                    sink(UnsafeRawBufferPointer(rebasing: readBuffer[..<got]))
                }
            }
            if !partial.isEmpty {
                malformedLines += 1
                partial.removeAll()
            }
        }
    }

    // MARK: Filtering

    private var needsParsing: Bool {
        options.format != .json || !options.decisions.isEmpty || options.routePrefix != nil
            || options.sinceMilliseconds != nil
    }

    private func emit(_ line: UnsafeRawBufferPointer, into out: inout [String]) {
        guard !line.isEmpty else { return }
        guard needsParsing else {
            out.append(String(decoding: line, as: UTF8.self))
            return
        }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any] else {
            malformedLines += 1
            return
        }
        guard matches(object) else { return }
        switch options.format {
        case .json: out.append(String(decoding: line, as: UTF8.self))
        case .human(let color): out.append(Self.humanLine(object, color: color))
        }
    }

    /// Whether a parsed record passes the decision, route and since filters.
    ///
    /// Event records (`worker_exit`, which have an `event` member and no decision or route) pass only the
    /// since filter: `--decision` and `--route` ask about requests.
    func matches(_ object: [String: Any]) -> Bool {
        if object["event"] != nil && (!options.decisions.isEmpty || options.routePrefix != nil) { return false }
        if !options.decisions.isEmpty {
            guard let raw = object["decision"] as? String, let decision = AuditRecord.Decision(rawValue: raw),
                  options.decisions.contains(decision)
            else { return false }
        }
        if let prefix = options.routePrefix {
            guard let route = object["route"] as? String, route.hasPrefix(prefix) else { return false }
        }
        if let since = options.sinceMilliseconds {
            guard let text = object["ts"] as? String, let ts = AuditTimestamp(rfc3339: text),
                  ts.millisecondsSinceEpoch >= options.now.millisecondsSinceEpoch - since
            else { return false }
        }
        return true
    }
}
