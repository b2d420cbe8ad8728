import Testing

@testable import HTTP1

@Suite struct HTTPAcceptTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var what: String
        var accept: [UInt8]
        var html: Bool
        var testDescription: String { what }

        init(_ what: String, _ accept: String, html: Bool) {
            self.what = what
            self.accept = Array(accept.utf8)
            self.html = html
        }

        init(_ what: String, bytes: [UInt8], html: Bool) {
            self.what = what
            self.accept = bytes
            self.html = html
        }
    }

    static let table: [Case] = [
        // Navigations (a form submission) by real browsers.
        Case("Chromium navigation",
             "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
                + "application/signed-exchange;v=b3;q=0.7", html: true),
        Case("Firefox navigation", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", html: true),
        Case("Firefox 115 navigation",
             "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8", html: true),
        Case("Safari navigation", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", html: true),
        // API clients.
        Case("curl", "*/*", html: false),
        Case("application/json", "application/json", html: false),
        Case("axios", "application/json, text/plain, */*", html: false),
        Case("json preferred over html", "application/json, text/html;q=0.9", html: false),
        Case("html preferred but json accepted", "text/html, application/json;q=0.1", html: false),
        Case("application/* counts as json", "text/html, application/*", html: false),
        Case("*/* alone is not json, nor html", "*/*;q=1", html: false),
        // Weights.
        Case("html q=0", "text/html;q=0", html: false),
        Case("html q=0.000", "text/html;q=0.000, */*", html: false),
        Case("json q=0", "text/html, application/json;q=0", html: true),
        Case("low q still accepted", "text/html;q=0.001", html: true),
        Case("exact beats wildcard", "text/*, text/html;q=0", html: false),
        Case("exact beats wildcard, other way", "text/*;q=0, text/html", html: true),
        Case("text/*", "text/*", html: true),
        Case("highest of equals", "text/html;q=0, text/html;q=0.5", html: true),
        // Case and whitespace.
        Case("upper case", "TEXT/HTML", html: true),
        Case("mixed case q", "Text/Html;Q=0.5", html: true),
        Case("mixed case json", "text/html, Application/JSON", html: false),
        Case("OWS around ; and ,", "  text/html ;\tq=0.5 ,\t*/*  ", html: true),
        Case("empty elements", ",, ,text/html,,", html: true),
        Case("parameters ignored", "text/html;level=1;charset=\"utf-8\"", html: true),
        Case("quoted comma", "text/html;x=\"a,application/json\"", html: true),
        Case("first q counts", "text/html;q=0;q=1", html: false),
        // Empty and malformed.
        Case("empty", "", html: false),
        Case("whitespace only", " \t ", html: false),
        Case("no slash", "html", html: false),
        Case("*/html", "*/html", html: false),
        Case("empty subtype", "text/", html: false),
        Case("space inside type", "text /html", html: false),
        Case("q too large", "text/html;q=2", html: false),
        Case("q 1.5", "text/html;q=1.5", html: false),
        Case("q four decimals", "text/html;q=0.1234", html: false),
        Case("q not a number", "text/html;q=abc", html: false),
        Case("q empty", "text/html;q=", html: false),
        Case("q without value", "text/html;q", html: false),
        Case("q quoted", "text/html;q=\"1\"", html: false),
        Case("unterminated quote", "text/html;x=\"abc", html: false),
        Case("malformed json range is dropped", "text/html, application/json;q=x", html: true),
        Case("controls", "text/html\u{1}", html: false),
        Case("invalid UTF-8", bytes: [0xFF, 0x2F, 0xFE], html: false),
        Case("NUL", bytes: Array("text/html".utf8) + [0], html: false),
    ]

    @Test(arguments: table)
    func negotiatesErrorFormat(_ c: Case) {
        #expect(HTTPAccept(value: c.accept).prefersHTMLErrors == c.html)
    }

    @Test func parsesRangesInOrder() {
        let accept = HTTPAccept(value: "TEXT/Html, application/xml;q=0.9, bogus, */*;q=0.8".utf8)
        #expect(accept.ranges == [
            .init(type: "text", subtype: "html"),
            .init(type: "application", subtype: "xml", quality: 900),
            .init(type: "*", subtype: "*", quality: 800),
        ])
    }

    @Test func qualityUsesTheMostSpecificRange() {
        let accept = HTTPAccept(value: "text/*;q=0.3, text/plain;q=0.7, */*;q=0.1".utf8)
        #expect(accept.quality(type: "text", subtype: "plain") == 700)
        #expect(accept.quality(type: "text", subtype: "html") == 300)
        #expect(accept.quality(type: "image", subtype: "png") == 100)
        #expect(accept.quality(type: "image", subtype: "png", countingFullWildcard: false) == nil)
    }

    @Test(arguments: [
        ("0", 0), ("1", 1000), ("0.", 0), ("1.", 1000), ("0.5", 500), ("0.25", 250), ("0.125", 125),
        ("1.0", 1000), ("1.000", 1000), ("0.999", 999),
    ])
    func parsesQValues(_ text: String, _ value: Int) {
        #expect(HTTPAccept.parseQValue(ArraySlice(text.utf8)) == value)
    }

    @Test(arguments: ["", "2", "1.001", "1.5", "0.1234", ".5", "-0", "0,5", "0.5a", " 0.5", "01"])
    func rejectsBadQValues(_ text: String) {
        #expect(HTTPAccept.parseQValue(ArraySlice(text.utf8)) == nil)
    }
}
