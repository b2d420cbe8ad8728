import CLinux
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

    /// The request Content-Type for the encoded body is this prefix and the boundary (the proxy writes both
    /// straight into the upstream head, `HTTPForwardingContext.ContentType.multipart`).
    public static let contentTypePrefix: StaticString = "multipart/form-data; boundary="

    /// Appends the delimiter and canonical headers of `part` to `out`; the part's data follows.
    public mutating func writePartHead(_ part: MultipartPart, into out: inout [UInt8]) {
        withPartHead(part) { out.append(contentsOf: $0) }
    }

    /// `writePartHead` into temporary memory: `body` gets the bytes, valid only during the call (the proxy
    /// copies them into its upstream buffer, with no array in between).
    public mutating func withPartHead<R>(_ part: MultipartPart, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let first = !started
        started = true
        let name = part.name ?? []
        let contentType = part.filename == nil ? nil : Self.canonicalContentType(part.contentType)
        // Exact unless a name needs escaping (up to three bytes each); the writer grows its room if short.
        let room = boundary.count + name.count + (part.filename?.count ?? 0) + (contentType?.count ?? 0) + 96
        return ByteWriter.withBytes(room: room, { out in
            if !first { out.writeCRLF() }
            out.write(ASCII.hyphen)
            out.write(ASCII.hyphen)
            boundary.withUnsafeBytes { out.write($0) }
            out.write("\r\nContent-Disposition: form-data; name=\"" as StaticString)
            Self.writeEscaped(name, to: &out)
            out.write(ASCII.quote)
            if let filename = part.filename, let contentType {
                out.write("; filename=\"" as StaticString)
                Self.writeEscaped(filename, to: &out)
                out.write(ASCII.quote)
                out.write("\r\nContent-Type: " as StaticString)
                contentType.withUnsafeBytes { out.write($0) }
            }
            out.writeCRLF()
            out.writeCRLF()
        }, body)
    }

    /// Appends the close delimiter (and a final CRLF) to `out`.
    public mutating func writeClose(into out: inout [UInt8]) {
        withClose { out.append(contentsOf: $0) }
    }

    /// `writeClose` into temporary memory: `body` gets the bytes, valid only during the call.
    public mutating func withClose<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        let first = !started
        started = true
        return ByteWriter.withBytes(room: boundary.count + 8, { out in
            if !first { out.writeCRLF() }
            out.write(ASCII.hyphen)
            out.write(ASCII.hyphen)
            boundary.withUnsafeBytes { out.write($0) }
            out.write(ASCII.hyphen)
            out.write(ASCII.hyphen)
            out.writeCRLF()
        }, body)
    }

    /// The part as the upstream will see it after encoding and re-parsing: escaped name and filename,
    /// canonical Content-Type for files, no Content-Type for fields, no anomalies.
    public static func canonical(_ part: MultipartPart) -> MultipartPart {
        func escaped(_ value: [UInt8]) -> [UInt8] {
            ByteWriter.withBytes(room: value.count * 3, { writeEscaped(value, to: &$0) }) { Array($0) }
        }
        let name = escaped(part.name ?? [])
        let filename = part.filename.map(escaped)
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
        bytes.withUnsafeBytes { bytes in
            // The type up to the slash, then the subtype to the end: two runs of the shim's table.
            guard let base = bytes.baseAddress else { return false }
            let slash = cl_lower_tchar_span(base, bytes.count)
            guard slash > 0, slash < bytes.count - 1, bytes[slash] == 0x2F else { return false }
            return cl_lower_tchar_span(base + slash + 1, bytes.count - slash - 1) == bytes.count - slash - 1
        }
    }

    private static func writeEscaped(_ value: [UInt8], to out: inout ByteWriter) {
        // Names and filenames seldom hold a byte to escape: then one copy instead of a write per byte.
        guard value.contains(where: { escape($0) != nil }) else {
            value.withUnsafeBytes { out.write($0) }
            return
        }
        for c in value {
            if let (high, low) = escape(c) {
                out.write(ASCII.percent)
                out.write(high)
                out.write(low)
            } else {
                out.write(c)
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
