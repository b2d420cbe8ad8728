import Inspect
import Rules
import Testing
import TestRandom
@testable import Proxy

/// `deny-embedded-markup` judges the whole part: real image, PDF and text files carrying server-side markup past
/// the sniffed prefix (after 5 KiB) are refused, whatever the slicing, and the payload never reaches the upstream
/// complete.
@Suite struct DeepMarkupExchangeTests {
    private static let rules = """
    route /up { file photo { deny-embedded-markup; } }
    route /short { file photo { deny-embedded-markup php-short-tags; } }
    route /strip { upstream-body hold; file photo { deny-embedded-markup; action strip; } }
    route /lax { file photo { } }
    """

    /// Pseudo-random bytes with no `<` followed by text: compressed image data, as far as the scan can tell.
    private static func noise(_ count: Int, seed: UInt64) -> [UInt8] {
        var rng = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            let b = UInt8(truncatingIfNeeded: rng.next())
            return b == 0x3C ? 0x3D : b
        }
    }

    private static func be32(_ v: Int) -> [UInt8] { [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: v >> $0) } }
    private static func le32(_ v: Int) -> [UInt8] { [0, 8, 16, 24].map { UInt8(truncatingIfNeeded: v >> $0) } }

    /// Files of each sniffed kind with `payload` after about 5 KiB (`noise` before and after it).
    static func files(carrying payload: String) -> [(name: String, type: String, label: String, data: [UInt8])] {
        let p = Array(payload.utf8)
        let before = noise(5 * 1024, seed: 1)
        let after = noise(2048, seed: 2)
        // JPEG: SOI, APP0 JFIF, entropy-coded-looking data, EOI.
        let jfif: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10] + Array("JFIF\0".utf8) + [1, 1, 0, 0, 1, 0, 1, 0, 0]
        let sos: [UInt8] = [0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x3F, 0x00]
        let jpeg = jfif + sos + before + p + after + [0xFF, 0xD9]
        // PNG: signature, IHDR, an IDAT holding the payload, IEND (CRCs are not what the sniffer reads).
        let ihdr = be32(13) + Array("IHDR".utf8) + be32(1) + be32(1) + [8, 2, 0, 0, 0] + [0, 0, 0, 0]
        let idatData = before + p + after
        let png = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + ihdr + be32(idatData.count) + Array("IDAT".utf8)
            + idatData + [0, 0, 0, 0] + be32(0) + Array("IEND".utf8) + [0xAE, 0x42, 0x60, 0x82]
        // GIF: header, logical screen, a comment extension holding the payload, trailer.
        let gif = Array("GIF89a".utf8) + [1, 0, 1, 0, 0, 0, 0] + before + p + after + [0x3B]
        // WebP: RIFF container with a VP8L chunk.
        let vp8l = Array("VP8L".utf8) + le32(idatData.count) + idatData
        let webp = Array("RIFF".utf8) + le32(4 + vp8l.count) + Array("WEBP".utf8) + vp8l
        let pdf = Array("%PDF-1.4\n%\u{E2}\u{E3}\n1 0 obj\n<< /Length 9000 >>\nstream\n".utf8) + before + p + after
            + Array("\nendstream\nendobj\n%%EOF\n".utf8)
        let lorem = String(repeating: "Lorem ipsum dolor sit amet.\n", count: 190)
        let text = Array(lorem.utf8) + p + Array("\nend\n".utf8)
        return [("a.jpg", "image/jpeg", "jpeg", jpeg), ("a.png", "image/png", "png", png),
                ("a.gif", "image/gif", "gif", gif), ("a.webp", "image/webp", "webp", webp),
                ("a.pdf", "application/pdf", "pdf", pdf), ("a.txt", "text/plain", "text", text)]
    }

    static let payloads = [
        "<?php system($_GET['c']); ?>",
        "<?=`$_GET[0]`?>",
        "<% Runtime.getRuntime().exec(request.getParameter(\"c\")); %>",
        "<%@ Page Language=\"C#\" %><% Response.Write(1); %>",
        "<jsp:scriptlet>Runtime.getRuntime().exec(request.getParameter(\"c\"));</jsp:scriptlet>",
        "<cfexecute name=\"#url.c#\" timeout=\"5\"></cfexecute>",
        "<!--#exec cmd=\"id\" -->",
        "<script>alert(document.domain)</script>",
    ]

    private func post(_ path: String, filename: String, type: String, data: [UInt8]) -> [UInt8] {
        let head = "--B\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"\(filename)\"\r\n"
            + "Content-Type: \(type)\r\n\r\n"
        let body = Array(head.utf8) + data + Array("\r\n--B--\r\n".utf8)
        return Array(("POST \(path) HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\n"
            + "Content-Length: \(body.count)\r\n\r\n").utf8) + body
    }

    private struct Outcome {
        var status: String
        var reason: String?
        var detail: String?
        var upstream: [UInt8]
    }

    private func run(_ path: String, filename: String, type: String, data: [UInt8], pieces: [Int] = []) throws
        -> Outcome {
        let policy = try #require(RuleChecker.compile(source: Self.rules, file: "deep.rules").policy)
        let r = ExchangeRig(config: try ExchangeRig.configuration(), policy: policy)
        r.run(client: post(path, filename: filename, type: type, data: data), pieces: pieces, clientEOF: false)
        #expect(r.violations() == [])
        let record = r.records.first ?? nil
        return Outcome(status: String(decoding: r.clientReceived.prefix(12), as: UTF8.self), reason: record?.reason,
                       detail: record?.violations.first?.detail,
                       upstream: r.connections.first?.received ?? [])
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }

    @Test(arguments: [0, 1000, 4096, 7])
    func markupPastThePrefixIsRefused(piece: Int) throws {
        for payload in Self.payloads {
            for file in Self.files(carrying: payload) {
                // The sniffer sees the file for what it is: nothing in its prefix.
                let sniffed = Sniffer.sniff(file.data)
                #expect(sniffed.kind.label == file.label && sniffed.flags.isEmpty, "\(file.name)")
                let refused = try run("/up", filename: file.name, type: file.type, data: file.data,
                                      pieces: piece == 0 ? [] : [piece])
                #expect(refused.status == "HTTP/1.1 415", "\(file.name) \(payload)")
                #expect(refused.reason == "embedded_markup", "\(file.name) \(payload)")
                #expect(refused.detail?.hasPrefix("sniffed \(file.label) carrying ") == true, "\(refused.detail ?? "")")
                // The payload's last byte never reaches the upstream: the request is cut before it.
                #expect(!Self.contains(refused.upstream, Array(payload.utf8)), "\(file.name) \(payload)")
            }
        }
    }

    @Test func withoutTheDirectiveTheFilesPass() throws {
        for file in Self.files(carrying: Self.payloads[0]) {
            #expect(try run("/lax", filename: file.name, type: file.type, data: file.data).status == "HTTP/1.1 200")
        }
        for file in Self.files(carrying: "nothing to see") {
            #expect(try run("/up", filename: file.name, type: file.type, data: file.data).status == "HTTP/1.1 200",
                    "\(file.name)")
        }
    }

    @Test func detailNamesTheMarkupAndItsOffset() throws {
        let file = Self.files(carrying: "<?php system($_GET['c']); ?>")[0]
        let refused = try run("/up", filename: file.name, type: file.type, data: file.data)
        #expect(refused.detail == "sniffed jpeg carrying PHP code (<?php) at byte 5150")
    }

    @Test func shortOpenTagsOnlyWhereTheRouteSaysSo() throws {
        let file = Self.files(carrying: "<? system($_GET['c']); ?>")[2]
        #expect(try run("/up", filename: file.name, type: file.type, data: file.data).status == "HTTP/1.1 200")
        let refused = try run("/short", filename: file.name, type: file.type, data: file.data)
        #expect(refused.reason == "embedded_markup")
    }

    @Test func htmlInMarkupIsMarkupNotEmbedded() throws {
        let html = Array("<!doctype html><html><body>".utf8) + Array(repeating: 0x20, count: 5000)
            + Array("<script>alert(1)</script></body></html>".utf8)
        #expect(try run("/up", filename: "a.html", type: "text/html", data: html).reason != "embedded_markup")
    }

    @Test func serverMarkupInThePrefixIsCutBeforeItsLastByte() throws {
        // ASP in the first 4 KiB, which the sniffer does not judge, sent in small reads: the match is complete at
        // the 16th printable byte after `<%`, and that read never goes upstream.
        let asp = "<% eval request(\"c\") %>"
        let data = Array("GIF89a\u{1}\u{0}\u{1}\u{0}\u{0}\u{0}\u{0}".utf8) + Self.noise(1000, seed: 3) + Array(asp.utf8)
            + Self.noise(4000, seed: 4)
        let refused = try run("/up", filename: "a.gif", type: "image/gif", data: data, pieces: [3])
        #expect(refused.reason == "embedded_markup")
        #expect(refused.detail == "content carrying ASP/JSP code (<%) at byte 1013")
        #expect(!Self.contains(refused.upstream, Array(asp.utf8.prefix(18))))
    }

    @Test func stripDropsThePartBeforeItIsSent() throws {
        let file = Self.files(carrying: Self.payloads[0])[0]
        let stripped = try run("/strip", filename: file.name, type: file.type, data: file.data, pieces: [1500])
        #expect(stripped.status == "HTTP/1.1 200")
        #expect(!Self.contains(stripped.upstream, Array("JFIF".utf8)))
    }
}
