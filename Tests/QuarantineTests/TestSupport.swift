import Foundation
import Glibc
import Inspect
import Testing

@testable import Quarantine
import TestRandom


/// A fresh private directory under /tmp, removed by `remove()`.
struct ScratchDirectory {
    let path: String

    init() {
        var template = Array("/tmp/formwall-quarantine-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

func meta(_ request: String = "req-1", time: Date = Date(timeIntervalSince1970: 1_795_953_662.345),
          filename: [UInt8]? = Array("../evil name.exe".utf8)) -> QuarantineMeta {
    QuarantineMeta(
        requestID: request, route: "avatar", client: "10.0.0.7:51234", time: time, partName: Array("avatar".utf8),
        filename: filename, declaredType: "image/png",
        violations: [QuarantineViolation(kind: "file_type_mismatch", detail: "declared image/png, content is ELF",
                                         rule: "rules.fw:7")]
    )
}

/// The sidecar of `id` parsed with Foundation.
func sidecarObject(_ store: QuarantineStore, _ id: String) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(store.show(id).utf8)) as? [String: Any])
}

func randomBytes(_ count: Int, _ rng: inout SplitMix64) -> [UInt8] {
    (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
}

func mode(_ path: String) -> mode_t? {
    var st = stat()
    return lstat(path, &st) == 0 ? st.st_mode : nil  // type and permission bits
}

/// Every path under `root` (files and directories), relative.
func tree(_ root: String) -> [String] {
    guard let e = FileManager.default.enumerator(atPath: root) else { return [] }
    return (e.allObjects as? [String] ?? []).sorted()
}

/// Writes a complete item straight into the store's layout under `root` (no fsync, a placeholder sidecar:
/// fast, for tests that need many items), returning its id.
func plantItem(_ root: String, day: String, size: Int, _ rng: inout SplitMix64) throws -> String {
    let id = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &rng)) }.joined()
    let item = "\(root)/\(day)/\(id)"
    try FileManager.default.createDirectory(atPath: item, withIntermediateDirectories: true)
    try Data(repeating: 0x5A, count: size).write(to: URL(fileURLWithPath: "\(item)/\(id).bin"))
    try Data("{\"id\":\"\(id)\"}\n".utf8).write(to: URL(fileURLWithPath: "\(item)/\(id).json"))
    return id
}

/// Sum of the sizes of the regular files under `root`.
func treeBytes(_ root: String) -> Int64 {
    tree(root).reduce(into: Int64(0)) { total, path in
        var st = stat()
        if lstat("\(root)/\(path)", &st) == 0, st.st_mode & S_IFMT == S_IFREG { total += Int64(st.st_size) }
    }
}

/// Checks the store's on-disk invariant: no temp files, and every item directory holds exactly a
/// sidecar and a data file whose size and SHA-256 match the sidecar. Returns the complete item ids.
func verifyConsistent(_ root: String, sourceLocation: SourceLocation = #_sourceLocation) -> Set<String> {
    var ids: Set<String> = []
    for path in tree(root) {
        let name = (path as NSString).lastPathComponent
        #expect(!name.hasPrefix(".tmp-"), "leftover temp file \(path)", sourceLocation: sourceLocation)
        let components = path.split(separator: "/")
        var isDir: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: "\(root)/\(path)", isDirectory: &isDir)
        if isDir.boolValue {
            let children = (try? FileManager.default.contentsOfDirectory(atPath: "\(root)/\(path)")) ?? []
            #expect(!children.isEmpty, "empty directory \(path)", sourceLocation: sourceLocation)
            if components.count == 4 {
                let id = String(components[3])
                #expect(Set(children) == ["\(id).bin", "\(id).json"], "item \(path) holds \(children)",
                        sourceLocation: sourceLocation)
                if let data = FileManager.default.contents(atPath: "\(root)/\(path)/\(id).bin"),
                   let sidecar = FileManager.default.contents(atPath: "\(root)/\(path)/\(id).json"),
                   let object = try? JSONSerialization.jsonObject(with: sidecar) as? [String: Any]
                {
                    #expect(object["size"] as? Int == data.count, sourceLocation: sourceLocation)
                    #expect(object["sha256"] as? String == SHA256Hasher.hex(Array(data)),
                            sourceLocation: sourceLocation)
                    ids.insert(id)
                } else {
                    Issue.record("unreadable item \(path)", sourceLocation: sourceLocation)
                }
            }
        }
    }
    return ids
}
