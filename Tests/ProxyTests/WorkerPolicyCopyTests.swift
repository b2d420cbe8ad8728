import Foundation
import Testing
@testable import Proxy
import Rules

// Each worker judges with its own copy of the policy (`ProxyServer.workerCopy`): compiled again from the same files,
// equal to the checked policy, and sharing none of its storage, so that no two workers write the reference count
// of one of its arrays or strings (bench/proxy/sharing.py). A file changed between the two compiles leaves every
// worker with the checked policy.

@Suite struct WorkerPolicyCopyTests {
    /// A directory holding a rule file that includes another, removed by the caller.
    private static func ruleFiles() throws -> (directory: String, paths: [String]) {
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("fw-workercopy-\(getpid())-\(UUID())").path
        try FileManager.default.createDirectory(atPath: dir + "/inc", withIntermediateDirectories: true)
        try """
        include inc/files.rules;
        route /upload {
            field caption { max 1KiB; name-deny-chars "<>"; }
            file doc { max 1MiB; extensions .pdf .txt; }
        }
        """.write(toFile: dir + "/main.rules", atomically: true, encoding: .utf8)
        try "route /avatar { file photo { types image/png; } }\n"
            .write(toFile: dir + "/inc/files.rules", atomically: true, encoding: .utf8)
        return (dir, [dir + "/main.rules"])
    }

    private static func load(_ paths: [String]) throws -> Policy? {
        try ProxyServer.loadPolicy(paths, quarantine: false)
    }

    /// Where a policy's route list is stored: the same address means the same (shared) storage.
    private static func routeStorage(_ policy: Policy?) -> UnsafeRawPointer? {
        policy?.routes.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
    }

    @Test func theCopyEqualsThePolicyAndSharesNoStorage() throws {
        let (dir, paths) = try Self.ruleFiles()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let policy = try #require(try Self.load(paths))
        #expect(policy.routes.count == 2 && policy.sources.count == 2)
        let copies = (0..<3).map { _ in ProxyServer.workerCopy(of: policy) { try Self.load(paths) } }
        for copy in copies {
            #expect(copy == policy)
            #expect(Self.routeStorage(copy) != Self.routeStorage(policy))
            #expect(copy?.routes.first?.location?.file == policy.routes.first?.location?.file)
        }
        #expect(Set(copies.map { Self.routeStorage($0) }).count == copies.count)
    }

    @Test func aFileChangedInBetweenLeavesTheCheckedPolicy() throws {
        let (dir, paths) = try Self.ruleFiles()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let policy = try #require(try Self.load(paths))
        // The included file is edited after the check: the recompiled policy differs, and is not used.
        try "route /avatar { file photo { types image/jpeg; } }\n"
            .write(toFile: dir + "/inc/files.rules", atomically: true, encoding: .utf8)
        let changed = try #require(try Self.load(paths))
        #expect(changed != policy)
        let copy = ProxyServer.workerCopy(of: policy) { try Self.load(paths) }
        #expect(copy == policy)
        #expect(Self.routeStorage(copy) == Self.routeStorage(policy))
        // A file that no longer compiles (or is gone) likewise.
        try "route /avatar { file photo { types; } }\n"
            .write(toFile: dir + "/inc/files.rules", atomically: true, encoding: .utf8)
        let broken = ProxyServer.workerCopy(of: policy) { try Self.load(paths) }
        #expect(Self.routeStorage(broken) == Self.routeStorage(policy))
        try FileManager.default.removeItem(atPath: dir + "/inc/files.rules")
        let gone = ProxyServer.workerCopy(of: policy) { try Self.load(paths) }
        #expect(Self.routeStorage(gone) == Self.routeStorage(policy))
    }

    @Test func noPolicyStaysNone() {
        var compiled = 0
        let copy = ProxyServer.workerCopy(of: nil) {
            compiled += 1
            return Policy()
        }
        #expect(copy == nil)
        #expect(compiled == 0)
    }
}
