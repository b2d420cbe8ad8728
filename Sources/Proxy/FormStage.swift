import Foundation
import Inspect
import Multipart
import Quarantine
import Reactor
import Rules

// The multipart body stage with policy: decode → policy → stage or quarantine → encode.
//
//   MultipartParser events ──► PolicyEvaluator (per part: begin, data counts, sniffed type, value, end)
//        │                                         │
//        │          ┌──────────── mode ────────────┴─────────────────────────────────┐
//        ▼          ▼                                                                 ▼
//   part data ─► stream  (written through the canonical encoder at once)        hold (0600 temp file until
//              ─► drop   (stripped: never written anywhere)                      the part's end, then replayed
//              ─► quarantine (QuarantineWriter: fsynced store, sha256 on the fly) through the encoder, or
//                                                                                  dropped/quarantined)
//
// A part is held only when the policy says a later check could still strip or quarantine it; otherwise it
// streams, because a later failure can only reject the whole request, which aborts the upstream request.
// While a held part is replayed (the upstream connection streams the file), the stage is blocked: it keeps the
// unparsed rest of the current input (`carry`, at most one input slice) and resumes when the replay is done.
//
// The request ends at the framing end (`finish`: Content-Length reached or the last chunk), not at the close
// delimiter: bytes after it (an epilogue, extra hyphens, transport padding, a look-alike) are still parsed,
// counted and judged by the route's anomaly policy; then `PolicyEvaluator.end()` runs and the canonical close
// delimiter is written. No order of calls traps: a call the stage cannot honour throws 500 `internal_error`.

/// Which parts the stage hashes with SHA-256 (`PartRecord.sha256`). Hashing a part costs about as much CPU as
/// relaying it twice (docs/performance.md, "Hashing only what is read"), so the proxy hashes only what its audit
/// log prints: file parts, and nothing without an audit log. A policy never reads a hash.
public enum PartHashing: Sendable {
    /// No part (the proxy without an audit log).
    case none
    /// File parts only (the proxy's audit log lists a digest for files, `null` for fields).
    case files
    /// Every part, when the stage observes (`formwall inspect`, the demo's echo upstream).
    case all
}

/// What the stage knows about one part, for `formwall inspect` and the audit log.
public struct PartRecord: Sendable {
    public var index: Int
    public var part: MultipartPart
    public var size: UInt64 = 0
    public var sha256: String?
    public var sniffedType: String?
    public var action: String = "forward"
    public var quarantineID: String?
    public var sanitizedFilename: String?
    /// The first bytes of a field's value (at most 256), for the demo echo upstream; nil for files.
    public var preview: String?
    /// The antivirus verdict (`clean`, `infected: NAME`, `unscanned`); nil without `--antivirus`.
    public var scan: String?
    /// What `disarm` removed; nil when the part was not disarmed.
    public var disarmed: [String]?
}

extension PartRecord {
    /// A record holding no storage, left behind when one is moved out (`moveOut`).
    static var empty: PartRecord { PartRecord(index: 0, part: MultipartPart(name: nil)) }
}

/// Moves `value` out, leaving `empty` (a value holding no storage) in its place: where `consume` cannot reach (a
/// stored property, or a variable the compiler will not consume), this moves without a copy's retains.
@inline(__always)
func moveOut<T>(_ value: inout T, leaving empty: T) -> T {
    var out = empty
    swap(&out, &value)
    return out
}

/// Where a quarantined part goes, and the request facts its sidecar records.
public struct QuarantineContext {
    public var store: QuarantineStore
    public var requestID: String
    public var route: String?
    public var client: String

    public init(store: QuarantineStore, requestID: String, route: String?, client: String) {
        self.store = store
        self.requestID = requestID
        self.route = route
        self.client = client
    }
}

/// Why the form stage stopped the request.
public enum FormStageError: Error {
    /// The body is malformed (400).
    case malformed(MultipartError)
    /// The policy rejected the request.
    case rejected(Violation)
    /// The quarantine store could not take the part: fail closed (503).
    case quarantineFailed(String)
    /// A temporary file for holding a part could not be written (500).
    case holdFailed(String)
    /// The antivirus gave no verdict (down, timeout, stream too long) and failures are not allowed: 503.
    case antivirusFailed(String)

    /// The stage was driven out of order (a Formwall bug): 500 `internal_error`, for this request only.
    ///
    /// A rejection rather than a case of its own, so every caller already answers it with its status.
    public static func internalError(_ detail: String) -> FormStageError {
        .rejected(Violation(kind: .internalError, detail: "form stage: " + detail))
    }
}

/// Output of the stage: bytes, or a file to splice in (a held part's data) after everything written so far.
public protocol FormOutput: AnyObject {
    /// Appends canonical body bytes.
    func write(_ bytes: UnsafeRawBufferPointer)
    /// Appends a whole file's contents after everything written so far. Returns true when the file is
    /// queued asynchronously: the stage must then wait for `isReplaying` to become false before writing more.
    func enqueue(_ file: TemporaryFile) -> Bool
    /// Whether a queued file is still being sent.
    var isReplaying: Bool { get }
}

/// The multipart body stage.
public final class FormStage {
    public let parser: MultipartParser
    public private(set) var encoder: MultipartEncoder?
    public private(set) var records: [PartRecord] = []
    public private(set) var evaluator: PolicyEvaluator? {
        get { evaluatorSlot.value }
        set { evaluatorSlot.value = newValue }
    }
    private var evaluatorSlot = EvaluatorSlot(nil)

    /// The evaluator, moved out of its slot to be updated and stored back (`EvaluatorSlot.take`).
    private func takeEvaluator() -> PolicyEvaluator? { evaluatorSlot.take() }
    private let quarantine: QuarantineContext?
    private let spoolDirectory: String
    /// Whether to sniff every file part and keep its record's facts (needed by a policy, the audit log and
    /// `inspect`).
    private let observe: Bool
    /// Which parts get a SHA-256 (`hashing`, read by `observe` only for `.all`).
    private let hashing: PartHashing
    /// Field names whose first 256 bytes are kept in `PartRecord.preview` (nil: every field).
    private let previewFields: Set<String>?
    private var reportedAnomalies = MultipartAnomalies()
    private var carry: [UInt8] = []
    private var blocked = false
    private var ended = false
    private var inputDone = false
    /// Set once a part was stripped, quarantined or renamed (audit decision `modified`).
    public private(set) var modified = false

    fileprivate enum Mode {
        case stream
        case hold(TemporaryFile)
        case drop
        case quarantine(QuarantineWriter)
    }

    /// The part being received. An object, updated where it is: as a struct (360 bytes) it was moved out of
    /// `current` and back around every call that could end the part, a `memcpy` each way, about 70 a request
    /// (stored inline in the stage and updated in place, the optimiser still copied it whole at each part's start
    /// and end). One object serves every part of a request (`spare`), and the worker's pools keep it for the next
    /// request (`RequestPools.partStates`), so it costs no allocation in steady state.
    public final class Current {
        fileprivate var record = PartRecord.empty
        fileprivate var mode = Mode.drop
        fileprivate var pending: PolicyEvaluator.PendingChecks = []
        fileprivate var sniffer: Sniffer?
        fileprivate var hasher: SHA256Hasher?
        fileprivate var value: [UInt8]?
        fileprivate var valueLimit = 0
        /// Archive inspection (docs/rules.md, "Archives"): the first bytes until the format is known, then the
        /// inspector; nil once done, or for parts that are not inspected.
        fileprivate var archiveProbe: [UInt8]?
        /// The rule's archive settings, turned into the inspector's limits only once the probe finds an archive
        /// (building the limits hashes every denied extension: most files are not archives).
        fileprivate var archiveSettings: ArchiveSettings?
        fileprivate var archive: ArchiveInspector?
        /// `disarm` on the part's rule: the part is held, then rewritten at its end.
        fileprivate var disarm: DisarmMode?
        /// Whether a field's value is UTF-8 so far (`invalid-utf8-value`); nil for files and without a policy.
        fileprivate var text: UTF8Validity?
        /// The whole-part scan of a file part under `deny-embedded-markup`; nil once it gave its verdict.
        fileprivate var markup: MarkupScanner?
        /// Whether the scan reported markup: the sniffer's own finding is then not reported again.
        fileprivate var markupReported = false

        /// A state holding no part.
        init() {}

        /// Starts a part whose record is in place: every other field is set (those not given to nil).
        fileprivate func start(mode: Mode, pending: PolicyEvaluator.PendingChecks, sniffer: Sniffer?,
                               hasher: SHA256Hasher?, value: [UInt8]?, valueLimit: Int) {
            self.mode = mode
            self.pending = pending
            self.sniffer = sniffer
            self.hasher = hasher
            self.value = value
            self.valueLimit = valueLimit
            archiveProbe = nil
            archiveSettings = nil
            archive = nil
            disarm = nil
            text = nil
            markup = nil
            markupReported = false
        }

        /// Whether the state holds nothing of a part (what `clear` leaves): for the pools' tests.
        var isClear: Bool {
            record.index == 0 && record.part.name == nil && record.size == 0 && record.sha256 == nil
                && record.sniffedType == nil && record.preview == nil && pending.isEmpty && sniffer == nil
                && hasher == nil && value == nil && valueLimit == 0 && archiveProbe == nil && archiveSettings == nil
                && archive == nil && disarm == nil && text == nil && markup == nil && !markupReported
                && { if case .drop = mode { true } else { false } }()
        }

        /// Lets go of everything the part held (its files, buffers, sniffer and hasher), to be kept for another.
        /// The record has been moved out already (`moveOut` leaves it empty): assigning it again would only
        /// destroy an empty record, a release call for each of its eleven fields.
        fileprivate func clear() {
            start(mode: .drop, pending: [], sniffer: nil, hasher: nil, value: nil, valueLimit: 0)
        }
    }

    private var current: Current?
    /// The part state to use for the next part: the last part's, cleared, or one from the worker's pools.
    private var spare: Current?

    // Antivirus (`serve --antivirus`): every file part is held; at its end the stage blocks until the verdict.
    /// What the antivirus said about a held file part.
    public enum ScanVerdict: Sendable, Equatable {
        case clean
        case infected(signature: String)
        case failed(reason: String)
    }
    /// Scan every file part before it goes upstream.
    let scanFiles: Bool
    /// A failed scan forwards the part (unscanned) instead of failing the request.
    let allowScanFailure: Bool
    /// The held file part being scanned (from its first byte: the driver streams the file to clamd as it grows),
    /// its scan's number (verdicts of older scans are ignored), whether the machine took the request, whether the
    /// part ended (and the machine said so), and the verdict once it came.
    private var scanFile: TemporaryFile?
    private var scanID = 0
    private var scanRequested = false
    private var scanInputEnded = false
    private var scanEndSignalled = false
    private var scanOutcome: ScanVerdict?
    /// The part ended and waits for its verdict: the stage is blocked meanwhile.
    private var awaitingVerdict = false
    /// Parts forwarded without a verdict (`--antivirus-failure allow`), for the audit record.
    public private(set) var unscannedParts = 0

    /// Creates the stage. `evaluator` must have had `begin` called and chosen `.multipart`; nil means no policy
    /// (every part streams). `reencodeBoundary` nil means parse only (`formwall inspect` without output). `records` and
    /// `partState` are storage from the worker's pools (`RequestPools`), given back with `giveBack(to:)`.
    public init(boundary: [UInt8], limits: MultipartLimits, anomalies: MultipartAnomalies,
                reencodeBoundary: [UInt8]?, evaluator: PolicyEvaluator?, quarantine: QuarantineContext?,
                spoolDirectory: String = "/tmp", holdPending: Bool = false, observe: Bool = true,
                hashing: PartHashing = .all, previewFields: Set<String>? = nil, scanFiles: Bool = false,
                allowScanFailure: Bool = false, records: [PartRecord] = [], partState: Current? = nil) {
        self.holdPending = holdPending
        self.scanFiles = scanFiles
        self.allowScanFailure = allowScanFailure
        self.observe = observe || evaluator != nil
        self.hashing = hashing
        self.previewFields = previewFields
        parser = MultipartParser(boundary: boundary, limits: limits, anomalies: anomalies)
        encoder = reencodeBoundary.map { MultipartEncoder(boundary: $0) }
        evaluatorSlot = EvaluatorSlot(evaluator)
        self.quarantine = quarantine
        self.spoolDirectory = spoolDirectory
        self.records = records
        spare = partState
    }

    /// Gives the part-record list to `pools` for later stages (`records:`): only once the request's audit
    /// record has been built, and the stage must not write again.
    func giveBack(to pools: RequestPools) {
        pools.partRecords.recycle(moveOut(&records, leaving: []))
        if let state = spare.take() { pools.recyclePartState(state) }
    }

    /// `upstream-body hold`: every file part with a pending verdict is held until it passes.
    let holdPending: Bool

    /// Whether the stage waits for a held part's replay to finish (call `resume` when `out.isReplaying` is false).
    public var isBlocked: Bool { blocked }

    /// Whether the body is complete: the close delimiter was seen, the input ended, and the end-of-request
    /// checks passed (the canonical close delimiter has been written).
    public var isComplete: Bool { ended }

    /// Counts raw body bytes against the route's body-max.
    public func bodyData(count: Int) throws(FormStageError) {
        guard var ev = takeEvaluator() else { return }
        let action = ev.bodyData(count: count)
        evaluatorSlot.put(consume ev)
        if case .reject(let v) = action { throw .rejected(v) }
    }

    /// Counts `chunk` against the route's `body-max` and parses it: the bytes up to the limit first, then the
    /// limit. How the body was cut into reads then changes nothing: a body malformed within its first `body-max`
    /// bytes is `malformed_body`, and a longer one with nothing wrong before that is `body_too_large`, in one read
    /// or byte by byte. (`bodyData` of a whole read before its `feed` judged the limit first, so the same bytes
    /// got either answer with the reads: found by fuzz/RequestPathFuzz.swift's split invariance.) The same rules
    /// as `feed`: not while `isBlocked`, not after `finish`.
    public func feedBody(_ chunk: UnsafeRawBufferPointer, out: FormOutput) throws(FormStageError) {
        var room = chunk.count
        // The bytes up to the limit never pass it, so only an earlier rejection is answered here.
        if var ev = takeEvaluator() {
            let (counted, action) = ev.bodyDataWithinLimit(count: chunk.count)
            evaluatorSlot.put(consume ev)
            room = counted
            if case .reject(let v) = action { throw .rejected(v) }
        }
        guard room < chunk.count else { return try feed(chunk, out: out) }
        if room > 0 { try feed(UnsafeRawBufferPointer(rebasing: chunk[..<room]), out: out) }
        // Past the limit: refused here, unless the policy only monitors; then parsed on (after a held part's
        // replay if the bytes before it started one).
        let rest = UnsafeRawBufferPointer(rebasing: chunk[room...])
        try bodyData(count: rest.count)
        if blocked { carry.append(contentsOf: rest) } else { try feed(rest, out: out) }
    }

    /// Feeds one chunk. Must not be called while `isBlocked` or after `finish` (either throws `internal_error`).
    public func feed(_ chunk: UnsafeRawBufferPointer, out: FormOutput) throws(FormStageError) {
        guard !blocked else { throw .internalError("feed while blocked on a replay") }
        guard !inputDone else { throw .internalError("feed after finish") }
        try run(chunk, out: out)
    }

    /// The held file part to stream to the antivirus as it arrives, once per part (nil when none is new).
    public func takeScanRequest() -> (file: TemporaryFile, id: Int)? {
        guard let file = scanFile, !scanRequested else { return nil }
        scanRequested = true
        return (file, scanID)
    }

    /// The scanned part ended (its file is complete), once: the driver sends clamd the end of the stream.
    public func takeScanEnd() -> Int? {
        guard scanFile != nil, scanRequested, scanInputEnded, !scanEndSignalled else { return nil }
        scanEndSignalled = true
        return scanID
    }

    /// The antivirus verdict for scan `id`; `resume` then finishes the part. A verdict for an older scan (a part
    /// that was stripped meanwhile) is ignored.
    public func scanFinished(_ verdict: ScanVerdict, id: Int) {
        guard scanFile != nil, id == scanID else { return }
        scanOutcome = verdict
    }

    /// Continues after a replay or a scan verdict: parses the carried input, then completes the body if its
    /// input has ended.
    public func resume(out: FormOutput) throws(FormStageError) {
        guard blocked, !out.isReplaying else { return }
        if awaitingVerdict {
            guard scanOutcome != nil else { return }
            awaitingVerdict = false
            blocked = false
            do { try partEnd(out: out) } catch {
                recordFailedPart()
                throw error
            }
            if blocked { return }
        }
        blocked = false
        // Run even with nothing carried: the parser may still hold an event (the close delimiter that ended
        // the chunk right after the held part), which must be drained before `parser.finish()`.
        let pending = carry
        carry.removeAll(keepingCapacity: true)
        let result = pending.withUnsafeBytes { bytes in
            Result { () throws(FormStageError) in try run(bytes, out: out) }
        }
        try result.get()
        if !blocked && inputDone { try complete(out: out) }
    }

    /// Declares the framing end of the body (Content-Length reached or the last chunk): the parser must have
    /// seen the close delimiter; then the last anomaly check, the policy's end-of-request checks and the
    /// canonical close delimiter. If blocked, completion happens in `resume`.
    public func finish(out: FormOutput) throws(FormStageError) {
        guard !inputDone else { throw .internalError("finish called twice") }
        inputDone = true
        if blocked { return }
        try complete(out: out)
    }

    private func complete(out: FormOutput) throws(FormStageError) {
        guard !ended else { throw .internalError("body completed twice") }
        do { try parser.finish() } catch {
            if var ev = takeEvaluator() {
                _ = ev.malformed(detail: error.description)
                evaluatorSlot.put(consume ev)
            }
            throw .malformed(error)
        }
        guard current == nil else { throw .internalError("input ended inside a part") }
        try checkRequestAnomalies()
        if var ev = takeEvaluator() {
            let action = ev.end()
            evaluatorSlot.put(consume ev)
            if case .reject(let v) = action { throw .rejected(v) }
        }
        ended = true
        encoder?.withClose { out.write($0) }
    }

    private func run(_ chunk: UnsafeRawBufferPointer, out: FormOutput) throws(FormStageError) {
        // Anomalies are judged in byte order whatever the reads: the Content-Type's before any body byte, and
        // those flagged before a parse error before that error.
        try checkRequestAnomalies()
        var consumed = 0
        while !blocked {
            // Steps, not events: a step is trivial to drop, and the begun part is moved out of the parser.
            let event: MultipartStep?
            do { event = try parser.step(chunk, consumed: &consumed) } catch {
                try checkRequestAnomalies()
                if var ev = takeEvaluator() {
                    _ = ev.malformed(detail: error.description)
                    evaluatorSlot.put(consume ev)
                }
                throw .malformed(error)
            }
            // A flag comes from bytes after a data span (a look-alike ends it), so data is handled first;
            // any other event comes after the bytes that set a flag in the same call.
            if case .partData = event {} else { try checkRequestAnomalies() }
            guard let event else { return }
            do throws(FormStageError) {
                switch event {
                case .partBegin:
                    guard let part = parser.takePart() else {
                        throw FormStageError.internalError("part begin without a part")
                    }
                    try partBegin(part, out: out)
                case .partData(let span):
                    try partData(span, out: out)
                    try checkRequestAnomalies()
                case .partEnd: try partEnd(out: out)
                case .end: break   // the epilogue is still parsed; `complete` ends the request
                }
            } catch {
                recordFailedPart()
                throw error
            }
        }
        // Blocked on a replay: keep the rest of this chunk for `resume`.
        if consumed < chunk.count { carry.append(contentsOf: chunk[consumed...]) }
    }

    /// The part being processed when the request failed is listed too, with the action that ended it.
    private func recordFailedPart() {
        guard let cur = current else { return }
        cur.record.action = "reject"
        cur.record.sha256 = nil
        if case .hold(let file) = cur.mode { file.close() }
        if case .quarantine(let writer) = cur.mode { writer.abort() }
        records.append(moveOut(&cur.record, leaving: .empty))
        current = nil
        cur.clear()
        spare = cur
    }

    private func checkRequestAnomalies() throws(FormStageError) {
        let now = parser.anomalies
        guard now.bits != reportedAnomalies.bits else { return }
        let fresh = now.subtracting(reportedAnomalies)
        reportedAnomalies = now
        guard var ev = takeEvaluator() else { return }
        let action = ev.anomalies(fresh)
        evaluatorSlot.put(consume ev)
        if case .reject(let v) = action { throw .rejected(v) }
    }

    private func partBegin(_ part: consuming MultipartPart, out: FormOutput) throws(FormStageError) {
        // Room for a typical form at once (each growth of the list would allocate and move the records again).
        if records.capacity == 0 { records.reserveCapacity(4) }
        // The part is moved into its record and read from there: a copy would retain and release its arrays.
        var record = PartRecord(index: records.count, part: part)
        let isFile = record.part.isFile
        var mode = Mode.stream
        var pending: PolicyEvaluator.PendingChecks = []
        var valueLimit = 0
        // What the part's rule says about disarming and archives, read while the evaluator is in hand: reading
        // them through `evaluator` would copy the whole evaluator each time.
        var disarm: DisarmMode?
        var archiveSettings: ArchiveSettings?
        var markupShortTags: Bool?
        if var ev = takeEvaluator() {
            let decision = ev.partBegin(index: record.index, name: record.part.nameString,
                                        filename: record.part.filenameString,
                                        declaredType: record.part.contentTypeString, anomalies: record.part.anomalies)
            // A held field value is bounded by its rule's `max` (only a field with a `pattern` is held).
            if decision.pending.contains(.value) { valueLimit = Int(min(ev.currentRuleMax ?? 65_536, 16 << 20)) }
            if isFile {
                disarm = ev.currentDisarm
                archiveSettings = ev.currentArchiveSettings
                markupShortTags = ev.currentMarkupScanShortTags
            }
            evaluatorSlot.put(consume ev)
            pending = decision.pending
            record.part.anomalies.formUnion(decision.flags)
            if let renamed = decision.filename {
                record.sanitizedFilename = renamed
                modified = true
            }
            switch decision.action {
            case .reject(let v):
                // Refused at its header (extension, unknown part, counts): still listed, with its action.
                record.action = "reject"
                records.append(record)
                throw .rejected(v)
            case .strip:
                mode = .drop
            case .quarantine(let v):
                mode = .quarantine(try openQuarantine(record.part, violations: [v]))
            case .forward:
                // Hold mode: any file whose verdict is still pending waits for it, so a file that fails is
                // never sent upstream at all.
                if decision.mustHold || (holdPending && isFile && !decision.pending.isEmpty) {
                    do { mode = .hold(try TemporaryFile(directory: spoolDirectory)) } catch {
                        throw .holdFailed("\(error)")
                    }
                }
            }
        }
        // With an antivirus, a file goes upstream only after its verdict, and a file to disarm only once rewritten:
        // either is held like a pending part.
        if (scanFiles || disarm != nil) && isFile, case .stream = mode {
            do { mode = .hold(try TemporaryFile(directory: spoolDirectory)) } catch { throw .holdFailed("\(error)") }
        }
        if scanFiles && isFile, case .hold(let file) = mode {
            // The scan starts now and follows the file as it grows.
            scanFile = file
            scanID += 1
            scanRequested = false
            scanInputEnded = false
            scanEndSignalled = false
            scanOutcome = nil
        }
        if case .stream = mode { writeHead(of: record, out: out) }
        // The record is swapped into the part state, whose record is empty, and read from there while the part
        // lasts. Moved in (`moveOut`) it left a second empty record to destroy, a release call for each of its
        // eleven fields (`consume` of the local is not supported here by the compiler).
        let state = spare.take() ?? Current()
        swap(&state.record, &record)
        state.start(mode: mode, pending: pending, sniffer: isFile && observe ? Sniffer() : nil,
                    hasher: hashes(file: isFile) ? SHA256Hasher() : nil,
                    value: pending.contains(.value) ? [] : nil, valueLimit: valueLimit)
        state.disarm = disarm
        if let markupShortTags { state.markup = MarkupScanner(phpShortTags: markupShortTags) }
        if !isFile && !evaluatorSlot.isEmpty { state.text = UTF8Validity() }
        if isFile, let settings = archiveSettings, settings.inspect {
            state.archiveProbe = []
            state.archiveSettings = settings
        }
        current = state
    }

    /// Writes the part's head as it goes upstream: with the sanitized filename when the policy renamed it.
    private func writeHead(of record: PartRecord, out: FormOutput) {
        guard let renamed = record.sanitizedFilename else {
            encoder?.withPartHead(record.part) { out.write($0) }
            return
        }
        var head = record.part
        head.filename = Array(renamed.utf8)
        encoder?.withPartHead(head) { out.write($0) }
    }

    private func partData(_ span: UnsafeRawBufferPointer, out: FormOutput) throws(FormStageError) {
        // The parser emits data only between partBegin and partEnd; a stage bug must still not trap.
        guard let cur = current else { throw .internalError("part data outside a part") }
        let action = observe(span, cur)
        if case .forward = action {} else {
            // Rare: the action may end the part.
            try apply(action, out: out)
            guard current != nil else { return }
        }
        // Judged before the span goes anywhere: markup found in it never reaches the upstream.
        if cur.markup != nil, let found = markupStep(cur, span) {
            try judgeMarkup(found, cur, out: out)
            guard current != nil else { return }
        }
        if cur.archiveProbe != nil || cur.archive != nil, let finding = archiveStep(cur, span) {
            try judgeArchive(finding, out: out)
        }
        guard let mode = current?.mode else { return }
        switch mode {
        case .stream: out.write(span)
        case .drop: break
        case .hold(let file):
            do { try file.write(span) } catch { throw .holdFailed("\(error)") }
        case .quarantine(let writer):
            do { try writer.write(span) } catch {
                writer.abort()
                throw .quarantineFailed("\(error)")
            }
        }
    }

    /// Whether a part (a file part or a field) gets a SHA-256.
    private func hashes(file: Bool) -> Bool {
        switch hashing {
        case .none: false
        case .files: file
        case .all: observe
        }
    }

    /// Feeds a span of part data to the part's record, hasher, text check, sniffer, held value and the policy;
    /// returns the policy's action. Touches no stored property but `evaluator` besides the part it is given.
    private func observe(_ span: UnsafeRawBufferPointer, _ cur: Current) -> PolicyEvaluator.Action {
        if !cur.record.part.isFile && cur.record.size < 256
            && (previewFields.map { set in !set.isEmpty && (cur.record.part.nameString.map(set.contains) ?? false) } ?? true) {
            let take = min(span.count, 256 - Int(cur.record.size))
            cur.record.preview = (cur.record.preview ?? "") + String(decoding: span.prefix(take), as: UTF8.self)
        }
        cur.record.size += UInt64(span.count)
        cur.hasher?.update(span)
        cur.text?.feed(span)
        var action = PolicyEvaluator.Action.forward
        if var ev = takeEvaluator() {
            action = ev.partData(count: span.count)
            // The sniffer sees the part's first bytes whatever its action so far (a stripped or quarantined
            // part too), so the type recorded and judged is the content's, never an unfed sniffer's.
            // Fed in place, so its buffer is not copied on every span.
            if cur.sniffer?.isDecided == false {
                cur.sniffer?.feed(span)
                if let result = cur.sniffer?.result {
                    cur.record.sniffedType = result.mimeType
                    if case .reject = action {} else { action = ev.partSniffed(sniffedFacts(result, cur)) }
                }
            }
            evaluatorSlot.put(consume ev)
        } else if cur.sniffer?.isDecided == false {
            cur.sniffer?.feed(span)
            cur.record.sniffedType = cur.sniffer?.result?.mimeType
        }
        if let held = cur.value?.count {
            if span.count <= cur.valueLimit - held { cur.value?.append(contentsOf: span) } else { cur.value = nil }
        }
        return action
    }

    /// Carries out a mid-part action.
    private func apply(_ action: PolicyEvaluator.Action, out: FormOutput) throws(FormStageError) {
        switch action {
        case .forward:
            return
        case .reject(let v):
            throw .rejected(v)
        case .strip, .quarantine:
            break
        }
        guard let cur = current else { return }
        switch action {
        case .forward, .reject:
            return
        case .strip(let v):
            switch cur.mode {
            case .stream:
                // Already flowing upstream: the only safe answer is to fail the request (fail closed).
                throw .rejected(v)
            case .hold(let file):
                file.close()
                cur.mode = .drop
            case .quarantine, .drop:
                break
            }
        case .quarantine(let v):
            switch cur.mode {
            case .stream:
                throw .rejected(v)
            case .hold(let file):
                let writer = try openQuarantine(cur.record.part, violations: [v])
                do { try copy(file, into: writer) } catch {
                    writer.abort()
                    throw .quarantineFailed("\(error)")
                }
                file.close()
                cur.mode = .quarantine(writer)
            case .drop:
                // A stripped part stays stripped.
                break
            case .quarantine:
                break
            }
        }
    }

    private func partEnd(out: FormOutput) throws(FormStageError) {
        // The part stays in `current` until its record is listed: `apply` and `recordFailedPart` read it there.
        guard let cur = current else { throw .internalError("part end outside a part") }
        if scanFiles, cur.record.part.isFile, case .hold(let file) = cur.mode, file === scanFile, file.size > 0 {
            guard let verdict = scanOutcome else {
                // Wait for the antivirus: the machine tells the driver the file is complete and comes back with
                // `scanFinished`.
                scanInputEnded = true
                awaitingVerdict = true
                blocked = true
                return
            }
            scanOutcome = nil
            scanFile = nil
            switch verdict {
            case .clean:
                cur.record.scan = "clean"
            case .infected(let signature):
                cur.record.scan = "infected: \(signature)"
                if var ev = takeEvaluator() {
                    let action = ev.partMalware(signature: signature)
                    evaluatorSlot.put(consume ev)
                    try apply(action, out: out)
                } else {
                    throw .rejected(Violation(kind: .malware, part: cur.record.part.nameString,
                                              partIndex: cur.record.index, detail: "\(signature) FOUND"))
                }
            case .failed(let reason):
                guard allowScanFailure else { throw .antivirusFailed(reason) }
                cur.record.scan = "unscanned"
                unscannedParts += 1
            }
        }
        var final = PolicyEvaluator.Action.forward
        // Taken, not copied, to be finished (a copy would share the sniffer's buffer, which finishing may change).
        if cur.sniffer?.isDecided == false, var sniffer = cur.sniffer.take() {
            let result = sniffer.finish()
            cur.record.sniffedType = result.mimeType
            cur.sniffer = sniffer
            if var ev = takeEvaluator() {
                let action = ev.partSniffed(sniffedFacts(result, cur))
                evaluatorSlot.put(consume ev)
                try apply(action, out: out)
            }
        }
        if cur.markup != nil, let found = markupStep(cur, nil) {
            try judgeMarkup(found, cur, out: out)
        }
        if cur.archiveProbe != nil || cur.archive != nil, let finding = archiveEnd(cur) {
            try judgeArchive(finding, out: out)
        }
        if let mode = cur.disarm, case .hold(let file) = cur.mode, file.size > 0,
           let kind = Self.disarmKind(cur.record.sniffedType) {
            do {
                let (rewritten, removed) = try disarm(file, kind: kind, mode: mode)
                file.close()
                cur.mode = .hold(rewritten)
                cur.record.disarmed = removed
                if !removed.isEmpty { modified = true }
            } catch {
                guard var ev = takeEvaluator() else { throw .holdFailed("\(error)") }
                let action = ev.partDisarmFailed(detail: "\(error)")
                evaluatorSlot.put(consume ev)
                try apply(action, out: out)
            }
        }
        if let text = cur.text, var ev = takeEvaluator() {
            cur.record.part.anomalies.formUnion(PolicyEvaluator.textFlags(text))
            let action = ev.fieldText(text)
            evaluatorSlot.put(consume ev)
            try apply(action, out: out)
        }
        if var ev = takeEvaluator() {
            if let value = cur.value, cur.pending.contains(.value) {
                cur.record.part.anomalies.formUnion(ev.valueFlags(value))
                let action = ev.fieldValue(value)
                evaluatorSlot.put(consume ev)
                try apply(action, out: out)
                guard let updated = takeEvaluator() else { throw .internalError("evaluator lost") }
                ev = updated
            }
            final = ev.partEnd()
            evaluatorSlot.put(consume ev)
        }
        cur.record.sha256 = cur.hasher?.finalizeHex()
        try apply(final, out: out)
        current = nil
        switch cur.mode {
        case .stream:
            cur.record.action = cur.record.sanitizedFilename == nil ? "forward" : "sanitize"
        case .drop:
            cur.record.action = "strip"
            modified = true
        case .hold(let file):
            cur.record.action = cur.record.disarmed != nil ? "disarm"
                : cur.record.sanitizedFilename == nil ? "forward" : "sanitize"
            writeHead(of: cur.record, out: out)
            if encoder != nil && file.size > 0 {
                if out.enqueue(file) { blocked = true }
            } else {
                file.close()
            }
        case .quarantine(let writer):
            cur.record.action = "quarantine"
            modified = true
            var meta = quarantineMeta(cur.record.part, violations: violationsFor(index: cur.record.index))
            meta.sniffedType = cur.record.sniffedType
            do {
                let item = try writer.commit(meta)
                cur.record.quarantineID = item.id
            } catch {
                writer.abort()
                throw .quarantineFailed("\(error)")
            }
        }
        // Moved into the list rather than copied (a copy costs a retain and a release per string it holds).
        records.append(moveOut(&cur.record, leaving: .empty))
        cur.clear()
        spare = cur
    }

    // MARK: Disarm

    /// The disarmer for a sniffed type; nil for types `disarm` leaves as they are.
    static func disarmKind(_ sniffed: String?) -> DisarmKind? {
        switch sniffed {
        case "image/jpeg": return .jpeg
        case "image/png": return .png
        case "image/gif": return .gif
        case "image/webp": return .webp
        case "image/svg+xml": return .svg
        default: return nil
        }
    }

    /// Rewrites a held file through its disarmer into a new held file (bounded memory: chunk by chunk). What the
    /// disarmer emits is gathered into 64 KiB writes: it emits short spans (a JPEG's every FF00 pair, a GIF's every
    /// sub-block size byte), one write each before.
    private func disarm(_ file: TemporaryFile, kind: DisarmKind, mode: DisarmMode) throws
        -> (TemporaryFile, [String]) {
        let output = try TemporaryFile(directory: spoolDirectory)
        let disarmer = makeDisarmer(for: kind, svgMode: mode == .reject ? .reject : .strip)
        let gathered = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { gathered.deallocate() }
        var used = 0
        var writeError: Error?
        let write: (UnsafeRawBufferPointer) -> Void = { bytes in
            guard writeError == nil else { return }
            do { try output.write(bytes) } catch { writeError = error }
        }
        let emit: (UnsafeRawBufferPointer) -> Void = { bytes in
            if used + bytes.count > gathered.count {
                write(UnsafeRawBufferPointer(rebasing: gathered[0..<used]))
                used = 0
            }
            if bytes.count >= gathered.count {
                write(bytes)
            } else if let from = bytes.baseAddress, let into = gathered.baseAddress {
                (into + used).copyMemory(from: from, byteCount: bytes.count)
                used += bytes.count
            }
        }
        do {
            try file.forEachChunk { try disarmer.feed($0, emit: emit) }
            try disarmer.finish(emit: emit)
            write(UnsafeRawBufferPointer(rebasing: gathered[0..<used]))
            if let writeError { throw writeError }
            for patch in disarmer.patches {
                try patch.bytes.withUnsafeBytes { try output.overwrite($0, at: UInt64(patch.offset)) }
            }
        } catch {
            output.close()
            throw error
        }
        return (output, disarmer.removed)
    }

    // MARK: Embedded markup

    /// Feeds one span of a file part (nil: the part ended) to its whole-part markup scan and returns a finding
    /// once it counts: server-side markup at once, an HTML tag once the sniffer found the part not to be markup.
    /// A part whose sniffed prefix carried markup first was judged by the sniffer (one finding either way).
    private func markupStep(_ cur: Current, _ span: UnsafeRawBufferPointer?) -> MarkupFinding? {
        if let span { cur.markup?.feed(span) } else { cur.markup?.finish() }
        if cur.markup?.judgesHTML == nil {
            if let sniffer = cur.sniffer {
                if let result = sniffer.result {
                    if result.ruleFacts.embeddedMarkup != nil {
                        cur.markup = nil
                        return nil
                    }
                    cur.markup?.judgeHTML(result.kind.category != .markup)
                }
            } else {
                cur.markup?.judgeHTML(true)
            }
        }
        guard let found = cur.markup?.finding else { return nil }
        cur.markup = nil
        cur.markupReported = true
        return found
    }

    /// The sniffed facts the evaluator judges, without the prefix's markup once the whole-part scan reported it.
    private func sniffedFacts(_ result: SniffResult, _ cur: Current) -> SniffedContent {
        var facts = result.ruleFacts
        if cur.markupReported { facts.embeddedMarkup = nil }
        return facts
    }

    /// A markup finding becomes the violation `embedded_markup`, handled with the rule's action.
    private func judgeMarkup(_ found: MarkupFinding, _ cur: Current, out: FormOutput) throws(FormStageError) {
        guard var ev = takeEvaluator() else { return }
        let what = cur.sniffer?.result.map { "sniffed \($0.kind.label)" } ?? "content"
        let action = ev.partMarkup(detail: "\(what) carrying \(found)")
        evaluatorSlot.put(consume ev)
        try apply(action, out: out)
    }

    // MARK: Archives

    /// Feeds one span of a file part to its archive inspection: first the probe (until the format is known from
    /// at most 512 bytes), then the inspector. A finding ends the inspection.
    private func archiveStep(_ cur: Current, _ span: UnsafeRawBufferPointer) -> ArchiveFinding? {
        if let inspector = cur.archive {
            guard let finding = inspector.feed(span) else { return nil }
            cur.archive = nil
            return finding
        }
        guard let settings = cur.archiveSettings, var probe = cur.archiveProbe.take() else { return nil }
        let take = min(512 - probe.count, span.count)
        probe.append(contentsOf: span.prefix(take))
        let format = probe.withUnsafeBytes { ArchiveInspector.format(sniffing: $0) }
        // zip and gzip announce themselves in their first bytes; tar needs its header's 262.
        if probe.count < 512 && (format == nil || format == .tar) && probe.count < 262 {
            cur.archiveProbe = probe
            return nil
        }
        guard let format else { return nil }
        let inspector = ArchiveInspector(format: format, limits: ArchiveLimits(settings), members: memberChecks())
        if let finding = inspector.feed(probe) { return finding }
        if take < span.count, let finding = inspector.feed(UnsafeRawBufferPointer(rebasing: span[take...])) {
            return finding
        }
        cur.archive = inspector
        return nil
    }

    /// The part ended: an undecided probe is judged on what arrived; the inspector checks the archive's end.
    private func archiveEnd(_ cur: Current) -> ArchiveFinding? {
        if let settings = cur.archiveSettings, let probe = cur.archiveProbe.take() {
            guard let format = probe.withUnsafeBytes({ ArchiveInspector.format(sniffing: $0) }) else { return nil }
            let inspector = ArchiveInspector(format: format, limits: ArchiveLimits(settings), members: memberChecks())
            return inspector.feed(probe) ?? inspector.finish()
        }
        guard let inspector = cur.archive else { return nil }
        cur.archive = nil
        return inspector.finish()
    }

    /// What the current part's rule says of archive members beyond the archive settings: their names get the
    /// filename checks, and their content the markup scan under `deny-embedded-markup`. Read only once an archive
    /// was found (most files are not).
    private func memberChecks() -> ArchiveMemberChecks {
        guard let ev = takeEvaluator() else { return ArchiveMemberChecks() }
        let checks = ArchiveMemberChecks(name: ev.currentMemberNameCheck,
                                         markupShortTags: ev.currentMarkupScanShortTags)
        evaluatorSlot.put(consume ev)
        return checks
    }

    /// An archive finding becomes the violation `archive_<problem>`, handled with the rule's action.
    private func judgeArchive(_ finding: ArchiveFinding, out: FormOutput) throws(FormStageError) {
        guard var ev = takeEvaluator() else { return }
        let detail = finding.entry.map { "\($0): \(finding.detail)" } ?? finding.detail
        let action = ev.partArchive(ArchiveProblemKind(finding.problem), detail: detail)
        evaluatorSlot.put(consume ev)
        try apply(action, out: out)
    }

    // MARK: Quarantine

    private func openQuarantine(_ part: MultipartPart, violations: [Violation]) throws(FormStageError)
        -> QuarantineWriter
    {
        guard let quarantine else {
            throw .quarantineFailed("no quarantine store configured (--quarantine-dir)")
        }
        do {
            return try quarantine.store.begin(quarantineMeta(part, violations: violations))
        } catch {
            throw .quarantineFailed("\(error)")
        }
    }

    private func quarantineMeta(_ part: MultipartPart, violations: [Violation]) -> QuarantineMeta {
        QuarantineMeta(requestID: quarantine?.requestID ?? "", route: quarantine?.route, client: quarantine?.client ?? "",
                       partName: part.name ?? [], filename: part.filename, declaredType: part.contentTypeString,
                       violations: violations.map {
                           QuarantineViolation(kind: $0.kind.name, detail: $0.detail,
                                               rule: $0.rule.map { "\($0.file):\($0.line)" })
                       })
    }

    private func violationsFor(index: Int) -> [Violation] {
        (evaluator?.findings ?? []).map(\.violation).filter { $0.partIndex == index }
    }

    private func copy(_ file: TemporaryFile, into writer: QuarantineWriter) throws {
        try file.forEachChunk { try writer.write($0) }
    }
}

extension SniffResult {
    /// What the evaluator judges: MIME type, label, category and any embedded markup (`deny-embedded-markup`):
    /// PHP anywhere in the prefix (a polyglot's image kind is in `disguisedAs`), or an HTML tag in non-markup.
    var ruleFacts: SniffedContent {
        var markup: String?
        if kind == .php {
            markup = disguisedAs.map { "PHP code (behind a \($0.label) header)" } ?? "PHP code"
        } else if flags.contains(.embeddedHTML) {
            markup = "an HTML tag"
        }
        return SniffedContent(mimeType: mimeType, label: kind.label, category: category.name, embeddedMarkup: markup)
    }
}

extension ArchiveLimits {
    /// The inspector's limits from a rule's `archive-*` settings.
    init(_ settings: ArchiveSettings) {
        self.init()
        entriesMax = settings.entriesMax
        totalMax = settings.sizeMax
        ratioMax = settings.ratioMax
        depthMax = settings.depthMax
        forbiddenExtensions = Set(settings.denyExtensions)
        allowEncrypted = settings.allowEncrypted
        allowExecutables = settings.allowExecutables
    }
}

extension ArchiveProblemKind {
    init(_ problem: ArchiveProblem) {
        switch problem {
        case .tooManyEntries: self = .tooManyEntries
        case .tooLarge: self = .tooLarge
        case .ratio: self = .bomb
        case .tooDeep: self = .tooDeep
        case .forbiddenMember: self = .forbiddenMember
        case .executableMember: self = .executableMember
        case .encrypted: self = .encrypted
        case .traversal: self = .traversal
        case .duplicate: self = .duplicate
        case .centralDirectoryMismatch: self = .mismatch
        case .malformed: self = .malformed
        }
    }
}
