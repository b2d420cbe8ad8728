import Multipart

extension PolicyEvaluator {
    /// What the proxy does with a part (or the request) now. `log` decisions are `forward`.
    public enum Action: Sendable, Hashable {
        /// Send it upstream.
        case forward
        /// Leave the part out of the body sent upstream; the request continues.
        indirect case strip(Violation)
        /// Move the part into quarantine instead of sending it upstream; the request continues.
        indirect case quarantine(Violation)
        /// Fail the whole request with `violation.status`; send nothing more upstream.
        indirect case reject(Violation)

        /// The violation behind a non-forward action.
        public var violation: Violation? {
            switch self {
            case .forward: return nil
            case .strip(let violation), .quarantine(let violation), .reject(let violation): return violation
            }
        }

        /// Severity order: forward < strip < quarantine < reject.
        var rank: Int {
            switch self {
            case .forward: return 0
            case .strip: return 1
            case .quarantine: return 2
            case .reject: return 3
            }
        }
    }

    /// How the proxy should read the body of a request `begin` accepted.
    public enum BodyKind: Sendable, Hashable {
        /// No body (Content-Length 0): call `end()` next.
        case none
        /// Parse as multipart (any `multipart/*` type) and feed parts.
        case multipart
        /// Decode as `application/x-www-form-urlencoded` and feed each field as a part with no filename.
        case urlencoded
        /// Not a form: stream it through, feeding `bodyData(count:)` for `body-max`.
        case opaque
    }

    /// The answer to `begin`: reject before reading a body byte, or how to read the body.
    public enum BeginDecision: Sendable, Hashable {
        /// Answer with `violation.status` now (405, 400 from `require-header`, 415, 413 from Content-Length).
        case reject(Violation)
        /// Read the body this way.
        case proceed(BodyKind)
    }

    /// Checks on a part that can only be decided later.
    public struct PendingChecks: OptionSet, Sendable, Hashable {
        /// The raw value.
        public let rawValue: UInt8
        /// Creates a set from its raw value.
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// The rule has a `max` (`partData(count:)` may still cross it) or a `min` (judged by `partEnd()`).
        public static let size = PendingChecks(rawValue: 1 << 0)
        /// Types or a type mismatch must be checked: call `partSniffed(type:)` with the first bytes' type.
        public static let type = PendingChecks(rawValue: 1 << 1)
        /// The field has a `pattern`: buffer the value (bounded by `max`) and call `fieldValue(_:)`.
        public static let value = PendingChecks(rawValue: 1 << 2)
    }

    /// The answer to `partBegin`.
    public struct PartDecision: Sendable, Hashable {
        /// What to do with the part as far as is known now.
        public var action: Action
        /// Checks still to come; empty or a non-forward action means `action` is final.
        public var pending: PendingChecks
        /// When set, forward the part with this filename instead of the one sent (`filename sanitize`).
        public var filename: String?
        /// Whether the proxy must hold the part's data (stage it) until `partEnd`, because a pending
        /// check may still strip or quarantine it. When false, streaming it upstream is safe: a
        /// later failure can only reject the whole request.
        public var mustHold: Bool
        /// The semantic anomaly flags the part raised (`duplicate-name`, `name-brackets`, …), for its record.
        public var flags = MultipartAnomalies()

        /// Whether `action` can no longer change.
        public var isFinal: Bool { pending.isEmpty || action != .forward }
    }

    /// What the evaluator decided about one violation, kept for the audit log.
    public struct Finding: Sendable, Hashable {
        /// What was carried out (or, in monitor mode, would have been).
        public enum Outcome: String, Sendable, Hashable {
            /// The request was failed.
            case reject
            /// The part was left out.
            case strip
            /// The part went to quarantine.
            case quarantine
            /// Recorded only.
            case log
            /// The filename was rewritten.
            case sanitize
        }

        /// The violation.
        public var violation: Violation
        /// The decision.
        public var outcome: Outcome
        /// False in monitor mode: the outcome was not carried out.
        public var enforced: Bool
    }
}

extension PolicyEvaluator {
    /// In monitor mode, the first violation enforce mode would have refused the request for (its kind is the
    /// audit record's `reason`, its status the `would_status`); nil in enforce mode.
    public var wouldReject: Violation? {
        findings.first { !$0.enforced && $0.outcome == .reject }?.violation
    }

    /// The first violation that changed (or, in monitor mode, would have changed) a part: strip, quarantine or
    /// a sanitised filename. The audit record's `reason` for `modified`, and for `monitor` when nothing would
    /// have been refused.
    public var firstModification: Violation? {
        findings.first { $0.outcome == .strip || $0.outcome == .quarantine || $0.outcome == .sanitize }?.violation
    }
}
