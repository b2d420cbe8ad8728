import Audit
import Foundation
import Glibc
import Proxy
import Rules

// The proxy process's side of the supervisor's status channel and of the last good configuration
// (`LastGoodConfiguration`, docs/operations.md, "Restarts serve the last good configuration").
extension ServeCommand {
    /// The configuration file a restarted proxy process serves: the one last in force, when it is the same
    /// `--config` path; nil: read the disk.
    static func keptConfigFile(_ kept: LastGoodConfiguration?, path: String?) -> ConfigFile? {
        guard let kept, let path, kept.configPath == path, let file = kept.configFile(),
              !file.diagnostics.contains(where: { $0.severity == .error }) else { return nil }
        return file
    }

    /// Compares the configuration file on disk (`file`) with the one whose settings are in force (`started`):
    /// settings and upstream groups that changed are not applied but need a restart of formwall, which is logged
    /// (`configuration change needs a restart`) and returned as a reload warning.
    static func warnRestartNeeded(from started: ConfigFile?, to file: ConfigFile, _ events: EventLog) -> [String] {
        let before = started?.settings.mapValues(\.values) ?? [:]
        let changed = Set(before.keys).union(file.settings.keys)
            .filter { $0 != "rules" && before[$0] != file.settings[$0]?.values }
        let groups = started?.groups.map(\.summary) ?? []
        let names = changed.sorted() + (file.groups.map(\.summary) != groups ? ["upstream groups"] : [])
        guard !names.isEmpty else { return [] }
        events.write(.warn, "configuration change needs a restart", [
            .string("config", file.path), LogField("settings", .strings(names)),
        ])
        return ["\(file.path): \(names.joined(separator: ", ")) changed; not applied until formwall restarts"]
    }

    /// A restarted proxy process serves `kept`; it checks the files on disk too, and says at every start when they
    /// are invalid (an error: the next reload or restart of formwall would fail on them), when settings changed
    /// that need a restart, and when valid rules on disk differ from the policy in force (a reload applies them).
    static func reportDisk(against kept: LastGoodConfiguration, in source: OptionSource, _ config: ProxyConfiguration) {
        let events = config.eventLog
        let since = AuditTimestamp(millisecondsSinceEpoch: kept.loadedAt).rfc3339
        var paths = config.rules
        do {
            if let path = source.commandLine.value("config") {
                let disk = try readConfigFile(path)
                _ = warnRestartNeeded(from: source.file, to: disk, events)
                paths = parsedRules(OptionSource(commandLine: source.commandLine, file: disk))
            }
            let policy = try ProxyServer.loadPolicy(paths, quarantine: config.quarantine != nil,
                                                    upstreamGroups: config.upstreams.map(\.name))
            let inForce = kept.sources.map { PolicySource(path: $0.path, contents: Array($0.contents)) }
            if paths != kept.rules || (policy?.sources ?? []) != inForce {
                events.write(.warn, "rules on disk not in force", [
                    LogField("rules", .strings(paths)), .string("last_good_at", since),
                    .string("action", "serving the last good configuration; `formwall reload` applies the disk's"),
                ])
            }
        } catch {
            events.write(.error, "configuration on disk invalid", [
                .error(error), .string("action", "serving the last good configuration"),
                .string("last_good_at", since),
            ])
        }
    }

    /// Tells the supervisor that this proxy process is ready, and after each SIGHUP how the reload went, each time
    /// with the configuration now in force.
    static func tellSupervisor(_ channel: Int32, server: ProxyServer, file: ConfigFile?) {
        let send = { (message: SupervisorMessage) in
            let inForce = LastGoodConfiguration(config: file, rules: server.rulesInForce.paths,
                                                sources: server.rulesInForce.sources,
                                                loadedAt: server.rulesInfo?.loadedAt ?? .now())
            let memory = try? inForce.memoryFile()
            message.send(on: channel, attaching: memory)
            if let memory { close(memory) }
        }
        send(SupervisorMessage(event: .ready))
        server.onReloadFinished = { outcome in
            send(SupervisorMessage(event: .reloaded, errors: outcome.errors, warnings: outcome.warnings))
        }
    }
}
