import Multipart

/// The charsets a part's `Content-Type` and a `_charset_` field may name: `part-charsets` (docs/rules.md, *Names,
/// charsets and duplicates*). A name is compared whole and case-insensitively, as CRS 922100 and 922110 compare
/// theirs: `utf-` is not `utf-8`.
public struct PartCharsets: Sendable, Hashable, CustomStringConvertible {
    /// The names, lowercased, in the order written.
    public private(set) var names: [String]

    /// CRS 922110's `tx.allowed_request_content_type_charset` (`utf-8`, `iso-8859-1`, `iso-8859-15`,
    /// `windows-1252`) and `us-ascii`: ASCII and supersets of it, in which no ASCII character (a quote, a
    /// bracket, `<`) can be written as other bytes.
    public static let `default` = PartCharsets(["utf-8", "us-ascii", "iso-8859-1", "iso-8859-15", "windows-1252"])

    /// The longest name a list may hold (IANA's registry allows 40 characters).
    public static let maximumNameLength = 40

    /// A list of `names`, in any case.
    public init(_ names: [String]) { self.names = names.map { $0.lowercased() } }

    /// Whether `charset`, as sent (any case), is one of the names.
    public func allows(_ charset: some Collection<UInt8>) -> Bool {
        names.contains { name in
            name.utf8.count == charset.count && zip(name.utf8, charset).allSatisfy { $0 == ASCII.lowercased($1) }
        }
    }

    /// Whether `text` can name a charset: 1 to `maximumNameLength` of the characters RFC 2978 allows in one
    /// (letters, digits and `! # $ % & ' + - ^ _ ` { } ~`).
    public static func isValidName(_ text: String) -> Bool {
        let bytes = text.utf8
        guard (1...maximumNameLength).contains(bytes.count) else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "A")...UInt8(ascii: "Z"): return true
            default: return Array("!#$%&'+-^_`{}~".utf8).contains(byte)
            }
        }
    }

    /// Charsets in which ASCII characters are written as other bytes (UTF-7's `+ADw-` is `<`; UTF-16 and UTF-32
    /// put zero bytes beside each; EBCDIC moves all of them): allowing one lets a value carry what every check
    /// reading ASCII misses. `part-charsets` warns about these; a name not listed here is never warned about.
    static let writingASCIIOtherwise: Set<String> = {
        var names: Set<String> = [
            "utf-7", "utf7", "utf-16", "utf-16le", "utf-16be", "utf16", "utf-32", "utf-32le", "utf-32be", "utf32",
            "ucs-2", "ucs-4", "iso-10646-ucs-2", "iso-10646-ucs-4", "unicode",
        ]
        // EBCDIC code pages, by their IBM and cp names.
        for page in ["037", "273", "277", "278", "280", "284", "285", "290", "297", "420", "424", "500", "870",
                     "871", "875", "1026", "1047"] + (1140...1149).map(String.init) {
            names.insert("ibm" + page)
            names.insert("cp" + page)
            names.insert("ibm-" + page)
        }
        return names
    }()

    /// The names, space-separated, for messages.
    public var description: String { names.joined(separator: " ") }
}
