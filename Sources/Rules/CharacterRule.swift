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

        /// Whether `text` is all ASCII and the list allows each of its bytes: `firstRefused(in:skip:)` is then
        /// nil, whatever `skip` says. False sends the caller to `firstRefused`.
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
    /// `skip` is true are never reported (another check owns them).
    public func firstRefused(in text: String, skip: (Unicode.Scalar) -> Bool = { _ in false })
    -> (scalar: Unicode.Scalar, position: Int)? {
        // ASCII text, byte by byte against the table; a byte beyond ASCII sends the text to the scalar loop.
        enum Scan { case clean, refused(UInt8, position: Int), notASCII }
        let scan = text.utf8.withContiguousStorageIfAvailable { bytes -> Scan in
            for index in bytes.indices {
                let byte = bytes[index]
                if byte >= 0x80 { return .notASCII }
                if !asciiTable.allows(byte), !skip(Unicode.Scalar(byte)) { return .refused(byte, position: index + 1) }
            }
            return .clean
        } ?? .notASCII
        switch scan {
        case .clean: return nil
        case .refused(let byte, let position): return (Unicode.Scalar(byte), position)
        case .notASCII: break
        }
        return firstRefusedByScalars(in: text, skip: skip)
    }

    /// `firstRefused` scalar by scalar, for any text: the reference its ASCII path is tested against.
    func firstRefusedByScalars(in text: String, skip: (Unicode.Scalar) -> Bool)
    -> (scalar: Unicode.Scalar, position: Int)? {
        var position = 0
        for scalar in text.unicodeScalars {
            position += 1
            if !allows(scalar), !skip(scalar) { return (scalar, position) }
        }
        return nil
    }

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
