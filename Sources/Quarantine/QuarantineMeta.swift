import Foundation

/// One rule violation that caused (or accompanied) a quarantine.
public struct QuarantineViolation: Sendable, Equatable {
    /// The violation kind, e.g. `file_type_mismatch`.
    public var kind: String
    /// Human detail, e.g. `declared image/png, content is application/x-elf`.
    public var detail: String
    /// The rule's location as `file:line`, if any.
    public var rule: String?

    /// Creates a violation.
    public init(kind: String, detail: String, rule: String? = nil) {
        self.kind = kind
        self.detail = detail
        self.rule = rule
    }
}

/// What the proxy knows about a quarantined part; stored in the item's sidecar.
public struct QuarantineMeta: Sendable {
    /// The request id (matches the audit record).
    public var requestID: String
    /// The matched route, if any.
    public var route: String?
    /// The client address.
    public var client: String
    /// When the part arrived; also selects the `YYYY/MM/DD` directory (UTC).
    public var time: Date
    /// The part's `name` parameter as received.
    public var partName: [UInt8]
    /// The `filename` parameter exactly as sent (may be invalid UTF-8), if any.
    public var filename: [UInt8]?
    /// A safe version of the filename; nil lets the store derive one with `sanitize(_:)`.
    public var sanitizedFilename: String?
    /// The part's Content-Type, if any.
    public var declaredType: String?
    /// The sniffed content type, if known (often only at commit).
    public var sniffedType: String?
    /// Why the part was quarantined.
    public var violations: [QuarantineViolation]

    /// Creates metadata; `sanitizedFilename` defaults to `sanitize(filename)`.
    public init(
        requestID: String, route: String?, client: String, time: Date = Date(), partName: [UInt8],
        filename: [UInt8]? = nil, sanitizedFilename: String? = nil, declaredType: String? = nil,
        sniffedType: String? = nil, violations: [QuarantineViolation] = []
    ) {
        self.requestID = requestID
        self.route = route
        self.client = client
        self.time = time
        self.partName = partName
        self.filename = filename
        self.sanitizedFilename = sanitizedFilename
        self.declaredType = declaredType
        self.sniffedType = sniffedType
        self.violations = violations
    }

    /// A conservative filename: the last path component (after `/` or `\`), with every byte outside
    /// `[A-Za-z0-9._-]` replaced by `_`, leading dots removed, at most 128 bytes; `unnamed` if empty.
    public static func sanitize(_ raw: [UInt8]) -> String {
        let last = raw.split(omittingEmptySubsequences: false) { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "\\") }
            .last ?? []
        var out: [UInt8] = []
        for b in last {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"):
                out.append(b)
            default:
                out.append(UInt8(ascii: "_"))
            }
        }
        while out.first == UInt8(ascii: ".") { out.removeFirst() }
        if out.count > 128 { out = Array(out.suffix(128)) }
        return out.isEmpty ? "unnamed" : String(decoding: out, as: UTF8.self)
    }
}

/// A complete quarantined item as read back from its sidecar.
public struct QuarantineItem: Sendable {
    /// 32 lowercase hex digits.
    public var id: String
    /// When the part arrived.
    public var time: Date
    /// The request id.
    public var requestID: String
    /// The route, if any.
    public var route: String?
    /// The client address.
    public var client: String
    /// The part name (invalid UTF-8 replaced by U+FFFD).
    public var partName: String
    /// The filename as sent (invalid UTF-8 replaced by U+FFFD), if any.
    public var filename: String?
    /// The sanitised filename, if the part had a filename.
    public var sanitizedFilename: String?
    /// The declared Content-Type.
    public var declaredType: String?
    /// The sniffed type.
    public var sniffedType: String?
    /// Bytes stored.
    public var size: Int64
    /// Lowercase hex SHA-256 of the stored bytes.
    public var sha256: String
    /// The violations.
    public var violations: [QuarantineViolation]
    /// Absolute path of `<id>.bin`.
    public var dataPath: String
    /// Absolute path of `<id>.json`.
    public var sidecarPath: String
}
