/// A parsed `Accept` field value (RFC 9110 §12.5.1): the media ranges a client accepts, with their weights.
///
/// ```
/// text/html, application/xml;q=0.9, */*;q=0.8
/// └───┬───┘  └──────┬──────┘ └─┬─┘  └┬┘ └─┬─┘
///   range         range       weight range weight (q=1 when absent)
/// ```
///
/// Parsing is forgiving the safe way: a malformed element (no `/`, a non-token, `*/html`, a bad q-value, an
/// unterminated quoted string) is dropped on its own and the others are kept. Types and subtypes are compared
/// case-insensitively; media-type parameters other than `q` are ignored.
public struct HTTPAccept: Sendable, Hashable {
    /// One media range and its weight.
    public struct MediaRange: Sendable, Hashable {
        /// The type, lowercased; `*` in `*/*`.
        public var type: String
        /// The subtype, lowercased; `*` in `*/*` and `type/*`.
        public var subtype: String
        /// The q-value in thousandths, 0...1000 (`q=0.5` is 500; no `q` is 1000).
        public var quality: Int

        /// Creates a range.
        public init(type: String, subtype: String, quality: Int = 1000) {
            self.type = type
            self.subtype = subtype
            self.quality = quality
        }
    }

    /// The well-formed ranges in field order.
    public private(set) var ranges: [MediaRange]

    /// Parses a field value (several `Accept` fields are one value joined with `,`).
    public init(value: some Sequence<UInt8>) {
        ranges = []
        var scanner = Scanner(bytes: Array(value))
        while let element = scanner.nextElement() {
            if let range = Self.parseRange(element) { ranges.append(range) }
        }
    }

    /// The weight of the most specific range matching `type/subtype` (exact, then `type/*`, then `*/*`),
    /// in thousandths; nil when no range matches. Among equally specific ranges the highest weight counts.
    ///
    /// With `countingFullWildcard: false`, `*/*` is not a match: a client that lists `*/*` takes anything but
    /// asked for nothing in particular.
    public func quality(type: String, subtype: String, countingFullWildcard: Bool = true) -> Int? {
        var best: (specificity: Int, quality: Int)?
        for range in ranges {
            let specificity: Int
            if range.type == "*" {
                guard countingFullWildcard else { continue }
                specificity = 0
            } else if range.type != type {
                continue
            } else if range.subtype == "*" {
                specificity = 1
            } else if range.subtype == subtype {
                specificity = 2
            } else {
                continue
            }
            if let b = best,
               b.specificity > specificity || (b.specificity == specificity && b.quality >= range.quality) {
                continue
            }
            best = (specificity, range.quality)
        }
        return best?.quality
    }

    /// Whether an error should be rendered as an HTML page rather than JSON: `text/html` is asked for by name
    /// (or `text/*`) with q > 0, and `application/json` (or `application/*`) is not. `*/*` counts for neither,
    /// so curl's `*/*`, an empty or absent field and API clients get JSON; a browser navigation gets HTML.
    public var prefersHTMLErrors: Bool {
        let html = quality(type: "text", subtype: "html", countingFullWildcard: false) ?? 0
        let json = quality(type: "application", subtype: "json", countingFullWildcard: false) ?? 0
        return html > 0 && json == 0
    }

    // MARK: Parsing

    /// `type "/" subtype *( OWS ";" OWS parameter )`, with the first `q` parameter as the weight.
    private static func parseRange(_ element: ArraySlice<UInt8>) -> MediaRange? {
        var params = Scanner.split(element, on: UInt8(ascii: ";"))
        guard !params.isEmpty else { return nil }
        let mediaType = params.removeFirst()
        guard let slash = mediaType.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let type = mediaType[mediaType.startIndex..<slash]
        let subtype = mediaType[(slash + 1)...]
        guard isToken(type), isToken(subtype) else { return nil }
        let typeName = lowercasedString(type)
        let subtypeName = lowercasedString(subtype)
        if typeName == "*" && subtypeName != "*" { return nil }

        var quality = 1000
        var sawQuality = false
        for param in params {
            if param.isEmpty { continue }   // `text/html;;q=1` and a trailing `;` are allowed by the grammar
            guard let equals = param.firstIndex(of: UInt8(ascii: "=")) else { return nil }
            let name = param[param.startIndex..<equals]
            let value = param[(equals + 1)...]
            guard isToken(name), isToken(value) || isQuotedString(value) else { return nil }
            guard name.count == 1, HTTPSyntax.lowercased(name.first!) == UInt8(ascii: "q") else { continue }
            if sawQuality { continue }
            guard let q = parseQValue(value) else { return nil }
            quality = q
            sawQuality = true
        }
        return MediaRange(type: typeName, subtype: subtypeName, quality: quality)
    }

    /// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )` in thousandths.
    static func parseQValue(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard let first = bytes.first, first == UInt8(ascii: "0") || first == UInt8(ascii: "1") else { return nil }
        var rest = bytes.dropFirst()
        var value = first == UInt8(ascii: "1") ? 1000 : 0
        guard let dot = rest.first else { return value }
        guard dot == UInt8(ascii: "."), rest.count <= 4 else { return nil }
        rest = rest.dropFirst()
        var scale = 100
        for byte in rest {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value += Int(byte - UInt8(ascii: "0")) * scale
            scale /= 10
        }
        return value <= 1000 ? value : nil
    }

    private static func isToken(_ bytes: ArraySlice<UInt8>) -> Bool {
        !bytes.isEmpty && bytes.allSatisfy(HTTPSyntax.isTokenChar)
    }

    /// `DQUOTE *( qdtext / quoted-pair ) DQUOTE`, closed exactly at the end.
    private static func isQuotedString(_ bytes: ArraySlice<UInt8>) -> Bool {
        guard bytes.count >= 2, bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\"") else {
            return false
        }
        var index = bytes.startIndex + 1
        while index < bytes.endIndex - 1 {
            let byte = bytes[index]
            guard HTTPSyntax.isFieldValueByte(byte) else { return false }
            if byte == UInt8(ascii: "\"") { return false }
            if byte == UInt8(ascii: "\\") {
                index += 1
                guard index < bytes.endIndex - 1, HTTPSyntax.isFieldValueByte(bytes[index]) else { return false }
            }
            index += 1
        }
        return true
    }

    private static func lowercasedString(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.map(HTTPSyntax.lowercased), as: UTF8.self)
    }

    /// Cuts a field value into list elements at commas outside quoted strings, each trimmed of OWS.
    private struct Scanner {
        let bytes: [UInt8]
        var position = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        /// The next non-empty element, or nil at the end. An unterminated quoted string runs to the end of
        /// the value, and that last element fails to parse as a range.
        mutating func nextElement() -> ArraySlice<UInt8>? {
            while position < bytes.count {
                let start = position
                var quoted = false
                while position < bytes.count {
                    let byte = bytes[position]
                    if quoted {
                        if byte == UInt8(ascii: "\\") { position += 1 }
                        else if byte == UInt8(ascii: "\"") { quoted = false }
                    } else if byte == UInt8(ascii: "\"") {
                        quoted = true
                    } else if byte == UInt8(ascii: ",") {
                        break
                    }
                    position += 1
                }
                let element = Scanner.trim(bytes[start..<min(position, bytes.count)])
                position += 1   // past the comma
                if !element.isEmpty { return element }
            }
            return nil
        }

        /// Splits at `separator` outside quoted strings; each piece trimmed of OWS.
        static func split(_ bytes: ArraySlice<UInt8>, on separator: UInt8) -> [ArraySlice<UInt8>] {
            var pieces: [ArraySlice<UInt8>] = []
            var start = bytes.startIndex
            var index = bytes.startIndex
            var quoted = false
            while index < bytes.endIndex {
                let byte = bytes[index]
                if quoted {
                    if byte == UInt8(ascii: "\\") { index += 1 }
                    else if byte == UInt8(ascii: "\"") { quoted = false }
                } else if byte == UInt8(ascii: "\"") {
                    quoted = true
                } else if byte == separator {
                    pieces.append(trim(bytes[start..<index]))
                    start = index + 1
                }
                index += 1
            }
            pieces.append(trim(bytes[start..<min(index, bytes.endIndex)]))
            return pieces
        }

        static func trim(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
            var slice = bytes
            while let b = slice.first, HTTPSyntax.isWhitespace(b) { slice = slice.dropFirst() }
            while let b = slice.last, HTTPSyntax.isWhitespace(b) { slice = slice.dropLast() }
            return slice
        }
    }
}
