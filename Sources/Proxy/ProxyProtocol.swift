import Glibc

/// The PROXY protocol header (HAProxy, versions 1 and 2) a load balancer puts before the first request of a
/// connection to name the client (`serve --proxy-protocol`). A pure parser: bytes in, a verdict out.
public enum ProxyProtocol {
    /// The longest header accepted: a v1 line is at most 107 bytes; v2 is 16 bytes plus its length, whose
    /// TLVs Formwall does not read, bounded here.
    public static let maxV2Length = 1024

    /// The v2 signature.
    static let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    static let v1Prefix = Array("PROXY ".utf8)

    /// What the parser made of the bytes so far.
    public enum Result: Equatable, Sendable {
        /// A prefix of a valid header: read more.
        case needMore
        /// A header of `consumed` bytes; `source` is the client as `ip:port` (`[v6]:port`), nil when the header
        /// names none (v1 `UNKNOWN`, v2 `LOCAL`, a family other than TCP over IPv4/IPv6): the connection's own
        /// peer stands.
        case complete(consumed: Int, source: String?)
        /// Not a PROXY header, or a malformed one.
        case invalid(String)
    }

    /// Parses the header at the start of `bytes`.
    public static func parse(_ bytes: [UInt8]) -> Result {
        guard let first = bytes.first else { return .needMore }
        if first == signature[0] { return parseV2(bytes) }
        if first == v1Prefix[0] { return parseV1(bytes) }
        return .invalid("no PROXY protocol header")
    }

    // MARK: v1: `PROXY TCP4 192.0.2.1 192.0.2.2 56324 443\r\n`

    private static func parseV1(_ bytes: [UInt8]) -> Result {
        let prefix = min(bytes.count, v1Prefix.count)
        guard bytes[0..<prefix].elementsEqual(v1Prefix[0..<prefix]) else { return .invalid("no PROXY protocol header") }
        let limit = min(bytes.count, 107)
        var lf: Int?
        for i in 0..<limit where bytes[i] == 0x0A {
            lf = i
            break
        }
        guard let lf else { return bytes.count >= 107 ? .invalid("v1 line longer than 107 bytes") : .needMore }
        guard lf > 0, bytes[lf - 1] == 0x0D else { return .invalid("v1 line not ended by CRLF") }
        guard bytes[0..<(lf - 1)].allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return .invalid("v1 control byte") }
        let line = String(decoding: bytes[v1Prefix.count..<(lf - 1)], as: UTF8.self)
        let words = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        if words.first == "UNKNOWN" { return .complete(consumed: lf + 1, source: nil) }
        guard words.count == 5, words[0] == "TCP4" || words[0] == "TCP6" else { return .invalid("v1 malformed line") }
        let family = words[0] == "TCP4" ? AF_INET : AF_INET6
        guard let source = canonical(words[1], family), canonical(words[2], family) != nil,
              let sourcePort = port(words[3]), port(words[4]) != nil else {
            return .invalid("v1 malformed address or port")
        }
        return .complete(consumed: lf + 1, source: joined(source, sourcePort, family))
    }

    private static func canonical(_ text: String, _ family: Int32) -> String? {
        if family == AF_INET {
            var a = in_addr()
            guard inet_pton(AF_INET, text, &a) == 1 else { return nil }
            return withUnsafeBytes(of: &a) { Array($0) }.map(String.init).joined(separator: ".")
        }
        var a = in6_addr()
        guard inet_pton(AF_INET6, text, &a) == 1 else { return nil }
        return ntop6(withUnsafeBytes(of: &a) { Array($0) })
    }

    /// 0…65535 in decimal, no sign, no leading zero.
    private static func port(_ text: String) -> UInt16? {
        let utf8 = Array(text.utf8)
        guard (1...5).contains(utf8.count), utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
              utf8.count == 1 || utf8[0] != 48, let value = Int(text), value <= 65535 else { return nil }
        return UInt16(value)
    }

    // MARK: v2: signature, version/command, family/transport, length, addresses, TLVs

    private static func parseV2(_ bytes: [UInt8]) -> Result {
        let prefix = min(bytes.count, signature.count)
        guard bytes[0..<prefix].elementsEqual(signature[0..<prefix]) else { return .invalid("no PROXY protocol header") }
        guard bytes.count >= 16 else { return .needMore }
        let versionCommand = bytes[12], familyTransport = bytes[13]
        guard versionCommand >> 4 == 2 else { return .invalid("v2 unknown version") }
        let command = versionCommand & 0x0F
        guard command <= 1 else { return .invalid("v2 unknown command") }
        let length = Int(bytes[14]) << 8 | Int(bytes[15])
        guard length <= maxV2Length else { return .invalid("v2 header longer than \(maxV2Length) bytes") }
        guard bytes.count >= 16 + length else { return .needMore }
        let consumed = 16 + length
        // LOCAL: the balancer's own connection (health checks); the peer stands.
        if command == 0 { return .complete(consumed: consumed, source: nil) }
        let body = Array(bytes[16..<consumed])
        switch familyTransport {
        case 0x11:
            guard body.count >= 12 else { return .invalid("v2 address block too short") }
            let ip = body[0..<4].map(String.init).joined(separator: ".")
            return .complete(consumed: consumed, source: joined(ip, UInt16(body[8]) << 8 | UInt16(body[9]), AF_INET))
        case 0x21:
            guard body.count >= 36 else { return .invalid("v2 address block too short") }
            let ip = ntop6(Array(body[0..<16]))
            return .complete(consumed: consumed,
                             source: joined(ip, UInt16(body[32]) << 8 | UInt16(body[33]), AF_INET6))
        case 0x00, 0x12, 0x22, 0x31, 0x32:
            // UNSPEC, UDP, UNIX: nothing Formwall can use as a client address.
            return .complete(consumed: consumed, source: nil)
        default:
            return .invalid("v2 unknown address family")
        }
    }

    private static func ntop6(_ bytes: [UInt8]) -> String {
        var a = in6_addr()
        withUnsafeMutableBytes(of: &a) { $0.copyBytes(from: bytes) }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        // Unreachable failure: 16 bytes always format as an IPv6 address within INET6_ADDRSTRLEN.
        guard inet_ntop(AF_INET6, &a, &text, socklen_t(text.count)) != nil else { return "::" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func joined(_ ip: String, _ port: UInt16, _ family: Int32) -> String {
        family == AF_INET6 ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }
}
