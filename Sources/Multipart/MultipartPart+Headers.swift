import CLinux
import Glibc

/// What the parser learned from one part's header block.
///
/// Names and filenames are kept as bytes: they need not be valid UTF-8 (an `invalid-utf8` flag says so).
/// `filename` is already folded: when `filename*` is present and decodes, it wins (RFC 6266 §4.3), and a
/// disagreement with `filename` raises `filename-mismatch`.
public struct MultipartPart: Sendable, Equatable {
    /// The `name` parameter, or `nil` when absent (`missing-name`).
    public var name: [UInt8]?
    /// The filename (from `filename*` or `filename`), or `nil` for a field part.
    public var filename: [UInt8]?
    /// The declared Content-Type value, surrounding whitespace removed, or `nil`.
    public var contentType: [UInt8]?
    /// Anomalies seen in this part's headers.
    public var anomalies: MultipartAnomalies

    /// Creates a part description.
    public init(name: [UInt8]?, filename: [UInt8]? = nil, contentType: [UInt8]? = nil,
                anomalies: MultipartAnomalies = MultipartAnomalies()) {
        self.name = name
        self.filename = filename
        self.contentType = contentType
        self.anomalies = anomalies
    }

    /// Whether the part is a file (it carries a filename parameter, even an empty one).
    public var isFile: Bool { filename != nil }

    /// `name` decoded as UTF-8 (invalid sequences replaced).
    public var nameString: String? { name.map { String(decoding: $0, as: UTF8.self) } }
    /// `filename` decoded as UTF-8 (invalid sequences replaced).
    public var filenameString: String? { filename.map { String(decoding: $0, as: UTF8.self) } }
    /// `contentType` decoded as UTF-8 (invalid sequences replaced).
    public var contentTypeString: String? { contentType.map { String(decoding: $0, as: UTF8.self) } }
}

extension MultipartPart {
    /// Parses a complete part header block: header lines, each ended by CRLF (or a bare LF, flagged `lf-line`),
    /// without the terminating empty line.
    ///
    /// Fatal: a line without `:`, an empty or non-token header name, whitespace before the colon, a bare CR.
    /// Flagged: folding, control characters, duplicates, unknown headers and parameters, and so on.
    public static func parse(headerBlock block: UnsafeRawBufferPointer) throws(MultipartError) -> MultipartPart {
        // Pass 1, over physical lines: line ends, bare CRs, folding. Its errors come before any of pass 2.
        var anomalies = MultipartAnomalies()
        var folded = false
        var i = 0
        let n = block.count
        while i < n {
            let (lineEnd, end) = physicalLine(block, from: i)
            if lineEnd == end && end < n {
                anomalies.insert(.lfLine)
            }
            let line = UnsafeRawBufferPointer(rebasing: block[i..<lineEnd])
            if let base = line.baseAddress, memchr(base, Int32(ASCII.cr), line.count) != nil {
                throw MultipartError(.bareCR)
            }
            if let first = line.first, first == ASCII.space || first == ASCII.tab {
                guard i > 0 else { throw MultipartError(.malformedPartHeader) }
                anomalies.insert(.headerFolding)
                folded = true
            }
            i = end + 1
        }
        guard folded else {
            return try parseLogicalLines(block, anomalies: anomalies)
        }
        // Unfold into one buffer of LF-ended logical lines: a continuation line joins the previous one after
        // a single space, its leading whitespace removed.
        var unfolded: [UInt8] = []
        unfolded.reserveCapacity(n)
        i = 0
        while i < n {
            let (lineEnd, end) = physicalLine(block, from: i)
            var rest = block[i..<lineEnd]
            if let first = rest.first, first == ASCII.space || first == ASCII.tab {
                while let f = rest.first, f == ASCII.space || f == ASCII.tab { rest = rest.dropFirst() }
                unfolded[unfolded.count - 1] = ASCII.space
            }
            unfolded.append(contentsOf: rest)
            unfolded.append(ASCII.lf)
            i = end + 1
        }
        let result = unfolded.withUnsafeBytes { bytes in
            Result { () throws(MultipartError) -> MultipartPart in try parseLogicalLines(bytes, anomalies: anomalies) }
        }
        return try result.get()
    }

    /// The line starting at `start`: where its content ends (before a CR that precedes the LF) and where its
    /// LF is (or `block.count`).
    private static func physicalLine(_ block: UnsafeRawBufferPointer, from start: Int) -> (lineEnd: Int, end: Int) {
        var end = block.count
        if start < block.count, let base = block.baseAddress,
           let found = memchr(base + start, Int32(ASCII.lf), block.count - start) {
            end = base.distance(to: UnsafeRawPointer(found))
        }
        var lineEnd = end
        if lineEnd > start, block[lineEnd - 1] == ASCII.cr {
            lineEnd -= 1
        }
        return (lineEnd, end)
    }

    /// Pass 2: the header block as logical lines, already checked by pass 1 (no folding, no CR but one before
    /// each LF), scanned in place.
    private static func parseLogicalLines(
        _ block: UnsafeRawBufferPointer,
        anomalies: MultipartAnomalies
    ) throws(MultipartError) -> MultipartPart {
        var anomalies = anomalies
        var disposition: Range<Int>?
        var contentType: [UInt8]?
        var nestedMultipart = false
        var seenCTE = false
        var i = 0
        let n = block.count
        while i < n {
            let (lineEnd, end) = physicalLine(block, from: i)
            let start = i
            i = end + 1
            // Index loops over the raw bytes: the generic slice algorithms cost several times as much per byte.
            // The name runs over tchars up to the colon.
            // The shim's tchar table, a lookup per byte (the shift-and-test took about nine instructions a byte).
            let colon = start + cl_tchar_span(block.baseAddress.map { $0 + start }, lineEnd - start)
            guard colon < lineEnd, colon > start, block[colon] == ASCII.colon else {
                throw MultipartError(.malformedPartHeader)
            }
            var valueStart = colon + 1
            while valueStart < lineEnd, block[valueStart] == ASCII.space || block[valueStart] == ASCII.tab {
                valueStart += 1
            }
            var valueEnd = lineEnd
            while valueEnd > valueStart, block[valueEnd - 1] == ASCII.space || block[valueEnd - 1] == ASCII.tab {
                valueEnd -= 1
            }
            let name = block[start..<colon]
            let value = block[valueStart..<valueEnd]
            let (control, nonASCII) = ASCII.controlAndHighBytes(UnsafeRawBufferPointer(rebasing: value))
            if control { anomalies.insert(.controlCharacters) }
            if nonASCII && !UTF8Check.isValid(value) { anomalies.insert(.invalidUTF8) }
            if ASCII.equalsLower(name, "content-disposition") {
                if disposition != nil {
                    anomalies.insert(.duplicateContentDisposition)
                } else {
                    disposition = value.startIndex..<value.endIndex
                }
            } else if ASCII.equalsLower(name, "content-type") {
                if contentType != nil {
                    anomalies.insert(.duplicateHeader)
                } else {
                    contentType = Array(UnsafeRawBufferPointer(rebasing: value))
                    nestedMultipart = isMultipartType(value)
                }
            } else if ASCII.equalsLower(name, "content-transfer-encoding") {
                if seenCTE { anomalies.insert(.duplicateHeader) }
                seenCTE = true
                anomalies.insert(.contentTransferEncoding)
            } else {
                anomalies.insert(.unknownPartHeader)
            }
        }

        // The arrays are moved into the part (`take`): copying them would retain and release each.
        var part = MultipartPart(name: nil, filename: nil, contentType: contentType.take(), anomalies: anomalies)
        if nestedMultipart { part.anomalies.insert(.nestedMultipart) }
        guard let disposition else {
            part.anomalies.insert(.missingContentDisposition)
            part.anomalies.insert(.missingName)
            return part
        }
        var plainFilename: [UInt8]?
        var starFilename: [UInt8]?
        let dispositionBytes = UnsafeRawBufferPointer(rebasing: block[disposition])
        if let plain = plainDisposition(dispositionBytes) {
            // The usual form: what the parameter parser would find, without it.
            part.name = Array(UnsafeRawBufferPointer(rebasing: dispositionBytes[plain.name]))
            plainFilename = plain.filename.map { Array(UnsafeRawBufferPointer(rebasing: dispositionBytes[$0])) }
        } else {
            parseDisposition(dispositionBytes, into: &part, plainFilename: &plainFilename, starFilename: &starFilename)
        }
        if let star = starFilename.take() {
            if let plain = plainFilename, plain != star { part.anomalies.insert(.filenameMismatch) }
            part.filename = star
        } else {
            part.filename = plainFilename.take()
        }
        if part.name == nil { part.anomalies.insert(.missingName) }
        func check(_ v: [UInt8]?) {
            guard let v else { return }
            let (control, nonASCII) = v.withUnsafeBytes { ASCII.controlAndHighBytes($0, tabIsControl: true) }
            if control { part.anomalies.insert(.controlCharacters) }
            if nonASCII && !UTF8Check.isValid(v) { part.anomalies.insert(.invalidUTF8) }
        }
        check(part.name)
        check(part.filename)
        return part
    }

    /// Where the name and filename lie in a Content-Disposition value of the form nearly every client sends:
    /// `form-data; name="NAME"` and optionally `; filename="FILENAME"` (the disposition type in any case, the space
    /// after each `;` optional), the values quoted without a quote or backslash inside, nothing else. Nil for
    /// anything else, which the parameter parser then reads. For these the parser finds the same name and
    /// filename, quoted, and no anomaly (`PartHeaderReferenceTests` compares the two on generated values).
    static func plainDisposition(_ b: UnsafeRawBufferPointer) -> (name: Range<Int>, filename: Range<Int>?)? {
        let type: StaticString = "form-data"
        guard b.count > type.utf8CodeUnitCount, let base = b.baseAddress,
              cl_equals_lower(base, type.utf8Start, type.utf8CodeUnitCount) != 0 else { return nil }
        var i = type.utf8CodeUnitCount
        // `; key="value"` at `i`: the value's range, and `i` moved past its closing quote.
        func quoted(_ key: StaticString) -> Range<Int>? {
            guard i < b.count, b[i] == ASCII.semicolon else { return nil }
            i += 1
            if i < b.count, b[i] == ASCII.space { i += 1 }
            let keyCount = key.utf8CodeUnitCount
            guard b.count - i > keyCount + 1, memcmp(base + i, key.utf8Start, keyCount) == 0,
                  b[i + keyCount] == ASCII.equals, b[i + keyCount + 1] == ASCII.quote else { return nil }
            let start = i + keyCount + 2
            var end = start
            while end < b.count, b[end] != ASCII.quote, b[end] != ASCII.backslash { end += 1 }
            guard end < b.count, b[end] == ASCII.quote else { return nil }
            i = end + 1
            return start..<end
        }
        guard let name = quoted("name") else { return nil }
        if i == b.count { return (name, nil) }
        guard let filename = quoted("filename"), i == b.count else { return nil }
        return (name, filename)
    }

    /// The Content-Disposition value through the parameter parser: name, filenames and their anomalies.
    private static func parseDisposition(_ value: UnsafeRawBufferPointer, into part: inout MultipartPart,
                                         plainFilename: inout [UInt8]?, starFilename: inout [UInt8]?) {
        // Duplicate names: flags for the three known ones, a set (made only then) for any other.
        var seenKnown: UInt8 = 0
        var seenOthers: Set<[UInt8]>?
        let cd = HeaderParameters.scan(raw: value) { p in
            let known: UInt8 = ASCII.equals(p.name, "name") ? 1 : ASCII.equals(p.name, "filename") ? 2
                : ASCII.equals(p.name, "filename*") ? 4 : 0
            let duplicate: Bool
            if known != 0 {
                duplicate = seenKnown & known != 0
                seenKnown |= known
            } else {
                duplicate = seenOthers?.insert(p.name).inserted == false
                if seenOthers == nil { seenOthers = [p.name] }
            }
            if duplicate { part.anomalies.insert(.duplicateParameter); return }
            switch known {
            case 1:
                part.name = p.value
            case 2:
                plainFilename = p.value
            case 4:
                if p.quoted { part.anomalies.insert(.invalidQuoting) }
                if let decoded = ExtendedValue.decode(p.value) {
                    starFilename = decoded
                } else {
                    part.anomalies.insert(.invalidExtendedValue)
                }
            default:
                part.anomalies.insert(.unknownParameter)
            }
        }
        part.anomalies.formUnion(cd.anomalies)
        if !ASCII.equals(cd.value, "form-data") { part.anomalies.insert(.dispositionNotFormData) }
    }

    /// Whether a Content-Type value's media type (lowercased, before any `;`) starts with `multipart/`, as
    /// `HeaderParameters.parse(value).value` would show, checked in place.
    private static func isMultipartType(_ value: Slice<UnsafeRawBufferPointer>) -> Bool {
        var rest = value
        while let f = rest.first, f == ASCII.space || f == ASCII.tab { rest = rest.dropFirst() }
        return rest.count >= 10 && ASCII.equalsLower(rest.prefix(10), "multipart/")
    }
}

/// RFC 8187 / RFC 5987 extended parameter values: `charset'language'percent-encoded`.
enum ExtendedValue {
    /// Decodes to UTF-8 bytes; `nil` when malformed or in an unsupported charset.
    static func decode(_ v: [UInt8]) -> [UInt8]? {
        guard let q1 = v.firstIndex(of: ASCII.apostrophe) else { return nil }
        guard let q2 = v[(q1 + 1)...].firstIndex(of: ASCII.apostrophe) else { return nil }
        let charset = v[..<q1]
        var raw: [UInt8] = []
        var i = q2 + 1
        while i < v.count {
            let c = v[i]
            if c == ASCII.percent {
                guard i + 2 < v.count, let h = ASCII.hexValue(v[i + 1]), let l = ASCII.hexValue(v[i + 2]) else {
                    return nil
                }
                raw.append(h << 4 | l)
                i += 3
            } else if ASCII.isTChar(c) {
                raw.append(c)
                i += 1
            } else {
                return nil
            }
        }
        if ASCII.equalsLower(charset, "utf-8") {
            return UTF8Check.isValid(raw) ? raw : nil
        }
        if ASCII.equalsLower(charset, "iso-8859-1") {
            var out: [UInt8] = []
            for b in raw {
                if b < 0x80 { out.append(b) } else { out.append(0xC0 | b >> 6); out.append(0x80 | b & 0x3F) }
            }
            return out
        }
        return nil
    }
}

/// UTF-8 validation without building a String (also the head parsers' check of non-ASCII field values).
package enum UTF8Check {
    package static func isValid(_ bytes: some Collection<UInt8>) -> Bool {
        if bytes.allSatisfy({ $0 < 0x80 }) {
            return true  // ASCII, the usual case, needs no decoder.
        }
        var it = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&it) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }
}
