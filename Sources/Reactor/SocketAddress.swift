// IPv4/IPv6 socket addresses, the "host:port" parser, and socket-level errors.
import CLinux
import Glibc

/// Errors from address parsing and socket setup, phrased for operators. New cases do not break callers.
public struct SocketError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Kind: Equatable, Sendable {
        case invalidAddress(String, String)
        case resolutionFailed(String, String)
        case addressInUse(String)
        case addressNotAvailable(String)
        case permissionDenied(String)
    }

    private let kind: Kind

    /// A host name did not resolve (as opposed to a malformed address): it may resolve elsewhere.
    public var isResolutionFailure: Bool {
        if case .resolutionFailed = kind { return true }
        return false
    }

    /// `text` is not a usable "host:port"; `why` says what is wrong.
    public static func invalidAddress(_ text: String, _ why: String) -> SocketError {
        SocketError(kind: .invalidAddress(text, why))
    }
    /// A hostname could not be resolved.
    public static func resolutionFailed(_ host: String, _ why: String) -> SocketError {
        SocketError(kind: .resolutionFailed(host, why))
    }
    /// Another socket already owns the address (EADDRINUSE).
    public static func addressInUse(_ address: String) -> SocketError { SocketError(kind: .addressInUse(address)) }
    /// The address is not local to this host (EADDRNOTAVAIL).
    public static func addressNotAvailable(_ address: String) -> SocketError {
        SocketError(kind: .addressNotAvailable(address))
    }
    /// Binding needs privileges we lack (EACCES).
    public static func permissionDenied(_ address: String) -> SocketError {
        SocketError(kind: .permissionDenied(address))
    }

    /// E.g. `"address already in use: 127.0.0.1:8080"`.
    public var description: String {
        switch kind {
        case .invalidAddress(let text, let why): "invalid address \"\(text)\": \(why)"
        case .resolutionFailed(let host, let why): "cannot resolve \(host): \(why)"
        case .addressInUse(let address): "address already in use: \(address)"
        case .addressNotAvailable(let address): "address not available: \(address)"
        case .permissionDenied(let address): "permission denied binding \(address)"
        }
    }
}

/// A numeric IPv4 or IPv6 address with a port.
public struct SocketAddress: Hashable, Sendable, CustomStringConvertible {
    /// The address family.
    public enum Family: Hashable, Sendable {
        /// IPv4 (AF_INET).
        case inet
        /// IPv6 (AF_INET6).
        case inet6
    }

    /// IPv4 or IPv6.
    public let family: Family
    /// The canonical numeric host, e.g. `"127.0.0.1"` or `"::1"` (no brackets).
    public let ip: String
    /// The port in host byte order.
    public let port: UInt16

    /// Creates an address from a numeric IPv4 or IPv6 host; nil if `ip` is not numeric.
    public init?(ip: String, port: UInt16) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, ip, &v4) == 1 {
            self.init(family: .inet, bytes: withUnsafeBytes(of: &v4) { Array($0) }, port: port)
        } else if inet_pton(AF_INET6, ip, &v6) == 1 {
            self.init(family: .inet6, bytes: withUnsafeBytes(of: &v6) { Array($0) }, port: port)
        } else {
            return nil
        }
    }

    private init(family: Family, bytes: [UInt8], port: UInt16) {
        self.family = family
        self.port = port
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let af = family == .inet ? AF_INET : AF_INET6
        _ = bytes.withUnsafeBytes { inet_ntop(af, $0.baseAddress, &text, socklen_t(text.count)) }
        self.ip = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `"127.0.0.1:8080"` or `"[::1]:8080"`.
    public var description: String {
        family == .inet6 ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }

    /// Parses `"127.0.0.1:8080"`, `"[::1]:8080"` or `"localhost:8080"` without any DNS lookup.
    ///
    /// `localhost` always means 127.0.0.1. Other hostnames throw; use `resolve(_:)` for them at startup.
    public static func parse(_ text: String) throws(SocketError) -> SocketAddress {
        let (host, port) = try split(text)
        if host == "localhost" {
            return SocketAddress(ip: "127.0.0.1", port: port)!
        }
        guard let address = SocketAddress(ip: host, port: port) else {
            throw .invalidAddress(text, "host is not a numeric IP address (hostnames need resolve)")
        }
        if text.hasPrefix("["), address.family != .inet6 {
            throw .invalidAddress(text, "brackets are only for IPv6 addresses")
        }
        if !text.hasPrefix("["), address.family == .inet6 {
            throw .invalidAddress(text, "IPv6 addresses must be bracketed, e.g. [::1]:8080")
        }
        return address
    }

    /// Like `parse(_:)`, but resolves other hostnames with blocking getaddrinfo. Use at startup only, never on a loop.
    public static func resolve(_ text: String) throws(SocketError) -> SocketAddress {
        let (host, port) = try split(text)
        if host == "localhost" || SocketAddress(ip: host, port: port) != nil {
            return try parse(text)
        }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0, let first = list else {
            throw .resolutionFailed(host, String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(list) }
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let current = node {
            if let sa = current.pointee.ai_addr, let address = SocketAddress(sockaddr: sa, port: port) {
                return address
            }
            node = current.pointee.ai_next
        }
        throw .resolutionFailed(host, "no IPv4 or IPv6 address")
    }

    /// Splits `"host:port"` / `"[v6]:port"` and validates the port.
    private static func split(_ text: String) throws(SocketError) -> (host: String, port: UInt16) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw .invalidAddress(text, "missing ']'") }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw .invalidAddress(text, "missing ':port' after ']'") }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw .invalidAddress(text, "missing ':port'") }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty else { throw .invalidAddress(text, "empty host") }
        guard !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }), let port = UInt16(portText) else {
            throw .invalidAddress(text, "port must be a number in 0...65535")
        }
        return (String(host), port)
    }

    /// Reads an AF_INET/AF_INET6 `sockaddr`; `port` overrides the one stored in it when given.
    init?(sockaddr pointer: UnsafePointer<sockaddr>, port overridePort: UInt16? = nil) {
        switch Int32(pointer.pointee.sa_family) {
        case AF_INET:
            let sin = UnsafeRawPointer(pointer).loadUnaligned(as: sockaddr_in.self)
            var addr = sin.sin_addr
            self.init(
                family: .inet, bytes: withUnsafeBytes(of: &addr) { Array($0) },
                port: overridePort ?? UInt16(bigEndian: sin.sin_port))
        case AF_INET6:
            let sin6 = UnsafeRawPointer(pointer).loadUnaligned(as: sockaddr_in6.self)
            var addr = sin6.sin6_addr
            self.init(
                family: .inet6, bytes: withUnsafeBytes(of: &addr) { Array($0) },
                port: overridePort ?? UInt16(bigEndian: sin6.sin6_port))
        default:
            return nil
        }
    }

    /// Reads a `sockaddr_storage` filled by accept/getsockname/getpeername.
    init?(storage: sockaddr_storage) {
        var copy = storage
        let address = withUnsafePointer(to: &copy) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress(sockaddr: $0) }
        }
        guard let address else { return nil }
        self = address
    }

    /// The AF_* constant for this family.
    var addressFamily: Int32 { family == .inet ? cl_af_inet() : cl_af_inet6() }

    /// Calls `body` with this address as a C `sockaddr` and its length.
    func withSockAddr<R, E: Error>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws(E) -> R) throws(E) -> R {
        switch family {
        case .inet:
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            _ = inet_pton(AF_INET, ip, &sin.sin_addr)
            return try withUnsafePointer(to: &sin) { pointer throws(E) in
                try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa throws(E) in
                    try body(sa, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        case .inet6:
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            _ = inet_pton(AF_INET6, ip, &sin6.sin6_addr)
            return try withUnsafePointer(to: &sin6) { pointer throws(E) in
                try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa throws(E) in
                    try body(sa, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
    }
}
