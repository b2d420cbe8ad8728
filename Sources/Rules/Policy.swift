import Multipart

/// A compiled rule set: the mode, the global anomaly actions and the routes.
///
/// A plain value, safe to share between event loops. Build one with `Policy.load(paths:)` or
/// `Policy.parse(_:file:)`; evaluate requests against it with `PolicyEvaluator`.
public struct Policy: Sendable, Hashable {
    /// Enforce or only monitor.
    public var mode: PolicyMode
    /// The global anomaly actions (each route folds its own overrides into `Route.anomalies`).
    public var anomalies: AnomalyActions
    /// The routes, in file order (`route(for:host:)` ranks them).
    public var routes: [Route]
    /// The route used when none matches: `route /` if the files have one, otherwise the implicit
    /// fallback, which accepts any Content-Type and any method, applies the main context's limits
    /// (1 MiB body by default) and rejects every form part with 403 `unknown_part`.
    public var fallback: Route
    /// The rule files this policy was compiled from, in the order they were read (an `include`d file where it
    /// was included), with the bytes that were read: what `/rules` on the admin listener lists and hashes.
    public var sources: [PolicySource] = []
    /// `ambiguous-paths`: refuse a request whose path backends read as another route's (the default), or route it
    /// by formwall's own reading alone.
    public var ambiguousPaths: AmbiguousPaths = .reject

    /// A policy with no routes: enforce mode, default anomaly actions, the implicit fallback.
    public init() {
        mode = .enforce
        anomalies = AnomalyActions()
        routes = []
        fallback = Self.implicitFallback(defaults: Route(prefix: "/", location: nil))
    }

    /// Builds the implicit fallback from the main context's defaults.
    static func implicitFallback(defaults: Route) -> Route {
        var route = defaults
        route.prefix = "/"
        route.location = nil
        route.methods = nil
        // A constant pattern: the unwrap cannot fail.
        route.contentTypes = [MediaTypePattern("*/*")!]
        route.unknown = .reject
        route.unknownFields = nil
        route.unknownFiles = nil
        return route
    }

    /// The route for a request; nil when none matches.
    ///
    /// Precedence (docs/rules.md, *Routes*): an exact route beats a pattern beats a prefix; among
    /// patterns more literal segments win, among prefixes the longest segment-aware prefix (`/api`
    /// matches `/api`, `/api/` and `/api/x`, never `/apix`); at the same path specificity a route whose
    /// `host` matches beats a route without `host`; then file order. A route with `host` never applies to
    /// another Host, nor to a request without one. The query and fragment are ignored and the path is
    /// normalised first (see `normalize(path:)`); the Host is compared lowercase without its port.
    public func route(for path: String, host: String? = nil) -> Route? {
        routeIndex(for: path, host: host).map { routes[$0] }
    }

    /// The index in `routes` of `route(for:host:)`'s route; nil when none matches. Reads the routes in place
    /// (iterating them would copy each: a retain and a release of every array and string in it).
    public func routeIndex(for path: String, host: String? = nil) -> Int? {
        routeIndex(normalised: Self.normalize(path: path), host: host, caseless: false)
    }

    /// `routeIndex(for:host:)` for a path already read (`normalize(path:)` or a `PathReading`); `caseless` compares
    /// the route paths lowercase, against a lowercase path.
    @inline(__always)
    func routeIndex(normalised: String, host: String?, caseless: Bool) -> Int? {
        // Read only when a route names hosts.
        var requestHost: String??
        var segments: [Substring]?
        var best: (index: Int, rank: (Int, Int, Int))?
        for index in routes.indices {
            if let hosts = routes[index].hosts {
                if requestHost == nil { requestHost = .some(host.flatMap(HostPattern.normalize(host:))) }
                guard let requestHost = requestHost ?? nil, hosts.contains(where: { $0.matches(requestHost) }) else {
                    continue
                }
            }
            let specificity: Int
            switch routes[index].match {
            case .exact:
                if caseless {
                    guard routes[index].prefix.lowercased() == normalised else { continue }
                } else {
                    guard routes[index].prefix == normalised else { continue }
                }
                specificity = 0
            case .prefix:
                if caseless {
                    guard Self.prefix(routes[index].prefix.lowercased(), matches: normalised) else { continue }
                } else {
                    guard Self.prefix(routes[index].prefix, matches: normalised) else { continue }
                }
                specificity = routes[index].prefix == "/" ? 0 : routes[index].prefix.utf8.count
            case .pattern:
                if segments == nil { segments = normalised.split(separator: "/") }
                let found = caseless ? Self.pattern(routes[index].prefix.lowercased(), matches: segments ?? [])
                    : Self.pattern(routes[index].prefix, matches: segments ?? [])
                guard let literals = found else { continue }
                specificity = literals
            }
            let kindRank = routes[index].match == .exact ? 2 : routes[index].match == .pattern ? 1 : 0
            let rank = (kindRank, specificity, routes[index].hosts == nil ? 0 : 1)
            // Strictly better only: routes are in file order, so the first of equals stays.
            if best.map({ rank > $0.rank }) ?? true { best = (index, rank) }
        }
        return best?.index
    }

    /// `route(for:host:)`, or the fallback route when none matches.
    public func effectiveRoute(for path: String, host: String? = nil) -> Route {
        route(for: path, host: host) ?? fallback
    }

    /// The number of literal segments when `pattern` (`*` for one segment) matches `segments`, else nil.
    static func pattern(_ pattern: String, matches segments: [Substring]) -> Int? {
        let parts = pattern.split(separator: "/")
        guard parts.count == segments.count else { return nil }
        var literals = 0
        for (part, segment) in zip(parts, segments) {
            if part == "*" { continue }
            guard part == segment else { return nil }
            literals += 1
        }
        return literals
    }

    static func prefix(_ prefix: String, matches path: String) -> Bool {
        if prefix == "/" { return true }
        guard path.hasPrefix(prefix) else { return false }
        return path.utf8.count == prefix.utf8.count || path.utf8.dropFirst(prefix.utf8.count).first == UInt8(ascii: "/")
    }

    /// Normalises a request target for route matching, the way a backend is likely to read it.
    ///
    /// Drops `?query` and `#fragment`; decodes percent-escapes of unreserved characters
    /// (`%61` → `a`, RFC 3986 §6.2.2.2); collapses `//`; resolves `.` and `..` segments (never above
    /// the root); drops a trailing `/`. A target that does not start with `/` (absolute-form,
    /// `*`) normalises to its path if it has a scheme and authority, else to `/`.
    public static func normalize(path: String) -> String {
        // Most targets are already in normal form: returned as they are, without the copies below.
        let normal = path.utf8.withContiguousStorageIfAvailable { isNormal($0) } ?? false
        return normal ? path : normalizeFully(path: path)
    }

    /// Whether `normalize(path:)` would return `path` unchanged: it starts with `/`, has no `?`, `#` or `%`, no
    /// empty, `.` or `..` segment, and no trailing `/` (unless it is `/`). `PolicyTests` compares the two on
    /// random targets.
    static func isNormal(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.first == UInt8(ascii: "/") else { return false }
        guard bytes.count > 1 else { return true }
        var segmentStart = 1
        for index in 1...bytes.count {
            let byte = index < bytes.count ? bytes[index] : UInt8(ascii: "/")
            switch byte {
            case UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "%"):
                return false
            case UInt8(ascii: "/"):
                let length = index - segmentStart
                if length == 0 { return false }
                if bytes[segmentStart] == UInt8(ascii: "."),
                   length == 1 || (length == 2 && bytes[segmentStart + 1] == UInt8(ascii: ".")) {
                    return false
                }
                segmentStart = index + 1
            default:
                break
            }
        }
        return true
    }

    /// `normalize(path:)` for any target.
    static func normalizeFully(path: String) -> String {
        var target = Substring(path)
        if let cut = target.firstIndex(where: { $0 == "?" || $0 == "#" }) { target = target[..<cut] }
        if !target.hasPrefix("/") {
            guard let scheme = target.range(of: "://") else { return "/" }
            let rest = target[scheme.upperBound...]
            guard let slash = rest.firstIndex(of: "/") else { return "/" }
            target = rest[slash...]
        }
        let decoded = decodeUnreserved(target)
        var segments: [Substring] = []
        for segment in decoded.split(separator: "/", omittingEmptySubsequences: true) {
            switch segment {
            case ".": continue
            case "..": if !segments.isEmpty { segments.removeLast() }
            default: segments.append(segment)
            }
        }
        return "/" + segments.joined(separator: "/")
    }

    private static func decodeUnreserved(_ text: Substring) -> String {
        var bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
               let high = ASCII.hexValue(bytes[index + 1]), let low = ASCII.hexValue(bytes[index + 2]) {
                let byte = high << 4 | low
                if isUnreserved(byte) {
                    out.append(byte)
                    index += 3
                    continue
                }
            }
            out.append(bytes[index])
            index += 1
        }
        bytes = out
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
             UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}

/// One rule file as it was read when a policy was compiled.
public struct PolicySource: Sendable, Hashable {
    public var path: String
    public var contents: [UInt8]
    public init(path: String, contents: [UInt8]) {
        self.path = path
        self.contents = contents
    }
}
