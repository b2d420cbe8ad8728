import Foundation
import Audit
import Proxy
import Reactor
import Rules

// `formwall serve`'s configuration: the command line over the --config file, checked by one piece of code so a
// value means the same in both places and every message names where it came from.
extension ServeCommand {
    /// `serve`'s long options that take a value; each is also a configuration-file directive.
    static let valuedOptions: Set<String> = [
        "config", "listen", "upstream", "workers", "max-connections", "upstream-body", "spool-dir", "trusted-proxies", "max-head-bytes",
        "max-headers", "client-header-timeout", "client-body-timeout", "client-send-timeout", "keepalive-timeout", "upstream-connect-timeout",
        "upstream-response-timeout", "drain-timeout", "client-body-min-rate", "client-body-rate-grace",
        "upstream-idle-timeout", "linger-time", "linger-timeout", "linger-bytes", "rules", "quarantine-dir",
        "quarantine-max", "quarantine-retention", "audit-log", "audit-rotate", "audit-keep", "audit-field", "pid-file", "admin", "log-level", "log-format",
        "tls-certificate", "tls-key", "tls-min-version", "tls-ciphers", "tls-ciphersuites", "tls-client-ca",
        "tls-client-certificate", "tls-client-subject-header", "upstream-ca", "upstream-tls-verify",
        "upstream-tls-certificate", "upstream-tls-key", "antivirus", "antivirus-failure", "antivirus-timeout",
        "underscore-headers",
    ]
    /// `serve`'s flags; `NAME on;` in the file.
    static let flagOptions: Set<String> = ["single-process", "proxy-protocol", "tls-strict-sni"]

    /// Reads a --config file; its diagnostics (file:line:col) become one error.
    static func readConfigFile(_ path: String) throws -> ConfigFile {
        let file = ConfigFile.read(path, valued: valuedOptions, flags: flagOptions)
        let errors = file.diagnostics.filter { $0.severity == .error }
        guard errors.isEmpty else {
            throw ConfigurationError("invalid configuration file:\n" + errors.map(\.description).joined(separator: "\n"))
        }
        return file
    }

    /// The rule files: `--rules` from the command line when given, else the file's `rules` and `include`s.
    static func parsedRules(_ source: OptionSource) -> [String] {
        let given = source.commandLine.values("rules")
        guard given.isEmpty else { return given }
        return (source.file?.settings["rules"]?.values ?? []) + (source.file?.rules ?? [])
    }

    /// Stands in for a server `check` could not resolve, and for the default before the groups are read: it is
    /// never dialled (`serve` resolves every server or stops).
    private static func placeholderUpstream() throws -> ProxyConfiguration.Upstream {
        ProxyConfiguration.Upstream(address: try SocketAddress.parse("127.0.0.1:9"), authority: "127.0.0.1:9")
    }

    /// The configuration `source` describes. With `resolve` false (`formwall check`) a host name that does not
    /// resolve here is a warning, not an error: it may resolve where `serve` runs (a container network).
    static func configuration(from source: OptionSource, resolve: Bool = true,
                              warn: (String) -> Void = { _ in }) throws -> ProxyConfiguration {
        let listens = source.values("listen")
        guard !listens.isEmpty else {
            throw ConfigurationError("--listen is required (or `listen` in the --config file)")
        }
        var addresses: [SocketAddress] = []
        var schemes: [Bool?] = []   // true: https://, false: http://, nil: none written
        for written in listens {
            var listen = Substring(written)
            var scheme: Bool?
            if listen.hasPrefix("https://") { scheme = true; listen = listen.dropFirst(8) }
            else if listen.hasPrefix("http://") { scheme = false; listen = listen.dropFirst(7) }
            if listen.hasSuffix("/") { listen = listen.dropLast() }
            schemes.append(scheme)
            let address: SocketAddress
            do { address = try SocketAddress.resolve(String(listen)) } catch {
                throw ConfigurationError("\(source.label("listen")): invalid address \(listen): \(error)")
            }
            guard !addresses.contains(address) else {
                throw ConfigurationError("\(source.label("listen")): \(listen) is given twice")
            }
            addresses.append(address)
        }
        var config = ProxyConfiguration(listen: addresses[0], upstream: try placeholderUpstream())
        config.additionalListeners = Array(addresses.dropFirst())
        try tlsSettings(source, schemes: schemes, into: &config)
        config.upstreams = try upstreamGroups(source, resolve: resolve, warn: warn)
        if let v = source.value("workers") { config.workers = try positiveInt(v, source.label("workers")) }
        if let v = source.value("max-connections") {
            config.maxConnections = try positiveInt(v, source.label("max-connections"))
        }
        if let v = source.value("upstream-body") {
            guard let mode = ProxyConfiguration.UpstreamBodyMode(rawValue: v) else {
                throw ConfigurationError("\(source.label("upstream-body")) must be chunked, hold or spool")
            }
            config.upstreamBody = mode
        }
        if let v = source.value("spool-dir") { config.spoolDirectory = v }
        if let v = source.value("log-level") {
            guard let level = LogLevel(name: v) else {
                throw ConfigurationError("\(source.label("log-level")) must be debug, info, warn or error, got '\(v)'")
            }
            config.logLevel = level
        }
        if let v = source.value("log-format") {
            guard let format = LogFormat(rawValue: v) else {
                throw ConfigurationError("\(source.label("log-format")) must be json or text, got '\(v)'")
            }
            config.logFormat = format
        }
        if let v = source.value("antivirus") {
            do { config.antivirus = try .parse(v) } catch { throw ConfigurationError("\(source.label("antivirus")): \(error)") }
            if let f = source.value("antivirus-failure") {
                guard ["reject", "allow"].contains(f) else {
                    throw ConfigurationError("\(source.label("antivirus-failure")) must be reject or allow, got '\(f)'")
                }
                config.antivirus?.allowOnFailure = f == "allow"
            }
            if let t = source.value("antivirus-timeout") {
                config.antivirus?.timeout = try seconds(t, source.label("antivirus-timeout"))
            }
        } else if let other = ["antivirus-failure", "antivirus-timeout"].first(where: { source.value($0) != nil }) {
            throw ConfigurationError("\(source.label(other)) needs --antivirus")
        }
        if let v = source.value("admin") {
            do { config.admin = try SocketAddress.resolve(v) } catch {
                throw ConfigurationError("\(source.label("admin")): invalid address \(v): \(error)")
            }
        }
        config.proxyProtocol = source.flag("proxy-protocol")
        if let v = source.value("underscore-headers") {
            guard let mode = ProxyConfiguration.UnderscoreHeaders(rawValue: v) else {
                throw ConfigurationError("\(source.label("underscore-headers")) must be drop or forward, got '\(v)'")
            }
            config.underscoreHeaders = mode
        }
        if let v = source.value("trusted-proxies") {
            switch TrustedProxies.parse(v) {
            case .success(let trusted): config.trustedProxies = trusted
            case .failure(let error):
                throw ConfigurationError("\(source.label("trusted-proxies")): '\(error.entry)' is not an address or CIDR range")
            }
        }
        if let v = source.value("max-head-bytes") { config.http.maxHeadBytes = try positiveInt(v, source.label("max-head-bytes")) }
        if let v = source.value("max-headers") { config.http.maxHeaderCount = try positiveInt(v, source.label("max-headers")) }
        if let v = source.value("client-header-timeout") { config.timeouts.clientHeader = try seconds(v, source.label("client-header-timeout")) }
        if let v = source.value("client-body-timeout") { config.timeouts.clientBody = try seconds(v, source.label("client-body-timeout")) }
        if let v = source.value("client-send-timeout") { config.timeouts.clientSend = try seconds(v, source.label("client-send-timeout")) }
        if let v = source.value("keepalive-timeout") { config.timeouts.clientKeepAlive = try seconds(v, source.label("keepalive-timeout")) }
        if let v = source.value("upstream-connect-timeout") { config.timeouts.upstreamConnect = try seconds(v, source.label("upstream-connect-timeout")) }
        if let v = source.value("upstream-response-timeout") { config.timeouts.upstreamResponse = try seconds(v, source.label("upstream-response-timeout")) }
        if let v = source.value("drain-timeout") { config.timeouts.drain = try seconds(v, source.label("drain-timeout")) }
        if let v = source.value("client-body-min-rate") {
            guard let n = Int(v), n >= 0 else {
                throw ConfigurationError("\(source.label("client-body-min-rate")) needs a whole number of bytes per second, got '\(v)'")
            }
            config.timeouts.clientBodyMinRate = n
        }
        if let v = source.value("client-body-rate-grace") {
            config.timeouts.clientBodyRateGrace = try seconds(v, source.label("client-body-rate-grace"))
        }
        if let v = source.value("upstream-idle-timeout") { config.pool.idleTimeout = try seconds(v, source.label("upstream-idle-timeout")) }
        if let v = source.value("linger-time") { config.linger.time = try seconds(v, source.label("linger-time")) }
        if let v = source.value("linger-timeout") { config.linger.timeout = try seconds(v, source.label("linger-timeout")) }
        if let v = source.value("linger-bytes") { config.linger.bytes = Int(clamping: try size(v, source.label("linger-bytes"))) }
        // `--rules` on the command line replaces the file's `rules` and `include`; else both, in file order.
        config.rules = parsedRules(source)
        // Options that only mean something with another one: a missing partner is a mistake, not a no-op.
        for (option, needs) in [("quarantine-max", "quarantine-dir"), ("quarantine-retention", "quarantine-dir"),
                                ("audit-rotate", "audit-log"), ("audit-keep", "audit-log"),
                                ("audit-field", "audit-log")]
            where source.value(option) != nil && source.value(needs) == nil {
            let label = source.label(option)
            throw ConfigurationError("\(label) needs \(label.hasPrefix("--") ? "--\(needs)" : "`\(needs)`")")
        }
        if let path = source.value("pid-file"), path.isEmpty { throw ConfigurationError("\(source.label("pid-file")) needs a path") }
        if let dir = source.value("quarantine-dir") {
            var q = ProxyConfiguration.QuarantineSettings(directory: dir)
            if let v = source.value("quarantine-max") { q.maxBytes = try size(v, source.label("quarantine-max")) }
            if let v = source.value("quarantine-retention") {
                q.retentionSeconds = try days(v, source.label("quarantine-retention")) * 86_400
            }
            config.quarantine = q
        }
        if let path = source.value("audit-log") {
            var a = ProxyConfiguration.AuditSettings(path: path)
            if let v = source.value("audit-rotate") { a.rotateBytes = Int(try size(v, source.label("audit-rotate"))) }
            if let v = source.value("audit-keep") { a.keep = try positiveInt(v, source.label("audit-keep")) }
            a.fields = Set(source.values("audit-field"))
            config.audit = a
        }
        return config
    }

    /// The upstream groups, the default first. `upstream` names the default: a group declared in the file, or
    /// `http://host:port` (a group called `default` of that one server). Without `upstream`, a group called
    /// `default`, or the only group, is the default.
    static func upstreamGroups(_ source: OptionSource, resolve: Bool,
                               warn: (String) -> Void) throws -> [ProxyConfiguration.UpstreamGroup] {
        typealias Group = ProxyConfiguration.UpstreamGroup
        func server(_ text: String, _ label: String) throws -> ProxyConfiguration.Upstream {
            do {
                return try .parse(text)
            } catch let error as UpstreamResolutionError where !resolve {
                warn("\(label): \(error) (on this machine; `serve` resolves it at start-up)")
                return try placeholderUpstream()
            } catch {
                throw ConfigurationError("\(label): \(error)")
            }
        }
        var groups: [Group] = []
        for declaration in source.file?.groups ?? [] {
            let at = { (l: SourceLocation) in "\(l.file):\(l.line):\(l.column)" }
            var servers: [Group.Server] = []
            for s in declaration.servers {
                var entry = Group.Server(try server(s.address, "\(at(s.location)): server"))
                if let w = s.weight {
                    guard let n = Int(w), (1...1000).contains(n) else {
                        throw ConfigurationError("\(at(s.location)): weight must be a whole number from 1 to 1000, got '\(w)'")
                    }
                    entry.weight = n
                }
                servers.append(entry)
            }
            var group = Group(name: declaration.name, servers: servers)
            if let (text, location) = declaration.balance {
                guard let balance = Group.Balance(rawValue: text) else {
                    throw ConfigurationError("\(at(location)): balance must be round-robin or least-conn, got '\(text)'")
                }
                group.balance = balance
            }
            if let (text, location) = declaration.maxFails {
                guard let n = Int(text), (0...1000).contains(n) else {
                    throw ConfigurationError("\(at(location)): max-fails must be a whole number from 0 to 1000, got '\(text)'")
                }
                group.maxFails = n
            }
            if let (text, location) = declaration.failTimeout {
                group.failTimeout = try seconds(text, "\(at(location)): fail-timeout")
            }
            if let (text, location) = declaration.readiness {
                guard let readiness = Group.Readiness(rawValue: text) else {
                    throw ConfigurationError("\(at(location)): readiness must be required or optional, got '\(text)'")
                }
                group.readiness = readiness
            }
            groups.append(group)
        }
        if let text = source.value("upstream") {
            if let index = groups.firstIndex(where: { $0.name == text }) {
                groups.insert(groups.remove(at: index), at: 0)
            } else if text.contains(":") {
                if groups.contains(where: { $0.name == Group.defaultName }) {
                    throw ConfigurationError("\(source.label("upstream")) \(text): a group is already called "
                        + "'\(Group.defaultName)'; name it as the default upstream instead")
                }
                groups.insert(Group(name: Group.defaultName, servers: [.init(try server(text, source.label("upstream")))]),
                              at: 0)
            } else {
                throw ConfigurationError("\(source.label("upstream")) '\(text)' is neither http://host:port nor a "
                    + "declared upstream group" + (groups.isEmpty ? "" : " (\(groups.map(\.name).joined(separator: ", ")))"))
            }
        } else if let index = groups.firstIndex(where: { $0.name == Group.defaultName }) ?? (groups.count == 1 ? 0 : nil) {
            groups.insert(groups.remove(at: index), at: 0)
        } else {
            throw ConfigurationError(groups.isEmpty
                ? "--upstream is required (or `upstream` in the --config file)"
                : "which upstream group is the default? add `upstream NAME;` to the configuration file")
        }
        return groups
    }

    /// `--tls-*` and `--upstream-tls-*`. With certificates, a listen address without a scheme is TLS unless some
    /// address names one (`http://` plain, `https://` TLS), which is how plain and TLS listeners are mixed.
    static func tlsSettings(_ source: OptionSource, schemes: [Bool?], into config: inout ProxyConfiguration) throws {
        let certificates = source.values("tls-certificate")
        let keys = source.values("tls-key")
        guard certificates.count == keys.count else {
            throw ConfigurationError("\(source.label("tls-certificate")): give one --tls-key per --tls-certificate, "
                + "in the same order (\(certificates.count) certificates, \(keys.count) keys)")
        }
        let explicit = schemes.contains { $0 != nil }
        if certificates.isEmpty {
            if schemes.contains(true) {
                throw ConfigurationError("\(source.label("listen")): https:// needs --tls-certificate and --tls-key")
            }
            for option in ["tls-min-version", "tls-ciphers", "tls-ciphersuites", "tls-client-ca",
                           "tls-client-certificate", "tls-client-subject-header"] where source.value(option) != nil {
                throw ConfigurationError("\(source.label(option)) needs --tls-certificate and --tls-key")
            }
            if source.flag("tls-strict-sni") {
                throw ConfigurationError("\(source.label("tls-strict-sni")) needs --tls-certificate and --tls-key")
            }
        } else {
            var tls = ProxyConfiguration.TLSSettings(certificates: Array(zip(certificates, keys)))
            if let v = source.value("tls-min-version") {
                guard ["1.2", "1.3"].contains(v) else {
                    throw ConfigurationError("\(source.label("tls-min-version")) must be 1.2 or 1.3, got '\(v)'")
                }
                tls.minimumVersion = v
            }
            tls.ciphers = source.value("tls-ciphers")
            tls.ciphersuites = source.value("tls-ciphersuites")
            tls.strictSNI = source.flag("tls-strict-sni")
            tls.clientCA = source.value("tls-client-ca")
            if let v = source.value("tls-client-certificate") {
                guard tls.clientCA != nil else {
                    throw ConfigurationError("\(source.label("tls-client-certificate")) needs --tls-client-ca")
                }
                guard ["required", "optional"].contains(v) else {
                    throw ConfigurationError("\(source.label("tls-client-certificate")) must be required or optional, "
                        + "got '\(v)'")
                }
                tls.clientCertificateRequired = v == "required"
            }
            if let v = source.value("tls-client-subject-header") {
                guard !v.isEmpty, v.utf8.allSatisfy({ b in b < 0x80 && (b == 0x2D || b == 0x5F || (b >= 0x30 && b <= 0x39) || ((b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A)) }) else {
                    throw ConfigurationError("\(source.label("tls-client-subject-header")) must be a header field name")
                }
                tls.clientSubjectHeader = v
            }
            config.tls = tls
            config.tlsListeners = Set(schemes.indices.filter { explicit ? schemes[$0] == true : true })
            if config.tlsListeners.isEmpty {
                throw ConfigurationError("\(source.label("tls-certificate")): no listener is TLS; write "
                    + "--listen https://HOST:PORT")
            }
        }
        if let v = source.value("upstream-ca") { config.upstreamTLS.caFile = v }
        if let v = source.value("upstream-tls-verify") {
            guard ["on", "off"].contains(v) else {
                throw ConfigurationError("\(source.label("upstream-tls-verify")) must be on or off, got '\(v)'")
            }
            config.upstreamTLS.verify = v == "on"
        }
        let upstreamCertificate = source.value("upstream-tls-certificate")
        let upstreamKey = source.value("upstream-tls-key")
        guard (upstreamCertificate == nil) == (upstreamKey == nil) else {
            throw ConfigurationError("--upstream-tls-certificate and --upstream-tls-key go together")
        }
        if let upstreamCertificate, let upstreamKey { config.upstreamTLS.certificate = (upstreamCertificate, upstreamKey) }
    }
}
