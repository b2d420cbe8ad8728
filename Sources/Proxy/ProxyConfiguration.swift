import Audit
import Glibc
import HTTP1
import Inspect
import Multipart
import Reactor
import Rules

/// Everything one proxy instance needs; every limit has a documented, safe default (docs/configuration.md).
public struct ProxyConfiguration: Sendable {
    /// Where clients connect (`--listen`): the first address; `additionalListeners` holds the others.
    public var listen: SocketAddress
    /// More addresses to accept clients on (`--listen` given several times, several `listen` directives).
    public var additionalListeners: [SocketAddress] = []
    /// Every listening address, the first first. Each worker has one SO_REUSEPORT socket on each.
    public var listeners: [SocketAddress] { [listen] + additionalListeners }
    /// Which of `listeners` (by index) terminate TLS with `tls`'s certificates.
    public var tlsListeners: Set<Int> = []
    /// TLS for clients (`--tls-certificate`, `--tls-key`, …); nil: no TLS listener.
    public var tls: TLSSettings?
    /// TLS to upstream servers given as `https://host:port`.
    public var upstreamTLS = UpstreamTLSSettings()
    /// Antivirus scanning of file parts with clamd (`--antivirus`); nil: none.
    public var antivirus: AntivirusSettings?

    /// `--antivirus clamd:unix:PATH|clamd:tcp:HOST:PORT`: every file part is staged (0600, unlinked) and streamed
    /// to clamd with INSTREAM while it arrives; it goes upstream only once clamd answered OK (docs/rules.md,
    /// "Antivirus").
    public struct AntivirusSettings: Sendable {
        public enum Address: Sendable, CustomStringConvertible {
            case unix(String)
            case tcp(SocketAddress)
            public var description: String {
                switch self {
                case .unix(let path): return "unix:\(path)"
                case .tcp(let address): return "tcp:\(address)"
                }
            }
        }
        public var address: Address
        /// clamd down, too slow or refusing the stream (StreamMaxLength): `false` (default) answers 503 and
        /// forwards nothing (fail closed); `true` (`--antivirus-failure allow`) forwards the part unscanned and
        /// says so in the audit record.
        public var allowOnFailure = false
        /// Longest wait for a verdict once a part ended (`--antivirus-timeout`, default 30 s).
        public var timeout: Double = 30

        public init(address: Address) { self.address = address }

        /// Parses `clamd:unix:/run/clamav/clamd.ctl` or `clamd:tcp:127.0.0.1:3310`.
        public static func parse(_ text: String) throws -> AntivirusSettings {
            var rest = Substring(text)
            guard rest.hasPrefix("clamd:") else {
                throw ConfigurationError("antivirus must be clamd:unix:PATH or clamd:tcp:HOST:PORT, got '\(text)'")
            }
            rest = rest.dropFirst(6)
            if rest.hasPrefix("unix:"), rest.count > 5 { return AntivirusSettings(address: .unix(String(rest.dropFirst(5)))) }
            if rest.hasPrefix("tcp:") {
                do { return AntivirusSettings(address: .tcp(try SocketAddress.resolve(String(rest.dropFirst(4))))) } catch {
                    throw ConfigurationError("antivirus \(text): \(error)")
                }
            }
            throw ConfigurationError("antivirus must be clamd:unix:PATH or clamd:tcp:HOST:PORT, got '\(text)'")
        }
    }

    /// Client-side TLS: certificates, protocols, client certificates (docs/tls.md).
    public struct TLSSettings: Sendable {
        /// Certificate chains (PEM) and their keys; the first is the default, the others are chosen by the
        /// server name a client sends (SNI), matched against each certificate's DNS names.
        public var certificates: [(certificate: String, key: String)]
        /// Oldest protocol accepted: `1.3` (default) or `1.2`.
        public var minimumVersion: String = "1.3"
        /// TLS 1.2 cipher list (OpenSSL syntax); nil: a modern AEAD-only default.
        public var ciphers: String?
        /// TLS 1.3 cipher suites; nil: OpenSSL's default (AES-GCM and ChaCha20-Poly1305).
        public var ciphersuites: String?
        /// A server name that no certificate matches gets the `unrecognized_name` alert instead of the default
        /// certificate.
        public var strictSNI = false
        /// CA bundle (PEM) that client certificates must chain to (`--tls-client-ca`); nil: none asked for.
        public var clientCA: String?
        /// With `clientCA`: whether a client without a certificate is refused (`required`, default) or served
        /// (`optional`; an invalid certificate is still refused).
        public var clientCertificateRequired = true
        /// The request field that carries the verified client subject upstream (default
        /// `X-Client-Cert-Subject`); a client's own copy is always removed.
        public var clientSubjectHeader = "X-Client-Cert-Subject"

        public init(certificates: [(certificate: String, key: String)]) { self.certificates = certificates }
    }

    /// Upstream-side TLS, for `https://` upstream servers.
    public struct UpstreamTLSSettings: Sendable {
        /// CA bundle to verify upstream certificates against (`--upstream-ca`); nil: the system store.
        public var caFile: String?
        /// Verification of the upstream's certificate and host name (`--upstream-tls-verify off` turns it off,
        /// loudly). Default on.
        public var verify = true
        /// A client certificate and key for mTLS to the upstream.
        public var certificate: (certificate: String, key: String)?
        public init() {}
    }
    /// The upstream groups. The first is the default, used by routes without `upstream NAME;`: the one server of
    /// `--upstream http://host:port` (named `default`), or the group a configuration file's `upstream NAME;`
    /// chooses. Never empty; every group has at least one server.
    public var upstreams: [UpstreamGroup]
    /// The default group's first server (`--upstream http://host:port`); setting it replaces the default group.
    public var upstream: Upstream {
        get { upstreams[0].servers[0].upstream }
        set { upstreams[0] = UpstreamGroup(name: UpstreamGroup.defaultName, servers: [.init(newValue)]) }
    }
    /// Event-loop worker threads, each with its own SO_REUSEPORT listener (`--workers`, default: cores).
    public var workers: Int = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    /// Client connections one worker keeps open at once (`--max-connections`, default 4096). At the limit, a new
    /// connection closes the one that has been idle longest (between requests, or before its first byte, with
    /// nothing left to write); when none is idle, the worker stops accepting until one closes, and new
    /// connections wait in the listen backlog. With the per-connection worst case of about 2 MiB
    /// (docs/configuration.md, "Memory per connection") this bounds a worker's memory.
    public var maxConnections: Int = 4096
    /// Client connections the process keeps open at most: `workers` × `maxConnections` (saturating).
    public var connectionCapacity: Int {
        let (product, overflow) = workers.multipliedReportingOverflow(by: maxConnections)
        return overflow ? .max : product
    }
    /// How re-encoded multipart bodies travel upstream (`--upstream-body`).
    public var upstreamBody: UpstreamBodyMode = .chunked
    /// Directory for spooled bodies (`--spool-dir`, default /tmp); files are 0600 and always removed.
    public var spoolDirectory: String = "/tmp"
    /// Request head limits (head bytes 16 KiB, 100 headers; 431 beyond) and chunked framing bounds.
    public var http = HTTPLimits()
    /// Multipart parser limits (part header block 16 KiB, 10,000 parts, Content-Type 1 KiB).
    public var multipart = MultipartLimits()
    /// Buffers and timeouts.
    public var buffers = Buffers()
    public var timeouts = Timeouts()
    /// Upstream connection pool.
    public var pool = Pool()
    /// Rule files or directories (`--rules`); empty: no policy, every well-formed request is forwarded
    /// (multipart bodies still re-encoded).
    public var rules: [String] = []
    /// The policy to start with instead of reading `rules` from the disk: the files as they were read when it was
    /// last in force, and when that was. A proxy process the supervisor restarts gets it (docs/operations.md,
    /// "Restarts serve the last good configuration"); nil: read the disk.
    public var lastGoodRules: LastGoodRules?

    /// The rule files of a policy that was in force, as they were read (`Policy.sources`), and when it was loaded.
    public struct LastGoodRules: Sendable {
        public var sources: [PolicySource]
        public var loadedAt: AuditTimestamp
        public init(sources: [PolicySource], loadedAt: AuditTimestamp) {
            self.sources = sources
            self.loadedAt = loadedAt
        }
    }
    /// Quarantine store (`--quarantine-dir`); nil: a `quarantine` action fails closed with 503.
    public var quarantine: QuarantineSettings?
    /// Audit log (`--audit-log FILE|-`); nil: no audit log.
    public var audit: AuditSettings?
    /// Peers whose X-Forwarded-For is believed (`--trusted-proxies`); empty: none, every incoming
    /// X-Forwarded-For is replaced by the peer's address.
    public var trustedProxies = TrustedProxies()
    /// Every connection starts with a PROXY protocol header (v1 or v2) naming the client (`--proxy-protocol`).
    public var proxyProtocol = false
    /// Request fields whose names hold a `_` (`--underscore-headers`): dropped (the default, as nginx's
    /// `underscores_in_headers off`), or forwarded except those a CGI-style server reads as a field Formwall sets
    /// or drops (`X_Forwarded_For`, `X_Original_URL`). Method overrides spelled so are judged either way.
    public var underscoreHeaders: UnderscoreHeaders = .drop

    /// What `--underscore-headers` does with request fields whose names hold a `_`.
    public enum UnderscoreHeaders: String, Sendable, Hashable {
        /// Left out of what goes upstream.
        case drop
        /// Forwarded, except those read as a field Formwall sets or drops.
        case forward
    }
    /// The admin listener (`--admin HOST:PORT`): /metrics, /healthz, /readyz, /rules over plain HTTP/1.1 GET.
    /// Default nil: off.
    public var admin: SocketAddress?

    /// Whether each request's `AuditRecord` is built: for the audit log, or for the admin listener's metrics.
    public var buildsAuditRecords: Bool { audit != nil || admin != nil }

    /// The least severe event line written on stderr (`--log-level debug|info|warn|error`, default `info`: listening,
    /// reloads, process starts and exits, and every failure; `error` keeps only failures).
    public var logLevel: LogLevel = .info
    /// How event lines on stderr look (`--log-format json|text`, default `json`: one JSON object per line).
    public var logFormat: LogFormat = .json

    /// The stderr event log these settings describe.
    public var eventLog: EventLog { EventLog(level: logLevel, format: logFormat) }

    /// Where quarantined parts go.
    public struct QuarantineSettings: Sendable {
        public var directory: String
        /// Store size cap (`--quarantine-max`, default 10 GiB); a full store fails closed (503).
        public var maxBytes: UInt64 = 10 << 30
        /// Items older than this are pruned (`--quarantine-retention`, default 30 days).
        public var retentionSeconds: Double = 30 * 86_400
        public init(directory: String) { self.directory = directory }
    }

    /// The audit log.
    public struct AuditSettings: Sendable {
        public var path: String
        /// Built-in size rotation (`--audit-rotate 100MiB --audit-keep 10`); nil when logrotate rotates.
        public var rotateBytes: Int?
        public var keep: Int = 10
        /// Field values logged in the record's `fields` (opt-in; values truncated to 256 bytes). Default none:
        /// field values can be secrets.
        public var fields: Set<String> = []
        /// Write human one-line summaries (as `formwall tail` prints them) instead of JSON (used by `demo`).
        public var human = false
        public init(path: String) { self.path = path }
    }

    /// Creates a configuration with defaults for everything but the two addresses.
    public init(listen: SocketAddress, upstream: Upstream) {
        self.listen = listen
        self.upstreams = [UpstreamGroup(name: UpstreamGroup.defaultName, servers: [.init(upstream)])]
    }

    /// The index of the group called `name` in `upstreams`.
    public func upstreamGroup(named name: String) -> Int? { upstreams.firstIndex { $0.name == name } }

    /// A group of interchangeable upstream servers (`upstream app { server 10.0.0.5:9000; … }`).
    public struct UpstreamGroup: Sendable {
        /// The name of the group `--upstream http://…` makes.
        public static let defaultName = "default"
        /// How the next server is chosen.
        public enum Balance: String, Sendable {
            /// Weighted round-robin (smooth: a weight-2 server gets every other of three requests).
            case roundRobin = "round-robin"
            /// The server with the fewest requests in flight from this worker, relative to its weight; ties
            /// go round-robin.
            case leastConnections = "least-conn"
        }
        /// One server of the group.
        public struct Server: Sendable {
            public var upstream: Upstream
            /// Relative share of requests (`weight N`, 1…1000). Default 1.
            public var weight: Int = 1
            public init(_ upstream: Upstream, weight: Int = 1) {
                self.upstream = upstream
                self.weight = weight
            }
        }

        public var name: String
        public var servers: [Server]
        /// `balance round-robin|least-conn`. Default round-robin.
        public var balance: Balance = .roundRobin
        /// Passive health: a server that failed this many requests in a row (`max-fails`, default 1; 0 never
        /// marks it down) ...
        public var maxFails: Int = 1
        /// ... is skipped for this many seconds (`fail-timeout`, default 10), like nginx's `max_fails` and
        /// `fail_timeout`. When every server is down, they are all tried anyway.
        public var failTimeout: Double = 10
        /// Whether /readyz checks the group (`readiness required|optional`).
        public enum Readiness: String, Sendable {
            /// /readyz probes every server of the group and fails while none accepts a connection.
            case required
            /// /readyz ignores the group; its health is on /upstreams and /metrics.
            case optional
        }
        /// `readiness`. Default optional: one application's outage does not make the proxy unready.
        public var readiness: Readiness = .optional

        public init(name: String, servers: [Server]) {
            self.name = name
            self.servers = servers
        }
    }

    /// The upstream origin.
    public struct Upstream: Sendable, CustomStringConvertible {
        /// The resolved address.
        public var address: SocketAddress
        /// The `host[:port]` text, for error messages.
        public var authority: String
        /// `https://`: connections to it are TLS, verified against `host` (docs/tls.md).
        public var tls = false
        /// The host name as written, for SNI and certificate verification (no port, no brackets).
        public var host: String {
            if authority.hasPrefix("["), let end = authority.firstIndex(of: "]") {
                return String(authority[authority.index(after: authority.startIndex)..<end])
            }
            return authority.lastIndex(of: ":").map { String(authority[..<$0]) } ?? authority
        }

        public init(address: SocketAddress, authority: String, tls: Bool = false) {
            self.address = address
            self.authority = authority
            self.tls = tls
        }

        /// Parses `http://host:port`, `https://host:port` or `host:port` (plain); resolves the host once, at start-up.
        public static func parse(_ text: String) throws -> Upstream {
            var rest = Substring(text)
            var tls = false
            if rest.hasPrefix("http://") {
                rest = rest.dropFirst(7)
            } else if rest.hasPrefix("https://") {
                rest = rest.dropFirst(8)
                tls = true
            } else if rest.contains("://") {
                throw ConfigurationError("upstream must be http://host:port or https://host:port: \(text)")
            }
            if let slash = rest.firstIndex(of: "/") {
                guard rest[slash...] == "/" else {
                    throw ConfigurationError("upstream must not have a path: \(text)")
                }
                rest = rest[..<slash]
            }
            var authority = String(rest)
            if !authority.contains(":") || authority.hasSuffix("]") { authority += tls ? ":443" : ":80" }
            let address: SocketAddress
            do { address = try SocketAddress.resolve(authority) } catch {
                if error.isResolutionFailure { throw UpstreamResolutionError(text: text, reason: "\(error)") }
                throw ConfigurationError("cannot resolve upstream \(text): \(error)")
            }
            return Upstream(address: address, authority: authority, tls: tls)
        }

        public var description: String { "\(tls ? "https" : "http")://\(authority)" }
    }

    /// How a re-encoded body travels to the upstream: `chunked` (default), `hold` or `spool`; a route's
    /// `upstream-body` overrides it (docs/rules.md).
    public typealias UpstreamBodyMode = Rules.UpstreamBodyMode

    /// Per-connection buffer sizes; together they bound a connection's memory.
    public struct Buffers: Sendable {
        /// Most bytes read from a client at a time (the client input buffer's cap). Default 512 KiB; reads start
        /// at 16 KiB and double only while each read fills what it asked for (a body streaming in fast).
        public var clientRead: Int = 512 * 1024
        /// The most bytes read from an upstream at a time. Default 128 KiB. As on the client side, reads start
        /// at 16 KiB and double only while each read fills what it asked for (a large response).
        public var upstreamRead: Int = 128 * 1024
        /// Queued output above which Formwall stops producing more (backpressure). Default 256 KiB.
        /// Hard cap per output buffer: `outputCap`.
        public var outputHighWater: Int = 256 * 1024

        /// Compressed bytes of a `Content-Encoding` body decoded per zlib call, and the unit in which
        /// `compression-ratio-max` counts them, rounded up (the first blocks are smaller: they end at 1, 2, 4 and
        /// 8 KiB, so the first check comes at the ratio times 1 KiB of decoded bytes). Default 16 KiB. The decoded
        /// bytes at each block's end are fixed by the stream, so the verdict on a compressed body does not depend
        /// on how it was cut into reads (StreamInflater).
        public var decodeBlock: Int = StreamInflater.defaultBlock

        /// The most an output buffer may hold: 4x the high-water mark (1 MiB by default), and at least 256 KiB
        /// past it. Output is produced only below the mark, and one step can add more than a small mark: the
        /// re-encoding of a 64 KiB input slice or decoded piece (at most about 3x) with a part's header block
        /// held from earlier reads (up to 16 KiB, escaped up to 3x). A cap under that answered valid requests
        /// 500 `body_sink_failed` under a high-water mark of 2 KiB (found by the exchange fuzzer's gzip bodies).
        public var outputCap: Int {
            outputHighWater > Int.max / 4 ? Int.max : max(4 * outputHighWater, outputHighWater + 256 * 1024)
        }
    }

    /// Timeouts, in seconds.
    public struct Timeouts: Sendable {
        /// Whole request head must arrive within this (slowloris). Default 10 s; 408 after.
        public var clientHeader: Double = 10
        /// Longest silence while a request body is being received. Default 60 s; 408 after.
        public var clientBody: Double = 60
        /// Idle keep-alive client connection. Default 75 s; closed silently.
        public var clientKeepAlive: Double = 75
        /// Longest time the client takes no byte of a response that Formwall has for it (nginx's `send_timeout`).
        /// Default 60 s; the response is cut and the connection closed (audit reason `client_send_timeout`).
        /// Meanwhile the upstream, not read because of it, is not timed out.
        public var clientSend: Double = 60
        /// Connecting to the upstream. Default 5 s; 504 after.
        public var upstreamConnect: Double = 5
        /// Longest silence from the upstream while a response is awaited or streamed. Default 60 s; 504 after.
        public var upstreamResponse: Double = 60
        /// How long SIGTERM/SIGINT wait for in-flight requests. Default 30 s.
        public var drain: Double = 30
        /// Slowest average request-body rate accepted, in bytes per second, counted only while Formwall wants
        /// to read (time paused by backpressure from the upstream is not counted). Default 1024; 0 turns it off.
        /// A trickling body (slow-loris on the body) is cut with 408 `client_body_too_slow`.
        public var clientBodyMinRate: Int = 1024
        /// The minimum rate is checked once this many seconds of reading have passed. Default 10 s.
        public var clientBodyRateGrace: Double = 10
    }

    /// Lingering close: after Formwall answers a request whose body it did not read to the end (a rejection,
    /// or an early answer from the upstream), it sends the answer, shuts down its sending side and reads and
    /// discards what the client still sends, so the client's kernel does not reset the connection and destroy
    /// the answer before the client read it. Bounded in time and bytes, like nginx's `lingering_close`.
    public struct Linger: Sendable {
        /// Longest total lingering. Default 30 s (nginx `lingering_time`).
        public var time: Double = 30
        /// Longest silence while lingering. Default 5 s (nginx `lingering_timeout`).
        public var timeout: Double = 5
        /// Most bytes read and discarded, from the answer on. Default 64 MiB.
        public var bytes: Int = 64 << 20
    }
    public var linger = Linger()

    /// Upstream keep-alive pool, per worker.
    public struct Pool: Sendable {
        /// Idle upstream connections kept per worker. Default 64.
        public var maxIdle: Int = 64
        /// Idle upstream connections are closed after this (`--upstream-idle-timeout`). Default 1.5 s: before
        /// common upstreams close them (gunicorn's keep-alive is 2 s, uvicorn's and node's 5 s), so Formwall
        /// seldom reuses a connection the upstream is closing. Also the window in which the pool counts the
        /// connections the load did not need, half of which it closes at the window's end (`IdlePool`).
        public var idleTimeout: Double = 1.5
        /// A request sent on a reused connection that the upstream closed before any response byte is retried
        /// once on a fresh connection if at most this many bytes of it had been written. Default 64 KiB.
        public var replayLimit: Int = 64 * 1024
    }
}

/// A configuration mistake, reported as one line.
public struct ConfigurationError: Error, CustomStringConvertible {
    public let description: String
    public init(_ message: String) { description = message }
}

/// An upstream host name that does not resolve (here and now). `formwall check` reports it as a warning.
public struct UpstreamResolutionError: Error, CustomStringConvertible {
    public let text: String
    public let reason: String
    public var description: String { "cannot resolve upstream \(text): \(reason)" }
}
