import Foundation
import Glibc
import HTTP1
import Inspect
import Multipart
import Proxy
import Reactor
import Rules

/// `formwall inspect`: parse a captured multipart body offline and print what Formwall sees.
enum InspectCommand: Command {
    static let name = "inspect"
    static let summary = "parse a captured request body and print its parts (and a policy's verdict) as JSON"
    static let help = """
    Usage: formwall inspect --content-type 'multipart/form-data; boundary=…' [FILE|-] [options]

    Parses a captured request body (FILE, or standard input for `-` or no FILE) exactly as the proxy would,
    streaming in constant memory, and prints one JSON document to stdout:

      {"parts": [{"name": …, "filename": … or null, "content_type": … or null, "size": N, "sha256": "hex",
                  "anomalies": [...]}],
       "anomalies": ["flag-name", …], "error": null or "kind", "error_offset": N or null}

    Request-level "anomalies" include every part's flags. Exit status: 0 when the body parses, 1 when it is
    malformed ("error" names the kind), 2 for a usage or I/O error.

    Options:
      --content-type VALUE   the request's Content-Type header value (required)
      --reencode OUT         also write the canonical body Formwall would send upstream to OUT
                             (the JSON then gains "boundary": the fresh boundary used)
      --max-part-header-bytes N   limit on one part's header block (default 16384)
      --rules FILE|DIR       also apply a policy (repeatable) and print what it decides: "decision"
                             (allow|modified|reject|monitor), "status", "route", "violations" (kind, part,
                             rule file:line, detail, outcome, enforced), and each part's "action" and
                             "sniffed_type"; in monitor mode "reason" and "would_status" too. The route's
                             body stage runs as in `serve`: multipart, urlencoded ("body": "urlencoded", each
                             field a part) or any other type streamed through against body-max ("body":
                             "opaque"); "body_bytes" counts what was read. A regular FILE's size is the
                             Content-Length.
      --path PATH            the request target the policy routes on, query included: its parameter
                         names count for `query-collision` (default /)
      --method METHOD        the request method (default POST)
      --host HOST            the request's Host field, for routes with `host` (default none: only routes
                             without `host` match)
      --header 'NAME: VALUE' a request field, for `require-header` and method overrides (repeatable)
      --batch FILE           differential-testing mode: FILE holds records "<content-type>\\n<length>\\n<body>";
                             prints one JSON line per record, feeding each body in pseudo-random chunks
      --seed N               chunking seed for --batch (default 1)
      --help                 show this help
    """

    static func run(_ args: [String]) -> Int32 {
        let parsed: Arguments
        do {
            parsed = try Arguments(args, valued: ["content-type", "reencode", "batch", "seed", "max-part-header-bytes",
                                                  "rules", "path", "method", "host", "header"], flags: [])
        } catch {
            printError("\(error). Run `formwall inspect --help`.")
            return 2
        }
        var limits = MultipartLimits()
        if let v = parsed.value("max-part-header-bytes") {
            guard let n = Int(v), n > 0 else { printError("--max-part-header-bytes needs a positive number"); return 2 }
            limits.maxPartHeaderBytes = n
        }
        if let batch = parsed.value("batch") {
            return runBatch(path: batch, seed: UInt64(parsed.value("seed") ?? "1") ?? 1, limits: limits)
        }
        guard let contentType = parsed.value("content-type") else {
            printError("--content-type is required. Run `formwall inspect --help`.")
            return 2
        }
        guard parsed.positionals.count <= 1 else { printError("at most one input FILE"); return 2 }
        let path = parsed.positionals.first ?? "-"
        let fd: Int32 = path == "-" ? 0 : open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { printError("cannot open \(path): \(String(cString: strerror(errno)))"); return 2 }
        defer { if fd != 0 { close(fd) } }

        var out: OutputFile?
        if let reencode = parsed.value("reencode") {
            do { out = try OutputFile(path: reencode) } catch {
                printError("\(error)")
                return 2
            }
        }
        var headers: [(name: String, value: String)] = []
        for field in parsed.values("header") {
            guard let colon = field.firstIndex(of: ":"), colon != field.startIndex else {
                printError("--header needs 'NAME: VALUE', got '\(field)'")
                return 2
            }
            headers.append((String(field[..<colon]), field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        var policy: Policy?
        do { policy = try ProxyServer.loadPolicy(parsed.values("rules"), quarantine: true) } catch {
            printError("\(error)")
            return 2
        }
        // A regular file's size is the body's Content-Length (checked against body-max before any byte, as the
        // proxy does); a pipe is read like a chunked body.
        var info = stat()
        let length: UInt64? = fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
            ? UInt64(info.st_size) : nil
        var result = inspect(contentType: Array(contentType.utf8), limits: limits,
                             reencode: out != nil, policy: policy, method: parsed.value("method") ?? "POST",
                             path: parsed.value("path") ?? "/", host: parsed.value("host"), headers: headers,
                             contentLength: length, readChunk: { buf in
            let n = read(fd, buf.baseAddress, buf.count)
            return n < 0 ? -1 : n
        }, sink: { out?.write($0) })
        if let out {
            do { try out.close() } catch { printError("\(error)"); return 2 }
        }
        if result.ioError {
            printError("read error on \(path): \(String(cString: strerror(errno)))")
            return 2
        }
        result.json["boundary"] = out == nil ? nil : result.boundary
        print(jsonString(result.json, pretty: false))
        return result.json["error"] is NSNull ? 0 : 1
    }

    struct Result {
        var json: [String: Any]
        var boundary: String?
        var ioError = false
    }

    /// Parses one body read through `readChunk` (returns bytes read, 0 at EOF, -1 on error).
    static func inspect(contentType: [UInt8], limits: MultipartLimits, reencode: Bool,
                        policy: Policy? = nil, method: String = "POST", path: String = "/", host: String? = nil,
                        headers: [(name: String, value: String)] = [], contentLength: UInt64? = nil, chunkSize: () -> Int = { 256 * 1024 },
                        readChunk: (UnsafeMutableRawBufferPointer) -> Int,
                        sink: @escaping (UnsafeRawBufferPointer) -> Void) -> Result {
        var json: [String: Any] = ["parts": [Any](), "anomalies": [String](), "error": NSNull(), "error_offset": NSNull()]
        var evaluator = policy.map { PolicyEvaluator(policy: $0) }
        func decide(_ status: Int, _ decision: String) {
            guard let ev = evaluator else { return }
            record(status, decision, ev, into: &json)
        }
        if evaluator != nil {
            let ct = String(decoding: contentType, as: UTF8.self)
            let values: (String) -> [String] = { name in
                headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
            }
            // The proxy's own reading of the override fields (every spelling it judges).
            let overrides = HTTPHeaders(headers.map { HTTPHeaderField(name: $0.name, value: $0.value) }).methodOverrides
            switch evaluator!.begin(method: method, path: path, host: host, contentType: ct,
                                    contentLength: contentLength, methodOverrides: overrides, headerValues: values) {
            case .reject(let v):
                json["error"] = v.kind.name
                decide(v.status, "reject")
                return Result(json: json)
            case .proceed(.multipart):
                break
            case .proceed(let kind):
                // The same stages as the proxy: urlencoded fields decoded and checked, anything else streamed
                // through against body-max.
                return inspectOther(kind, evaluator: evaluator!, json: json, reencode: reencode, chunkSize: chunkSize,
                                    readChunk: readChunk, sink: sink)
            }
        }
        let boundary: MultipartBoundary.Parsed
        do {
            boundary = try MultipartBoundary.parse(contentType: contentType, limits: limits)
        } catch {
            json["error"] = error.kind.rawValue
            if evaluator != nil { _ = evaluator!.malformed(detail: error.kind.rawValue); decide(400, "reject") }
            return Result(json: json)
        }
        var fresh: [UInt8]?
        if reencode {
            // A predictable boundary would let a part's data end the re-encoded body early: none is made up.
            guard let drawn = SecureRandom.boundary() else {
                json["error"] = "random_unavailable"
                return Result(json: json)
            }
            fresh = drawn
        }
        let stage = FormStage(boundary: boundary.boundary, limits: limits, anomalies: boundary.anomalies,
                              reencodeBoundary: fresh, evaluator: evaluator, quarantine: nil)
        let out = SyncOutput(sink)
        let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
        defer { buf.deallocate() }
        var failure: FormStageError?
        var ioError = false
        while failure == nil {
            let want = min(max(chunkSize(), 1), buf.count)
            let n = readChunk(UnsafeMutableRawBufferPointer(rebasing: buf[0..<want]))
            if n < 0 { ioError = true; break }
            if n == 0 {
                do { try stage.finish(out: out) } catch { failure = error }
                break
            }
            do {
                try stage.feedBody(UnsafeRawBufferPointer(rebasing: buf[0..<n]), out: out)
            } catch { failure = error }
        }
        var all = stage.parser.anomalies
        json["parts"] = stage.records.map { p -> [String: Any] in
            all.formUnion(p.part.anomalies)
            var part: [String: Any] = [
                "name": p.part.nameString.map { $0 as Any } ?? NSNull(),
                "filename": p.part.filenameString.map { $0 as Any } ?? NSNull(),
                "content_type": p.part.contentTypeString.map { $0 as Any } ?? NSNull(),
                "size": p.size,
                "sha256": p.sha256 ?? SHA256Hasher.hex([]),
                "anomalies": p.part.anomalies.names,
            ]
            if policy != nil {
                part["action"] = p.action
                part["sniffed_type"] = p.sniffedType ?? NSNull()
                if let renamed = p.sanitizedFilename { part["sanitized_filename"] = renamed }
            }
            return part
        }
        json["anomalies"] = all.names
        evaluator = stage.evaluator
        switch failure {
        case nil:
            decide(200, stage.modified ? "modified" : (evaluator?.mode == .monitor
                                                        && !(evaluator?.findings.isEmpty ?? true) ? "monitor" : "allow"))
        case .malformed(let error):
            json["error"] = error.kind.rawValue
            json["error_offset"] = error.offset.map { $0 as Any } ?? NSNull()
            decide(400, "reject")
        case .rejected(let v):
            json["error"] = v.kind.name
            decide(v.status, "reject")
        case .quarantineFailed(let why), .holdFailed(let why), .antivirusFailed(let why):
            json["error"] = why
            decide(503, "reject")
        }
        return Result(json: json, boundary: fresh.map { String(decoding: $0, as: UTF8.self) }, ioError: ioError)
    }

    /// A urlencoded or opaque body under a policy (`begin` chose `kind`), read to its end as the proxy reads it.
    static func inspectOther(_ kind: PolicyEvaluator.BodyKind, evaluator: PolicyEvaluator, json: [String: Any],
                             reencode: Bool, chunkSize: () -> Int,
                             readChunk: (UnsafeMutableRawBufferPointer) -> Int,
                             sink: @escaping (UnsafeRawBufferPointer) -> Void) -> Result {
        var json = json
        var evaluator = evaluator
        let urlencoded = kind == .urlencoded ? UrlencodedStage(evaluator: evaluator) : nil
        let out = SyncOutput(reencode ? sink : { _ in })
        let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
        defer { buf.deallocate() }
        var failure: FormStageError?
        var ioError = false
        var bodyBytes: UInt64 = 0
        while failure == nil {
            let want = min(max(chunkSize(), 1), buf.count)
            let n = readChunk(UnsafeMutableRawBufferPointer(rebasing: buf[0..<want]))
            if n < 0 { ioError = true; break }
            do throws(FormStageError) {
                if n == 0 {
                    if let urlencoded {
                        try urlencoded.finish(out: out)
                    } else if case .reject(let v) = evaluator.end() {
                        throw .rejected(v)
                    }
                    break
                }
                bodyBytes += UInt64(n)
                let chunk = UnsafeRawBufferPointer(rebasing: buf[0..<n])
                if let urlencoded {
                    try urlencoded.feedBody(chunk, out: out)
                } else {
                    if case .reject(let v) = evaluator.bodyData(count: n) { throw .rejected(v) }
                    out.write(chunk)
                }
            } catch { failure = error }
        }
        if let urlencoded { evaluator = urlencoded.evaluator }
        json["body"] = kind == .urlencoded ? "urlencoded" : "opaque"
        json["body_bytes"] = bodyBytes
        json["parts"] = (urlencoded?.records ?? []).map { p -> [String: Any] in
            ["name": p.part.nameString.map { $0 as Any } ?? NSNull(), "filename": NSNull(),
             "content_type": NSNull(), "size": p.size, "sha256": NSNull(), "anomalies": [String](),
             "action": p.action, "sniffed_type": NSNull()]
        }
        switch failure {
        case nil:
            let modified = urlencoded?.modified ?? false
            let monitored = evaluator.mode == .monitor && !evaluator.findings.isEmpty
            record(200, modified ? "modified" : monitored ? "monitor" : "allow", evaluator, into: &json)
        case .malformed(let error):
            json["error"] = error.kind.rawValue
            record(400, "reject", evaluator, into: &json)
        case .rejected(let v):
            json["error"] = v.kind.name
            record(v.status, "reject", evaluator, into: &json)
        case .quarantineFailed(let why), .holdFailed(let why), .antivirusFailed(let why):
            json["error"] = why
            record(503, "reject", evaluator, into: &json)
        }
        return Result(json: json, ioError: ioError)
    }

    /// The policy's verdict in the JSON: decision, status, route, violations; in monitor mode also the
    /// `reason` and `would_status` enforce mode would have answered with (as in the audit log).
    static func record(_ status: Int, _ decision: String, _ ev: PolicyEvaluator, into json: inout [String: Any]) {
        json["decision"] = decision
        json["status"] = status
        json["route"] = ev.route?.prefix ?? NSNull()
        json["violations"] = ev.findings.map { f -> [String: Any] in
            ["kind": f.violation.kind.name, "part": f.violation.part ?? NSNull(),
             "rule": f.violation.rule.map { "\($0.file):\($0.line)" } ?? NSNull(),
             "detail": f.violation.detail, "outcome": f.outcome.rawValue, "enforced": f.enforced]
        }
        if decision == "monitor", let would = ev.wouldReject {
            json["reason"] = would.kind.name
            json["would_status"] = would.status
        }
    }

    /// Output for the offline inspector: held parts are copied in place at once.
    final class SyncOutput: FormOutput {
        let sink: (UnsafeRawBufferPointer) -> Void
        init(_ sink: @escaping (UnsafeRawBufferPointer) -> Void) { self.sink = sink }
        func write(_ bytes: UnsafeRawBufferPointer) { sink(bytes) }
        func enqueue(_ file: TemporaryFile) -> Bool {
            defer { file.close() }
            try? file.forEachChunk { sink($0) }
            return false
        }
        var isReplaying: Bool { false }
    }

    /// `--batch`: many bodies in one process, for the differential test.
    static func runBatch(path: String, seed: UInt64, limits: MultipartLimits) -> Int32 {
        guard let data = FileManager.default.contents(atPath: path) else {
            printError("cannot read \(path)")
            return 2
        }
        let bytes = [UInt8](data)
        var i = 0
        var rng = seed
        func nextLine() -> String? {
            guard let nl = bytes[i...].firstIndex(of: 0x0A) else { return nil }
            defer { i = nl + 1 }
            return String(decoding: bytes[i..<nl], as: UTF8.self)
        }
        var output = ""
        while i < bytes.count {
            guard let ct = nextLine(), let lenLine = nextLine(), let len = Int(lenLine), i + len <= bytes.count else {
                printError("malformed batch record at byte \(i)")
                return 2
            }
            let body = bytes[i..<(i + len)]
            i += len
            var at = body.startIndex
            let result = inspect(contentType: Array(ct.utf8), limits: limits, reencode: false, chunkSize: {
                rng = rng &* 6364136223846793005 &+ 1442695040888963407
                let pick = rng >> 33
                return pick % 4 == 0 ? Int(pick % 7) + 1 : Int(pick % 70_000) + 1
            }, readChunk: { buf in
                let n = min(buf.count, body.endIndex - at)
                body[at..<(at + n)].withUnsafeBytes { buf.copyMemory(from: $0) }
                at += n
                return n
            }, sink: { _ in })
            output += jsonString(result.json, pretty: false) + "\n"
            if output.utf8.count > 1 << 20 {
                FileHandle.standardOutput.write(output.data(using: .utf8)!)
                output = ""
            }
        }
        FileHandle.standardOutput.write(output.data(using: .utf8)!)
        return 0
    }
}

/// Serialises a JSON object with sorted keys.
func jsonString(_ object: Any, pretty: Bool) -> String {
    var options: JSONSerialization.WritingOptions = [.sortedKeys, .withoutEscapingSlashes]
    if pretty { options.insert(.prettyPrinted) }
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: options) else { return "{}" }
    return String(decoding: data, as: UTF8.self)
}

/// A file written with 0600 permissions through a 256 KiB buffer.
final class OutputFile {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var failed: Int32 = 0
    let path: String

    init(path: String) throws {
        self.path = path
        fd = path == "-" ? 1 : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw UsageError("cannot create \(path): \(String(cString: strerror(errno)))") }
        buffer.reserveCapacity(256 * 1024)
    }

    func write(_ bytes: UnsafeRawBufferPointer) {
        if buffer.count + bytes.count > 256 * 1024 { flush() }
        if bytes.count >= 256 * 1024 { writeAll(bytes); return }
        buffer.append(contentsOf: bytes)
    }

    private func flush() {
        buffer.withUnsafeBytes { writeAll($0) }
        buffer.removeAll(keepingCapacity: true)
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer) {
        var off = 0
        while off < bytes.count, failed == 0 {
            let n = Glibc.write(fd, bytes.baseAddress! + off, bytes.count - off)
            if n < 0 {
                if errno == EINTR { continue }
                failed = errno
                return
            }
            off += n
        }
    }

    func close() throws {
        flush()
        if fd > 2 { Glibc.close(fd) }
        if failed != 0 { throw UsageError("write error on \(path): \(String(cString: strerror(failed)))") }
    }
}
