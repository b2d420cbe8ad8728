import Testing

@testable import HTTP1
import TestRandom

/// The serializers as first written (Set-based), kept as the specification the allocation-free ones must match.
enum ReferenceSerializer {
    static func droppedNames(_ headers: HTTPHeaders) -> Set<String> {
        var names = HTTPHeadSerializer.hopByHop.union(referenceConnectionTokens(headers))
        names.remove("host")
        return names
    }

    static func referenceConnectionTokens(_ headers: HTTPHeaders) -> [String] {
        headers.fields.filter { HTTPSyntax.equalsIgnoringCase($0.name, "connection") }.map(\.value).flatMap { value in
            value.split(separator: ",", omittingEmptySubsequences: false).map { HTTPSyntax.trimmed($0) }
                .filter { !$0.isEmpty }.map { $0.lowercased() }
        }
    }

    static func requestDropped(_ headers: HTTPHeaders) -> Set<String> {
        droppedNames(headers).union(HTTPHeadSerializer.replacedInRequests)
    }

    static func responseDropped(_ headers: HTTPHeaders) -> Set<String> {
        var dropped = droppedNames(headers)
        dropped.remove("transfer-encoding")
        dropped.insert("via")
        return dropped
    }

    static func writeRequestHead(
        _ head: HTTPRequestHead,
        framing: BodyFraming,
        context: HTTPForwardingContext
    ) -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.append(contentsOf: "\(head.method) \(head.target) HTTP/1.1\r\n".utf8)
        let dropped = requestDropped(head.headers)
        // The proxy's own Content-Type (a re-encoded body's) replaces the client's fields of that name.
        let ownContentType: String? = switch context.contentType {
        case .value(let value): value
        case .multipart(let boundary): "multipart/form-data; boundary=" + String(decoding: boundary, as: UTF8.self)
        case nil: nil
        }
        for field in head.headers where !dropped.contains(field.name.lowercased()) {
            if ownContentType != nil && field.name.lowercased() == "content-type" { continue }
            writeField(field.name, field.value, into: &buffer)
        }
        if let ownContentType {
            writeField("Content-Type", ownContentType, into: &buffer)
        }
        let host = head.headers.fields.first { HTTPSyntax.equalsIgnoringCase($0.name, "host") }?.value
        if host == nil, let defaultHost = context.defaultHost {
            writeField("Host", defaultHost, into: &buffer)
        }
        switch framing {
        case .none: break
        case .contentLength(let length): writeField("Content-Length", String(length), into: &buffer)
        case .chunked: writeField("Transfer-Encoding", "chunked", into: &buffer)
        case .closeDelimited: Issue.record("close-delimited request")
        }
        let forwardedFor = values(head.headers, "x-forwarded-for") + [context.clientAddress]
        writeField("X-Forwarded-For", forwardedFor.joined(separator: ", "), into: &buffer)
        writeField("X-Forwarded-Proto", context.scheme, into: &buffer)
        if let host {
            writeField("X-Forwarded-Host", host, into: &buffer)
        }
        let via = values(head.headers, "via") + [HTTPHeadSerializer.viaEntry]
        writeField("Via", via.joined(separator: ", "), into: &buffer)
        writeField("X-Request-Id", context.requestID, into: &buffer)
        buffer.append(contentsOf: "\r\n".utf8)
        return buffer
    }

    static func writeResponseHead(_ head: HTTPResponseHead, close: Bool) -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.append(contentsOf: "HTTP/1.1 \(head.status) \(head.reason)\r\n".utf8)
        let dropped = responseDropped(head.headers)
        for field in head.headers where !dropped.contains(field.name.lowercased()) {
            writeField(field.name, field.value, into: &buffer)
        }
        let via = values(head.headers, "via") + [HTTPHeadSerializer.viaEntry]
        writeField("Via", via.joined(separator: ", "), into: &buffer)
        if close {
            writeField("Connection", "close", into: &buffer)
        }
        buffer.append(contentsOf: "\r\n".utf8)
        return buffer
    }

    static func values(_ headers: HTTPHeaders, _ name: String) -> [String] {
        headers.fields.filter { HTTPSyntax.equalsIgnoringCase($0.name, name) }.map(\.value)
    }

    static func writeField(_ name: String, _ value: String, into buffer: inout [UInt8]) {
        buffer.append(contentsOf: "\(name): \(value)\r\n".utf8)
    }
}

@Suite struct SerializerReferenceTests {
    /// Names that matter to the serializers, in odd cases, plus ordinary ones.
    static let tokenNames = [
        "Host", "HOST", "host", "Connection", "connection", "Keep-Alive", "keep-alive", "Proxy-Connection", "TE", "te",
        "Trailer", "Upgrade", "Transfer-Encoding", "transfer-encoding", "Content-Length", "Expect", "X-Forwarded-For",
        "x-forwarded-for", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Request-Id", "Via", "VIA", "X-Secret",
        "x-secret", "Close", "Content-Type", "Accept", "X-K", "Tee", "Vias", "Hosts", "X", "K",
    ]

    /// Names only the Unicode path classifies like the Set lookups did (KELVIN SIGN lowercases to `k`).
    static let unicodeNames = [
        "\u{212A}eep-Alive", "X-\u{212A}", "Hos\u{0074}", "T\u{0301}E", "V\u{0130}A", "Con\u{FB00}", "\u{212A}",
    ]

    /// Connection values: lists with empty elements, odd whitespace, non-ASCII tokens and combining marks.
    static let connectionValues = [
        "close", "keep-alive", "Keep-Alive, X-Secret", "x-secret ,, TE", ",", "", " ", "Host", "transfer-encoding",
        "X-\u{212A}", "\u{212A}eep-alive", "x-secret,\u{0301} via", "a, \u{0301}x-secret", "VIA", "close\t, Upgrade",
        "X-K", "x-k , CLOSE", "Content-Type", "\u{212A}EEP-ALIVE", "clos\u{0065}\u{0301}", "CLOSE ,keep-alive",
        "X-\u{212A}\u{0301}", "k", "\u{212A}", "hosts, tee",
    ]

    static let values = ["v", "1.0 edge", "198.51.100.1", "a, b", "\u{00E9}t\u{00E9}", "chunked", "9", ""]

    func randomHeaders(_ rng: inout SplitMix64, names: [String]) -> HTTPHeaders {
        var headers = HTTPHeaders()
        for _ in 0..<Int.random(in: 0...8, using: &rng) {
            let name = names.randomElement(using: &rng)!
            let isConnection = HTTPSyntax.equalsIgnoringCase(name, "connection")
            let value = (isConnection ? Self.connectionValues : Self.values).randomElement(using: &rng)!
            headers.append(name: name, value: value)
        }
        return headers
    }

    @Test func dropDecisionsMatchTheSetsForAnyName() {
        var rng = SplitMix64(seed: 1)
        for _ in 0..<20_000 {
            let headers = randomHeaders(&rng, names: Self.tokenNames + Self.unicodeNames)
            let scan = HeadScan(headers)
            let request = ReferenceSerializer.requestDropped(headers)
            let response = ReferenceSerializer.responseDropped(headers)
            // As the serializers decide: on the name's bytes, past the Connection elements' lengths first.
            headers.forEachField { index, name, _, known in
                let field = headers[index]
                let kind = FieldName(field)
                let lowered = field.name.lowercased()
                #expect(FieldName(known: known, name: name) == kind)
                #expect(
                    HTTPHeadSerializer.dropsFromRequest(kind, name, headers, hasConnection: scan.connectionMayName(name, known))
                        == request.contains(lowered), "request \(field.name) in \(headers.fields)")
                #expect(
                    HTTPHeadSerializer.dropsFromResponse(kind, name, headers, hasConnection: scan.connectionMayName(name, known))
                        == response.contains(lowered), "response \(field.name) in \(headers.fields)")
            }
            #expect(ReferenceSerializer.referenceConnectionTokens(headers) == headers.connectionTokens)
        }
    }

    @Test func requestHeadsMatchTheReference() {
        var rng = SplitMix64(seed: 2)
        let framings: [BodyFraming] = [.none, .chunked, .contentLength(0), .contentLength(10_240), .contentLength(.max)]
        for _ in 0..<5_000 {
            let head = HTTPRequestHead(
                method: ["POST", "GET", "M-SEARCH"].randomElement(using: &rng)!,
                target: ["/", "/up?x=1", "*"].randomElement(using: &rng)!,
                headers: randomHeaders(&rng, names: Self.tokenNames)
            )
            var context = HTTPForwardingContext(
                clientAddress: ["203.0.113.7", "2001:db8::1"].randomElement(using: &rng)!,
                scheme: ["http", "https"].randomElement(using: &rng)!,
                requestID: "req-\(rng.next() % 1000)",
                defaultHost: Bool.random(using: &rng) ? "default.example" : nil
            )
            // A re-encoded body's Content-Type, as a String or (multipart) as the boundary's bytes, or none.
            switch rng.next() % 4 {
            case 0: context.contentType = .value(["application/x-www-form-urlencoded", "text/plain"].randomElement(using: &rng)!)
            case 1: context.contentType = .multipart(boundary: Array("formwall-\(rng.next() % 100_000)AbZ".utf8))
            case 2: context.contentType = .multipart(boundary: Array("x'()+_,-./:=?y".utf8))
            default: break
            }
            let framing = framings.randomElement(using: &rng)!
            var buffer: [UInt8] = Bool.random(using: &rng) ? Array("prefix".utf8) : []
            let prefix = buffer
            HTTPHeadSerializer.writeRequestHead(head, framing: framing, context: context, into: &buffer)
            let expected = prefix + ReferenceSerializer.writeRequestHead(head, framing: framing, context: context)
            #expect(buffer == expected, "\(head.headers.fields)")
        }
    }

    @Test func responseHeadsMatchTheReference() {
        var rng = SplitMix64(seed: 3)
        for _ in 0..<5_000 {
            let head = HTTPResponseHead(
                status: [100, 200, 204, 404, 599].randomElement(using: &rng)!,
                reason: ["OK", "", "Not Found"].randomElement(using: &rng)!,
                headers: randomHeaders(&rng, names: Self.tokenNames),
                framing: .none
            )
            let close = Bool.random(using: &rng)
            var buffer: [UInt8] = []
            HTTPHeadSerializer.writeResponseHead(head, close: close, into: &buffer)
            #expect(buffer == ReferenceSerializer.writeResponseHead(head, close: close), "\(head.headers.fields)")
        }
    }

    /// Heads from the parsers carry `HTTPHeaders.parsed` (the serializers then skip re-checking their bytes):
    /// they serialize exactly as the same fields appended by hand (which are checked) and as the reference,
    /// requests and responses; equality and hashing ignore the flag, and appending a field clears it.
    @Test func parsedHeadsSerializeAsAppendedOnes() throws {
        var rng = SplitMix64(seed: 5)
        var requests = 0
        var responses = 0
        for _ in 0..<4_000 {
            let fields = randomHeaders(&rng, names: Self.tokenNames).fields
            var text = ""
            for field in fields { text += "\(field.name): \(field.value)\r\n" }
            let context = HTTPForwardingContext(clientAddress: "203.0.113.7", scheme: "http", requestID: "req-1")
            var requestParser = HTTPRequestHeadParser()
            let request = Array("POST /up HTTP/1.1\r\n\(text)\r\n".utf8)
            if case .complete(let head, _)? = request.withUnsafeBytes({ try? requestParser.parse($0) }) {
                requests += 1
                var manual = HTTPHeaders()
                for field in head.headers { manual.append(name: field.name, value: field.value) }
                #expect(head.headers.parsed && !manual.parsed)
                #expect(head.headers == manual && head.headers.hashValue == manual.hashValue)
                var byHand = head
                byHand.headers = manual
                var parsedBytes: [UInt8] = []
                var manualBytes: [UInt8] = []
                HTTPHeadSerializer.writeRequestHead(head, framing: head.framing, context: context, into: &parsedBytes)
                HTTPHeadSerializer.writeRequestHead(byHand, framing: head.framing, context: context, into: &manualBytes)
                #expect(parsedBytes == manualBytes, "\(fields)")
                #expect(parsedBytes == ReferenceSerializer.writeRequestHead(head, framing: head.framing, context: context))
            }
            var responseParser = HTTPResponseHeadParser()
            let response = Array("HTTP/1.1 200 OK\r\n\(text)\r\n".utf8)
            if case .complete(let head, _)? = response.withUnsafeBytes({ try? responseParser.parse($0, requestMethod: "GET") }) {
                responses += 1
                var byHand = head
                byHand.headers = HTTPHeaders(head.headers.fields)
                #expect(head.headers.parsed && !byHand.headers.parsed)
                var parsedBytes: [UInt8] = []
                var manualBytes: [UInt8] = []
                HTTPHeadSerializer.writeResponseHead(head, close: false, into: &parsedBytes)
                HTTPHeadSerializer.writeResponseHead(byHand, close: false, into: &manualBytes)
                #expect(parsedBytes == manualBytes, "\(fields)")
                #expect(parsedBytes == ReferenceSerializer.writeResponseHead(head, close: false))
            }
        }
        // The parsers reject many random heads (a missing Host, conflicting framing): enough must remain.
        #expect(requests >= 300 && responses >= 300, "\(requests) requests, \(responses) responses parsed")
    }

    @Test func persistenceMatchesTheTokenArray() {
        var rng = SplitMix64(seed: 4)
        for _ in 0..<20_000 {
            let headers = randomHeaders(&rng, names: Self.tokenNames + Self.unicodeNames)
            let tokens = ReferenceSerializer.referenceConnectionTokens(headers)
            for version in [HTTPVersion.http1_0, .http1_1] {
                let expected = !tokens.contains("close") && (version == .http1_1 || tokens.contains("keep-alive"))
                #expect(headers.persists(version: version) == expected, "\(headers.fields)")
            }
        }
    }

    @Test func decimalsMatchStringConversion() {
        let samples: [UInt64] = [0, 1, 9, 10, 99, 100, 10_240, 4_294_967_296, .max - 1, .max]
        for value in samples {
            var buffer: [UInt8] = [7]
            HTTPSyntax.appendDecimal(value, to: &buffer)
            #expect(buffer == [7] + Array(String(value).utf8))
        }
        for value in [0, 5, 200, 599, Int.max] {
            var buffer: [UInt8] = []
            HTTPSyntax.appendDecimal(value, to: &buffer)
            #expect(buffer == Array(String(value).utf8))
        }
    }
}
