/// The HTML form of an error response, for browsers that submitted a form (see `HTTPAccept.prefersHTMLErrors`).
///
/// One self-contained page, no scripts, no external resources, inline CSS only, with the same facts as the
/// JSON body: status, reason (the error kind), part, limit, detail and request id. Every value is escaped.
///
/// ```
/// <h1>413 Content Too Large</h1>
/// <dl><dt>Status</dt><dd>413</dd><dt>Reason</dt><dd>file_too_large</dd><dt>Part</dt><dd>avatar</dd>…
/// ```
public enum HTTPErrorPage {
    /// The page's `Content-Type`.
    public static let contentType = "text/html; charset=utf-8"

    /// Renders the page. `part`, `limit` and `detail` are left out when nil.
    public static func render(status: Int, kind: String, part: String?, limit: UInt64?, detail: String?,
                              requestID: String) -> [UInt8] {
        let title = "\(status) \(HTTPErrorResponse.reasonPhrase(for: status))"
        var page: [UInt8] = []
        page.reserveCapacity(1024)
        page.append(contentsOf: """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="robots" content="noindex">
            <title>
            """.utf8)
        appendEscaped(title, to: &page)
        page.append(contentsOf: """
            </title>
            <style>
            body{font:16px/1.5 system-ui,sans-serif;color:#222;max-width:42em;margin:3em auto;padding:0 1em}
            h1{font-size:1.5em;margin:0 0 .5em}
            dl{display:grid;grid-template-columns:max-content 1fr;gap:.3em 1.2em}
            dt{font-weight:600}dd{margin:0;font-family:ui-monospace,monospace;overflow-wrap:anywhere}
            </style>
            </head>
            <body>
            <h1>
            """.utf8)
        appendEscaped(title, to: &page)
        page.append(contentsOf: "</h1>\n<p>The request was not accepted.</p>\n<dl>\n".utf8)
        appendRow("Status", String(status), to: &page)
        appendRow("Reason", kind, to: &page)
        if let part { appendRow("Part", part, to: &page) }
        if let limit { appendRow("Limit", String(limit), to: &page) }
        if let detail { appendRow("Detail", detail, to: &page) }
        appendRow("Request id", requestID, to: &page)
        page.append(contentsOf: "</dl>\n</body>\n</html>\n".utf8)
        return page
    }

    private static func appendRow(_ term: String, _ value: String, to page: inout [UInt8]) {
        page.append(contentsOf: "<dt>".utf8)
        appendEscaped(term, to: &page)
        page.append(contentsOf: "</dt><dd>".utf8)
        appendEscaped(value, to: &page)
        page.append(contentsOf: "</dd>\n".utf8)
    }

    /// Appends `text` as HTML character data that is also safe inside a quoted attribute: `& < > " '` become
    /// references, and control characters other than TAB, LF and CR (which HTML forbids) become U+FFFD.
    static func appendEscaped(_ text: String, to page: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "&"): page.append(contentsOf: "&amp;".utf8)
            case UInt8(ascii: "<"): page.append(contentsOf: "&lt;".utf8)
            case UInt8(ascii: ">"): page.append(contentsOf: "&gt;".utf8)
            case UInt8(ascii: "\""): page.append(contentsOf: "&quot;".utf8)
            case UInt8(ascii: "'"): page.append(contentsOf: "&#39;".utf8)
            case 0x09, 0x0A, 0x0D: page.append(byte)
            case 0x00..<0x20, 0x7F: page.append(contentsOf: [0xEF, 0xBF, 0xBD])
            default: page.append(byte)
            }
        }
    }
}
