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
        var anomalies = MultipartAnomalies()
        // Logical header lines (after unfolding).
        var lines: [[UInt8]] = []
        var i = 0
        let n = block.count
        while i < n {
            var end = i
            while end < n, block[end] != ASCII.lf { end += 1 }
            var lineEnd = end
            if lineEnd > i, block[lineEnd - 1] == ASCII.cr {
                lineEnd -= 1
            } else if end < n {
                anomalies.insert(.lfLine)
            }
            let line = UnsafeRawBufferPointer(rebasing: block[i..<lineEnd])
            if line.contains(ASCII.cr) { throw MultipartError(.bareCR) }
            if let first = line.first, first == ASCII.space || first == ASCII.tab {
                guard !lines.isEmpty else { throw MultipartError(.malformedPartHeader) }
                anomalies.insert(.headerFolding)
                var rest = line[...]
                while let f = rest.first, f == ASCII.space || f == ASCII.tab { rest = rest.dropFirst() }
                lines[lines.count - 1].append(ASCII.space)
                lines[lines.count - 1].append(contentsOf: rest)
            } else {
                lines.append(Array(line))
            }
            i = end + 1
        }

        var disposition: [UInt8]?
        var contentType: [UInt8]?
        var seenCTE = false
        for line in lines {
            guard let colon = line.firstIndex(of: ASCII.colon), colon > 0 else {
                throw MultipartError(.malformedPartHeader)
            }
            let name = line[..<colon]
            guard name.allSatisfy(ASCII.isTChar) else { throw MultipartError(.malformedPartHeader) }
            var value = line[(colon + 1)...]
            while let f = value.first, f == ASCII.space || f == ASCII.tab { value = value.dropFirst() }
            while let l = value.last, l == ASCII.space || l == ASCII.tab { value = value.dropLast() }
            if value.contains(where: { ($0 < 0x20 && $0 != ASCII.tab) || $0 == 0x7F }) {
                anomalies.insert(.controlCharacters)
            }
            if !UTF8Check.isValid(value) { anomalies.insert(.invalidUTF8) }
            if ASCII.equalsLower(name, "content-disposition") {
                if disposition != nil { anomalies.insert(.duplicateContentDisposition) } else { disposition = Array(value) }
            } else if ASCII.equalsLower(name, "content-type") {
                if contentType != nil { anomalies.insert(.duplicateHeader) } else { contentType = Array(value) }
            } else if ASCII.equalsLower(name, "content-transfer-encoding") {
                if seenCTE { anomalies.insert(.duplicateHeader) }
                seenCTE = true
                anomalies.insert(.contentTransferEncoding)
            } else {
                anomalies.insert(.unknownPartHeader)
            }
        }

        var part = MultipartPart(name: nil, filename: nil, contentType: contentType, anomalies: anomalies)
        if let ct = contentType {
            let parsed = HeaderParameters.parse(ct)
            if parsed.value.starts(with: Array("multipart/".utf8)) { part.anomalies.insert(.nestedMultipart) }
        }
        guard let disposition else {
            part.anomalies.insert(.missingContentDisposition)
            part.anomalies.insert(.missingName)
            return part
        }
        let cd = HeaderParameters.parse(disposition)
        part.anomalies.formUnion(cd.anomalies)
        if cd.value != Array("form-data".utf8) { part.anomalies.insert(.dispositionNotFormData) }
        var plainFilename: [UInt8]?
        var starFilename: [UInt8]?
        var seen = Set<[UInt8]>()
        for p in cd.parameters {
            if !seen.insert(p.name).inserted { part.anomalies.insert(.duplicateParameter); continue }
            switch String(decoding: p.name, as: UTF8.self) {
            case "name":
                part.name = p.value
            case "filename":
                plainFilename = p.value
            case "filename*":
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
        if let star = starFilename {
            if let plain = plainFilename, plain != star { part.anomalies.insert(.filenameMismatch) }
            part.filename = star
        } else {
            part.filename = plainFilename
        }
        if part.name == nil { part.anomalies.insert(.missingName) }
        for v in [part.name, part.filename] {
            guard let v else { continue }
            if v.contains(where: { $0 < 0x20 || $0 == 0x7F }) { part.anomalies.insert(.controlCharacters) }
            if !UTF8Check.isValid(v) { part.anomalies.insert(.invalidUTF8) }
        }
        return part
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

/// UTF-8 validation without building a String.
enum UTF8Check {
    static func isValid(_ bytes: some Collection<UInt8>) -> Bool {
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
