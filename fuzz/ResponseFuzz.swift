// libFuzzer target for the response half of one exchange, without sockets: whatever the upstream answers (the
// fuzzer's bytes), read in pieces of any size, goes through ConnectionMachine's response head parser, chunked
// decoder and relay to the client. The upstream is the application behind Formwall, but a bug, a crash or a
// compromised process there must still end one exchange with a 502, never trap the worker. The whole exchange
// target (fuzz/ExchangeFuzz.swift) fuzzes the client's bytes against eight fixed responses; this one fuzzes the
// response against a fixed set of requests.
//
// Built by fuzz/run.sh like the exchange target (the library modules and the machine's files in Sources/Proxy).
//
// Input layout: byte 0 picks the request (bits 0-2), what the upstream does after its response (bits 3-4: stay
// open, close, reset, stall) and when it answers (bits 6-7: at the request's end, at its head, after 16 body
// bytes); byte 1 is the size of the pieces the response arrives in (0: all at once); the rest is the response.
// Checks, besides "no trap":
//   - the rig's invariants (one record per request, no action after close, liveness past every deadline), except
//     its pooling check, which judges a response by its text and is wrong for arbitrary bytes (a body that
//     contains "Connection: close"): `violations(judgingPooling: false)`. The machine's own rule (nothing unread,
//     keep-alive, whole request sent) is what `UpstreamReuse` tests;
//   - split invariance for an upstream that answers once the request is complete: the same record whole and in
//     pieces, and the same bytes to the client unless the response was refused as malformed (how much of a bad
//     chunked body was relayed before the bad byte depends on where the pieces ended); chunked bodies are compared
//     by their payload, since a close-delimited body is relayed as a chunk per piece.

import HTTP1

let requests: [[UInt8]] = [
    "GET /a HTTP/1.1\r\nHost: a\r\n\r\n",
    "HEAD /a HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /a HTTP/1.0\r\nHost: a\r\n\r\n",
    "POST /up HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\nContent-Length: 67\r\n\r\n"
        + "--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n--B--\r\n",
    "POST /up HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\nExpect: 100-continue\r\n"
        + "Transfer-Encoding: chunked\r\n\r\n43\r\n"
        + "--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n--B--\r\n\r\n0\r\n\r\n",
    "GET /a HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    "POST /form HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 11\r\n\r\n"
        + "title=hello",
    "PUT /x HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\nContent-Length: 5\r\n\r\nhello",
].map { Array($0.utf8) }

func run(_ config: ProxyConfiguration, _ script: ExchangeRig.UpstreamScript, _ request: [UInt8]) -> ExchangeRig {
    let rig = ExchangeRig(config: config, policy: nil, script: script)
    rig.run(client: request)
    let problems = rig.violations(judgingPooling: false)
    if !problems.isEmpty {
        fatalError("invariants broken (pieces of \(script.responsePiece ?? 0)): \(problems)")
    }
    return rig
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 2 else { return 0 }
    let request = requests[Int(data[0] & 7)]
    var script = ExchangeRig.UpstreamScript()
    script.then = [.stayOpen, .close, .reset, .stall][Int((data[0] >> 3) & 3)]
    script.answer = [.atEnd, .atHead, .afterBodyBytes(16), .atEnd][Int(data[0] >> 6)]
    script.response = Array(UnsafeBufferPointer(start: data + 2, count: size - 2))
    let piece = Int(data[1])

    guard let config = try? ExchangeRig.fuzzConfiguration() else {
        fatalError("the harness cannot resolve 127.0.0.1")   // the harness's environment, not a finding
    }
    let whole = run(config, script, request)
    guard piece > 0 else { return 0 }
    script.responsePiece = piece
    let split = run(config, script, request)
    guard case .atEnd = script.answer else { return 0 }
    let wholeSummary = whole.recordSummary, splitSummary = split.recordSummary
    if splitSummary != wholeSummary {
        fatalError("the record depends on the response's pieces: \(wholeSummary) vs \(splitSummary) "
                   + "(pieces of \(piece))")
    }
    let refused = wholeSummary.contains { $0.contains("bad_upstream_response") }
    if !refused && ExchangeRig.responsesDechunked(split.clientReceived)
        != ExchangeRig.responsesDechunked(whole.clientReceived) {
        fatalError("the client's bytes depend on the response's pieces (pieces of \(piece))")
    }
    return 0
}
