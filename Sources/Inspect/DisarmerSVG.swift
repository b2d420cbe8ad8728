import Glibc

// SVG active-content disarm: a streaming tokenizer over tags, not a full XML parser.
//
//   text ──'<'──▶ tag buffer (≤ 64 KiB, '>' outside a quoted value ends it) ──▶ element / PI / declaration
//     ▲              ├─ "<!--"      ─▶ comment, streamed through until "-->"
//     │              └─ "<![CDATA[" ─▶ CDATA, streamed through until "]]>"
//     └──────────────────────────────────────────── emitted (or, inside a removed element, dropped)
//
//   removed (strip) / thrown (reject), with the `removed` name:
//     <script>, <handler> and all they contain        "script"          (any case, any prefix: svg:SCRIPT)
//     <foreignObject> and all it contains             "foreignObject"
//     <iframe>, <frame>, <frameset>, <embed>, <object>, <applet>, <portal>, <meta>, <link>, <base> (any prefix:
//     XHTML elements placed straight into the SVG), with content             the local name: "iframe"
//     <set>/<animate*> whose attributeName is href or on*, with content   "animation"
//     on* attributes (event handlers)                 the attribute name, lowercased: "onload"
//     xml:base (any prefix)                           "xml-base" (a "#id" href would resolve against it)
//     href / xlink:href (any prefix) whose value is not "#…" or data:image/(png|jpeg|gif|webp)[;,]:
//                                                     "javascript-href" (javascript: scheme), else "external-href"
//     <!DOCTYPE …[ internal subset ]>                 "entity" (subset declares an entity), else "doctype-subset"
//     <!ENTITY …>, <!ELEMENT …> … outside a DOCTYPE  "entity", "declaration"
//     <?xml-stylesheet …?>                            "xml-stylesheet" (external style sheet / XSLT)
//     <?…>…?> (a '>' before the end)                  "processing-instruction"
//     <!DOCTYPE …> with a '>' inside quotes            "doctype"
//   kept: everything else byte-identical, including <!DOCTYPE> without internal subset, comments, CDATA, text;
//   an attribute is cut together with the whitespace (or HTML-style '/') before it.
//   rewritten (no `removed` entry): end tags go out as "</name>"; a '<' inside CDATA goes out as
//   "]]>&lt;<![CDATA[" (same text to XML). These, the two removals above and the comment errors below close
//   the gaps where an HTML parser would end a comment, CDATA section, PI, doctype or end tag elsewhere than
//   XML does. The target is the SVG parsed as XML (an image or a document); inlining uploaded SVG into HTML
//   is not made safe by this (e.g. raw-text <style> after an HTML breakout tag).
//
// Attribute names and values are compared after decoding character references (&#106; &#x6A; &amp; &colon; …)
// and ASCII case folding; URL values also lose every byte ≤ 0x20 first (browsers drop tabs and newlines in URLs).
// Errors (both modes): a comment that an HTML parser would end early ("<!-->", "<!--->", "--" not followed by
// '>', as in "--!>"), an end tag without a name, a NUL byte (UTF-16/32 input is refused: its ASCII markup
// would be invisible to this tokenizer), a tag longer than `maximumTagLength`, the part ending inside a tag,
// comment, CDATA section or removed element.

/// Removes (or rejects) script and external references from an SVG as it streams. See the file header.
final class SVGDisarmer: DisarmFormat {
    /// The longest tag (or PI, or declaration) held whole before it is judged: 64 KiB.
    static let maximumTagLength = 64 * 1024

    private enum State {
        /// Character data: copied until '<'.
        case text
        /// Buffering a tag in `tag`; `scan` tracks what it is and where it ends.
        case tag
        /// Inside a comment; `dashes` trailing '-' seen (-1: at the start, -2: after a first '-').
        case comment(dashes: Int)
        /// Inside a CDATA section; `brackets` trailing ']' seen.
        case cdata(brackets: Int)
    }

    /// What the buffered tag is, as far as its bytes tell.
    private enum TagKind {
        /// Only "<" so far.
        case open
        /// "<!" and a prefix of "<!--" or "<![CDATA[".
        case bang
        /// "<?": ends at "?>".
        case instruction
        /// "<!" declaration (DOCTYPE, ENTITY, …): ends at '>' outside quotes and brackets.
        case declaration
        /// A start or end tag: ends at '>' outside a quoted attribute value.
        case element
    }

    let mode: SVGMode
    private var state: State = .text
    private var tag: [UInt8] = []
    private var kind: TagKind = .open
    private var quote: UInt8 = 0
    private var afterEquals = false
    private var brackets = 0
    private var sawSubset = false
    /// > 0: inside a removed element, this many levels deep; nothing is emitted.
    private var removingDepth = 0
    private var log = DisarmLog()

    var removed: [String] { log.names }

    init(mode: SVGMode) {
        self.mode = mode
        tag.reserveCapacity(256)
    }

    func end(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        switch state {
        case .text:
            guard removingDepth > 0 else { return }
            throw .malformed("svg: ended inside a removed element")
        case .tag: throw .malformed("svg: ended inside a tag")
        case .comment: throw .malformed("svg: ended inside a comment")
        case .cdata: throw .malformed("svg: ended inside a CDATA section")
        }
    }

    func run(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        if let base = bytes.baseAddress, memchr(base, 0, bytes.count) != nil {
            throw .malformed("svg: NUL byte (only ASCII-compatible encodings are accepted)")
        }
        var i = 0
        let n = bytes.count
        while i < n {
            switch state {
            case .text:
                var j = i
                while j < n && bytes[j] != 0x3C { j += 1 }
                if j > i && removingDepth == 0 { emit(bytes.slice(i..<j)) }
                if j < n {
                    tag.removeAll(keepingCapacity: true)
                    tag.append(0x3C)
                    kind = .open
                    quote = 0
                    afterEquals = false
                    brackets = 0
                    sawSubset = false
                    state = .tag
                    j += 1
                }
                i = j
            case .tag:
                let b = bytes[i]
                i += 1
                guard tag.count < SVGDisarmer.maximumTagLength else {
                    throw .malformed("svg: tag longer than \(SVGDisarmer.maximumTagLength) bytes")
                }
                tag.append(b)
                try tagByte(b, emit: emit)
            case .comment(let dashes):
                var j = i
                var d = dashes
                var done = false
                while j < n {
                    let b = bytes[j]
                    j += 1
                    d = try SVGDisarmer.commentStep(d, b)
                    if d == SVGDisarmer.commentEnded { done = true; break }
                }
                if removingDepth == 0 { emit(bytes.slice(i..<j)) }
                state = done ? .text : .comment(dashes: d)
                i = j
            case .cdata(let closing):
                // A '<' inside CDATA goes out as "]]>&lt;<![CDATA[": the same character data to an XML parser,
                // but an HTML parser that takes "<![CDATA[" for a bogus comment (ended by the first '>') never
                // sees a tag in it.
                var j = i
                var run = i
                var c = closing
                var done = false
                while j < n {
                    let b = bytes[j]
                    j += 1
                    if b == 0x3E && c >= 2 { done = true; break }
                    c = b == 0x5D ? c + 1 : 0
                    if b == 0x3C && removingDepth == 0 {
                        if j - 1 > run { emit(bytes.slice(run..<j - 1)) }
                        SVGDisarmer.escapedLessThan.withUnsafeBytes { emit($0) }
                        run = j
                    }
                }
                if removingDepth == 0 && j > run { emit(bytes.slice(run..<j)) }
                state = done ? .text : .cdata(brackets: c)
                i = j
            }
        }
    }

    /// Advances the tag scanner over `b`, the byte just appended to `tag`.
    private func tagByte(_ b: UInt8, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        switch kind {
        case .open:
            switch b {
            case 0x21: kind = .bang  // !
            case 0x3F: kind = .instruction  // ?
            default:
                kind = .element
                try elementByte(b, emit: emit)
            }
        case .bang:
            if tag.elementsEqual(Array("<!--".utf8)) {
                if removingDepth == 0 { tag.withUnsafeBytes { emit($0) } }
                state = .comment(dashes: -1)
            } else if tag.elementsEqual(Array("<![CDATA[".utf8)) {
                if removingDepth == 0 { tag.withUnsafeBytes { emit($0) } }
                state = .cdata(brackets: 0)
            } else if !Array("<!--".utf8).starts(with: tag) && !Array("<![CDATA[".utf8).starts(with: tag) {
                kind = .declaration
                try declarationByte(b, emit: emit)
            }
        case .instruction:
            if b == 0x3E && tag.count >= 4 && tag[tag.count - 2] == 0x3F { try instruction(emit: emit) }
        case .declaration:
            try declarationByte(b, emit: emit)
        case .element:
            try elementByte(b, emit: emit)
        }
    }

    private func elementByte(_ b: UInt8, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        if quote != 0 {
            if b == quote { quote = 0 }
            afterEquals = false
        } else if b == 0x3E {
            try element(emit: emit)
        } else if (b == 0x22 || b == 0x27) && afterEquals {
            quote = b
            afterEquals = false
        } else {
            afterEquals = b == 0x3D || (afterEquals && SVGDisarmer.isSpace(b))
        }
    }

    private func declarationByte(_ b: UInt8, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        if quote != 0 {
            if b == quote { quote = 0 }
            return
        }
        switch b {
        case 0x22, 0x27: quote = b
        case 0x5B: brackets += 1; sawSubset = true
        case 0x5D: brackets = max(0, brackets - 1)
        case 0x3E where brackets == 0: try declaration(emit: emit)
        default: break
        }
    }

    // MARK: - Judging a complete tag

    /// Records a removal, or throws in reject mode.
    private func remove(_ name: String) throws(DisarmError) {
        if mode == .reject { throw .rejected("svg: rejected \(name)") }
        log.note(name)
    }

    private func instruction(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        state = .text
        guard removingDepth == 0 else { return }
        let target = SVGDisarmer.folded(tag, from: 2) { !SVGDisarmer.isSpace($0) && $0 != 0x3F }
        if target == "xml-stylesheet" {
            try remove("xml-stylesheet")
            return
        }
        if tag.dropLast().contains(0x3E) {  // an HTML parser ends "<?…" at the first '>'
            try remove("processing-instruction")
            return
        }
        tag.withUnsafeBytes { emit($0) }
    }

    private func declaration(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        state = .text
        guard removingDepth == 0 else { return }
        let keyword = SVGDisarmer.folded(tag, from: 2) { !SVGDisarmer.isSpace($0) && $0 != 0x5B && $0 != 0x3E }
        if keyword == "doctype" && !sawSubset {
            guard !tag.dropLast().contains(0x3E) else {  // an HTML parser ends a doctype at the first '>'
                try remove("doctype")
                return
            }
            tag.withUnsafeBytes { emit($0) }
            return
        }
        if keyword == "doctype" {
            try remove(SVGDisarmer.contains(tag, caseless: "<!entity") ? "entity" : "doctype-subset")
        } else {
            try remove(keyword == "entity" ? "entity" : "declaration")
        }
    }

    private func element(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        state = .text
        let isEnd = tag.count > 1 && tag[1] == 0x2F
        let selfClosing = !isEnd && tag.count >= 3 && tag[tag.count - 2] == 0x2F
        var i = isEnd ? 2 : 1
        while i < tag.count && SVGDisarmer.isSpace(tag[i]) { i += 1 }
        let nameStart = i
        while i < tag.count, !SVGDisarmer.isNameEnd(tag[i]) { i += 1 }
        let name = SVGDisarmer.localName(SVGDisarmer.folded(tag, from: nameStart, to: i) { _ in true })

        if removingDepth > 0 {
            if isEnd {
                removingDepth -= 1
            } else if !selfClosing {
                removingDepth += 1
            }
            return
        }
        if isEnd {
            // Only "</name>" goes out: XML allows nothing else in an end tag, and an HTML parser reads
            // "</ …>" as a bogus comment ending at the first '>' (quotes or not).
            guard i > nameStart else { throw .malformed("svg: end tag without a name") }
            tag.withUnsafeBytes { raw in
                emitPair(0x3C, 0x2F, emit)
                emit(raw.slice(nameStart..<i))
                emit(raw.slice(raw.count - 1..<raw.count))
            }
            return
        }
        switch name {
        case "script", "handler":
            try removeElement("script", selfClosing: selfClosing)
            return
        case "foreignobject":
            try removeElement("foreignObject", selfClosing: selfClosing)
            return
        case "iframe", "frame", "frameset", "embed", "object", "applet", "portal", "meta", "link", "base":
            try removeElement(name, selfClosing: selfClosing)
            return
        default:
            break
        }
        let animation = ["set", "animate", "animatemotion", "animatetransform", "animatecolor"].contains(name)
        var cuts: [Range<Int>] = []
        var attributes = AttributeScanner(tag: tag, from: i, end: tag.count - (selfClosing ? 2 : 1))
        while let attribute = attributes.next() {
            let attrName = SVGDisarmer.localName(SVGDisarmer.decoded(tag, attribute.name, url: false))
            if attrName.hasPrefix("on") {
                try remove(SVGDisarmer.label(attrName))
                cuts.append(attribute.whole)
            } else if attrName == "href" {
                let value = SVGDisarmer.decoded(tag, attribute.value, url: true)
                if !SVGDisarmer.isSafeReference(value) {
                    try remove(value.hasPrefix("javascript:") ? "javascript-href" : "external-href")
                    cuts.append(attribute.whole)
                }
            } else if attrName == "base" {  // xml:base: "#id" would resolve against a javascript: base
                try remove("xml-base")
                cuts.append(attribute.whole)
            } else if animation && attrName == "attributename" {
                let target = SVGDisarmer.localName(SVGDisarmer.decoded(tag, attribute.value, url: true))
                if target == "href" || target.hasPrefix("on") {
                    try removeElement("animation", selfClosing: selfClosing)
                    return
                }
            }
        }
        var start = 0
        tag.withUnsafeBytes { raw in
            for cut in cuts {
                if cut.lowerBound > start { emit(raw.slice(start..<cut.lowerBound)) }
                start = cut.upperBound
            }
            emit(raw.slice(start..<raw.count))
        }
    }

    static let commentEnded = Int.min
    static let escapedLessThan: [UInt8] = Array("]]>&lt;<![CDATA[".utf8)

    /// The comment scanner: the new dash count after `b`, or `commentEnded`. Strict where an HTML parser would
    /// end the comment elsewhere than XML does ("<!-->", "<!--->", "--!>", "--" not closing): those throw.
    static func commentStep(_ dashes: Int, _ b: UInt8) throws(DisarmError) -> Int {
        switch dashes {
        case -1, -2:
            guard b != 0x3E else { throw .malformed("svg: comment opened by \"<!-->\" or \"<!--->\"") }
            return b == 0x2D ? (dashes == -1 ? -2 : 2) : 0
        case 2...:
            guard b == 0x3E else { throw .malformed("svg: \"--\" inside a comment") }
            return commentEnded
        default:
            return b == 0x2D ? dashes + 1 : 0
        }
    }

    private func removeElement(_ name: String, selfClosing: Bool) throws(DisarmError) {
        try remove(name)
        if !selfClosing { removingDepth = 1 }
    }

    // MARK: - Byte helpers

    static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D || b == 0x0C }

    /// Bytes that end an element name: whitespace, '/', '>', '=', quotes, '<'.
    static func isNameEnd(_ b: UInt8) -> Bool {
        isSpace(b) || b == 0x2F || b == 0x3E || b == 0x3D || b == 0x22 || b == 0x27 || b == 0x3C
    }

    /// The ASCII-lowercased bytes of `bytes[from..<to]`, stopping at the first byte `while` refuses.
    static func folded(
        _ bytes: [UInt8], from: Int, to: Int? = nil, while accept: (UInt8) -> Bool
    ) -> String {
        var out: [UInt8] = []
        var i = from
        let end = min(to ?? bytes.count, bytes.count)
        while i < end && accept(bytes[i]) {
            out.append(lower(bytes[i]))
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func lower(_ b: UInt8) -> UInt8 { (0x41...0x5A).contains(b) ? b | 0x20 : b }

    /// The part after the last ':' (the namespace prefix goes).
    static func localName(_ name: String) -> String {
        guard let colon = name.lastIndex(of: ":") else { return name }
        return String(name[name.index(after: colon)...])
    }

    static func contains(_ bytes: [UInt8], caseless needle: String) -> Bool {
        let n = Array(needle.utf8)
        guard bytes.count >= n.count else { return false }
        for start in 0...(bytes.count - n.count) {
            var k = 0
            while k < n.count && lower(bytes[start + k]) == n[k] { k += 1 }
            if k == n.count { return true }
        }
        return false
    }

    /// A safe audit name for an event-handler attribute: ASCII letters, digits, '-', at most 32 bytes.
    static func label(_ name: String) -> String {
        let kept = name.utf8.prefix(32).filter { b in
            (0x61...0x7A).contains(b) || (0x30...0x39).contains(b) || b == 0x2D
        }
        return String(decoding: kept, as: UTF8.self)
    }

    /// `bytes[range]` with character references decoded and ASCII case folded; non-ASCII references become
    /// U+FFFD's first byte (0xEF, never a match). `url`: bytes ≤ 0x20 are dropped, as browsers do in URLs.
    static func decoded(_ bytes: [UInt8], _ range: Range<Int>, url: Bool) -> String {
        var out: [UInt8] = []
        var i = range.lowerBound
        let end = min(range.upperBound, bytes.count)
        while i < end {
            var b = bytes[i]
            i += 1
            if b == 0x26, let (value, next) = reference(bytes, from: i, end: end) {  // &
                b = value
                i = next
            }
            if url && b <= 0x20 { continue }
            out.append(lower(b))
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes the character reference after '&' at `from`: its byte value (0xEF above ASCII) and where it ends.
    private static func reference(_ bytes: [UInt8], from: Int, end: Int) -> (UInt8, Int)? {
        var i = from
        if i < end && bytes[i] == 0x23 {  // #
            i += 1
            var hex = false
            if i < end && lower(bytes[i]) == 0x78 { hex = true; i += 1 }  // x
            var value = 0
            var digits = 0
            while i < end {
                let c = lower(bytes[i])
                let d: Int
                if (0x30...0x39).contains(c) { d = Int(c) - 0x30 }
                else if hex && (0x61...0x66).contains(c) { d = Int(c) - 0x61 + 10 }
                else { break }
                value = min(value * (hex ? 16 : 10) + d, 0x11_0000)
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            if i < end && bytes[i] == 0x3B { i += 1 }  // ;
            return (value < 0x80 ? UInt8(value) : 0xEF, i)
        }
        var name: [UInt8] = []
        while i < end && name.count < 16 && ((0x41...0x5A).contains(bytes[i]) || (0x61...0x7A).contains(bytes[i])) {
            name.append(lower(bytes[i]))
            i += 1
        }
        if i < end && bytes[i] == 0x3B { i += 1 }
        switch String(decoding: name, as: UTF8.self) {
        case "amp": return (0x26, i)
        case "lt": return (0x3C, i)
        case "gt": return (0x3E, i)
        case "quot": return (0x22, i)
        case "apos": return (0x27, i)
        case "colon": return (0x3A, i)
        case "sol": return (0x2F, i)
        case "tab": return (0x09, i)
        case "newline": return (0x0A, i)
        case "num": return (0x23, i)
        default: return nil
        }
    }

    static let safeDataImages = ["data:image/png", "data:image/jpeg", "data:image/gif", "data:image/webp"]

    /// True for a local fragment ("#id") or an inline raster image.
    static func isSafeReference(_ value: String) -> Bool {
        if value.hasPrefix("#") { return true }
        for prefix in safeDataImages where value.hasPrefix(prefix) {
            let rest = value.utf8.dropFirst(prefix.utf8.count)
            if let next = rest.first, next == 0x3B || next == 0x2C { return true }  // ; ,
        }
        return false
    }
}

/// Walks the attributes of a buffered start tag: `name`, `value` (inside quotes, if any) and `whole` (the
/// attribute with the whitespace or '/' before it, which is what a cut removes). Uses the same quoting rule as the
/// tag scanner: a quote opens a value only right after '=' and optional whitespace.
struct AttributeScanner {
    struct Attribute {
        var name: Range<Int>
        var value: Range<Int>
        var whole: Range<Int>
    }

    let tag: [UInt8]
    var i: Int
    /// The end of the attribute area: before the closing '>' (or "/>").
    let end: Int

    init(tag: [UInt8], from: Int, end: Int) {
        self.tag = tag
        self.i = from
        self.end = max(from, min(end, tag.count))
    }

    mutating func next() -> Attribute? {
        let lead = i
        while i < end && (SVGDisarmer.isSpace(tag[i]) || tag[i] == 0x2F) { i += 1 }
        guard i < end else { return nil }
        let nameStart = i
        while i < end, !SVGDisarmer.isSpace(tag[i]), tag[i] != 0x3D, tag[i] != 0x2F, tag[i] != 0x3E { i += 1 }
        let name = nameStart..<i
        var value = i..<i
        var j = i
        while j < end && SVGDisarmer.isSpace(tag[j]) { j += 1 }
        if j < end && tag[j] == 0x3D {
            j += 1
            while j < end && SVGDisarmer.isSpace(tag[j]) { j += 1 }
            if j < end && (tag[j] == 0x22 || tag[j] == 0x27) {
                let q = tag[j]
                var k = j + 1
                while k < end && tag[k] != q { k += 1 }
                value = (j + 1)..<k
                j = min(k + 1, end)
            } else {
                var k = j
                while k < end && !SVGDisarmer.isSpace(tag[k]) { k += 1 }
                value = j..<k
                j = k
            }
            i = j
        }
        if i == nameStart { i += 1 }  // a stray byte ('>' inside a malformed tag): always make progress
        return Attribute(name: name, value: value, whole: lead..<i)
    }
}
