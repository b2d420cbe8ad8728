import Audit
import HTTP1
import Multipart
import Rules

extension ConnectionMachine {
    /// The one audit record of an exchange; nil without an audit log and without metrics (`--admin`).
    func auditRecord(_ ex: Exchange, status: Int, reason: String?, error: String?,
                     violation: Violation? = nil) -> AuditRecord? {
        guard config.buildsAuditRecords else { return nil }
        let evaluator = ex.form?.evaluator ?? ex.urlencoded?.evaluator ?? ex.body?.evaluator ?? ex.evaluator
        let monitoring = evaluator?.mode == .monitor
        // The decision follows what happened, never a guess from the status alone.
        let decision: AuditRecord.Decision
        if violation != nil {
            decision = .reject
        } else if let error {
            if ex.responseStarted || status == 499 || error == "client_closed" || error == "client_reset"
                || error == "client_aborted" {
                decision = .aborted
            } else {
                decision = status >= 500 ? .error : .reject
            }
        } else if monitoring && !(evaluator?.findings.isEmpty ?? true) {
            decision = .monitor
        } else {
            decision = (ex.form?.modified ?? ex.urlencoded?.modified ?? false) ? .modified : .allow
        }
        var anomalies = ex.form?.parser.anomalies ?? MultipartAnomalies()
        // A `reencode off` body went upstream byte for byte: every such request says so.
        let reencodeOff = (ex.urlencoded?.verbatim == true ? ["reencode-off"] : [])
            + (ex.encodingUninspected ? ["encoding-uninspected"] : [])
            + ((ex.form?.unscannedParts ?? 0) > 0 ? ["antivirus-unscanned"] : [])
        let parts: [AuditRecord.Part] = (ex.form?.records ?? ex.urlencoded?.records ?? []).map { r in
            anomalies.formUnion(r.part.anomalies)
            return AuditRecord.Part(
                index: r.index, name: AuditText(bytes: r.part.name ?? []), kind: r.part.isFile ? .file : .field,
                filename: r.part.filename.map { AuditText(bytes: $0) }, declaredType: r.part.contentTypeString,
                sniffedType: r.sniffedType, size: Int(clamping: r.size), sha256: r.part.isFile ? r.sha256 : nil,
                action: r.action, quarantineID: r.quarantineID, disarmed: r.disarmed)
        }
        var violations = (evaluator?.findings ?? []).map { f in
            AuditRecord.Violation(kind: f.violation.kind.name, part: f.violation.partIndex,
                                  rule: f.violation.rule.map { "\($0.file):\($0.line)" }, detail: f.violation.detail,
                                  outcome: f.outcome.rawValue, enforced: f.enforced)
        }
        // A violation the machine found itself (a content coding, a ratio) is listed too.
        if let violation, !violations.contains(where: { $0.kind == violation.kind.name }) {
            violations.append(AuditRecord.Violation(
                kind: violation.kind.name, part: violation.partIndex,
                rule: violation.rule.map { "\($0.file):\($0.line)" }, detail: violation.detail,
                outcome: "reject", enforced: true))
        }
        // `monitor`: what enforce mode would have refused the request for, and with which status; `modified`:
        // the first change made. (docs/operations.md, `reason` and `would_status`)
        let wouldReject = decision == .monitor ? evaluator?.wouldReject : nil
        let decidedBy = decision == .monitor || decision == .modified ? wouldReject ?? evaluator?.firstModification : nil
        let matched = evaluator?.matchedRoutePrefix
        var fields: [AuditRecord.Field]?
        if let wanted = config.audit?.fields, !wanted.isEmpty {
            fields = (ex.form?.records ?? ex.urlencoded?.records ?? []).compactMap { r in
                guard !r.part.isFile, let name = r.part.nameString, wanted.contains(name), let value = r.preview else {
                    return nil
                }
                return AuditRecord.Field(name: AuditText(name), value: AuditText(value))
            }
        }
        // Body bytes that really left: the whole payload once everything was written, else no more than the
        // kernel accepted (queued bytes of a rejected or failed request are not counted).
        let payload = ex.body?.sink.payloadBytes ?? 0
        let allSent = ex.requestComplete && !ex.bodyDiscarded && ex.body?.sink.sending == nil
            && upstreamOut.isEmpty && ex.upstreamAccepted > 0
        let sent = allSent ? payload : min(payload, ex.upstreamAccepted)
        // The record is built as the upstream's part ends (its response's last byte, a failure, a cut): `now` is
        // that end. Times of the attempt that answered count from its dial, as nginx's $upstream_*_time do.
        let attempt = ex.connectStartedAt ?? ex.upstreamStartedAt
        func ms(_ from: UInt64?, _ to: UInt64?) -> Double? {
            guard let from, let to else { return nil }
            return Double(to &- from) / 1e6
        }
        let contacted = ex.upstreamStartedAt == nil ? nil : now
        return AuditRecord(
            timestamp: context.timestamp(), requestID: ex.requestID, client: ex.forwardedClient ?? peer,
            tls: tlsInfo,
            method: ex.head.method,
            path: AuditText(ex.head.target), route: matched, decision: decision, status: status,
            reason: violation?.kind.name ?? reason ?? decidedBy?.kind.name, wouldStatus: wouldReject?.status, bytesIn: Int(clamping: ex.body?.bytesIn ?? 0),
            bytesUpstream: Int(clamping: sent), durationMs: Double(now &- ex.startedAt) / 1e6,
            clientBodyMs: ms(ex.startedAt, ex.requestCompletedAt),
            upstreamMs: ms(ex.upstreamStartedAt, contacted),
            upstreamConnectMs: ms(ex.connectStartedAt, ex.upstreamConnectedAt),
            upstreamHeaderMs: ms(attempt, ex.upstreamHeadAt),
            upstreamResponseMs: ms(attempt, contacted),
            upstream: ex.upstreamStartedAt == nil ? nil : serverName(ex),
            parts: parts, violations: violations, anomalies: anomalies.names + reencodeOff, fields: fields, error: error)
    }

    /// The record's `tls` member.
    var tlsInfo: TLSInfo? {
        secureFacts.map { TLSInfo(version: $0.version, cipher: $0.cipher, serverName: $0.serverName,
                                  clientSubject: $0.clientSubject) }
    }

    /// A request refused before its head could be parsed still gets a record.
    func headErrorRecord(status: Int, kind: String, requestID: String) -> AuditRecord? {
        guard config.buildsAuditRecords else { return nil }
        return AuditRecord(timestamp: context.timestamp(), requestID: requestID, client: peer, tls: tlsInfo, method: "-", path: "-",
                           route: nil, decision: .reject, status: status, reason: kind, error: kind)
    }
}
