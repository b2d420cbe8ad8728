import Multipart

/// One way a backend reads a request path, for `ambiguous-paths` (docs/rules.md, *Ambiguous paths*).
///
/// Formwall picks a route from its own reading of the path (`Policy.normalize(path:)`): escapes of unreserved
/// characters decoded, `.` and `..` resolved. Backends read the same bytes differently. werkzeug, Django and
/// Starlette decode every escape, `%2F` included, and resolve nothing, so `/api%2Fupload` is `/api/upload` to them
/// and one segment, `api%2Fupload`, to a route table that does not decode it. Tomcat drops `;` path parameters
/// (`/api;x/upload`), IIS reads `\` as `/` and ignores case, and `new URL()` in Node takes `//host/upload` for a
/// host and the path `/upload`. A request whose readings fall under different routes would be judged by one
/// route's rules and served by the handler of another: `Policy.ambiguity(for:host:route:)` finds it.
public struct PathReading: Sendable, Hashable, CustomStringConvertible {
    /// How much percent-decoding the backend does.
    enum Decoding: Sendable, Hashable {
        /// Every `%XX` once, `%2F` included.
        case all
        /// None: escapes stay in the path (an escaped dot still counts as a dot where dots are resolved).
        case none
    }

    /// A short name, for details and tests.
    public let name: String
    /// Who reads paths this way.
    public let readers: String
    let decoding: Decoding
    /// `.` and `..` segments resolved (never above the root), or kept as literal segments.
    let resolvesDots: Bool
    /// `;` and what follows it up to the next `/` dropped from each segment, before decoding (servlet containers).
    let dropsParameters: Bool
    /// `\` is a separator, before and after decoding.
    let backslashIsSlash: Bool
    /// A path starting with two separators is a network-path reference: `//host/rest` is the path `/rest`.
    let networkPath: Bool
    /// Letters compared without case (the route paths too).
    let caseless: Bool

    /// The readings compared with formwall's own, in this order (the first that differs is reported).
    public static let all: [PathReading] = [
        PathReading(name: "decoded", readers: "WSGI and ASGI frameworks (werkzeug, Django, Starlette)",
                    decoding: .all, resolvesDots: false),
        PathReading(name: "decoded-resolved", readers: "nginx and Go's net/http", decoding: .all, resolvesDots: true),
        PathReading(name: "raw", readers: "routers matching the raw target (Express, PHP front controllers)",
                    decoding: .none, resolvesDots: false),
        PathReading(name: "path-parameters", readers: "servlet containers (Tomcat, Jetty, Spring)",
                    decoding: .all, resolvesDots: true, dropsParameters: true),
        PathReading(name: "url-standard", readers: "the WHATWG URL parser (new URL() in Node)",
                    decoding: .none, resolvesDots: true, backslashIsSlash: true, networkPath: true),
        PathReading(name: "windows", readers: "IIS and ASP.NET", decoding: .all, resolvesDots: true,
                    backslashIsSlash: true, caseless: true),
    ]

    init(name: String, readers: String, decoding: Decoding, resolvesDots: Bool, dropsParameters: Bool = false,
         backslashIsSlash: Bool = false, networkPath: Bool = false, caseless: Bool = false) {
        self.name = name
        self.readers = readers
        self.decoding = decoding
        self.resolvesDots = resolvesDots
        self.dropsParameters = dropsParameters
        self.backslashIsSlash = backslashIsSlash
        self.networkPath = networkPath
        self.caseless = caseless
    }

    public var description: String { name }

    /// Whether any reading can differ from formwall's own: the path (before `?` or `#`) holds a `%`, `;`, `\` or
    /// capital letter, starts with `//`, or has a `.` or `..` segment. Most paths hold none, and are read once.
    public static func mayDiffer(_ target: String) -> Bool {
        // A native string's bytes are contiguous: the closure runs, and the slow path is never taken.
        target.utf8.withContiguousStorageIfAvailable { bytes in
            guard bytes.count >= 2 else { return false }
            if bytes[0] == UInt8(ascii: "/") && bytes[1] == UInt8(ascii: "/") { return true }
            var segmentStart = 0
            for index in 0...bytes.count {
                let byte = index < bytes.count ? bytes[index] : UInt8(ascii: "?")
                // Lowercase letters, the bulk of most paths, and `_` `{` `|` `}` `~`: nothing to look at.
                if byte >= UInt8(ascii: "_") { continue }
                switch byte {
                case UInt8(ascii: "%"), UInt8(ascii: ";"), UInt8(ascii: "\\"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
                    return true
                case UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"):
                    let length = index - segmentStart
                    if (length == 1 || length == 2) && bytes[segmentStart] == UInt8(ascii: ".")
                        && bytes[index - 1] == UInt8(ascii: ".") {
                        return true
                    }
                    if byte != UInt8(ascii: "/") { return false }
                    segmentStart = index + 1
                default:
                    break
                }
            }
            return false
        } ?? true
    }

    /// The path as this reading sees it: `/` and the segments joined by `/`, empty segments dropped, lowercase
    /// for a caseless reading. The query and fragment are ignored; a target not starting with `/` reads as `/`.
    public func read(_ target: String) -> String {
        var bytes = Array(target.utf8)
        if let cut = bytes.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) {
            bytes.removeSubrange(cut...)
        }
        guard bytes.first == UInt8(ascii: "/") || (backslashIsSlash && bytes.first == UInt8(ascii: "\\")) else {
            return "/"
        }
        if backslashIsSlash { Self.replaceBackslashes(&bytes) }
        if networkPath, bytes.count >= 2, bytes[1] == UInt8(ascii: "/") {
            // `//authority/rest`: the authority ends at the next separator.
            let rest = bytes[2...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.count
            bytes.removeSubrange(0..<rest)
        }
        if dropsParameters { bytes = Self.droppingParameters(bytes) }
        if decoding == .all {
            bytes = Percent.decode(bytes, plusIsSpace: false)
            if backslashIsSlash { Self.replaceBackslashes(&bytes) }
        }
        var segments: [ArraySlice<UInt8>] = []
        for segment in bytes.split(separator: UInt8(ascii: "/")) {
            if resolvesDots {
                switch Self.dots(segment, escaped: decoding == .none) {
                case 1: continue
                case 2:
                    if !segments.isEmpty { segments.removeLast() }
                    continue
                default: break
                }
            }
            segments.append(segment)
        }
        var out: [UInt8] = [UInt8(ascii: "/")]
        out.reserveCapacity(bytes.count + 1)
        for (index, segment) in segments.enumerated() {
            if index > 0 { out.append(UInt8(ascii: "/")) }
            out.append(contentsOf: segment)
        }
        if caseless { out = out.map { ASCII.lowercased($0) } }
        return String(decoding: out, as: UTF8.self)
    }

    private static func replaceBackslashes(_ bytes: inout [UInt8]) {
        for index in bytes.indices where bytes[index] == UInt8(ascii: "\\") { bytes[index] = UInt8(ascii: "/") }
    }

    /// Every `;…` up to the next `/` removed.
    private static func droppingParameters(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var inParameters = false
        for byte in bytes {
            if byte == UInt8(ascii: "/") { inParameters = false }
            if byte == UInt8(ascii: ";") { inParameters = true }
            if !inParameters { out.append(byte) }
        }
        return out
    }

    /// 1 for a `.` segment, 2 for `..`, else 0; with `escaped`, `%2e` (either case) counts as a dot, as the URL
    /// standard reads it.
    private static func dots(_ segment: ArraySlice<UInt8>, escaped: Bool) -> Int {
        var count = 0
        var index = segment.startIndex
        while index < segment.endIndex {
            if segment[index] == UInt8(ascii: ".") {
                index += 1
            } else if escaped, segment.endIndex - index >= 3, segment[index] == UInt8(ascii: "%"),
                      segment[index + 1] == UInt8(ascii: "2"),
                      segment[index + 2] == UInt8(ascii: "e") || segment[index + 2] == UInt8(ascii: "E") {
                index += 3
            } else {
                return 0
            }
            count += 1
            if count > 2 { return 0 }
        }
        return count
    }
}

/// A request path that two readings route differently (`Policy.ambiguity(for:host:route:)`).
public struct PathAmbiguity: Sendable, Hashable {
    /// The backend reading that disagrees with formwall's.
    public let reading: PathReading
    /// The path as that reading sees it.
    public let path: String
    /// The route it picks there (an index in `Policy.routes`), nil for the fallback.
    public let route: Int?
}

extension Policy {
    /// The first backend reading of `target` (`PathReading.all`) that picks another route than `route`, the one
    /// formwall's reading picked; nil when every reading agrees. Routes are compared as `routeIndex` ranks them,
    /// the fallback included; a caseless reading compares the route paths without case too.
    public func ambiguity(for target: String, host: String?, route: Int?) -> PathAmbiguity? {
        guard !routes.isEmpty, PathReading.mayDiffer(target) else { return nil }
        for reading in PathReading.all {
            let path = reading.read(target)
            let other = routeIndex(normalised: path, host: host, caseless: reading.caseless)
            if other != route { return PathAmbiguity(reading: reading, path: path, route: other) }
        }
        return nil
    }

    /// How a route is named in an `ambiguous_path` detail: `route /api (file:line)`, or the implicit fallback (a
    /// `route /` without `host` matches every path, so no index means there is none).
    func describeRoute(_ index: Int?) -> String {
        guard let index else { return "the implicit fallback" }
        let route = routes[index]
        let kind = route.match == .exact ? "= " : ""
        return "route \(kind)\(route.prefix)" + (route.location.map { " (\($0))" } ?? "")
    }
}
