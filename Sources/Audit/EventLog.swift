// Event and error lines on stderr: what `formwall serve` tells the operator (docs/operations.md, "Logs on stderr").
//
//   call site ──write(level, msg, fields)──▶ below the minimum level? drop
//                                          ──▶ render: {"ts":…,"level":…,"msg":…,"pid":…,fields…}\n (JSONLineWriter)
//                                          ──▶ one write(2) on fd 2, so lines from several threads never interleave
//
// Events are rare (start-up, signals, process exits, failures rate-limited per kind), so a line's fields are a
// small array built at the call site; nothing here runs per request or per chunk.

import Glibc

/// The severity of an event line (`--log-level`); lines below the configured minimum are not written.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    /// Details for debugging (signals received).
    case debug
    /// Normal events: listening, rules reloaded, stopped, a proxy process started.
    case info
    /// Something degraded that Formwall works around (accepting paused for lack of descriptors).
    case warn
    /// A failure: the request, the reload, the start-up or the proxy process it names failed.
    case error

    /// Parses `debug`, `info`, `warn` or `error`.
    public init?(name: String) {
        guard let level = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = level
    }

    /// The level's name as it appears in the `level` field.
    public var description: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .warn: "warn"
        case .error: "error"
        }
    }

    /// Orders levels from `debug` to `error`.
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// How event lines look (`--log-format`): one JSON object per line, or `formwall: msg key=value …` for a terminal.
public enum LogFormat: String, Sendable, CaseIterable {
    /// One JSON object per line (the default).
    case json
    /// `formwall: <msg> key=value …`, values quoted and escaped when they need it.
    case text
}

/// One structured field of an event line: a constant key and a value.
public struct LogField: Sendable {
    /// A field's value.
    public enum Value: Sendable {
        case string(String)
        /// Raw bytes written as a string; invalid UTF-8 becomes U+FFFD.
        case bytes([UInt8])
        case int(Int)
        /// A duration in seconds, at most three decimals.
        case seconds(Double)
        case strings([String])
    }

    /// The member name: plain ASCII, a schema constant such as `request_id`.
    public let key: StaticString
    /// The member's value.
    public let value: Value

    /// A field with any value.
    public init(_ key: StaticString, _ value: Value) {
        self.key = key
        self.value = value
    }

    /// A string field.
    public static func string(_ key: StaticString, _ value: String) -> LogField { LogField(key, .string(value)) }
    /// An integer field.
    public static func int(_ key: StaticString, _ value: Int) -> LogField { LogField(key, .int(value)) }
    /// A duration field, in seconds.
    public static func seconds(_ key: StaticString, _ value: Double) -> LogField { LogField(key, .seconds(value)) }
    /// The id of the request the line is about.
    public static func requestID(_ id: String) -> LogField { LogField("request_id", .string(id)) }
    /// The cause of a failure, as text.
    public static func error(_ error: Any) -> LogField { LogField("error", .string("\(error)")) }
}

/// Writes event lines of at least `minimumLevel` to a descriptor, one `write(2)` per line.
public struct EventLog: Sendable {
    /// Lines below this level are dropped (`--log-level`, default `info`).
    public var minimumLevel: LogLevel
    /// JSON lines (default) or text (`--log-format`).
    public var format: LogFormat
    /// Where lines go; 2 (stderr) unless a test says otherwise.
    public var fd: Int32

    /// An event log on `fd` (stderr by default).
    public init(level: LogLevel = .info, format: LogFormat = .json, fd: Int32 = 2) {
        minimumLevel = level
        self.format = format
        self.fd = fd
    }

    /// Whether a line of `level` would be written.
    @inlinable
    public func isEnabled(_ level: LogLevel) -> Bool { level >= minimumLevel }

    /// Writes one line, now, when `level` is enabled. A short or failed write is not retried: stderr is best effort.
    public func write(_ level: LogLevel, _ msg: StaticString, _ fields: [LogField] = []) {
        guard isEnabled(level) else { return }
        let line = render(level, msg, fields, at: .now(), pid: Int(getpid()))
        _ = line.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    /// The line for an event, ending in `\n`, in this log's format.
    public func render(_ level: LogLevel, _ msg: StaticString, _ fields: [LogField], at ts: AuditTimestamp,
                       pid: Int) -> [UInt8] {
        switch format {
        case .json: Self.renderJSON(level, msg, fields, at: ts, pid: pid)
        case .text: Self.renderText(level, msg, fields)
        }
    }

    /// `{"ts":"…","level":"…","msg":"…","pid":N,<fields>}\n`.
    static func renderJSON(_ level: LogLevel, _ msg: StaticString, _ fields: [LogField], at ts: AuditTimestamp,
                           pid: Int) -> [UInt8] {
        var json = JSONLineWriter(capacity: 256)
        json.beginObject()
        json.key("ts"); json.string(ts.rfc3339)
        json.key("level"); json.string(level.description)
        json.key("msg"); msg.withUTF8Buffer { json.string(utf8: UnsafeRawBufferPointer($0)) }
        json.key("pid"); json.int(pid)
        for field in fields {
            json.key(field.key)
            switch field.value {
            case .string(let s): json.string(s)
            case .bytes(let b): json.string(bytes: b)
            case .int(let n): json.int(n)
            case .seconds(let s): json.milliseconds(s)
            case .strings(let list):
                json.beginArray()
                for s in list { json.string(s) }
                json.endArray()
            }
        }
        json.endObject()
        json.endLine()
        return json.bytes
    }

    /// `formwall: <msg> key=value …\n` (warn and error lines say so after the prefix); a value with spaces, quotes,
    /// `=` or control characters is quoted and escaped as in JSON.
    static func renderText(_ level: LogLevel, _ msg: StaticString, _ fields: [LogField]) -> [UInt8] {
        var out = Array("formwall: ".utf8)
        if level >= .warn { out += Array("\(level): ".utf8) }
        msg.withUTF8Buffer { out.append(contentsOf: $0) }
        for field in fields {
            out.append(UInt8(ascii: " "))
            field.key.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(UInt8(ascii: "="))
            switch field.value {
            case .string(let s): appendTextValue(Array(s.utf8), to: &out)
            case .bytes(let b): appendTextValue(b, to: &out)
            case .int(let n): out += Array(String(n).utf8)
            case .seconds(let s):
                var json = JSONLineWriter(capacity: 16)
                json.milliseconds(s)
                out += json.bytes
            case .strings(let list): appendTextValue(Array(list.joined(separator: ",").utf8), to: &out)
            }
        }
        out.append(UInt8(ascii: "\n"))
        return out
    }

    private static func appendTextValue(_ value: [UInt8], to out: inout [UInt8]) {
        let plain = !value.isEmpty && value.allSatisfy {
            $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "=") && $0 != UInt8(ascii: "\\")
        }
        guard !plain else { out += value; return }
        out.append(UInt8(ascii: "\""))
        value.withUnsafeBytes { JSONLineWriter.appendEscaped($0, to: &out) }
        out.append(UInt8(ascii: "\""))
    }
}
