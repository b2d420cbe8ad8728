/// A structural oddity the multipart parser noticed and tolerated, or a name, filename or value that
/// frameworks read differently (found by the policy layer, for urlencoded fields too).
///
/// The parser never guesses silently: every leniency it applies is reported as one of these flags,
/// on the part where it happened or on the request. The policy layer adds the semantic flags (from
/// `duplicateName` on) and decides whether a flag rejects the request, is logged, or is allowed. Each flag has a stable kebab-case `name` used
/// in rule files (`anomaly header-folding reject;`), the audit log and `formwall inspect`.
public enum MultipartAnomaly: UInt8, CaseIterable, Sendable, Hashable {
    /// The Content-Type boundary parameter was a quoted-string.
    case boundaryQuoted
    /// Whitespace around `=` or inside the boundary parameter.
    case boundaryWhitespace
    /// Bytes before the first delimiter (a preamble).
    case dataBefore
    /// Bytes after the close delimiter other than one CRLF (an epilogue).
    case dataAfter
    /// A part header continued on a line starting with space or tab (obs-fold).
    case headerFolding
    /// A line ended with a bare LF instead of CRLF (delimiter or part header line).
    case lfLine
    /// Parameters in a header not separated by `;`.
    case missingSemicolon
    /// Single-quoted, unterminated or otherwise unbalanced quoting in a parameter value.
    case invalidQuoting
    /// A backslash escape inside a quoted-string parameter value.
    case backslashEscape
    /// More than one Content-Disposition header in a part.
    case duplicateContentDisposition
    /// Any other part header repeated (for example two Content-Type headers).
    case duplicateHeader
    /// A Content-Disposition parameter given more than once.
    case duplicateParameter
    /// A Content-Disposition parameter other than `name`, `filename` and `filename*`.
    case unknownParameter
    /// A disposition type other than `form-data`.
    case dispositionNotFormData
    /// No Content-Disposition header at all.
    case missingContentDisposition
    /// `filename` and `filename*` both present and different.
    case filenameMismatch
    /// An RFC 5987 `filename*` value that could not be decoded.
    case invalidExtendedValue
    /// NUL or other control characters in a part header.
    case controlCharacters
    /// A header value or parameter that is not valid UTF-8.
    case invalidUTF8
    /// A Content-Transfer-Encoding part header (deprecated by RFC 7578; never decoded).
    case contentTransferEncoding
    /// A part without a `name` parameter.
    case missingName
    /// A part whose Content-Type is itself multipart.
    case nestedMultipart
    /// A line in the body that starts like the delimiter but is not one.
    case delimiterLookalike
    /// A part header other than Content-Disposition, Content-Type and Content-Transfer-Encoding.
    case unknownPartHeader
    /// A name given again in the same body by a part no rule names: frameworks keep the first, the last, or a list.
    case duplicateName
    /// A plain name and a bracket name on it in one body (`a` and `a[b]`): PHP, Rack and `qs` read one variable,
    /// the later overwriting the earlier; others read two.
    case nameCollision
    /// A well-formed bracket name (`a[b]`, `a[]`, `a[b][c]`): PHP, Rack and `qs` nest it, others keep it whole.
    case nameBrackets
    /// A name PHP reads as another name: a space or `.` (read as `_`), leading spaces (dropped), an unbalanced
    /// or stray bracket, text after a bracket group (dropped), or an empty base (`[a]`, ignored).
    case nameRewritten
    /// A `%XX` escape in a name or filename: some frameworks decode it, some do not.
    case percentEscape
    /// A part Content-Type whose charset the route's `part-charsets` does not list (by default anything but UTF-8,
    /// US-ASCII, ISO-8859-1, ISO-8859-15 and Windows-1252: UTF-7, UTF-16, EBCDIC…).
    case partCharset
    /// A `_charset_` field, which some frameworks decode the other fields by, whose value the route's
    /// `part-charsets` does not list; a file part named `_charset_`.
    case charsetField
    /// A field value (a part without a filename, a urlencoded value) that is not valid UTF-8.
    case invalidUTF8Value
    /// A name with a character outside ASCII: busboy (and so multer) reads names as Latin-1 by default, and
    /// look-alikes (`ｒole`, `é` composed or not, zero-width and no-break spaces, a BOM) are other names.
    case nonASCIIName
    /// An empty name (`name=""`, a urlencoded `=v`): PHP and Go drop the part, busboy names it `undefined`.
    case emptyName
    /// A file part with an empty filename (a browser's "no file chosen"): a file to some frameworks, a field to
    /// others, an upload error to PHP.
    case emptyFilename
    /// `__proto__`, `constructor` or `prototype` as a name or a bracket key: JavaScript objects built from the form
    /// lose it or are polluted by it.
    case prototypeName
    /// A body field whose name is also a query parameter: Go's `FormValue` (for multipart bodies) and PHP's
    /// `$_REQUEST` read the query's value, others the body's.
    case queryCollision
    /// A field value starting with a UTF-8 byte order mark, which WHATWG decoders (undici) remove.
    case byteOrderMark

    /// The stable name used in rule files, audit records and tool output.
    public var name: String {
        switch self {
        case .boundaryQuoted: return "boundary-quoted"
        case .boundaryWhitespace: return "boundary-whitespace"
        case .dataBefore: return "data-before"
        case .dataAfter: return "data-after"
        case .headerFolding: return "header-folding"
        case .lfLine: return "lf-line"
        case .missingSemicolon: return "missing-semicolon"
        case .invalidQuoting: return "invalid-quoting"
        case .backslashEscape: return "backslash-escape"
        case .duplicateContentDisposition: return "duplicate-content-disposition"
        case .duplicateHeader: return "duplicate-header"
        case .duplicateParameter: return "duplicate-parameter"
        case .unknownParameter: return "unknown-parameter"
        case .dispositionNotFormData: return "disposition-not-form-data"
        case .missingContentDisposition: return "missing-content-disposition"
        case .filenameMismatch: return "filename-mismatch"
        case .invalidExtendedValue: return "invalid-extended-value"
        case .controlCharacters: return "control-characters"
        case .invalidUTF8: return "invalid-utf8"
        case .contentTransferEncoding: return "content-transfer-encoding"
        case .missingName: return "missing-name"
        case .nestedMultipart: return "nested-multipart"
        case .delimiterLookalike: return "delimiter-lookalike"
        case .unknownPartHeader: return "unknown-part-header"
        case .duplicateName: return "duplicate-name"
        case .nameCollision: return "name-collision"
        case .nameBrackets: return "name-brackets"
        case .nameRewritten: return "name-rewritten"
        case .percentEscape: return "percent-escape"
        case .partCharset: return "part-charset"
        case .charsetField: return "charset-field"
        case .invalidUTF8Value: return "invalid-utf8-value"
        case .nonASCIIName: return "non-ascii-name"
        case .emptyName: return "empty-name"
        case .emptyFilename: return "empty-filename"
        case .prototypeName: return "prototype-name"
        case .queryCollision: return "query-collision"
        case .byteOrderMark: return "byte-order-mark"
        }
    }

    /// Looks a flag up by its stable name.
    public init?(name: String) {
        guard let found = MultipartAnomaly.allCases.first(where: { $0.name == name }) else { return nil }
        self = found
    }
}

/// A compact set of anomaly flags (one bit per `MultipartAnomaly`).
public struct MultipartAnomalies: Sendable, Hashable, Sequence {
    /// The raw bit set; bit `n` is `MultipartAnomaly(rawValue: n)`.
    public var bits: UInt64

    /// The empty set.
    public init() { bits = 0 }

    /// Whether no flag is set.
    @inlinable public var isEmpty: Bool { bits == 0 }

    /// Whether `flag` is set.
    @inlinable public func contains(_ flag: MultipartAnomaly) -> Bool { bits & (1 << UInt64(flag.rawValue)) != 0 }

    /// Sets `flag`.
    @inlinable public mutating func insert(_ flag: MultipartAnomaly) { bits |= 1 << UInt64(flag.rawValue) }

    /// Adds every flag of `other`.
    @inlinable public mutating func formUnion(_ other: MultipartAnomalies) { bits |= other.bits }

    /// The flags in declaration order (their raw values, so their bits, count up in that order), read off the bits
    /// one set bit at a time. Filtering `allCases` into an array took some 290 instructions for every set, the
    /// empty one too, and the policy iterates every part's flags.
    public func makeIterator() -> Iterator { Iterator(remaining: bits) }

    /// The set bits, lowest first.
    public struct Iterator: IteratorProtocol {
        var remaining: UInt64

        public mutating func next() -> MultipartAnomaly? {
            while remaining != 0 {
                let bit = remaining.trailingZeroBitCount
                remaining &= remaining &- 1
                // A bit no case has (only `bits` set by hand could hold one) is skipped, as the filter did.
                if let flag = MultipartAnomaly(rawValue: UInt8(bit)) { return flag }
            }
            return nil
        }
    }

    /// The flags of `self` that are not in `other`.
    public func subtracting(_ other: MultipartAnomalies) -> MultipartAnomalies {
        var out = self
        out.bits &= ~other.bits
        return out
    }

    /// Whether no flag of `flags` is set.
    public func isDisjoint(with flags: [MultipartAnomaly]) -> Bool { !flags.contains { contains($0) } }

    /// The set holding exactly `flags`.
    public init(_ flags: some Sequence<MultipartAnomaly>) {
        bits = 0
        for flag in flags { insert(flag) }
    }

    /// The flags' stable names in declaration order.
    public var names: [String] { map(\.name) }
}
