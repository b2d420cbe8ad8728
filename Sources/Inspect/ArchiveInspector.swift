// Archive inspection for one uploaded file part: looks inside ZIP, gzip, tar and tar.gz while they stream.
//
//   part bytes ──feed──▶ ArchiveInspector ──▶ ZipParser ──┐ (inflate, raw deflate, one zlib stream)
//                              │            ├─ TarParser ──┤
//                              │            └─ GzipParser ─┤ (inflate, gzip; a tar inside goes to a TarParser)
//                              │                           ▼
//                              │                     MemberScanner (one per entry: counts bytes, sniffs the first
//                              │                        │ 262 bytes for executables and archives)
//                              │                        └─▶ nested ArchiveInspector (depth + 1, same budget)
//                              ▼
//                     first ArchiveFinding (sticky) · ArchiveSummary for the audit log
//
// Pure: no I/O, no whole-file buffers. Memory per nesting level: one zlib stream (32 KiB window) with a 16 KiB
// output piece, header buffers capped (`ArchiveInspector.nameMax`, `extraMax`), and per entry a 262-byte head, a
// 48-byte central-directory record and a name hash (bounded by `entriesMax`).

/// Limits applied while looking inside an archive. Nested archives share one budget with their parent.
public struct ArchiveLimits: Sendable, Hashable {
    /// Entries (files, directories, links) in one archive, nested archives' entries counted too.
    public var entriesMax = 1000
    /// Uncompressed bytes of all members, really inflated (not as declared). A member of a nested archive is
    /// counted at every level it is a member of.
    public var totalMax: UInt64 = 1 << 30
    /// Largest uncompressed / compressed ratio, per entry and for the whole archive (zip bombs).
    public var ratioMax = 100
    /// Ratios are judged only once the entry (or the archive) has produced at least this many bytes, so small
    /// highly compressible files (a few KiB of spaces) pass. The check runs while inflating, not at the end.
    public var ratioFloor: UInt64 = 1 << 20
    /// Archive nesting allowed: 1 = no archive inside, 2 = one level inside, and so on (at most
    /// `ArchiveInspector.depthCeiling`).
    public var depthMax = 2
    /// Extensions refused anywhere in a member's last path component (lowercase, without the dot).
    public var forbiddenExtensions: Set<String> = [
        "exe", "dll", "scr", "com", "bat", "cmd", "ps1", "vbs", "js", "jar", "msi", "php", "phtml", "sh", "elf",
        "so",
    ]
    /// Accept encrypted members (they are then skipped, not inspected).
    public var allowEncrypted = false
    /// Accept members sniffed as executables (ELF, PE/MZ, Mach-O, `#!` scripts).
    public var allowExecutables = false

    /// The defaults above.
    public init() {}
}

/// What the caller judges of every member, beyond the archive's own limits: the same checks as an uploaded file.
public struct ArchiveMemberChecks: Sendable {
    /// Why a member's base name (after its last `/` or `\`) is refused, or nil: the check uploaded filenames get
    /// (`dangerous-extension`, `restricted-name`). A refusal is `forbiddenMember`. nil: names are not judged so.
    public var name: (@Sendable (String) -> String?)?
    /// Whether member content is scanned for embedded markup (`MarkupScanner`), and with PHP short tags; nil: not.
    /// A finding is `forbiddenMember`.
    public var markupShortTags: Bool?

    /// Checks of member names and content; the defaults check neither.
    public init(name: (@Sendable (String) -> String?)? = nil, markupShortTags: Bool? = nil) {
        self.name = name
        self.markupShortTags = markupShortTags
    }
}

/// Why an archive was refused.
public enum ArchiveProblem: Sendable, Hashable, CaseIterable {
    /// More than `entriesMax` entries, nested ones included.
    case tooManyEntries
    /// More than `totalMax` uncompressed bytes, really inflated.
    case tooLarge
    /// An entry or the whole archive inflates more than `ratioMax` times its compressed size.
    case ratio
    /// An archive nested deeper than `depthMax`.
    case tooDeep
    /// A member name with a forbidden extension, or a tar device or FIFO.
    case forbiddenMember
    /// A member sniffed as an executable (ELF, PE/MZ, Mach-O, `#!`), unless `allowExecutables`.
    case executableMember
    /// An encrypted member, unless `allowEncrypted`.
    case encrypted
    /// A member name or link target escaping the extraction directory (`..`, absolute, drive or UNC path).
    case traversal
    /// Two members with the same normalised name.
    case duplicate
    /// The ZIP central directory disagrees with the local headers (names, order, sizes, CRC, offsets, count),
    /// including overlapping entries.
    case centralDirectoryMismatch
    /// Anything that is not a well-formed archive of the declared kind: truncated, bad lengths, sizes or CRC that
    /// disagree with the data, unsupported compression methods.
    case malformed

    /// A short stable name for rule files and audit records (`too_many_entries`, `ratio` …).
    public var name: String {
        switch self {
        case .tooManyEntries: return "too_many_entries"
        case .tooLarge: return "too_large"
        case .ratio: return "ratio"
        case .tooDeep: return "too_deep"
        case .forbiddenMember: return "forbidden_member"
        case .executableMember: return "executable_member"
        case .encrypted: return "encrypted"
        case .traversal: return "traversal"
        case .duplicate: return "duplicate"
        case .centralDirectoryMismatch: return "central_directory_mismatch"
        case .malformed: return "malformed"
        }
    }
}

/// One reason to refuse an archive: the problem, the entry concerned (nested entries as `outer.zip!/inner`), and
/// a human-readable detail.
public struct ArchiveFinding: Sendable, Hashable, CustomStringConvertible {
    public let problem: ArchiveProblem
    public let entry: String?
    public let detail: String

    public init(problem: ArchiveProblem, entry: String?, detail: String) {
        self.problem = problem
        self.entry = entry
        self.detail = detail
    }

    public var description: String {
        "\(problem.name)" + (entry.map { " [\($0)]" } ?? "") + ": \(detail)"
    }
}

/// What was seen inside an archive, for the audit log.
public struct ArchiveSummary: Sendable, Hashable {
    /// Entries seen, nested ones included.
    public var entries = 0
    /// Uncompressed member bytes really produced (nested members counted at each level).
    public var totalUncompressed: UInt64 = 0
    /// The largest uncompressed / compressed ratio of a finished deflated entry or gzip stream.
    public var largestRatio: Double = 0
    /// The deepest nesting level reached (1: the archive itself).
    public var depthReached = 1
    /// The first `ArchiveInspector.summaryNamesMax` entry names, nested ones as `outer.zip!/inner`.
    public var names: [String] = []
}

/// The budget shared by an inspector and the inspectors of the archives nested in it.
final class ArchiveBudget {
    var summary = ArchiveSummary()
}

/// What every parser of one nesting level knows: the limits, its depth, the shared budget and the name prefix.
final class ArchiveContext {
    let limits: ArchiveLimits
    let members: ArchiveMemberChecks
    let depth: Int
    let budget: ArchiveBudget
    /// Prepended to entry names in findings and the summary: "" at the top, `outer.zip!/` inside it.
    let prefix: String

    init(limits: ArchiveLimits, members: ArchiveMemberChecks, depth: Int, budget: ArchiveBudget, prefix: String) {
        self.limits = limits
        self.members = members
        self.depth = depth
        self.budget = budget
        self.prefix = prefix
    }

    func finding(_ problem: ArchiveProblem, _ entry: String?, _ detail: String) -> ArchiveFinding {
        ArchiveFinding(problem: problem, entry: entry.map { prefix + $0 } ?? whole, detail: detail)
    }

    /// The name of the archive itself: nil at the top, the member holding it when nested.
    var whole: String? {
        prefix.isEmpty ? nil : String(prefix.dropLast(2))
    }

    /// Counts one entry and records its name for the summary.
    func countEntry(_ name: String) -> ArchiveFinding? {
        budget.summary.entries += 1
        if budget.summary.names.count < ArchiveInspector.summaryNamesMax { budget.summary.names.append(prefix + name) }
        if budget.summary.entries > limits.entriesMax {
            return finding(.tooManyEntries, name, "more than \(limits.entriesMax) entries")
        }
        return nil
    }

    /// Judges the ratio while inflating (at every `ArchiveInspector.ratioStep` compressed bytes).
    func judgeRunningRatio(_ name: String?, out: UInt64, in compressed: UInt64) -> ArchiveFinding? {
        guard out >= limits.ratioFloor, limits.ratioMax >= 0 else { return nil }
        let (bound, overflow) = compressed.multipliedReportingOverflow(by: UInt64(limits.ratioMax))
        guard !overflow, out > bound else { return nil }
        let detail = "inflates \(out) bytes from the first \(compressed) (more than \(limits.ratioMax)x)"
        return finding(.ratio, name, detail)
    }

    /// Records a finished entry's ratio for the summary and judges it.
    func judgeRatio(_ name: String?, out: UInt64, in compressed: UInt64, whole isWhole: Bool) -> ArchiveFinding? {
        let ratio = Double(out) / Double(max(compressed, 1))
        if !isWhole && ratio > budget.summary.largestRatio { budget.summary.largestRatio = ratio }
        guard out >= limits.ratioFloor, limits.ratioMax >= 0 else { return nil }
        let (bound, overflow) = compressed.multipliedReportingOverflow(by: UInt64(limits.ratioMax))
        guard !overflow, out > bound else { return nil }
        let what = isWhole ? "the archive" : "entry"
        return finding(.ratio, name, "\(what) inflates \(out) bytes from \(compressed) (more than \(limits.ratioMax)x)")
    }
}

/// A parser for one archive format, fed the archive's bytes in order.
protocol ArchiveParser: AnyObject {
    func feed(_ bytes: UnsafeRawBufferPointer) -> ArchiveFinding?
    func finish() -> ArchiveFinding?
}

/// A streaming inspector for one archive (one file part): fed byte slices of any size, it parses the archive,
/// inflates members with zlib to count their real size, checks names, and sniffs members for executables and
/// nested archives. No I/O, bounded memory.
///
/// The first finding ends the inspection: it is returned by the `feed(_:)` that found it, and every later `feed`
/// and `finish()` returns it again without looking at more bytes. The finding does not depend on how the bytes
/// were split.
///
/// ```swift
/// guard let format = ArchiveInspector.format(sniffing: head) else { return }
/// let inspector = ArchiveInspector(format: format, limits: policy.archive)
/// for chunk in part { if let finding = inspector.feed(chunk) { refuse(finding) } }
/// if let finding = inspector.finish() { refuse(finding) }
/// audit(inspector.summary)
/// ```
public final class ArchiveInspector {
    /// The container format, decided by the caller from the first bytes (see `format(sniffing:)`).
    public enum Format: Sendable, Hashable {
        /// ZIP and everything built on it (OOXML, ODF, JAR, APK, EPUB).
        case zip
        /// gzip (RFC 1952); a tar inside is recognised (`ustar` at 257) and inspected as tar.
        case gzip
        /// POSIX ustar, GNU or pax tar.
        case tar
        /// gzip that must hold a tar.
        case tarGzip
    }

    /// Names kept in the summary, at most.
    public static let summaryNamesMax = 32
    /// Nesting is never followed deeper than this, whatever `depthMax` says (each level holds a zlib stream and
    /// a stack frame).
    public static let depthCeiling = 16
    /// Longest member name accepted (bytes); longer is `malformed`.
    public static let nameMax = 4096
    /// Longest ZIP extra field or tar pax header accepted (bytes); longer is `malformed`.
    public static let extraMax = 65536

    public let format: Format
    let context: ArchiveContext
    private let parser: ArchiveParser
    private var finding: ArchiveFinding?
    private var finished = false

    /// Creates an inspector for a top-level archive; `members` adds the caller's checks of every member (nested
    /// archives' too).
    public convenience init(format: Format, limits: ArchiveLimits,
                            members: ArchiveMemberChecks = ArchiveMemberChecks()) {
        let context = ArchiveContext(limits: limits, members: members, depth: 1, budget: ArchiveBudget(), prefix: "")
        self.init(format: format, context: context)
    }

    init(format: Format, context: ArchiveContext) {
        self.format = format
        self.context = context
        if context.depth > context.budget.summary.depthReached { context.budget.summary.depthReached = context.depth }
        switch format {
        case .zip: parser = ZipParser(context)
        case .tar: parser = TarParser(context)
        case .gzip: parser = GzipParser(context, requireTar: false)
        case .tarGzip: parser = GzipParser(context, requireTar: true)
        }
    }

    /// Inspects the next bytes of the part. Returns the first finding (again on every later call), or nil.
    public func feed(_ bytes: UnsafeRawBufferPointer) -> ArchiveFinding? {
        if let finding { return finding }
        guard !finished else {
            finding = context.finding(.malformed, nil, "bytes fed after finish")
            return finding
        }
        guard !bytes.isEmpty else { return nil }
        finding = parser.feed(bytes)
        return finding
    }

    /// Inspects the next bytes (convenience for tests and small inputs).
    public func feed(_ bytes: [UInt8]) -> ArchiveFinding? {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// Declares the end of the part: an incomplete archive is `malformed`; ZIP central-directory checks end here.
    /// Returns the first finding, or nil when the archive passed. Idempotent.
    public func finish() -> ArchiveFinding? {
        if let finding { return finding }
        guard !finished else { return nil }
        finished = true
        finding = parser.finish()
        return finding
    }

    /// What was seen so far (entries, bytes, ratio, depth, first names).
    public var summary: ArchiveSummary { context.budget.summary }

    /// The archive format of a part from its first bytes: `PK 03 04` or an empty ZIP's `PK 05 06`, gzip's `1F 8B`,
    /// tar's `ustar` at offset 257. nil for anything else (or a prefix too short to tell).
    public static func format(sniffing prefix: UnsafeRawBufferPointer) -> Format? {
        let b = SniffBytes(prefix)
        if b.has([0x50, 0x4B, 0x03, 0x04]) || b.has([0x50, 0x4B, 0x05, 0x06]) { return .zip }
        if b.has([0x1F, 0x8B]) { return .gzip }
        if b.has("ustar", at: 257) { return .tar }
        return nil
    }

    /// Compressed bytes between two ratio checks while inflating: 4 KiB.
    static let ratioStep: UInt64 = 4096

    /// The bytes `format(sniffing:)` may need: 262 (`ustar` at 257).
    static let sniffLength = 262
}
