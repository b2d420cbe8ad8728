import Foundation
import Glibc
import Quarantine

/// `formwall quarantine`: list, show, release (copy out) and delete quarantined parts.
enum QuarantineCommand: Command {
    static let name = "quarantine"
    static let summary = "list, show, release or delete quarantined parts"
    static let defaultDirectory = "/var/lib/formwall/quarantine"
    static let help = """
    Usage: formwall quarantine list [--json] [--dir DIR]
           formwall quarantine show ID [--dir DIR]
           formwall quarantine release ID --to PATH [--dir DIR]
           formwall quarantine delete ID [--dir DIR]

    Operates on the quarantine store DIR (default \(defaultDirectory)), which must exist;
    ID is an item's 32 hex digits as shown by `list` and logged as "quarantine_id" in the audit log.

      list      one row per complete item, oldest first: ID, TIME (UTC), SIZE (bytes), SHA256 (first 12 hex
                digits), PART, FILENAME (as sent; control characters and spaces shown as \\xNN) and the
                first VIOLATION kind. With --json, one JSON object per line instead (the sidecar's
                members, keys sorted)
      show      print the item's sidecar JSON as stored
      release   copy the item's bytes to PATH, a new file with mode 0600; never overwrites or follows a
                symlink at PATH, and verifies the SHA-256 while copying (a mismatch removes the copy)
      delete    remove the item

    Options:
      --dir DIR              the quarantine store directory (default \(defaultDirectory))
      --json                 list: print one JSON object per line instead of a table
      --to PATH              release: where to write the bytes (required; must not exist)
      --help                 show this help

    For tests and drills, `add` stores a file as a new item through the same code path the proxy uses
    (creating DIR if needed) and prints its ID:

      formwall quarantine add --file FILE --name PART [--filename NAME] [--violation KIND[:DETAIL]]...
                              [--dir DIR]

      --file FILE            the bytes to store
      --name PART            the part's `name`
      --filename NAME        the part's `filename` as a client would send it (default: none)
      --violation KIND[:DETAIL]  a violation to record; repeat for several

    Exit status: 0 on success, 1 for an unknown ID, a missing store, an existing release target or an I/O
    error, 2 for a usage error.
    """

    static func run(_ args: [String]) -> Int32 {
        let parsed: Arguments
        do {
            parsed = try Arguments(args, valued: ["dir", "to", "file", "name", "filename", "violation"],
                                   flags: ["json"])
        } catch {
            return usage("\(error)")
        }
        guard let action = parsed.positionals.first else {
            return usage("missing action: list, show, release or delete")
        }
        let operands = Array(parsed.positionals.dropFirst())
        let directory = parsed.value("dir") ?? defaultDirectory
        let allowed: Set<String>
        switch action {
        case "list": allowed = ["dir", "json"]
        case "show", "delete": allowed = ["dir"]
        case "release": allowed = ["dir", "to"]
        case "add": allowed = ["dir", "file", "name", "filename", "violation"]
        default: return usage("unknown action '\(action)': expected list, show, release or delete")
        }
        let given = Set(parsed.options.keys).union(parsed.flags)
        if let stray = given.subtracting(allowed).sorted().first {
            return usage("option --\(stray) does not apply to `quarantine \(action)`")
        }
        let wantedOperands = action == "list" || action == "add" ? 0 : 1
        guard operands.count == wantedOperands else {
            return usage(wantedOperands == 0 ? "`quarantine \(action)` takes no ID"
                                             : "`quarantine \(action)` needs one ID")
        }

        if action == "release" && parsed.value("to") == nil { return usage("`quarantine release` needs --to PATH") }
        if action == "add" { return add(parsed, directory: directory) }
        guard let store = openExisting(directory) else { return 1 }
        do {
            switch action {
            case "list":
                try list(store, json: parsed.flags.contains("json"))
            case "show":
                let id = operands[0]
                guard let sidecar = try sidecar(id, in: store) else { return 1 }
                FileHandle.standardOutput.write(Data(sidecar.utf8))
            case "release":
                let id = operands[0]
                let target = parsed.value("to")!
                guard try sidecar(id, in: store) != nil else { return 1 }
                do {
                    try store.release(id, to: target)
                } catch let error as QuarantineError where error.code == .alreadyExists {
                    printError("\(target) already exists; release never overwrites")
                    return 1
                } catch let error as QuarantineError where error.path == target && error.errno != 0 {
                    printError("cannot create \(target): \(String(cString: strerror(error.errno)))")
                    return 1
                }
                let item = try store.item(id)
                print("released \(id) to \(target) (\(item.size) bytes, sha256 \(item.sha256) verified)")
            case "delete":
                let id = operands[0]
                guard try sidecar(id, in: store) != nil else { return 1 }
                try store.delete(id)
                print("deleted \(id)")
            default:
                preconditionFailure("action '\(action)' validated above")
            }
        } catch {
            printError("quarantine \(action): \(describe(error))")
            return 1
        }
        return 0
    }

    /// A failed system call reads `operation path: reason`; other store errors keep their code (`corrupt: …`).
    static func describe(_ error: any Error) -> String {
        guard let error = error as? QuarantineError, error.errno != 0 else { return "\(error)" }
        return "\(error.operation) \(error.path): \(String(cString: strerror(error.errno)))"
    }

    private static func usage(_ message: String) -> Int32 {
        printError("\(message). Run `formwall quarantine --help`.")
        return 2
    }

    /// Opens the store at `directory` only if it already exists (opening would otherwise create it).
    private static func openExisting(_ directory: String) -> QuarantineStore? {
        var st = stat()
        guard stat(directory, &st) == 0 else {
            printError("quarantine directory \(directory): \(String(cString: strerror(errno)))")
            return nil
        }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            printError("quarantine directory \(directory): not a directory")
            return nil
        }
        return open(directory)
    }

    private static func open(_ directory: String) -> QuarantineStore? {
        do {
            // The operator never writes past a cap or prunes: neither limit applies here.
            return try QuarantineStore(directory: directory, maxBytes: .max, retention: .seconds(0))
        } catch {
            printError("cannot open quarantine directory \(directory): \(describe(error))")
            return nil
        }
    }

    /// The sidecar text of item `id` (read, not parsed, so a damaged item can still be shown and deleted),
    /// or nil after printing a one-line error when `id` is malformed or names no item.
    private static func sidecar(_ id: String, in store: QuarantineStore) throws -> String? {
        do {
            return try store.show(id)
        } catch let error as QuarantineError where error.code == .invalidID {
            printError("'\(safe(id))' is not a quarantine ID (32 lowercase hex digits)")
        } catch let error as QuarantineError where error.code == .notFound && error.operation == "locate" {
            printError("no quarantined item \(id) in \(store.directory)")
        }
        return nil
    }

    // MARK: list

    private static func list(_ store: QuarantineStore, json: Bool) throws {
        let items = try store.list()
        var out = ""
        if json {
            for item in items {
                // Re-serialised from the sidecar so each object is one line whatever its stored layout.
                guard let bytes = FileManager.default.contents(atPath: item.sidecarPath),
                      let object = try? JSONSerialization.jsonObject(with: bytes)
                else { continue }  // deleted meanwhile
                out += jsonString(object, pretty: false) + "\n"
            }
        } else {
            var rows = [["ID", "TIME", "SIZE", "SHA256", "PART", "FILENAME", "VIOLATION"]]
            for item in items {
                rows.append([
                    item.id, timeText(item.time), String(item.size), String(item.sha256.prefix(12)),
                    safe(item.partName), item.filename.map(safe) ?? "-",
                    item.violations.first.map { safe($0.kind) } ?? "-",
                ])
            }
            out = table(rows)
        }
        FileHandle.standardOutput.write(Data(out.utf8))
    }

    /// Left-aligned columns two spaces apart; the last column is not padded.
    static func table(_ rows: [[String]]) -> String {
        guard let columns = rows.first?.count else { return "" }
        var widths = [Int](repeating: 0, count: columns)
        for row in rows {
            for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) }
        }
        var out = ""
        for row in rows {
            var line = ""
            for (i, cell) in row.enumerated() {
                line += i == columns - 1 ? cell : cell.padding(toLength: widths[i] + 2, withPad: " ", startingAt: 0)
            }
            out += line + "\n"
        }
        return out
    }

    /// `2026-11-29 12:01:02Z`: the arrival time in UTC, to the second.
    static func timeText(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var t = tm()
        gmtime_r(&seconds, &t)
        return String(format: "%04d-%02d-%02d %02d:%02d:%02dZ", Int(t.tm_year) + 1900, Int(t.tm_mon) + 1,
                      Int(t.tm_mday), Int(t.tm_hour), Int(t.tm_min), Int(t.tm_sec))
    }

    /// Client-supplied text made safe for a terminal and a table: controls, DEL and C1 become `\xNN`,
    /// spaces `\x20`.
    static func safe(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar.value <= 0x20 || (0x7F...0x9F).contains(scalar.value) {
                let hex = String(scalar.value, radix: 16)
                out += "\\x" + (hex.count < 2 ? "0" + hex : hex)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out.isEmpty ? "\"\"" : out
    }

    // MARK: add

    private static func add(_ parsed: Arguments, directory: String) -> Int32 {
        guard let file = parsed.value("file"), let partName = parsed.value("name") else {
            return usage("`quarantine add` needs --file FILE and --name PART")
        }
        let violations = parsed.values("violation").map { text -> QuarantineViolation in
            guard let colon = text.firstIndex(of: ":") else { return QuarantineViolation(kind: text, detail: "") }
            return QuarantineViolation(kind: String(text[..<colon]),
                                       detail: String(text[text.index(after: colon)...]))
        }
        let input = Glibc.open(file, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else {
            printError("cannot read \(file): \(String(cString: strerror(errno)))")
            return 1
        }
        defer { close(input) }
        guard let store = open(directory) else { return 1 }
        let meta = QuarantineMeta(
            requestID: "cli-add", route: nil, client: "formwall quarantine add", partName: Array(partName.utf8),
            filename: parsed.value("filename").map { Array($0.utf8) }, violations: violations)
        do {
            let writer = try store.begin(meta)
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
                if n < 0 {
                    if errno == EINTR { continue }
                    let reason = String(cString: strerror(errno))
                    writer.abort()
                    printError("read error on \(file): \(reason)")
                    return 1
                }
                if n == 0 { break }
                try buffer.withUnsafeBytes { try writer.write(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            }
            print(try writer.commit().id)
        } catch {
            printError("quarantine add: \(describe(error))")
            return 1
        }
        return 0
    }
}
