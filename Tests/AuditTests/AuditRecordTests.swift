import Foundation
import Testing

@testable import Audit

@Suite struct AuditRecordTests {
    @Test func everySchemaFieldIsPresentWithItsType() throws {
        var record = sampleRecord(id: "abc123", decision: .reject)
        record.error = "upstream reset"
        let line = record.jsonLine
        #expect(line.last == 0x0A)
        #expect(line.filter { $0 == 0x0A }.count == 1)
        let object = try #require(parseObject(String(decoding: line, as: UTF8.self)))
        let expectedKeys: Set = [
            "ts", "request_id", "client", "tls", "method", "path", "route", "decision", "status", "reason", "would_status",
            "bytes_in",
            "bytes_upstream", "duration_ms", "client_body_ms", "upstream_ms", "upstream_connect_ms",
            "upstream_header_ms", "upstream_response_ms", "upstream", "parts", "violations", "anomalies", "error",
        ]
        #expect(Set(object.keys) == expectedKeys)
        #expect(object["ts"] as? String == "2026-11-29T12:01:02.345Z")
        #expect(object["request_id"] as? String == "abc123")
        #expect(object["decision"] as? String == "reject")
        #expect(object["status"] as? Int == 413)
        #expect(object["reason"] as? String == "file_too_large")
        #expect(object["bytes_in"] as? Int == 7_549_747)
        #expect(object["duration_ms"] as? Double == 12.5)
        #expect(object["upstream_ms"] is NSNull)
        #expect(object["upstream_connect_ms"] is NSNull && object["upstream_header_ms"] is NSNull)
        #expect(object["upstream_response_ms"] is NSNull)
        #expect(object["client_body_ms"] as? Double == 12.125)
        #expect(object["error"] as? String == "upstream reset")
        #expect(object["anomalies"] as? [String] == ["lf_only_line_endings"])

        let parts = try #require(object["parts"] as? [[String: Any]])
        #expect(parts.count == 2)
        let partKeys: Set = ["index", "name", "kind", "filename", "declared_type", "sniffed_type", "size", "sha256",
                             "action", "quarantine_id", "disarmed"]
        for part in parts { #expect(Set(part.keys) == partKeys) }
        #expect(parts[0]["kind"] as? String == "field")
        #expect(parts[0]["filename"] is NSNull)
        #expect(parts[0]["sha256"] is NSNull)
        #expect(parts[1]["kind"] as? String == "file")
        #expect(parts[1]["filename"] as? String == "me.png")
        #expect((parts[1]["sha256"] as? String)?.count == 64)

        let violations = try #require(object["violations"] as? [[String: Any]])
        #expect(violations.count == 1)
        #expect(Set(violations[0].keys) == ["kind", "part", "rule", "detail", "outcome", "enforced"])
        #expect(violations[0]["outcome"] as? String == "reject")
        #expect(violations[0]["enforced"] as? Bool == true)
        #expect(object["would_status"] is NSNull)
        #expect(violations[0]["part"] as? Int == 1)
        #expect(violations[0]["rule"] as? String == "rules.fw:12")
    }

    @Test func nullableFieldsRenderAsNull() throws {
        var record = sampleRecord(id: "n1", route: nil)
        record.upstreamMs = nil
        let object = try #require(parseObject(String(decoding: record.jsonLine, as: UTF8.self)))
        #expect(object["route"] is NSNull)
        #expect(object["reason"] is NSNull)
        #expect(object["upstream_ms"] is NSNull)
        #expect(object["error"] is NSNull)
    }

    /// The upstream's time split renders in order after `upstream_ms`, each at most 3 decimals.
    @Test func upstreamTimesRenderInOrder() throws {
        let record = sampleRecord(id: "t1")
        let line = String(decoding: record.jsonLine, as: UTF8.self)
        #expect(line.contains(#""duration_ms":12.5,"client_body_ms":12.125,"upstream_ms":9.25,"#
            + #""upstream_connect_ms":0.042,"upstream_header_ms":9.001,"upstream_response_ms":9.25,"upstream":null"#))
    }

    @Test func fieldsAreOptInAndTruncatedAtACharacterBoundary() throws {
        var record = sampleRecord(id: "f1")
        #expect(parseObject(String(decoding: record.jsonLine, as: UTF8.self))?["fields"] == nil)

        // 255 ASCII bytes then a 2-byte character straddling the 256-byte limit.
        let long = AuditText(String(repeating: "x", count: 255) + "é" + "tail")
        record.fields = [.init(name: "title", value: "hello"), .init(name: "bio", value: long)]
        let object = try #require(parseObject(String(decoding: record.jsonLine, as: UTF8.self)))
        let fields = try #require(object["fields"] as? [[String: Any]])
        #expect(fields.count == 2)
        #expect(fields[0]["value"] as? String == "hello")
        #expect(fields[0]["truncated"] as? Bool == false)
        #expect(fields[1]["value"] as? String == String(repeating: "x", count: 255))
        #expect(fields[1]["truncated"] as? Bool == true)
    }

    @Test func wireTextWithInvalidUTF8StaysOneValidLine() throws {
        let record = sampleRecord(id: "w1", path: AuditText(bytes: Array("/up\n".utf8) + [0xFF, 0x22]))
        let line = record.jsonLine
        #expect(line.filter { $0 == 0x0A }.count == 1)
        let object = try #require(parseObject(String(decoding: line, as: UTF8.self)))
        #expect(object["path"] as? String == "/up\n\u{FFFD}\"")
    }
}
