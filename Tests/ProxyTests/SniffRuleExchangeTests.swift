import Inspect
import Rules
import Testing
@testable import Proxy

/// `deny-embedded-markup`, `categories` and `labels` through FormStage with real polyglot bytes.
@Suite struct SniffRuleExchangeTests {
    private static let rules = """
    route /up { file photo { types image/gif image/png; deny-embedded-markup; } }
    route /lax { file photo { types image/gif image/png; } }
    route /poly { file photo { deny-embedded-markup; } }
    route /cat { file photo { categories image; labels png; } }
    """

    private func post(_ path: String, filename: String, type: String, data: [UInt8]) -> [UInt8] {
        let body = Array("--B\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"\(filename)\"\r\nContent-Type: \(type)\r\n\r\n".utf8)
            + data + Array("\r\n--B--\r\n".utf8)
        return Array(("POST \(path) HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\n"
            + "Content-Length: \(body.count)\r\n\r\n").utf8) + body
    }

    private func run(_ path: String, filename: String, type: String, data: [UInt8], pieces: [Int] = [])
        throws -> (status: String, reason: String?) {
        let policy = try #require(RuleChecker.compile(source: Self.rules, file: "sniff.rules").policy)
        let r = ExchangeRig(config: try ExchangeRig.configuration(), policy: policy)
        r.run(client: post(path, filename: filename, type: type, data: data), pieces: pieces, clientEOF: false)
        #expect(r.violations() == [])
        return (String(String(decoding: r.clientReceived.prefix(12), as: UTF8.self)), r.records.first??.reason)
    }

    private static let gifWithScript = Array("GIF89a\u{01}\u{00}\u{01}\u{00}<script>alert(1)</script>".utf8)
    private static let gifWithPHP = Array("GIF89a\u{01}\u{00}\u{01}\u{00}<?php system($_GET['c']); ?>".utf8)
    private static let png = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("\0\0\0\rIHDR rest".utf8)

    @Test(arguments: [0, 1, 5])
    func gifCarryingScriptIsRefused(piece: Int) throws {
        let data = Self.gifWithScript
        #expect(Sniffer.sniff(data).flags.contains(.embeddedHTML))
        let refused = try run("/up", filename: "a.gif", type: "image/gif", data: data, pieces: piece == 0 ? [] : [piece])
        #expect(refused.status == "HTTP/1.1 415")
        #expect(refused.reason == "embedded_markup")
        let lax = try run("/lax", filename: "a.gif", type: "image/gif", data: data)
        #expect(lax.status == "HTTP/1.1 200")
    }

    @Test func gifCarryingPHPIsEmbeddedMarkup() throws {
        // Sniffed as php (disguised as gif): `types` alone already refuses it; with `deny-embedded-markup` the
        // whole-part scan names the polyglot for what it is as soon as its open tag arrives.
        #expect(Sniffer.sniff(Self.gifWithPHP).disguisedAs == .gif)
        let lax = try run("/lax", filename: "a.gif", type: "image/gif", data: Self.gifWithPHP)
        #expect(lax.reason == "type_not_allowed")
        #expect(try run("/up", filename: "a.gif", type: "image/gif", data: Self.gifWithPHP).reason == "embedded_markup")
        let refused = try run("/poly", filename: "a.gif", type: "image/gif", data: Self.gifWithPHP)
        #expect(refused.status == "HTTP/1.1 415")
        #expect(refused.reason == "embedded_markup")
    }

    @Test func cleanPNGPassesAndLabelsAreChecked() throws {
        #expect(try run("/up", filename: "a.png", type: "image/png", data: Self.png).status == "HTTP/1.1 200")
        #expect(try run("/cat", filename: "a.png", type: "image/png", data: Self.png).status == "HTTP/1.1 200")
        let gif = Array("GIF89a\u{01}\u{00}\u{01}\u{00}\u{00}\u{00}".utf8)
        let refused = try run("/cat", filename: "a.gif", type: "image/gif", data: gif)
        #expect(refused.status == "HTTP/1.1 415")
        #expect(refused.reason == "sniffed_not_allowed")
    }

    /// Rules keeps its own copy of the sniffer's names; it must stay equal to Inspect's.
    @Test func vocabularyMatchesTheSniffer() {
        #expect(SniffVocabulary.categories == SniffCategory.allCases.map(\.name))
        #expect(SniffVocabulary.labels == SniffKind.allCases.map(\.label))
    }

    /// Rules' list of the types `disarm` rewrites (for `formwall check`) is the proxy's, and with the image types
    /// it names as passing unchanged covers every sniffed image type.
    @Test func disarmedTypesMatchTheProxy() {
        let images = SniffKind.allCases.filter { $0.category == .image || $0 == .svg }.map(\.mimeType)
        #expect(Set(images.filter { FormStage.disarmKind($0) != nil }) == Set(DisarmMode.rewrittenTypes))
        #expect(Set(images.filter { FormStage.disarmKind($0) == nil }) == Set(DisarmMode.unchangedImageTypes))
    }
}
