import Testing
@testable import Proxy

/// The machine's `.log` failure lines: a constant msg, the kind that rate-limits them, and the request's id, the
/// same as in its audit record and error answer (docs/operations.md, "Logs on stderr").
@Suite struct FailureLineTests {
    @Test func refusedUpstreamNamesTheRequestOfTheAuditRecord() throws {
        var script = ExchangeRig.UpstreamScript()
        script.connect = .refuse
        let r = ExchangeRig(config: try ExchangeRig.configuration(), policy: nil, script: script)
        r.run(client: Array("GET /x HTTP/1.1\r\nHost: a\r\n\r\n".utf8), clientEOF: false)
        #expect(r.violations() == [])
        let record = try #require(r.records.first ?? nil)
        #expect(record.status == 502)
        let lines = r.actions.compactMap { action -> ConnectionMachine.FailureLine? in
            if case .log(let line) = action { return line } else { return nil }
        }
        #expect(lines.count == 1 && r.logs.count == 1)
        let expected = "formwall: error: upstream unreachable kind=upstream request_id=\(record.requestID) "
        #expect(r.logs.first?.hasPrefix(expected) == true, "\(r.logs)")
        for line in lines {
            #expect(line.kind == "upstream" && line.requestID == record.requestID)
            #expect("\(line.msg)" == "upstream unreachable")
        }
    }
}
