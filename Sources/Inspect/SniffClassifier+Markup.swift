// HTML, SVG and XML, recognised by what comes first after an optional UTF-8 BOM and whitespace.
//
//   <?xml …?>  <!-- … -->  <?pi …?>  <!DOCTYPE name …[…]>   <root
//   └──────────── skipped in any order and number ─────────┘  └ svg: SVG, html: HTML, other: XML
//
// Without an XML declaration, the first tag must be one a browser treats as HTML (the list in the
// WHATWG MIME Sniffing standard plus a few with script-bearing attributes), `<!doctype html`, or
// `<svg`; an unknown first tag leaves the input to the text rule. Tag names are matched ignoring
// ASCII case and must be followed by whitespace, `>` or `/`.

extension SniffClassifier {
    /// Tags that make a document HTML when they come first.
    private static let htmlTags: [StaticString] = [
        "html", "head", "body", "script", "iframe", "h1", "div", "font", "table", "a", "style", "title",
        "b", "br", "p", "meta", "link", "img", "form", "object", "embed", "frameset", "base",
    ]

    /// `.html`, `.svg`, `.xml`, or nil when the input does not start with markup.
    func markupKind() -> SniffKind? {
        var i = bytes.has("\u{FEFF}") ? 3 : 0
        var sawXMLProlog = false
        while true {
            i = skipSpace(from: i)
            guard bytes.byte(i) == 0x3C else { return sawXMLProlog ? .xml : nil }  // '<'
            if bytes.hasCaseless("<?xml", at: i) {
                sawXMLProlog = true
                guard let end = bytes.find("?>", from: i + 5) else { return .xml }
                i = end + 2
            } else if bytes.has("<?", at: i) {
                guard sawXMLProlog, let end = bytes.find("?>", from: i + 2) else { return sawXMLProlog ? .xml : nil }
                i = end + 2
            } else if bytes.has("<!--", at: i) {
                // A leading comment is HTML to a browser unless an XML prolog said otherwise.
                guard let end = bytes.find("-->", from: i + 4) else { return sawXMLProlog ? .xml : .html }
                i = end + 3
                if !sawXMLProlog && skipSpace(from: i) >= bytes.count { return .html }
            } else if bytes.hasCaseless("<!doctype", at: i) {
                let name = skipSpace(from: i + 9)
                if isTag("html", at: name) { return .html }
                if isTag("svg", at: name) { return .svg }
                sawXMLProlog = true
                guard let end = doctypeEnd(from: name) else { return .xml }
                i = end + 1
            } else {
                if isTag("svg", at: i + 1) || isTag("svg:svg", at: i + 1) { return .svg }
                // In an XML document only an `html` root makes it (X)HTML; `<a/>` is just XML.
                if sawXMLProlog { return isTag("html", at: i + 1) || isTag("html:html", at: i + 1) ? .html : .xml }
                for tag in Self.htmlTags where isTag(tag, at: i + 1) { return .html }
                return nil
            }
        }
    }

    /// True when `name` (lowercase) sits at `offset`, ignoring case, followed by whitespace, `>` or `/`.
    func isTag(_ name: StaticString, at offset: Int) -> Bool {
        guard bytes.hasCaseless(name, at: offset) else { return false }
        guard let next = bytes.byte(offset + name.utf8CodeUnitCount) else { return !complete }
        return SniffBytes.isSpace(next) || next == 0x3E || next == 0x2F
    }

    private func skipSpace(from start: Int) -> Int {
        var i = start
        while i < bytes.count && SniffBytes.isSpace(bytes[i]) { i += 1 }
        return i
    }

    /// The offset of the `>` closing a doctype, skipping an internal subset in brackets.
    private func doctypeEnd(from start: Int) -> Int? {
        var depth = 0
        var i = start
        while i < bytes.count {
            switch bytes[i] {
            case 0x5B: depth += 1  // [
            case 0x5D: depth -= 1  // ]
            case 0x3E where depth <= 0: return i  // >
            default: break
            }
            i += 1
        }
        return nil
    }
}
