import Glibc

/// An address range (`--trusted-proxies 10.0.0.0/8,::1`): a network address and a prefix length.
public struct AddressRange: Sendable, Hashable, CustomStringConvertible {
    /// The network's bytes (4 or 16), host bits cleared.
    public let network: [UInt8]
    /// The prefix length, 0...32 or 0...128.
    public let prefix: Int

    /// Parses `ADDR/N` or a bare `ADDR` (a single address). IPv4-mapped IPv6 addresses count as IPv4.
    public init?(_ text: String) {
        let pieces = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = Self.bytes(of: String(pieces[0])) else { return nil }
        let bits = bytes.count * 8
        var prefix = bits
        if pieces.count == 2 {
            guard !pieces[1].isEmpty, pieces[1].utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), pieces[1].utf8.count <= 3,
                  let n = Int(pieces[1]), n <= bits else { return nil }
            prefix = n
        }
        self.prefix = prefix
        network = Self.masked(bytes, prefix)
    }

    /// Whether `address` (the bytes of `bytes(of:)`) is in the range.
    public func contains(_ address: [UInt8]) -> Bool {
        address.count == network.count && Self.masked(address, prefix) == network
    }

    public var description: String {
        let text = network.count == 4 ? network.map(String.init).joined(separator: ".") : Self.ipv6Text(network)
        return "\(text)/\(prefix)"
    }

    /// The bytes of an IPv4 or IPv6 address in text form (no brackets, no zone); nil if it is not one.
    /// `::ffff:a.b.c.d` gives the 4 IPv4 bytes.
    public static func bytes(of text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
            return Array(bytes[12..<16])
        }
        return bytes
    }

    private static func masked(_ bytes: [UInt8], _ prefix: Int) -> [UInt8] {
        var out = bytes
        for i in 0..<out.count {
            let keep = max(0, min(8, prefix - i * 8))
            out[i] &= keep == 0 ? 0 : UInt8(truncatingIfNeeded: 0xff << (8 - keep))
        }
        return out
    }

    private static func ipv6Text(_ bytes: [UInt8]) -> String {
        stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }
}

/// `--trusted-proxies`: which peers may tell Formwall who the client is through X-Forwarded-For.
public struct TrustedProxies: Sendable, Hashable {
    public var ranges: [AddressRange]

    public init(_ ranges: [AddressRange] = []) {
        self.ranges = ranges
    }

    /// Parses `CIDR[,CIDR…]`; a failure names the first entry that is not an address or range.
    public static func parse(_ text: String) -> Result<TrustedProxies, ParseError> {
        var ranges: [AddressRange] = []
        for entry in text.split(separator: ",", omittingEmptySubsequences: false) {
            let trimmed = String(entry.filter { $0 != " " })
            guard let range = AddressRange(trimmed) else { return .failure(ParseError(entry: trimmed)) }
            ranges.append(range)
        }
        return .success(TrustedProxies(ranges))
    }

    public struct ParseError: Error, Sendable {
        public let entry: String
    }

    /// Whether `address` (text) is in a trusted range.
    public func trusts(_ address: String) -> Bool {
        guard !ranges.isEmpty, let bytes = AddressRange.bytes(of: address) else { return false }
        return ranges.contains { $0.contains(bytes) }
    }

    /// Who the client is, and whether the incoming X-Forwarded-For chain is kept.
    public struct Resolution: Sendable, Hashable {
        /// The client address: the audit log's `client`, the quarantine sidecar's, X-Forwarded-For's origin.
        public var client: String
        /// The incoming chain is forwarded (extended with the peer); false: it is replaced by the peer alone.
        public var keepChain: Bool
    }

    /// From an untrusted peer: the peer is the client and its X-Forwarded-For is replaced. From a trusted peer:
    /// the chain (every X-Forwarded-For field, comma-separated) is read right to left, skipping trusted
    /// addresses; the first untrusted address is the client. An entry that is not an address stops the walk:
    /// the address right of it (the last trusted hop, or the peer) is the client. When every entry is trusted,
    /// the left-most is the client.
    public func resolve(peer: String, forwardedFor: [String]) -> Resolution {
        guard trusts(peer) else { return Resolution(client: peer, keepChain: false) }
        let entries = forwardedFor.flatMap { $0.split(separator: ",") }
            .map { String($0.filter { $0 != " " && $0 != "\t" }) }.filter { !$0.isEmpty }
        var client = peer
        for entry in entries.reversed() {
            guard AddressRange.bytes(of: entry) != nil else { break }
            client = entry
            if !trusts(entry) { break }
        }
        return Resolution(client: client, keepChain: true)
    }
}
