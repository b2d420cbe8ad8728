/// Writes the Prometheus text exposition format, version 0.0.4: `# HELP` and `# TYPE` per family, then samples.
public struct PrometheusText {
    /// The content type of the format.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The text written so far.
    public private(set) var text = ""

    /// An empty document.
    public init() {}

    /// Starts a metric family. `type` is `counter`, `gauge` or `histogram`.
    public mutating func family(_ name: String, _ type: String, help: String) {
        text += "# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(type)\n"
    }

    /// A counter family with one label: one sample per key, sorted.
    public mutating func counters(_ name: String, help: String, label: String, _ values: [String: Int]) {
        family(name, "counter", help: help)
        for (value, n) in values.sorted(by: { $0.key < $1.key }) { sample(name, labels: [(label, value)], n) }
    }

    /// One sample line: `name{label="value",...} value`.
    public mutating func sample(_ name: String, labels: [(String, String)] = [], _ value: Double) {
        text += name
        if !labels.isEmpty {
            text += "{" + labels.map { "\($0.0)=\"\(Self.escapeLabel($0.1))\"" }.joined(separator: ",") + "}"
        }
        text += " " + Self.format(value) + "\n"
    }

    /// An integer sample.
    public mutating func sample(_ name: String, labels: [(String, String)] = [], _ value: Int) {
        sample(name, labels: labels, Double(value))
    }

    /// A histogram's `_bucket` lines (cumulative, ending with `le="+Inf"`), `_sum` and `_count`.
    public mutating func histogram(_ name: String, labels: [(String, String)] = [], _ h: Histogram) {
        for bucket in h.cumulative {
            sample(name + "_bucket", labels: labels + [("le", Self.format(bucket.le))], bucket.count)
        }
        sample(name + "_sum", labels: labels, h.sum)
        sample(name + "_count", labels: labels, h.count)
    }

    /// Label values escape backslash, double quote and line feed.
    public static func escapeLabel(_ value: String) -> String {
        var out = ""
        out.reserveCapacity(value.utf8.count)
        for c in value.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// Help text escapes backslash and line feed.
    public static func escapeHelp(_ value: String) -> String {
        var out = ""
        for c in value.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// `+Inf`, `-Inf`, `NaN`; whole numbers without a fraction (`3`); others as Swift prints them (`0.005`).
    public static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }
}

extension MetricsSnapshot {
    /// The /metrics document. Label sets are sorted, so the output is deterministic.
    public func prometheusText() -> String {
        var p = PrometheusText()
        let r = requests
        p.family("formwall_requests_total", "counter", help: "Requests finished, by route, decision and status.")
        for (key, n) in r.requests.sorted(by: { $0.key < $1.key }) {
            p.sample("formwall_requests_total",
                     labels: [("route", key.route), ("decision", key.decision), ("status", String(key.status))], n)
        }
        p.family("formwall_client_bytes_total", "counter", help: "Request body bytes received from clients.")
        p.sample("formwall_client_bytes_total", r.clientBytes)
        p.family("formwall_upstream_bytes_total", "counter", help: "Request body bytes sent to the upstream.")
        p.sample("formwall_upstream_bytes_total", r.upstreamBytes)
        p.family("formwall_parts_total", "counter", help: "Form parts seen.")
        p.sample("formwall_parts_total", r.parts)
        p.family("formwall_files_total", "counter", help: "Form parts with a filename.")
        p.sample("formwall_files_total", r.files)
        p.counters("formwall_violations_total", help: "Rule violations, by kind.", label: "kind", r.violations)
        p.counters("formwall_anomalies_total", help: "Multipart parser anomalies, by flag.", label: "flag", r.anomalies)
        p.family("formwall_quarantine_items_total", "counter", help: "Parts stored in quarantine.")
        p.sample("formwall_quarantine_items_total", r.quarantineItems)
        p.family("formwall_quarantine_bytes_total", "counter", help: "Bytes of parts stored in quarantine.")
        p.sample("formwall_quarantine_bytes_total", r.quarantineBytes)
        if let store = quarantine {
            p.family("formwall_quarantine_bytes", "gauge",
                     help: "Bytes in the quarantine store now (complete items and parts being written).")
            p.sample("formwall_quarantine_bytes", Double(store.bytes))
            p.family("formwall_quarantine_max_bytes", "gauge", help: "The quarantine store's cap (--quarantine-max).")
            p.sample("formwall_quarantine_max_bytes", Double(store.maxBytes))
        }
        p.family("formwall_active_connections", "gauge", help: "Client connections open now.")
        p.sample("formwall_active_connections", activeConnections)
        p.family("formwall_max_connections", "gauge",
                 help: "Client connections kept open at most: workers x --max-connections (alert on active / max).")
        p.sample("formwall_max_connections", connectionCapacity)
        p.family("formwall_connection_limit_total", "counter",
                 help: "At --max-connections: idle connections closed for new ones, and pauses of accepting.")
        p.sample("formwall_connection_limit_total", labels: [("action", "closed_idle")], r.connectionLimit.closedIdle)
        p.sample("formwall_connection_limit_total", labels: [("action", "paused")], r.connectionLimit.paused)
        p.counters("formwall_upstream_errors_total", help: "Requests that involved the upstream and ended in error, by upstream server.", label: "server", r.upstreamErrors)
        p.upstreamHealth(upstreams)
        p.family("formwall_tls_handshakes_total", "counter", help: "TLS handshakes completed with clients.")
        p.sample("formwall_tls_handshakes_total", r.tlsHandshakes)
        p.counters("formwall_tls_handshake_failures_total", help: "TLS handshakes with clients that failed, by reason.", label: "reason", r.tlsHandshakeFailures)
        p.counters("formwall_log_suppressed_total",
                   help: "Event-log lines left out by the rate limit (one per key per second per worker), by msg.",
                   label: "message", r.logSuppressed)
        p.family("formwall_request_duration_seconds", "histogram", help: "Time from request start to its end.")
        p.histogram("formwall_request_duration_seconds", r.requestDuration)
        p.family("formwall_upstream_duration_seconds", "histogram",
                 help: "Time from contacting the upstream to the request's end, for requests that contacted it.")
        p.histogram("formwall_upstream_duration_seconds", r.upstreamDuration)
        p.family("formwall_upstream_connect_seconds", "histogram",
                 help: "Time the answering upstream attempt took to connect (audit upstream_connect_ms).")
        p.histogram("formwall_upstream_connect_seconds", r.timing.connect)
        p.family("formwall_upstream_header_seconds", "histogram",
                 help: "Time from the answering upstream attempt's start to the response head (upstream_header_ms).")
        p.histogram("formwall_upstream_header_seconds", r.timing.header)
        p.family("formwall_upstream_response_seconds", "histogram",
                 help: "Time from the answering upstream attempt's start to the response's end (upstream_response_ms).")
        p.histogram("formwall_upstream_response_seconds", r.timing.response)
        p.family("formwall_client_body_seconds", "histogram",
                 help: "Time from a request's start until its body was received whole (client_body_ms).")
        p.histogram("formwall_client_body_seconds", r.timing.clientBody)
        p.family("formwall_rule_reloads_total", "counter", help: "Rule reloads on SIGHUP, by result.")
        p.sample("formwall_rule_reloads_total", labels: [("result", "ok")], ruleReloadsOK)
        p.sample("formwall_rule_reloads_total", labels: [("result", "failed")], ruleReloadsFailed)
        p.family("formwall_supervisor_restarts_total", "counter",
                 help: "Times the supervisor restarted the proxy process.")
        p.sample("formwall_supervisor_restarts_total", supervisorRestarts)
        return p.text
    }
}
