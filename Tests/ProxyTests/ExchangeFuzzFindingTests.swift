import Testing
@testable import Proxy
import Rules

// Shapes the exchange fuzzer (fuzz/ExchangeFuzz.swift) found, kept as tests with the harness's configuration
// (2 KiB output high-water mark, 4 KiB client reads). docs/fuzzing.md lists them.

@Suite struct ExchangeFuzzFindingTests {
    static func config() throws -> ProxyConfiguration { try ExchangeRig.fuzzConfiguration() }

    /// The generated policy of byte 0x54 (`unknown strip`, file `max 1KiB`, `data-after reject`): a `note=12`
    /// field then a `photo` file whose content is a PDF was `reject 415 type_not_allowed` read whole and
    /// `error 500 body_sink_failed` in reads of every size tried (second run of the mutator, 2026-11-30).
    @Test(arguments: [0, 1, 5, 46, 47, 48, 100, 200])
    func aPDFPhotoAfterAStrippedFieldIsRefusedTheSameInEveryReadSize(reads: Int) throws {
        let policy = try Policy.parse("""
        anomaly data-after reject;
        route / {
            upstream-body chunked;
            unknown strip;
            body-max 16KiB;
            field note { max 8; action strip; pattern "^[0-9]+$"; }
            file photo { types image/png; max 1KiB; }
        }
        """)
        let body = "--B\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\n12\r\n--B\r\nContent-Disposition: "
            + "form-data; name=\"photo\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n%PDF-1.4\n%abc\r\n--B--\r\n"
        let request = Array(("POST /up HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n" + body).utf8)
        let rig = ExchangeRig(config: try Self.config(), policy: policy)
        rig.run(client: request, pieces: reads == 0 ? [] : [reads])
        #expect(rig.violations() == [])
        #expect(rig.records.map { $0?.reason } == ["type_not_allowed"], "\(rig.logs)")
        #expect(rig.records.map { $0?.status } == [415])
    }

    /// Two Content-Type headers, `text/plain` then multipart, with a chunked multipart body, under
    /// rules/catch-all.rules (which allows text/plain): the body was forwarded unparsed with both headers, so an
    /// upstream taking the last one parsed a multipart body no rule had seen (first run of the mutator). The head
    /// parser now refuses a second Content-Type.
    @Test func twoContentTypesAreRefusedBeforeAnyBodyGoesUp() throws {
        let policy = try Policy.parse("route / { content-types text/plain multipart/form-data; unknown allow; }")
        let chunks = "1f\r\n--B\r\nContent-Disposition: form-d\r\n0\r\n\r\n"
        let request = Array(("POST /up HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\n"
            + "Content-Type: multipart/form-data; boundary=B\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks).utf8)
        let rig = ExchangeRig(config: try Self.config(), policy: policy)
        rig.run(client: request)
        #expect(rig.records.map { $0?.reason } == ["duplicate_content_type"])
        #expect(rig.records.map { $0?.status } == [400])
        #expect(rig.connections.allSatisfy { $0.received.isEmpty })
    }
}
