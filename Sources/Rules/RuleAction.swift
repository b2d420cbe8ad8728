/// What happens to a part that breaks a field or file rule (`action …;`). The default is `reject`.
public enum RuleAction: String, Sendable, Hashable, CaseIterable {
    /// Fail the whole request with the violation's status.
    case reject
    /// Drop the part from the body sent upstream; the request continues.
    case strip
    /// Divert the part into the quarantine store; the request continues without it.
    case quarantine
    /// Forward the part and record the violation.
    case log
}

/// What happens when the multipart parser reports an anomaly flag (`anomaly <flag> …;`).
public enum AnomalyAction: String, Sendable, Hashable, CaseIterable {
    /// Fail the request with 400 `anomaly_<flag>`.
    case reject
    /// Forward and record the anomaly.
    case log
    /// Forward without recording anything.
    case allow
    /// Leave the part out and record it (only flags with `MultipartAnomaly.canStrip`).
    case strip
}

/// What happens to a part that no field or file rule names (`unknown …;`). The default is `reject`.
public enum UnknownAction: String, Sendable, Hashable, CaseIterable {
    /// Fail the request with 403 `unknown_part`.
    case reject
    /// Drop the part and record it.
    case strip
    /// Forward the part without recording anything.
    case allow
}

/// How a route's re-encoded body travels to the upstream (`upstream-body …;`). Unset: the proxy's
/// `--upstream-body` option (default `chunked`).
public enum UpstreamBodyMode: String, Sendable, Hashable, CaseIterable {
    /// Streamed with `Transfer-Encoding: chunked` as it is parsed. A rejected request never reaches the
    /// upstream complete: its last chunk is never sent and the connection is closed.
    case chunked
    /// Chunked, but each file part with a verdict still pending (size, type) is held in a 0600 temporary file
    /// and released only once it passed: a rejected file never reaches the upstream at all.
    case hold
    /// The whole body is staged in a 0600 temporary file and sent with a `Content-Length` once complete:
    /// the upstream sees nothing of a rejected request (and frameworks that refuse chunked bodies work).
    case spool
}

/// What a route does with a CORS preflight (`preflight …;`): an `OPTIONS` request with `Origin` and
/// `Access-Control-Request-Method` and no body. The default is `pass`.
public enum PreflightMode: String, Sendable, Hashable, CaseIterable {
    /// Forwarded to the upstream whatever `methods` says: the application answers CORS.
    case pass
    /// Judged like any request: 405 unless `methods` lists `OPTIONS`.
    case reject
}

/// `ambiguous-paths reject|pass;` (docs/rules.md, *Ambiguous paths*).
public enum AmbiguousPaths: String, Sendable, Hashable, CaseIterable {
    /// A path that some backend reads as another route's path is refused: 400 `ambiguous_path`.
    case reject
    /// Routed by formwall's own reading alone (`Policy.normalize(path:)`).
    case pass
}

/// How filename problems are handled (`filename …;`). The default is `reject`.
public enum FilenameHandling: String, Sendable, Hashable, CaseIterable {
    /// A problematic filename is a violation, handled with the rule's action.
    case reject
    /// Rewrite the filename with `FilenameCheck.sanitize`; problems sanitizing cannot fix
    /// (a dangerous extension, a reserved device name) are still violations.
    case sanitize
    /// Do not check filenames at all.
    case allow
}

/// Whether violations are enforced or only recorded (`mode …;`). The default is `enforce`.
public enum PolicyMode: String, Sendable, Hashable, CaseIterable {
    /// Carry out every decision.
    case enforce
    /// Forward everything; record what `enforce` would have done.
    case monitor
}

extension CaseIterable where Self: RawRepresentable, RawValue == String {
    /// `a, b or c`, for diagnostics.
    static var choices: String {
        let names = allCases.map(\.rawValue)
        // Unreachable: every CaseIterable used here has cases (and this formats rule-file diagnostics).
        return names.dropLast().joined(separator: ", ") + " or " + names.last!
    }
}

/// Whether a route's form bodies are re-encoded canonically (`reencode on|off`).
public enum ReencodeMode: String, Sendable, Hashable, CaseIterable {
    /// The default: the upstream gets Formwall's canonical encoding of what it parsed and judged.
    case on
    /// Urlencoded bodies are parsed and judged but forwarded byte for byte (for HMAC-signed webhooks). The
    /// upstream's parse may differ from Formwall's (a parser differential); a change the rules ask for
    /// (strip) becomes a rejection. Multipart bodies cannot be sent unchanged: such a route must not accept them.
    case off
}

/// What a route does with a request body whose Content-Encoding Formwall cannot decode (`unknown-encoding …;`,
/// e.g. `br`, `zstd`). The default is `reject` (415 `encoding_not_supported`).
public enum UnknownEncodingMode: String, Sendable, Hashable, CaseIterable {
    /// 415 `encoding_not_supported`.
    case reject
    /// Forwarded byte for byte, uninspected, with its Content-Encoding; the audit record says so
    /// (anomaly `encoding-uninspected`).
    case pass
}
