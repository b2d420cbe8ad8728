// Renders an AuditRecord as one JSON line. Member order is fixed so lines are easy to scan
// and diff; the schema is documented in docs/operations.md.

extension AuditRecord {
    /// Appends this record as one JSON object followed by `\n` to `writer`.
    public func render(into writer: inout JSONLineWriter) {
        writer.beginObject()
        writer.key("ts")
        writer.string(timestamp.rfc3339)
        writer.key("request_id")
        writer.string(requestID)
        writer.key("client")
        writer.string(client)
        writer.key("tls")
        if let tls {
            writer.beginObject()
            writer.key("version")
            writer.string(tls.version)
            writer.key("cipher")
            writer.string(tls.cipher)
            writer.key("sni")
            writer.string(tls.serverName)
            writer.key("client_subject")
            writer.string(tls.clientSubject)
            writer.endObject()
        } else {
            writer.null()
        }
        writer.key("method")
        writer.string(method)
        writer.key("path")
        writer.string(bytes: path.bytes)
        writer.key("route")
        writer.string(route)
        writer.key("decision")
        writer.string(decision.rawValue)
        writer.key("status")
        writer.int(status)
        writer.key("reason")
        writer.string(reason)
        writer.key("would_status")
        writer.int(wouldStatus)
        writer.key("bytes_in")
        writer.int(bytesIn)
        writer.key("bytes_upstream")
        writer.int(bytesUpstream)
        writer.key("duration_ms")
        writer.milliseconds(durationMs)
        writer.key("client_body_ms")
        writer.milliseconds(clientBodyMs)
        writer.key("upstream_ms")
        writer.milliseconds(upstreamMs)
        writer.key("upstream_connect_ms")
        writer.milliseconds(upstreamConnectMs)
        writer.key("upstream_header_ms")
        writer.milliseconds(upstreamHeaderMs)
        writer.key("upstream_response_ms")
        writer.milliseconds(upstreamResponseMs)
        writer.key("upstream")
        writer.string(upstream)
        writer.key("parts")
        writer.beginArray()
        for part in parts { part.render(into: &writer) }
        writer.endArray()
        writer.key("violations")
        writer.beginArray()
        for violation in violations { violation.render(into: &writer) }
        writer.endArray()
        writer.key("anomalies")
        writer.beginArray()
        for anomaly in anomalies { writer.string(anomaly) }
        writer.endArray()
        if let fields {
            writer.key("fields")
            writer.beginArray()
            for field in fields {
                writer.beginObject()
                writer.key("name")
                writer.string(bytes: field.name.bytes)
                writer.key("value")
                writer.string(bytes: field.value.bytes)
                writer.key("truncated")
                writer.bool(field.truncated)
                writer.endObject()
            }
            writer.endArray()
        }
        writer.key("error")
        writer.string(error)
        writer.endObject()
        writer.endLine()
    }

    /// This record as one JSON line including the trailing `\n`.
    public var jsonLine: [UInt8] {
        var writer = JSONLineWriter()
        render(into: &writer)
        return writer.bytes
    }
}

extension AuditRecord.Part {
    fileprivate func render(into writer: inout JSONLineWriter) {
        writer.beginObject()
        writer.key("index")
        writer.int(index)
        writer.key("name")
        writer.string(bytes: name.bytes)
        writer.key("kind")
        writer.string(kind.rawValue)
        writer.key("filename")
        if let filename { writer.string(bytes: filename.bytes) } else { writer.null() }
        writer.key("declared_type")
        writer.string(declaredType)
        writer.key("sniffed_type")
        writer.string(sniffedType)
        writer.key("size")
        writer.int(size)
        writer.key("sha256")
        writer.string(sha256)
        writer.key("action")
        writer.string(action)
        writer.key("quarantine_id")
        writer.string(quarantineID)
        writer.key("disarmed")
        if let disarmed {
            writer.beginArray()
            for item in disarmed { writer.string(item) }
            writer.endArray()
        } else {
            writer.null()
        }
        writer.endObject()
    }
}

extension AuditRecord.Violation {
    fileprivate func render(into writer: inout JSONLineWriter) {
        writer.beginObject()
        writer.key("kind")
        writer.string(kind)
        writer.key("part")
        writer.int(part)
        writer.key("rule")
        writer.string(rule)
        writer.key("detail")
        writer.string(detail)
        writer.key("outcome")
        writer.string(outcome)
        writer.key("enforced")
        writer.bool(enforced)
        writer.endObject()
    }
}
