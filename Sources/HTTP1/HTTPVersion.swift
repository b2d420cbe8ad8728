/// An HTTP/1.x protocol version. The parsers only ever produce 1.0 and 1.1.
public struct HTTPVersion: Hashable, Sendable, CustomStringConvertible {
    /// The major version, always 1.
    public var major: Int
    /// The minor version, 0 or 1.
    public var minor: Int

    /// Creates a version.
    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    /// HTTP/1.0.
    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    /// HTTP/1.1.
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)

    /// `HTTP/1.1` style text.
    public var description: String {
        "HTTP/\(self.major).\(self.minor)"
    }

    /// Parses exactly `HTTP/DIGIT.DIGIT` from 8 bytes; nil if the bytes have another shape.
    @inline(__always) static func parse(_ bytes: Slice<UnsafeRawBufferPointer>) -> HTTPVersion? {
        let start = bytes.startIndex
        let base = bytes.base
        guard bytes.count == 8, base[start] == UInt8(ascii: "H"), base[start + 1] == UInt8(ascii: "T"),
              base[start + 2] == UInt8(ascii: "T"), base[start + 3] == UInt8(ascii: "P"),
              base[start + 4] == UInt8(ascii: "/") else {
            return nil
        }
        let major = bytes[start + 5]
        let dot = bytes[start + 6]
        let minor = bytes[start + 7]
        let digits = UInt8(ascii: "0")...UInt8(ascii: "9")
        guard digits.contains(major), dot == UInt8(ascii: "."), digits.contains(minor) else {
            return nil
        }
        return HTTPVersion(major: Int(major - UInt8(ascii: "0")), minor: Int(minor - UInt8(ascii: "0")))
    }

    /// Whether this parser supports the version (1.0 or 1.1).
    var isSupported: Bool {
        self == .http1_0 || self == .http1_1
    }
}
