import Multipart
import Rules

// application/x-www-form-urlencoded bodies under a policy: decoded field by field as they stream, checked
// with the same field rules as multipart parts, and re-encoded canonically (`name=value&…`, RFC 3986
// unreserved bytes literal, space as `+`, everything else `%XX`). A field is held in memory until its `&`,
// bounded by `maxFieldBytes`; stripped fields are never written.

/// The urlencoded body stage.
public final class UrlencodedStage {
    /// Largest decoded name or value held at once (default 1 MiB); a longer one is refused (413).
    public let maxFieldBytes: Int
    public private(set) var evaluator: PolicyEvaluator
    public private(set) var records: [PartRecord] = []
    public private(set) var modified = false
    private var name: [UInt8] = []
    private var value: [UInt8] = []
    private var inValue = false
    private var percent: (count: Int, high: UInt8) = (0, 0)
    private var wroteAny = false
    private var sawBytes = false
    private var finished = false
    /// Raw body bytes fed so far (the offset reported for a bad escape).
    private var offset: UInt64 = 0

    /// `reencode off`: the body is parsed and judged as usual, but each field's original bytes (with its `&`)
    /// are written instead of the canonical encoding, so the upstream gets the client's bytes unchanged. A
    /// field the rules would strip cannot be left out of unchanged bytes: the request is rejected instead.
    public let verbatim: Bool
    /// The original bytes of the field being parsed (at most about 3 × `maxFieldBytes`), in verbatim mode.
    private var rawField: [UInt8] = []

    public init(evaluator: PolicyEvaluator, maxFieldBytes: Int = 1 << 20, verbatim: Bool = false) {
        self.evaluator = evaluator
        self.maxFieldBytes = maxFieldBytes
        self.verbatim = verbatim
    }

    /// Counts raw body bytes against body-max.
    public func bodyData(count: Int) throws(FormStageError) {
        if case .reject(let v) = evaluator.bodyData(count: count) { throw .rejected(v) }
    }

    /// Counts `chunk` against `body-max` and parses it, the bytes up to the limit before the limit itself, so
    /// that the verdict does not depend on how the body was cut into reads (see `FormStage.feedBody`).
    public func feedBody(_ chunk: UnsafeRawBufferPointer, out: FormOutput) throws(FormStageError) {
        let (room, action) = evaluator.bodyDataWithinLimit(count: chunk.count)
        if case .reject(let v) = action { throw .rejected(v) }
        if room > 0 { try feed(UnsafeRawBufferPointer(rebasing: chunk[..<room]), out: out) }
        guard room < chunk.count else { return }
        let rest = UnsafeRawBufferPointer(rebasing: chunk[room...])
        try bodyData(count: rest.count)
        try feed(rest, out: out)
    }

    /// Feeds one chunk of the raw body.
    public func feed(_ chunk: UnsafeRawBufferPointer, out: FormOutput) throws(FormStageError) {
        guard !finished else { throw .internalError("urlencoded feed after finish") }
        for c in chunk {
            if verbatim { rawField.append(c) }
            sawBytes = true
            offset += 1
            if percent.count > 0 {
                guard let h = Self.hex(c) else {
                    let shown = c >= 0x21 && c < 0x7F ? "'\(Character(Unicode.Scalar(c)))'" : ("byte 0x" + String(c, radix: 16, uppercase: true))
                    throw malformed("invalid percent escape: \(shown) is not a hex digit (body byte \(offset))")
                }
                if percent.count == 1 { percent = (2, h) } else {
                    try append(percent.high << 4 | h)
                    percent = (0, 0)
                }
                continue
            }
            switch c {
            case UInt8(ascii: "&"):
                try endField(out: out)
            case UInt8(ascii: "=") where !inValue:
                inValue = true
            case UInt8(ascii: "%"):
                percent = (1, 0)
            case UInt8(ascii: "+"):
                try append(0x20)
            default:
                try append(c)
            }
        }
    }

    /// Ends the body: the last field, then the policy's end-of-request checks.
    public func finish(out: FormOutput) throws(FormStageError) {
        guard !finished else { throw .internalError("urlencoded finish called twice") }
        finished = true
        guard percent.count == 0 else { throw malformed("truncated percent escape at the end of the body") }
        try endField(out: out)
        flushVerbatim(out: out)
        if case .reject(let v) = evaluator.end() { throw .rejected(v) }
    }

    /// A malformed body: 400 `malformed_body`, the same kind and detail for the client and the audit log.
    private func malformed(_ detail: String) -> FormStageError {
        if case .reject(let v) = evaluator.malformed(detail: detail) { return .rejected(v) }
        // Unreachable in enforce mode; in monitor mode a body that cannot be decoded still cannot be forwarded.
        return .rejected(Violation(kind: .malformedBody, detail: detail))
    }

    private func append(_ byte: UInt8) throws(FormStageError) {
        if inValue {
            guard value.count < maxFieldBytes else { throw .rejected(tooLarge()) }
            value.append(byte)
        } else {
            guard name.count < maxFieldBytes else { throw .rejected(tooLarge()) }
            name.append(byte)
        }
    }

    private func tooLarge() -> Violation {
        Violation(kind: .fieldTooLarge, part: String(decoding: name, as: UTF8.self), partIndex: records.count,
                  detail: "urlencoded field over the \(maxFieldBytes)-byte buffer", limit: UInt64(maxFieldBytes))
    }

    private func endField(out: FormOutput) throws(FormStageError) {
        defer {
            name.removeAll(keepingCapacity: true)
            value.removeAll(keepingCapacity: true)
            inValue = false
        }
        guard !name.isEmpty || !value.isEmpty || inValue else {   // `a&&b`: empty pairs are skipped
            flushVerbatim(out: out)
            return
        }
        let nameString = String(decoding: name, as: UTF8.self)
        var record = PartRecord(index: records.count, part: .init(name: name))
        record.size = UInt64(value.count)
        record.preview = String(decoding: value.prefix(256), as: UTF8.self)
        var nameText = UTF8Validity()
        nameText.feed(name)
        var flags = MultipartAnomalies()
        if !nameText.isComplete { flags.insert(.invalidUTF8) }
        let decision = evaluator.partBegin(index: record.index, name: nameString, filename: nil, declaredType: nil,
                                           anomalies: flags)
        flags.formUnion(decision.flags)
        var action = decision.action
        if action == .forward { action = evaluator.partData(count: value.count) }
        if action == .forward {
            var text = UTF8Validity()
            text.feed(value)
            flags.formUnion(PolicyEvaluator.textFlags(text))
            action = evaluator.fieldText(text)
        }
        if action == .forward && decision.pending.contains(.value) {
            flags.formUnion(evaluator.valueFlags(value))
            action = evaluator.fieldValue(value)
        }
        record.part.anomalies = flags
        let final = evaluator.partEnd()
        if final != .forward { action = final }
        switch action {
        case .reject(let v):
            record.action = "reject"
            records.append(record)
            throw .rejected(v)
        case .strip where verbatim, .quarantine where verbatim:
            // Unchanged bytes cannot leave a field out: refuse the request with the violation that asked for it.
            record.action = "reject"
            records.append(record)
            var cause = evaluator.findings.last?.violation
                ?? Violation(kind: .internalError, part: nameString, partIndex: record.index, detail: "strip")
            cause.detail += " (reencode off: the body cannot be changed)"
            throw .rejected(cause)
        case .strip, .quarantine:
            // A urlencoded field has no file to keep: quarantine degrades to strip (recorded as such).
            record.action = "strip"
            modified = true
        case .forward where verbatim:
            flushVerbatim(out: out)
        case .forward:
            var encoded: [UInt8] = wroteAny ? [UInt8(ascii: "&")] : []
            Self.encode(name, into: &encoded)
            encoded.append(UInt8(ascii: "="))
            Self.encode(value, into: &encoded)
            encoded.withUnsafeBytes { out.write($0) }
            wroteAny = true
        }
        records.append(record)
    }

    /// Writes the original bytes parsed so far (verbatim mode only).
    private func flushVerbatim(out: FormOutput) {
        guard verbatim, !rawField.isEmpty else { return }
        rawField.withUnsafeBytes { out.write($0) }
        rawField.removeAll(keepingCapacity: true)
    }

    static func encode(_ bytes: [UInt8], into out: inout [UInt8]) {
        let digits = Array("0123456789ABCDEF".utf8)
        for b in bytes {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: "*"):
                out.append(b)
            case 0x20:
                out.append(UInt8(ascii: "+"))
            default:
                out.append(UInt8(ascii: "%"))
                out.append(digits[Int(b >> 4)])
                out.append(digits[Int(b & 15)])
            }
        }
    }

    static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }
}
