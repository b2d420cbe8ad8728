import Audit
import CLinux
import Foundation
import Glibc
import Proxy
import Rules

/// The configuration a proxy process had in force when it last started or reloaded successfully: the `--config`
/// file its settings came from and the rule files of its policy, as they were read. The proxy process hands it to
/// the supervisor in an anonymous memory file (memfd) after each start and reload; the supervisor keeps the latest
/// and hands it to the proxy process it starts next, which serves it instead of reading the disk again. So a crash
/// never applies what is on disk: neither a rule file a failed reload left behind nor a setting a reload said
/// needs a restart (docs/operations.md, "Restarts serve the last good configuration").
struct LastGoodConfiguration: Codable {
    /// One rule file as it was read.
    struct Source: Codable {
        var path: String
        var contents: Data
    }

    /// The `--config` file and its bytes, the settings in force; nil without `--config`.
    var configPath: String?
    var config: Data?
    /// The rule paths of the policy in force (`--rules`, or the rule files the configuration file named).
    var rules: [String]
    /// The rule files as they were read, in the order read.
    var sources: [Source]
    /// When the policy was loaded (milliseconds since the epoch).
    var loadedAt: Int64

    init(config: ConfigFile?, rules: [String], sources: [PolicySource], loadedAt: AuditTimestamp) {
        configPath = config?.path
        self.config = config.map { Data($0.contents) }
        self.rules = rules
        self.sources = sources.map { Source(path: $0.path, contents: Data($0.contents)) }
        self.loadedAt = loadedAt.millisecondsSinceEpoch
    }

    /// The policy part, as the proxy configuration takes it.
    var lastGoodRules: ProxyConfiguration.LastGoodRules {
        .init(sources: sources.map { PolicySource(path: $0.path, contents: Array($0.contents)) },
              loadedAt: AuditTimestamp(millisecondsSinceEpoch: loadedAt))
    }

    /// The configuration file as `serve` parses it, its `include`s not looked up (the rules are `rules`).
    func configFile() -> ConfigFile? {
        guard let configPath, let config else { return nil }
        return ConfigFile.parse(Array(config), path: configPath, valued: ServeCommand.valuedOptions,
                                flags: ServeCommand.flagOptions, includes: false)
    }

    /// A new anonymous memory file (close-on-exec) holding this configuration as JSON.
    func memoryFile() throws -> Int32 {
        let bytes = [UInt8](try JSONEncoder().encode(self))
        let fd = cl_memory_file("formwall-last-good")
        guard fd >= 0 else { throw ConfigurationError("memfd_create: \(String(cString: strerror(errno)))") }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
            guard written > 0 else {
                let reason = String(cString: strerror(errno))
                close(fd)
                throw ConfigurationError("last good configuration: write: \(reason)")
            }
            offset += written
        }
        return fd
    }

    /// Reads the configuration a memory file holds.
    static func read(_ fd: Int32) throws -> LastGoodConfiguration {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(bytes.count)) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else {
                throw ConfigurationError("last good configuration: read: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            bytes += chunk[..<n]
        }
        do { return try JSONDecoder().decode(LastGoodConfiguration.self, from: Data(bytes)) } catch {
            throw ConfigurationError("last good configuration: \(error)")
        }
    }
}
