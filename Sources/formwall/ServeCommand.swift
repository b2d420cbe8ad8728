import Audit
import CLinux
import Foundation
import Glibc
import Proxy
import Reactor
import Rules

/// `formwall serve`: run the proxy.
enum ServeCommand: Command {
    static let name = "serve"
    static let summary = "run the proxy in front of an upstream"
    static let help = """
    Usage: formwall serve --listen HOST:PORT --upstream http://HOST:PORT [options]
           formwall serve --config FILE [options]

    Runs the reverse proxy. multipart/form-data request bodies are parsed as they stream and re-encoded
    canonically (fresh boundary) to the upstream; other requests stream through unchanged. Malformed
    framing is answered with a JSON error ({"error": KIND, "status": N, "request_id": ID}).

    By default `serve` is a small supervisor process that binds the listening sockets and runs the proxy as
    a child process with them. When the proxy process dies (a crash, SIGKILL, the OOM killer) the supervisor
    starts a new one at once (with backoff 0.1 s … 5 s if it keeps dying quickly), logs the exit on stderr and
    as a `worker_exit` audit record. Connections arriving meanwhile wait in the listen backlog; only requests
    in flight in the dead process are lost. The new process serves the configuration last in force (the
    settings formwall started with, the rules of the last successful start or reload), not the files on disk,
    and logs an error at each start while those are invalid. A proxy process that exits before it is ready is
    not waited for: the listeners refuse connections until one starts.

    Signals (to the supervisor, which passes them on): SIGTERM and SIGINT stop accepting, let in-flight
    requests finish (up to --drain-timeout) and exit 0. SIGHUP reloads what can be reloaded; SIGUSR1 reopens
    logs. `formwall reload --pid-file FILE` sends SIGHUP and exits 1 if the reload failed. Under systemd
    (NOTIFY_SOCKET set, Type=notify) the supervisor sends READY=1, RELOADING=1 and STOPPING=1.

    Options:
      --config FILE                   read options from a configuration file (rule-file syntax; every option
                                      below is a directive of the same name: `workers 2;`, `proxy-protocol
                                      on;`), plus upstream groups and `include rules/*.rules;`. A relative
                                      path in the file is relative to the file's directory. Options on
                                      the command line override the file. Check it with
                                      `formwall check --config FILE`; docs/configuration.md
      --listen HOST:PORT              address to accept clients on (required), e.g. 127.0.0.1:8080; repeat it
                                      to listen on several addresses
      --upstream http://HOST:PORT     the application to protect (required; https://HOST:PORT for TLS to it,
                                      verified); with --config, or the name of an
                                      upstream group the file declares (`upstream app { server …; }`)
      --workers N                     event-loop threads (default: number of cores)
      --max-connections N             client connections each worker keeps open at once (default 4096). At
                                      the limit a new connection closes the longest-idle keep-alive one;
                                      with none idle the worker stops accepting until one closes (new
                                      connections wait in the listen backlog). The descriptor limit is
                                      raised to fit at start-up, or a warning says it cannot be
      --upstream-body chunked|hold|spool
                                      how re-encoded form bodies go upstream (default chunked: streamed;
                                      hold: file parts with a pending verdict wait in a 0600 temp file
                                      until they pass; spool: the whole body is staged in a 0600 temp
                                      file and sent with Content-Length, for Django, PHP-FPM and others
                                      that read chunked bodies as empty). A route's `upstream-body`
                                      setting overrides it.
      --spool-dir DIR                 where spooled bodies and held parts go (default /tmp; files are
                                      unlinked at once); must be a writable directory at start-up
      --trusted-proxies CIDR[,CIDR...]
                                      peers whose X-Forwarded-For is believed (10.0.0.0/8,::1): the
                                      client is its right-most untrusted address. From other peers the
                                      incoming X-Forwarded-For is replaced by the peer's address
      --proxy-protocol                every connection starts with a PROXY protocol header (v1 or v2)
                                      naming the client; without one: 400 invalid_proxy_header
      --underscore-headers drop|forward
                                      request fields whose names hold a `_` (default drop, as nginx: PHP
                                      and CGI servers read X_Original_URL as X-Original-URL); forward keeps
                                      them except those read as a field Formwall sets or drops
      --max-head-bytes N              request head limit (default 16384; 431 beyond)
      --max-headers N                 request header count limit (default 100; 431 beyond)
      --client-header-timeout SEC     whole request head must arrive within (default 10; 408 after)
      --client-body-timeout SEC       longest client silence during a request body while Formwall wants to
                                      read it (default 60; 408 after)
      --client-send-timeout SEC       longest time the client takes no byte of a response Formwall has for
                                      it (default 60; the response is cut, the connection closed)
      --keepalive-timeout SEC         idle client keep-alive connections (default 75)
      --upstream-connect-timeout SEC  connecting to the upstream (default 5; 504 after)
      --upstream-response-timeout SEC longest upstream silence once the request is sent, or while it takes
                                      no byte of a body that waits for it (default 60; 504)
      --drain-timeout SEC             how long SIGTERM waits for in-flight requests (default 30)
      --client-body-min-rate BYTES    slowest average body rate accepted, per second of reading (default
                                      1024; 0 off); slower bodies get 408 client_body_too_slow
      --client-body-rate-grace SEC    reading time before the minimum rate is checked (default 10)
      --upstream-idle-timeout SEC     pooled upstream connections close after this idle time (default 1.5,
                                      below gunicorn's 2 s keep-alive); the pool reuses its oldest connection
                                      first and, once per this time, closes half of those the load did not need
      --linger-time SEC               after answering a request whose body was not read to its end, read and
                                      discard what the client still sends for at most this long (default 30)
      --linger-timeout SEC            ... or until the client is silent this long (default 5)
      --linger-bytes SIZE             ... or until this much was discarded (default 64MiB)
      --rules FILE|DIR                rule files to enforce (repeatable; a DIR means its *.rules files).
                                      Without --rules every well-formed request is forwarded; a DIR
                                      without *.rules files is an error. SIGHUP reloads them; an invalid
                                      new file keeps the old policy.
      --quarantine-dir DIR            store for parts whose rule says `action quarantine` (created 0700 if
                                      missing; its parent must exist). Rules that use `action quarantine`
                                      without it are refused at start-up
      --quarantine-max SIZE           store size cap, e.g. 10GiB (default 10GiB); full store: 503, and
                                      /readyz fails. Usage is rescanned from the directory (when a part
                                      does not fit, on /metrics and /readyz, every 10 s), so items
                                      deleted by `formwall quarantine delete` or by hand make room
      --quarantine-retention DAYS     items older than this are pruned (default 30)
      --audit-log FILE|-              one JSON line per request (O_APPEND; `-` for stdout)
      --audit-rotate SIZE             rotate the audit log at SIZE (e.g. 100MiB), gzip old files
      --audit-keep N                  rotated audit files to keep (default 10)
      --audit-field NAME              also log this field's value, truncated to 256 bytes (repeatable;
                                      off by default because field values can be secrets)
      --tls-certificate FILE --tls-key FILE
                                      terminate TLS: a PEM certificate chain and its key (repeatable, in
                                      pairs; the first is the default, the others are chosen by the server
                                      name a client sends, matched against each certificate's names). Then
                                      every --listen is TLS, unless some are written http://HOST:PORT
                                      (plain) and https://HOST:PORT (TLS) to mix them. SIGHUP reloads them
      --tls-min-version 1.2|1.3       oldest protocol accepted (default 1.3)
      --tls-ciphers LIST              TLS 1.2 ciphers (OpenSSL syntax; default ECDHE with AES-GCM/ChaCha20)
      --tls-ciphersuites LIST         TLS 1.3 suites (default AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305)
      --tls-strict-sni                a server name no certificate matches gets an alert, not the default
      --tls-client-ca FILE            ask clients for certificates chained to this CA (mTLS)
      --tls-client-certificate required|optional
                                      with --tls-client-ca: refuse clients without one (default required)
      --tls-client-subject-header NAME
                                      field carrying the verified client subject upstream (default
                                      X-Client-Cert-Subject; a client's own copy is always removed)
      --upstream-ca FILE              CA bundle for https:// upstreams (default: the system store)
      --upstream-tls-verify on|off    verify https:// upstream certificates and host names (default on;
                                      off is logged as an error at start-up and on every reload)
      --upstream-tls-certificate FILE --upstream-tls-key FILE
                                      client certificate for mTLS to https:// upstreams
      --antivirus clamd:unix:PATH|clamd:tcp:HOST:PORT
                                      scan every file part with clamd (INSTREAM, while it arrives): parts
                                      are held until clamd says OK; a detection is the violation
                                      `malware` (the rule's action: reject or quarantine). docs/rules.md
      --antivirus-failure reject|allow
                                      clamd down, too slow or refusing the size: 503 and nothing forwarded
                                      (reject, default), or forward the part unscanned and say so (allow)
      --antivirus-timeout SEC         longest wait for a verdict once a part ended (default 30)
      --admin HOST:PORT               admin listener (default off), e.g. 127.0.0.1:9901: plain HTTP GET
                                      /metrics (Prometheus text), /healthz, /readyz, /rules, /upstreams.
                                      Bind it to a loopback or private address: it has no authentication
      --single-process                no supervisor: one process that binds and serves itself (for
                                      debugging, or under an init that restarts it)
      --log-level debug|info|warn|error
                                      least severe event line written on stderr (default info; error:
                                      failures only). Lines are JSON objects, one per line, with ts,
                                      level, msg, pid and fields such as request_id, error
      --log-format json|text          event lines as JSON (default) or as `formwall: msg key=value`
                                      text for a terminal
      --pid-file FILE                 write the pid to signal (the supervisor's, or with --single-process
                                      the one process's) to FILE (0644) once started; removed at exit.
                                      The supervisor also keeps FILE.status (0600) for `formwall reload`
      --help                          show this help

    Exit status: 0 after SIGTERM/SIGINT; 1 when start-up fails (address in use, invalid rules, a route naming
    an undeclared upstream group, a spool, quarantine or audit path that cannot be used; an event line with
    "level":"error","msg":"cannot start") or the proxy fails later; 2 for a usage error (unknown option,
    missing or invalid value, an option that needs another one, a mistake in the --config file; one
    `formwall: …` text line, as every other subcommand prints).
    """

    static func run(_ args: [String]) -> Int32 {
        let parsed: Arguments
        do {
            parsed = try Arguments(args, valued: valuedOptions, flags: flagOptions)
        } catch {
            printError("\(error). Run `formwall serve --help`.")
            return 2
        }
        guard parsed.positionals.isEmpty else {
            printError("unexpected argument '\(parsed.positionals[0])'. Run `formwall serve --help`.")
            return 2
        }
        let inherited: SupervisorEnvironment.Inherited?
        do { inherited = try SupervisorEnvironment.take() } catch {
            printError("\(error)")
            return 2
        }
        // A proxy process the supervisor restarts serves the configuration last in force, not the disk's.
        let lastGood = inherited?.lastGood.map { fd in
            defer { close(fd) }
            return Result { try LastGoodConfiguration.read(fd) }
        }
        let kept = try? lastGood?.get()
        let source: OptionSource
        var config: ProxyConfiguration
        do {
            let file = try keptConfigFile(kept, path: parsed.value("config"))
                ?? parsed.value("config").map { try readConfigFile($0) }
            source = OptionSource(commandLine: parsed, file: file)
            config = try configuration(from: source, resolve: true)
        } catch {
            printError("\(error)")
            return 2
        }
        if let kept {
            config.rules = kept.rules
            config.lastGoodRules = kept.lastGoodRules
        }
        // The supervised proxy process runs with the same arguments; only the top process writes the pid file.
        let pidFile = inherited == nil ? source.value("pid-file") : nil
        if inherited == nil && !source.flag("single-process") {
            return supervise(config, pidFile: pidFile)
        }
        // From here on every line is an event line (docs/operations.md, "Logs on stderr"), start-up failures included.
        let events = config.eventLog
        if case .failure(let error) = lastGood {
            events.write(.error, "last good configuration unreadable", [
                .error(error), .string("action", "reading the configuration on disk"),
            ])
        }
        if let kept { reportDisk(against: kept, in: source, config) }
        if let supervisor = inherited?.supervisor {
            // Drain (SIGTERM) if the supervisor dies; it may already have, just before this call.
            _ = cl_set_parent_death_signal(SIGTERM)
            if getppid() != supervisor {
                events.write(.error, "cannot start", [.int("supervisor_pid", Int(supervisor)),
                                                      .string("error", "the supervisor is gone")])
                return 1
            }
        }
        if let inherited, inherited.listeners.count != config.workers * config.listeners.count {
            // The configuration file changed since the supervisor bound one socket per worker and address: the
            // sockets win until a restart of formwall itself.
            let perWorker = inherited.listeners.count / max(1, config.workers)
            let running = inherited.listeners.count % config.listeners.count == 0
                ? inherited.listeners.count / config.listeners.count : 0
            guard running > 0 else {
                events.write(.error, "cannot start", [.string("error", "listen addresses changed in the configuration "
                    + "(\(config.listeners.count) now, \(perWorker) bound); restart formwall to apply")])
                return 1
            }
            events.write(.warn, "configuration change needs a restart", [
                .string("setting", "workers"), .int("configured", config.workers), .int("running", running),
            ])
            config.workers = running
        }
        let descriptors = raiseDescriptorLimit(config)
        let server: ProxyServer
        do {
            server = try ProxyServer(configuration: config, inheritedListeners: inherited?.listeners ?? [],
                                     inheritedAdmin: inherited?.admin)
            server.supervisorRestarts = inherited?.restarts ?? 0
        } catch {
            events.write(.error, "cannot start", [.error(error)])
            return 1
        }
        if let path = parsed.value("config") {
            // SIGHUP reads the file again: its `include`s and `rules` may name other files now. What else changed
            // needs a restart, and is said so.
            let started = source.file
            server.rulePaths = {
                let file = try readConfigFile(path)
                return (parsedRules(OptionSource(commandLine: parsed, file: file)),
                        warnRestartNeeded(from: started, to: file, events))
            }
        }
        if let pidFile {
            do { try PIDFile.write(pidFile) } catch {
                events.write(.error, "cannot start", [.error(error)])
                return 1
            }
        }
        defer { if let pidFile { PIDFile.remove(pidFile) } }
        var listening: [LogField] = [.string("listen", config.listeners.map { "\($0)" }.joined(separator: ",")),
                                     .string("upstream", config.upstream.authority), .int("workers", config.workers)]
        listening.append(.int("max_connections", config.maxConnections))
        if let descriptors { listening.append(.int("descriptor_limit", Int(clamping: descriptors.now))) }
        if let admin = config.admin { listening.append(.string("admin", "\(admin)")) }
        if let kept {
            listening.append(.string("last_good_at", AuditTimestamp(millisecondsSinceEpoch: kept.loadedAt).rfc3339))
        }
        if config.upstreams.count > 1 || config.upstreams[0].servers.count > 1 {
            listening.append(LogField("upstream_groups", .strings(config.upstreams.map(\.name))))
        }
        events.write(.info, "listening", listening)
        if let channel = inherited?.status { tellSupervisor(channel, server: server, file: source.file) }
        do {
            try server.run()
        } catch {
            events.write(.error, "proxy failed", [.error(error)])
            return 1
        }
        events.write(.info, "stopped")
        return 0
    }

    /// Descriptors the proxy process may need: a client and an upstream connection for each of `max-connections`
    /// per worker, and a margin for listeners, spool and quarantine files, logs and the event loops' own.
    static func descriptorsNeeded(_ config: ProxyConfiguration) -> UInt64 {
        let twice = UInt64(config.connectionCapacity) * 2   // at most 2 × Int.max: no overflow
        return min(twice, .max - 256) + 256
    }

    /// Raises the soft descriptor limit to what `max-connections` needs (up to the hard limit), and warns when
    /// the hard limit is lower: connections past it fail to be accepted (EMFILE) and wait in the backlog.
    static func raiseDescriptorLimit(_ config: ProxyConfiguration) -> DescriptorLimit.Outcome? {
        let needed = descriptorsNeeded(config)
        guard let outcome = DescriptorLimit.raise(toAtLeast: needed) else { return nil }
        if !outcome.allows(needed) {
            config.eventLog.write(.warn, "descriptor limit below what max-connections needs", [
                .int("descriptor_limit", Int(clamping: outcome.now)), .int("hard_limit", Int(clamping: outcome.hard)),
                .int("needed", Int(clamping: needed)), .int("workers", config.workers),
                .int("max_connections", config.maxConnections),
            ])
        }
        return outcome
    }

    /// Runs the supervisor (the default): validates, binds, then keeps a proxy process running.
    static func supervise(_ config: ProxyConfiguration, pidFile: String?) -> Int32 {
        let supervisor = Supervisor(configuration: config, arguments: CommandLine.arguments,
                                    statusPath: pidFile.map(SupervisorStatus.path(forPIDFile:)))
        do {
            try Supervisor.validate(config)
            try supervisor.bind()
            if let pidFile { try PIDFile.write(pidFile) }
        } catch {
            config.eventLog.write(.error, "cannot start", [.error(error)])
            return 1
        }
        defer { if let pidFile { PIDFile.remove(pidFile) } }
        do {
            return try supervisor.run()
        } catch {
            config.eventLog.write(.error, "supervisor failed", [.error(error)])
            return 1
        }
    }

    static func positiveInt(_ text: String, _ option: String) throws -> Int {
        guard let n = Int(text), n > 0 else { throw ConfigurationError("\(option) needs a positive whole number, got '\(text)'") }
        return n
    }

    static func size(_ text: String, _ option: String) throws -> UInt64 {
        guard let n = ByteSize.parse(text), n > 0 else {
            throw ConfigurationError("\(option) needs a size like 100MiB or 10GiB, got '\(text)'")
        }
        return n
    }

    static func days(_ text: String, _ option: String) throws -> Double {
        guard let n = Double(text), n > 0, n <= 36_500 else {
            throw ConfigurationError("\(option) needs a number of days, got '\(text)'")
        }
        return n
    }

    static func seconds(_ text: String, _ option: String) throws -> Double {
        guard let n = Double(text), n > 0, n < 86_400 * 30 else {
            throw ConfigurationError("\(option) needs a number of seconds, got '\(text)'")
        }
        return n
    }
}

/// `--pid-file`: the pid of the process to signal, written once start-up succeeded and removed at exit.
enum PIDFile {
    /// Writes `getpid()` and a newline to `path`, mode 0644 whatever the umask.
    static func write(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ConfigurationError("--pid-file \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let text = Array("\(getpid())\n".utf8)
        guard fchmod(fd, 0o644) == 0, text.withUnsafeBytes({ Glibc.write(fd, $0.baseAddress, $0.count) }) == text.count
        else { throw ConfigurationError("--pid-file \(path): \(String(cString: strerror(errno)))") }
    }

    /// Removes the file if it still holds this process's pid (a newer instance may have replaced it).
    static func remove(_ path: String) {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              text.trimmingCharacters(in: .whitespacesAndNewlines) == String(getpid()) else { return }
        unlink(path)
    }
}
