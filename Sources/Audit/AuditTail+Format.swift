// Human formatting and duration parsing for `formwall tail`.
//
//   12:01:02.345 REJECT 413 POST /api/avatar file_too_large avatar (7.2 MiB > 5 MiB) req=abc123
//   12:01:03.000 MODIFIED 200 POST /docs type_mismatch doc quarantine=3f…9a (declared …) req=abc124
//   12:01:04.000 MONITOR 200 POST /m extension_not_allowed would=415 f (.gif not in .png) +3 more req=abc125
//   12:01:05.000 ALLOW 200 POST /up ms=2449.4 body=2448.9 up=0.2/2449.1/2449.4 req=abc126

extension AuditTail {
    /// Parses a look-back duration: a positive integer with unit `s`, `m`, `h` or `d`, or several
    /// such terms run together (`1h30m`). Returns milliseconds, or nil when malformed.
    public static func parseDuration(_ text: String) -> Int64? {
        var total: Int64 = 0
        var number: Int64? = nil
        var sawTerm = false
        for c in text.utf8 {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                let (m, o1) = (number ?? 0).multipliedReportingOverflow(by: 10)
                let (v, o2) = m.addingReportingOverflow(Int64(c - UInt8(ascii: "0")))
                guard !o1 && !o2 else { return nil }
                number = v
            case UInt8(ascii: "s"), UInt8(ascii: "m"), UInt8(ascii: "h"), UInt8(ascii: "d"):
                guard let n = number else { return nil }
                let unit: Int64 = switch c {
                case UInt8(ascii: "s"): 1000
                case UInt8(ascii: "m"): 60_000
                case UInt8(ascii: "h"): 3_600_000
                default: 86_400_000
                }
                let (product, o1) = n.multipliedReportingOverflow(by: unit)
                let (sum, o2) = total.addingReportingOverflow(product)
                guard !o1 && !o2 else { return nil }
                total = sum
                number = nil
                sawTerm = true
            default:
                return nil
            }
        }
        guard sawTerm, number == nil, total > 0 else { return nil }
        return total
    }

    /// Formats a parsed record as one human line; with `color`, ANSI colours mark the decision.
    ///
    /// Text from the record is made terminal-safe: control characters (which could carry escape
    /// sequences from a hostile path or filename) are shown as `\xNN`.
    public static func humanLine(_ object: [String: Any], color: Bool) -> String {
        let ts = object["ts"] as? String ?? "?"
        let time: String
        if ts.utf8.count == 24 {
            time = String(ts.dropFirst(11).prefix(12))
        } else {
            time = ts
        }
        if let event = object["event"] as? String { return eventLine(event, object, time: time, color: color) }
        let decision = (object["decision"] as? String ?? "?").uppercased()
        var words: [String] = []
        words.append(color ? "\u{1B}[2m\(time)\u{1B}[0m" : time)
        let shade: String = switch decision {
        case "REJECT": "1;31"
        case "MODIFIED": "33"
        case "MONITOR": "36"
        case "ALLOW": "32"
        default: "0"
        }
        words.append(color ? "\u{1B}[\(shade)m\(safe(decision))\u{1B}[0m" : safe(decision))
        words.append(number(object["status"]))
        words.append(safe(object["method"] as? String ?? "?"))
        words.append(safe(object["path"] as? String ?? "?"))
        if let reason = object["reason"] as? String { words.append(safe(reason)) }
        if let status = object["would_status"] as? Int { words.append("would=\(status)") }
        let violations = object["violations"] as? [[String: Any]] ?? []
        let parts = object["parts"] as? [[String: Any]] ?? []
        var shownPart: Int? = nil
        if let first = violations.first {
            if let index = first["part"] as? Int, let part = parts.first(where: { ($0["index"] as? Int) == index }) {
                shownPart = index
                words.append(partWords(part))
            }
            if let detail = first["detail"] as? String, !detail.isEmpty { words.append("(\(safe(detail)))") }
            if violations.count > 1 { words.append("+\(violations.count - 1) more") }
        }
        // Every quarantined part with its item id, so the operator can go straight to `formwall quarantine show`.
        for part in parts where part["quarantine_id"] is String && (part["index"] as? Int) != shownPart {
            words.append(partWords(part))
        }
        if let error = object["error"] as? String { words.append("error=\"\(safe(error))\"") }
        // Where the time went, for a request that reached the upstream: the whole, the client's body, and the
        // answering attempt's connect/header/response (`-`: none).
        if milliseconds(object["upstream_response_ms"]) != nil {
            words.append("ms=\(millis(object["duration_ms"]))")
            if milliseconds(object["client_body_ms"]) != nil {
                words.append("body=\(millis(object["client_body_ms"]))")
            }
            words.append("up=" + ["upstream_connect_ms", "upstream_header_ms", "upstream_response_ms"]
                .map { millis(object[$0]) }.joined(separator: "/"))
        }
        words.append("req=\(safe(object["request_id"] as? String ?? "?"))")
        return words.joined(separator: " ")
    }

    /// Milliseconds to one decimal (`2449.4`, `3`), or `-` for a null or missing time.
    private static func millis(_ value: Any?) -> String {
        guard let ms = milliseconds(value) else { return "-" }
        let tenths = Int((ms * 10).rounded())
        let whole = String(tenths / 10)
        return tenths % 10 == 0 ? whole : whole + "." + String(abs(tenths % 10))
    }

    /// A part's name, followed by `quarantine=<id>` when it was stored in quarantine.
    private static func partWords(_ part: [String: Any]) -> String {
        var text = safe(part["name"] as? String ?? "?")
        if let id = part["quarantine_id"] as? String { text += " quarantine=\(safe(id))" }
        return text
    }

    /// A line for a non-request record, e.g. `12:01:02.345 WORKER_EXIT pid=4242 signal=SIGKILL restarts=1`.
    private static func eventLine(_ event: String, _ object: [String: Any], time: String, color: Bool) -> String {
        var words = [color ? "\u{1B}[2m\(time)\u{1B}[0m" : time]
        let name = safe(event.uppercased())
        words.append(color ? "\u{1B}[1;35m\(name)\u{1B}[0m" : name)
        if event == WorkerExitRecord.event {
            words.append("pid=\(number(object["pid"]))")
            if let signal = object["signal"] as? String { words.append("signal=\(safe(signal))") }
            if let status = object["exit_status"] as? Int { words.append("exit_status=\(status)") }
            words.append("restarts=\(number(object["restarts"]))")
        }
        return words.joined(separator: " ")
    }

    /// A time member's value: a finite, non-negative number (JSON parsing gives an integer or a double).
    private static func milliseconds(_ value: Any?) -> Double? {
        let ms: Double
        if let int = value as? Int { ms = Double(int) } else if let double = value as? Double { ms = double } else {
            return nil
        }
        return ms.isFinite && ms >= 0 && ms < 1e12 ? ms : nil
    }

    private static func number(_ value: Any?) -> String {
        if let n = value as? Int { return String(n) }
        return "?"
    }

    /// Replaces C0/C1 controls and DEL with `\xNN` so record text cannot drive the terminal.
    static func safe(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else {
            return text
        }
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                let hex = String(scalar.value, radix: 16)
                out += "\\x" + (hex.count < 2 ? "0" + hex : hex)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
