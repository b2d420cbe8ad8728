import Multipart

/// Which characters a field or part name, or a filename, may hold: `name-deny-chars` / `name-allow-chars` and
/// `filename-deny-chars` / `filename-allow-chars` (docs/rules.md, *Name and filename characters*).
///
/// A deny list refuses the characters it holds; an allow list refuses every other. A list is literal characters
/// and ranges (`a-z`) plus two classes: `controls` (C0, DEL, C1) and `bidi` (the bidirectional controls of
/// `bidi-controls`).
public struct CharacterRule: Sendable, Hashable, CustomStringConvertible {
    /// Whether the list names what is refused or what is allowed.
    public enum Mode: String, Sendable, Hashable {
        /// `*-deny-chars`: the listed characters are refused.
        case deny
        /// `*-allow-chars`: only the listed characters are allowed.
        case allow
    }

    /// Deny or allow.
    public var mode: Mode { didSet { refreshASCII() } }
    /// Literal characters and ranges, as scalar values.
    public var ranges: [ClosedRange<UInt32>] { didSet { refreshASCII() } }
    /// Whether the list holds C0 controls, DEL and C1 controls (`controls`).
    public var controls: Bool { didSet { refreshASCII() } }
    /// Whether the list holds the bidirectional controls (`bidi`).
    public var bidi: Bool { didSet { refreshASCII() } }
    /// `allows` of each ASCII byte, worked out again whenever the list changes: a name or filename of ASCII is
    /// judged with a shift and a test per byte. Two words, read from a rule without copying the list (a copy
    /// retains `ranges`, whose buffer the policy's rules and every worker share; bench/proxy/sharing.py). Derived
    /// from the fields above, so equal lists have equal tables (the synthesized `==` and `hash` may include it).
    public private(set) var asciiTable = ASCIITable(low: 0, high: 0)

    /// Creates a list.
    public init(mode: Mode, ranges: [ClosedRange<UInt32>] = [], controls: Bool = false, bidi: Bool = false) {
        self.mode = mode
        self.ranges = ranges
        self.controls = controls
        self.bidi = bidi
        refreshASCII()
    }

    private mutating func refreshASCII() {
        var low: UInt64 = 0
        var high: UInt64 = 0
        for byte in 0..<64 where allows(Unicode.Scalar(UInt8(byte))) { low |= 1 << UInt64(byte) }
        for byte in 64..<128 where allows(Unicode.Scalar(UInt8(byte))) { high |= 1 << UInt64(byte - 64) }
        asciiTable = ASCIITable(low: low, high: high)
    }

    /// `CharacterRule.asciiTable`: one bit per ASCII byte the list allows (0–63 in `low`, 64–127 in `high`).
    public struct ASCIITable: Sendable, Hashable {
        let low: UInt64
        let high: UInt64

        /// Whether the list allows ASCII byte `byte` (below 0x80).
        @inline(__always) func allows(_ byte: UInt8) -> Bool {
            byte < 64 ? (low >> UInt64(byte)) & 1 == 1 : (high >> UInt64(byte &- 64)) & 1 == 1
        }

        /// Whether `text` is all ASCII and the list allows each of its bytes: `firstRefused(in:references:skip:)` is
        /// then nil, whatever `skip` says. False sends the caller to `firstRefused`.
        public func allowsAll(_ text: String) -> Bool {
            var text = text
            return text.withUTF8 { bytes in
                for byte in bytes where byte >= 0x80 || !allows(byte) { return false }
                return true
            }
        }
    }

    /// The default for field and part names: `" ' ; = \` plus controls and bidi controls are refused (CRS 920121
    /// refuses the same quote, semicolon, equals and backslash characters in names).
    public static let defaultNames = CharacterRule(mode: .deny, ranges: scalarRanges("\"';=\\"), controls: true, bidi: true)

    /// The default for filenames: `" ; =` plus controls and bidi controls are refused. `'` stays allowed
    /// (`John's CV.pdf`); `\` and `/` belong to `path-separators`.
    public static let defaultFilenames = CharacterRule(mode: .deny, ranges: scalarRanges("\";="), controls: true, bidi: true)

    /// Whether the list holds `scalar`.
    public func contains(_ scalar: Unicode.Scalar) -> Bool {
        if controls, FilenameCheck.isControl(scalar) { return true }
        if bidi, FilenameCheck.isBidiControl(scalar) { return true }
        return ranges.contains { $0.contains(scalar.value) }
    }

    /// Whether `scalar` may appear.
    public func allows(_ scalar: Unicode.Scalar) -> Bool { mode == .deny ? !contains(scalar) : contains(scalar) }

    /// The first refused character of `text` and its 1-based position in Unicode scalars; characters for which
    /// `skip` is true are never reported (another check owns them). With `references`, a `;` that ends a
    /// well-formed HTML character reference (`endsCharacterReference`) is not judged: `zzz&auml;zzz` holds no `;`
    /// to refuse (`character-references`).
    public func firstRefused(in text: String, references: Bool = false,
                             skip: (Unicode.Scalar) -> Bool = { _ in false })
    -> (scalar: Unicode.Scalar, position: Int)? {
        // ASCII text, byte by byte against the table; a byte beyond ASCII sends the text to the scalar loop.
        enum Scan { case clean, refused(UInt8, position: Int), notASCII }
        let scan = text.utf8.withContiguousStorageIfAvailable { bytes -> Scan in
            for index in bytes.indices {
                let byte = bytes[index]
                if byte >= 0x80 { return .notASCII }
                if !asciiTable.allows(byte), !skip(Unicode.Scalar(byte)),
                   !(references && byte == Self.semicolon && Self.endsCharacterReference(bytes, at: index)) {
                    return .refused(byte, position: index + 1)
                }
            }
            return .clean
        } ?? .notASCII
        switch scan {
        case .clean: return nil
        case .refused(let byte, let position): return (Unicode.Scalar(byte), position)
        case .notASCII: break
        }
        return firstRefusedByScalars(in: text, references: references, skip: skip)
    }

    /// `firstRefused` scalar by scalar, for any text: the reference its ASCII path is tested against.
    func firstRefusedByScalars(in text: String, references: Bool = false, skip: (Unicode.Scalar) -> Bool)
    -> (scalar: Unicode.Scalar, position: Int)? {
        var position = 0
        let scalars = text.unicodeScalars
        for index in scalars.indices {
            let scalar = scalars[index]
            position += 1
            if !allows(scalar), !skip(scalar),
               !(references && scalar == ";" && Self.endsCharacterReference(text.utf8, at: index)) {
                return (scalar, position)
            }
        }
        return nil
    }

    private static let semicolon = UInt8(ascii: ";")

    /// Whether the `;` at `index` of `bytes` ends a well-formed HTML character reference, the form browsers
    /// send a character outside the page's encoding in: `&` and a named reference's shape (a letter, then 1 to
    /// 31 letters or digits: `&auml;`, `&amp;`, `&frac12;`; the name is not looked up in the HTML list), `&#`
    /// and 1 to 7 decimal digits (`&#228;`), or `&#x` (or `&#X`) and 1 to 6 hex digits (`&#xE4;`). `&;`,
    /// `&#;`, `&#x;`, `& amp;` and a `;` with no `&` before it are not references.
    static func endsCharacterReference<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes, at index: Bytes.Index)
    -> Bool {
        // The run of letters and digits just before the `;`, never longer than the longest reference.
        var start = index
        var count = 0
        while start > bytes.startIndex {
            let previous = bytes.index(before: start)
            guard isASCIIAlphanumeric(bytes[previous]) else { break }
            start = previous
            count += 1
            if count > 32 { return false }
        }
        guard count > 0, start > bytes.startIndex else { return false }
        let before = bytes.index(before: start)
        let first = bytes[start]
        if bytes[before] == UInt8(ascii: "&") {
            return count >= 2 && isASCIILetter(first)
        }
        guard bytes[before] == UInt8(ascii: "#"), before > bytes.startIndex,
              bytes[bytes.index(before: before)] == UInt8(ascii: "&") else { return false }
        let run = bytes[start..<index]
        if first == UInt8(ascii: "x") || first == UInt8(ascii: "X") {
            return (2...7).contains(count) && run.dropFirst().allSatisfy { ASCII.hexValue($0) != nil }
        }
        return count <= 7 && run.allSatisfy(isASCIIDigit)
    }

    private static func isASCIIDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private static func isASCIILetter(_ byte: UInt8) -> Bool {
        ASCII.lowercased(byte) >= UInt8(ascii: "a") && ASCII.lowercased(byte) <= UInt8(ascii: "z")
    }

    private static func isASCIIAlphanumeric(_ byte: UInt8) -> Bool { isASCIIDigit(byte) || isASCIILetter(byte) }

    /// `U+0027 "'"`, the character shown only when it is printable.
    public static func display(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        let code = "U+" + String(repeating: "0", count: Swift.max(0, 4 - hex.count)) + hex
        guard !FilenameCheck.isControl(scalar), !FilenameCheck.isBidiControl(scalar), scalar != " " else { return code }
        return code + " '" + String(scalar) + "'"
    }

    /// `deny "\";=" controls bidi`, for messages.
    public var description: String {
        var parts = [mode.rawValue]
        var literal = ""
        for range in ranges {
            guard let low = Unicode.Scalar(range.lowerBound), let high = Unicode.Scalar(range.upperBound) else { continue }
            literal += range.count == 1 ? String(low) : String(low) + "-" + String(high)
        }
        if !literal.isEmpty { parts.append("\"" + literal + "\"") }
        if controls { parts.append("controls") }
        if bidi { parts.append("bidi") }
        if parts.count == 1 { parts.append("none") }
        return parts.joined(separator: " ")
    }

    /// The ranges a quoted list spells: each character stands for itself, `x-y` for every character from `x` to
    /// `y`; a `-` first or last is literal. Nil when a range runs backwards (`z-a`) or the text is empty.
    public static func parseRanges(_ text: String) -> [ClosedRange<UInt32>]? {
        let scalars = Array(text.unicodeScalars)
        guard !scalars.isEmpty else { return nil }
        var result: [ClosedRange<UInt32>] = []
        var index = 0
        while index < scalars.count {
            let low = scalars[index].value
            if index + 2 < scalars.count, scalars[index + 1] == "-" {
                let high = scalars[index + 2].value
                guard low <= high else { return nil }
                result.append(low...high)
                index += 3
            } else {
                result.append(low...low)
                index += 1
            }
        }
        return result
    }

    private static func scalarRanges(_ characters: String) -> [ClosedRange<UInt32>] {
        characters.unicodeScalars.map { $0.value...$0.value }
    }
}
