/// Writes a canonical multipart/form-data body, incrementally, around part data the caller streams.
///
/// Every part gets exactly `Content-Disposition: form-data; name="…"` (plus `; filename="…"` for files)
/// and, for files only, a normalised `Content-Type`. Nothing else from the client's part headers survives,
/// so the upstream cannot be confused by folding, duplicates, `filename*`, odd quoting or bare LFs.
/// Names and filenames are escaped as the HTML standard does for form submission: `"` → `%22`,
/// CR → `%0D`, LF → `%0A`; and `\` → `%5C`, because parsers disagree on whether a backslash escapes inside
/// a quoted-string (RFC 9110 says yes, the HTML standard no): without it a name ending in `\` would end the
/// quoted-string for one upstream and not for another. Part data is never touched: the caller writes it
/// between heads.
///
///     --B\r\n<head>\r\n\r\n<data>  \r\n--B\r\n<head>\r\n\r\n<data>  \r\n--B--\r\n
///     └── writePartHead ──┘        └────── writePartHead ───────┘   └ writeClose ┘
public struct MultipartEncoder: Sendable {
    /// The boundary, without `--`. Use `SecureRandom.boundary()` for a fresh one.
    public let boundary: [UInt8]
    private var started = false

    /// Creates an encoder for `boundary`, which must be a valid RFC 2046 boundary.
    public init(boundary: [UInt8]) {
        // Unreachable from input: the re-encode boundary is generated (SecureRandom.boundary), never a request's.
        precondition(MultipartBoundary.isValid(boundary), "invalid boundary")
        self.boundary = boundary
    }

    /// The request Content-Type for the encoded body.
    public var contentType: String {
        // One allocation, written in place (concatenating a decoded boundary would make two strings).
        let prefix: StaticString = "multipart/form-data; boundary="
        let prefixCount = prefix.utf8CodeUnitCount
        return String(unsafeUninitializedCapacity: prefixCount + boundary.count) { out in
            UnsafeMutableRawBufferPointer(out).copyMemory(
                from: UnsafeRawBufferPointer(start: prefix.utf8Start, count: prefixCount))
            boundary.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: out[prefixCount...])).copyMemory(from: $0)
            }
            return prefixCount + boundary.count
        }
    }

    /// Appends the delimiter and canonical headers of `part` to `out`; the part's data follows.
    public mutating func writePartHead(_ part: MultipartPart, into out: inout [UInt8]) {
        if started {
            out.append(ASCII.cr)
            out.append(ASCII.lf)
        }
        started = true
        out.append(ASCII.hyphen)
        out.append(ASCII.hyphen)
        out.append(contentsOf: boundary)
        out.append(contentsOf: Self.crlfDisposition)
        Self.appendEscaped(part.name ?? [], to: &out)
        out.append(ASCII.quote)
        if let filename = part.filename {
            out.append(contentsOf: Self.filenameParam)
            Self.appendEscaped(filename, to: &out)
            out.append(ASCII.quote)
            out.append(contentsOf: Self.crlfContentType)
            out.append(contentsOf: Self.canonicalContentType(part.contentType))
        }
        out.append(ASCII.cr)
        out.append(ASCII.lf)
        out.append(ASCII.cr)
        out.append(ASCII.lf)
    }

    /// Appends the close delimiter (and a final CRLF) to `out`.
    public mutating func writeClose(into out: inout [UInt8]) {
        if started {
            out.append(ASCII.cr)
            out.append(ASCII.lf)
        }
        started = true
        out.append(ASCII.hyphen)
        out.append(ASCII.hyphen)
        out.append(contentsOf: boundary)
        out.append(contentsOf: [ASCII.hyphen, ASCII.hyphen, ASCII.cr, ASCII.lf])
    }

    /// The part as the upstream will see it after encoding and re-parsing: escaped name and filename,
    /// canonical Content-Type for files, no Content-Type for fields, no anomalies.
    public static func canonical(_ part: MultipartPart) -> MultipartPart {
        var name: [UInt8] = []
        appendEscaped(part.name ?? [], to: &name)
        var filename: [UInt8]?
        if let f = part.filename {
            var escaped: [UInt8] = []
            appendEscaped(f, to: &escaped)
            filename = escaped
        }
        return MultipartPart(name: name, filename: filename,
                             contentType: part.filename == nil ? nil : canonicalContentType(part.contentType))
    }

    /// Normalises a declared file Content-Type: lowercase `type/subtype` of valid tokens, keeping only a
    /// token `charset` parameter; anything missing or malformed becomes `application/octet-stream`.
    public static func canonicalContentType(_ declared: [UInt8]?) -> [UInt8] {
        guard let declared else { return octetStream }
        // Already canonical (the usual `type/subtype` a client sends): the parse below would return it unchanged.
        if isPlainLowercaseMediaType(declared) { return declared }
        return parsedContentType(declared)
    }

    /// `canonicalContentType` through the parameter parser (what it does for any input that is not already plain).
    static func parsedContentType(_ declared: [UInt8]) -> [UInt8] {
        let fallback = octetStream
        let parsed = HeaderParameters.parse(declared)
        let v = parsed.value
        // Lowercased already, so this is the `type/subtype` check alone.
        guard isPlainLowercaseMediaType(v) else { return fallback }
        var out = v
        if let cs = parsed.first("charset"), !cs.value.isEmpty, cs.value.allSatisfy(ASCII.isTChar) {
            out.append(contentsOf: Array("; charset=".utf8))
            out.append(contentsOf: ASCII.lowercased(cs.value))
        }
        return out
    }

    private static let octetStream = Array("application/octet-stream".utf8)

    /// `type/subtype`: tokens without an uppercase letter, one slash with a token on each side, nothing else.
    static func isPlainLowercaseMediaType(_ bytes: [UInt8]) -> Bool {
        var slash = -1
        for index in bytes.indices {
            let byte = bytes[index]
            if byte == 0x2F {
                guard slash < 0 else { return false }
                slash = index
            } else if !ASCII.isTChar(byte) || (byte >= 0x41 && byte <= 0x5A) {
                return false
            }
        }
        return slash > 0 && slash < bytes.count - 1
    }

    private static let crlfDisposition = Array("\r\nContent-Disposition: form-data; name=\"".utf8)
    private static let filenameParam = Array("; filename=\"".utf8)
    private static let crlfContentType = Array("\r\nContent-Type: ".utf8)

    private static func appendEscaped(_ value: [UInt8], to out: inout [UInt8]) {
        // Names and filenames seldom hold a byte to escape: then one copy instead of an append per byte.
        guard value.contains(where: { escape($0) != nil }) else {
            out.append(contentsOf: value)
            return
        }
        for c in value {
            if let (high, low) = escape(c) {
                out.append(ASCII.percent)
                out.append(high)
                out.append(low)
            } else {
                out.append(c)
            }
        }
    }

    /// The two hex digits `%XX` replaces `c` with in a name or filename: `"`, CR, LF and backslash.
    private static func escape(_ c: UInt8) -> (UInt8, UInt8)? {
        switch c {
        case ASCII.quote: (0x32, 0x32)
        case ASCII.cr: (0x30, 0x44)
        case ASCII.lf: (0x30, 0x41)
        case ASCII.backslash: (0x35, 0x43)
        default: nil
        }
    }
}
