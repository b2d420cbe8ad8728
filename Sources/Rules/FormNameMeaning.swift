import Multipart

/// What frameworks make of a part's name, filename and type beyond the bytes: the semantic anomaly flags.
///
/// Pure functions over one part's metadata. Measured against PHP 8.2 (`php_register_variable_ex`), Rack and
/// `qs` (bracket nesting), and werkzeug, Starlette, Django, aiohttp, busboy, undici and Go (which take names
/// verbatim); see docs/rules.md, "Names, charsets and duplicates", and docs/differential.md.
public enum FormNameMeaning {
    /// How PHP reads a name.
    public enum Shape: Sendable, Hashable {
        /// Taken whole everywhere.
        case plain
        /// `base[k]…` with at least one group: nested by PHP, Rack and `qs`, kept whole by the others.
        case brackets(base: Substring)
        /// Read as another name by PHP: a space or `.`, leading spaces, unbalanced or stray brackets, text after
        /// the groups, an empty base.
        case rewritten
    }

    /// The shape of `name`.
    public static func shape(of name: String) -> Shape {
        // The usual name, in one pass over its storage: no `[`, and none of the bytes PHP rewrites.
        var text = name
        let plain = text.withUTF8 { bytes in
            !bytes.contains { $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: " ")
                || $0 == UInt8(ascii: "]") }
        }
        if plain { return .plain }
        let bytes = name.utf8
        guard let first = bytes.first else { return .plain }
        if first == UInt8(ascii: " ") { return .rewritten }
        guard let open = bytes.firstIndex(of: UInt8(ascii: "[")) else {
            return bytes.contains { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "]") }
                ? .rewritten : .plain
        }
        let base = name.utf8[..<open]
        if base.isEmpty || base.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: " ")
            || $0 == UInt8(ascii: "]") }) {
            return .rewritten
        }
        // One or more `[…]` groups with no bracket inside, and nothing after the last.
        var inGroup = false
        var expectOpen = true
        for byte in bytes[open...] {
            switch byte {
            case UInt8(ascii: "["):
                if inGroup || !expectOpen { return .rewritten }
                inGroup = true
                expectOpen = false
            case UInt8(ascii: "]"):
                if !inGroup { return .rewritten }
                inGroup = false
                expectOpen = true
            default:
                if !inGroup { return .rewritten }
            }
        }
        if inGroup { return .rewritten }
        return .brackets(base: Substring(base))
    }

    /// Whether `text` holds a `%XX` escape (two hex digits), or a character the canonical encoder can only
    /// write as one (`"`, CR, LF and `\`, as browsers do): either way some frameworks decode the escape and
    /// some do not, so the name read upstream would depend on the framework.
    public static func hasPercentEscape(_ text: String) -> Bool { nameBytes(text).percentEscape }

    /// One pass over a name's bytes: `hasPercentEscape`, and whether a byte is beyond ASCII (`non-ascii-name`).
    static func nameBytes(_ text: String) -> (percentEscape: Bool, nonASCII: Bool) {
        var escapeCharacter = false, percent = false, nonASCII = false
        var bytes = text
        bytes.withUTF8 { bytes in
            for byte in bytes {
                switch byte {
                case 0x22, 0x0D, 0x0A, 0x5C: escapeCharacter = true
                case UInt8(ascii: "%"): percent = true
                case 0x80...: nonASCII = true
                default: break
                }
            }
        }
        return (escapeCharacter || percent && Percent.containsEscape(text.utf8), nonASCII)
    }

    /// Whether a part Content-Type names a charset `allowed` does not hold (case-insensitive, quoted or not).
    public static func hasForeignCharset(_ contentType: String, allowed: PartCharsets = .default) -> Bool {
        guard holds(contentType, UInt8(ascii: ";")) else { return false }   // no parameter at all
        for parameter in contentType.split(separator: ";").dropFirst() {
            guard let equals = parameter.firstIndex(of: "=") else { continue }
            let key = parameter[..<equals].trimmingWhitespace().lowercased()
            guard key == "charset" else { continue }
            var value = parameter[parameter.index(after: equals)...].trimmingWhitespace()
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = value.dropFirst().dropLast() }
            if !allowed.allows(value.utf8) { return true }
        }
        return false
    }

    /// A name as PHP, Rack and `qs` read it, worked out once per part.
    public struct Reading: Sendable, Hashable {
        /// The name as sent.
        public let name: String
        /// Its shape.
        public let shape: Shape
        /// The keys after the base of a bracketed name (`a[b][]`: `b`, ``); empty for any other name, whose
        /// path is the name itself. Kept apart so that reading a plain name allocates no array.
        let keys: [Substring]

        /// The variable path (see `path(of:)`); never empty.
        public var path: [Substring] { [base] + keys }

        /// The path's first element: the base of a bracketed name, else the name itself.
        var base: Substring {
            if case .brackets(let base) = shape { return base }
            return Substring(name)
        }
    }

    /// Reads `name`.
    public static func read(_ name: String) -> Reading {
        let shape = shape(of: name)
        guard case .brackets(let base) = shape else { return Reading(name: name, shape: shape, keys: []) }
        var keys: [Substring] = []
        var key: Substring.Index?
        let text = Substring(name)
        var i = base.endIndex
        while i < text.endIndex {
            switch text[i] {
            case "[": key = text.index(after: i)
            case "]": if let start = key { keys.append(text[start..<i]) }
            default: break
            }
            i = text.index(after: i)
        }
        return Reading(name: name, shape: shape, keys: keys)
    }

    /// The variable path PHP, Rack and `qs` read from `name`: `a[b][]` is `a`, `b`, `` (an empty key appends);
    /// any other name is itself.
    public static func path(of name: String) -> [Substring] { read(name).path }

    /// Whether `name` is the HTML standard's `_charset_` (any case), which some frameworks decode the other fields
    /// by.
    public static func isCharsetField(_ name: String) -> Bool {
        name.utf8.count == 9 && name.lowercased() == "_charset_"
    }

    /// The flags a part's name, filename and type raise by themselves (not `duplicate-name`, which needs the
    /// body's other names, nor `invalid-utf8-value`, which needs the value). `charset-field` is raised here only
    /// for a file part named `_charset_`: a field's is judged by its value (`PolicyEvaluator.fieldValue`).
    /// `part-charset` is a Content-Type charset outside `charsets`.
    public static func flags(name reading: Reading?, filename: String?, contentType: String?,
                             charsets: PartCharsets = .default) -> MultipartAnomalies {
        var flags = MultipartAnomalies()
        if let reading {
            let name = reading.name
            switch reading.shape {
            case .plain: break
            case .brackets: flags.insert(.nameBrackets)
            case .rewritten: flags.insert(.nameRewritten)
            }
            let bytes = nameBytes(name)
            if bytes.percentEscape { flags.insert(.percentEscape) }
            if filename != nil, isCharsetField(name) { flags.insert(.charsetField) }
            if name.isEmpty { flags.insert(.emptyName) }
            if bytes.nonASCII { flags.insert(.nonASCIIName) }
            if isPrototypeKey(reading.base) || reading.keys.contains(where: isPrototypeKey) {
                flags.insert(.prototypeName)
            }
        }
        if filename?.isEmpty == true { flags.insert(.emptyFilename) }
        // In a filename, `\`, CR and LF are the filename checks' (`path-separators`, `control-characters`), which
        // reject them or cut them out under `filename sanitize`; `%XX` and `"` stay whatever the handling.
        if let filename,
           holds(filename, 0x22) || holds(filename, UInt8(ascii: "%")) && Percent.containsEscape(filename.utf8) {
            flags.insert(.percentEscape)
        }
        if let contentType, hasForeignCharset(contentType, allowed: charsets) { flags.insert(.partCharset) }
        return flags
    }

    /// Whether `text` holds `byte`, searched in its UTF-8 storage (iterating `utf8` took some 30 instructions a byte).
    static func holds(_ text: String, _ byte: UInt8) -> Bool {
        var text = text
        return text.withUTF8 { $0.contains(byte) }
    }

    /// Whether `key` is one of `prototypeKeys`, compared as bytes: no String is built for the set's lookup.
    static func isPrototypeKey(_ key: Substring) -> Bool {
        let count = key.utf8.count
        guard count == 9 || count == 11 else { return false }
        return prototypeKeys.contains { $0.utf8.elementsEqual(key.utf8) }
    }

    /// Keys JavaScript objects treat specially (`qs` nests on brackets, so `a[__proto__]` counts too).
    static let prototypeKeys: [String] = ["__proto__", "constructor", "prototype"]

}

/// The names of a body seen so far, for `duplicate-name` and `name-collision`: the variable paths PHP, Rack and
/// `qs` build (docs/rules.md, "Names, charsets and duplicates").
public struct FormNameRegistry: Sendable, Hashable {
    /// Every full path seen, and whether its first part was a file.
    private var paths = NameTable()
    /// Every strict prefix of a path seen.
    private var prefixes: Set<String> = []
    /// Parents holding an appended (`[]`) key, and parents holding a numeric key: together PHP numbers one over
    /// the other (`a[]` then `a[0]` overwrites).
    private var appendParents: Set<String> = []
    private var numericParents: Set<String> = []

    public init() {}

    /// What registering a name finds: `repeated` when the same name came before as the same kind of part,
    /// `collides` when it came as the other kind, or one name is an array the other a value (`a` and `a[b]`), or
    /// appended and numbered keys meet under one parent.
    public mutating func register(_ reading: FormNameMeaning.Reading, isFile: Bool)
    -> (repeated: Bool, collides: Bool) {
        guard reading.keys.isEmpty else { return register(reading.path, isFile: isFile) }
        // A name that is its own path (the usual case): one table update, and no prefix or parent to record.
        var repeated = false
        var collides = !prefixes.isEmpty && prefixes.contains(reading.name)
        if let firstWasFile = paths.insert(reading.name, isFile: isFile) {
            if firstWasFile == isFile { repeated = true } else { collides = true }
        }
        return (repeated, collides)
    }

    /// `register(_:isFile:)` for a variable path (`FormNameMeaning.Reading.path`).
    public mutating func register(_ path: [Substring], isFile: Bool) -> (repeated: Bool, collides: Bool) {
        let joined = Self.join(path[...])
        var repeated = false
        var collides = prefixes.contains(joined)
        if let firstWasFile = paths.insert(joined, isFile: isFile) {
            if firstWasFile == isFile { repeated = true } else { collides = true }
        }
        for end in path.indices.dropFirst() {
            let prefix = Self.join(path[..<end])
            if paths.contains(prefix) { collides = true }
            prefixes.insert(prefix)
        }
        if path.count > 1, let last = path.last {
            let parent = Self.join(path.dropLast())
            if last.isEmpty {
                if numericParents.contains(parent) { collides = true }
                appendParents.insert(parent)
            } else if last.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
                if appendParents.contains(parent) { collides = true }
                numericParents.insert(parent)
            }
        }
        return (repeated, collides)
    }

    private static func join(_ path: ArraySlice<Substring>) -> String {
        // A plain name (one part: the usual case) is its own key; `joined` takes the generic path, about 2,000
        // instructions for one part.
        if path.count == 1, let only = path.first { return String(only) }
        return path.joined(separator: "\u{0}")
    }
}

/// The full names a body has seen, each with whether it first came as a file. A form has a handful: they are kept
/// in a list and found by comparing, which costs less than hashing each (and allocating a table). Past
/// `listLimit` names, so that a body of many parts is not searched linearly, they move to a hash table.
struct NameTable: Sendable, Hashable {
    static let listLimit = 16
    private struct Entry: Sendable, Hashable {
        let name: String
        let isFile: Bool
    }
    private var list: [Entry] = []
    private var table: [String: Bool] = [:]

    /// Whether `name` was seen.
    func contains(_ name: String) -> Bool { kind(of: name) != nil }

    /// Whether `name` first came as a file; nil when it was not seen.
    func kind(of name: String) -> Bool? {
        for entry in list where entry.name == name { return entry.isFile }
        return table.isEmpty ? nil : table[name]
    }

    /// Records `name` unless it was seen; returns the kind it first came as, or nil when it is new.
    mutating func insert(_ name: String, isFile: Bool) -> Bool? {
        if let first = kind(of: name) { return first }
        if list.count < Self.listLimit {
            if list.isEmpty { list.reserveCapacity(4) }   // grown from one, the list was copied at the second name
            list.append(Entry(name: name, isFile: isFile))
        } else {
            table[name] = isFile
        }
        return nil
    }
}

/// Whether `bytes` are well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), fed in
/// pieces that may split a sequence.
public struct UTF8Validity: Sendable, Hashable {
    private var needed = 0
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF
    /// False once an invalid byte was seen.
    public private(set) var isValid = true
    /// The first bytes fed (up to three) and how many, for `startsWithByteOrderMark`.
    private var lead: UInt32 = 0
    private var leadCount = 0

    /// Whether the text starts with a UTF-8 byte order mark (EF BB BF).
    public var startsWithByteOrderMark: Bool { leadCount == 3 && lead == 0xEFBBBF }

    public init() {}

    /// Whether everything fed so far is valid and no sequence is left open.
    public var isComplete: Bool { isValid && needed == 0 }

    /// Feeds more bytes.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        var take = 0
        while leadCount < 3, take < bytes.count {
            lead = lead << 8 | UInt32(bytes[take])
            leadCount += 1
            take += 1
        }
        guard isValid else { return }
        var i = 0
        let count = bytes.count
        while i < count {
            let b = bytes[i]
            i += 1
            if needed == 0 {
                if b < 0x80 {
                    // ASCII run: skip ahead quickly.
                    while i < count, bytes[i] < 0x80 { i += 1 }
                    continue
                }
                switch b {
                case 0xC2...0xDF: needed = 1
                case 0xE0: needed = 2; lower = 0xA0
                case 0xE1...0xEC, 0xEE...0xEF: needed = 2
                case 0xED: needed = 2; upper = 0x9F
                case 0xF0: needed = 3; lower = 0x90
                case 0xF1...0xF3: needed = 3
                case 0xF4: needed = 3; upper = 0x8F
                default: isValid = false; return
                }
            } else {
                guard b >= lower && b <= upper else { isValid = false; return }
                lower = 0x80
                upper = 0xBF
                needed -= 1
            }
        }
    }

    /// Feeds more bytes from an array.
    public mutating func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { feed($0) }
    }
}
