import Inspect
import Multipart
import Testing
import TestRandom

@Suite struct MultipartEncoderTests {
    /// Random parts: names and filenames with quotes, semicolons, backslashes, UTF-8, CR and LF; data with
    /// complete delimiters of the client's old boundary and prefixes of the encoder's fresh one.
    static func randomParts(_ rng: inout SplitMix64, boundary fresh: [UInt8]) -> [(MultipartPart, [UInt8])] {
        let old = b("----WebKitFormBoundary7MA4YWxkTrZu0gW")
        let near = Array(fresh.dropLast())
        let alphabet: [[UInt8]] = ["a", "Z", "0", " ", "\"", ";", "=", "\\", "'", "\r", "\n", "é", "€", "-", "%", "/", "."]
            .map { b($0) }
        func word() -> [UInt8] {
            (0..<Int.random(in: 0...8, using: &rng)).flatMap { _ in alphabet.randomElement(using: &rng)! }
        }
        let dataPieces: [[UInt8]] = [b("\r\n"), b("--"), b("\r\n--") + old, b("\r\n--") + old + b("--"),
                                     b("x"), b("\r"), b("\n--") + near + b("!"), b("\r\n--") + near + b("!"), [0, 255]]
        return (0..<Int.random(in: 0...5, using: &rng)).map { _ in
            let isFile = Bool.random(using: &rng)
            let types = ["text/plain", "IMAGE/PNG", "application/json; charset=UTF-8", "bogus", "a/b; x=y"]
            let part = MultipartPart(name: word(), filename: isFile ? word() : nil,
                                     contentType: isFile ? b(types.randomElement(using: &rng)!) : nil)
            var data: [UInt8] = []
            for _ in 0..<Int.random(in: 0...12, using: &rng) {
                if Bool.random(using: &rng) { data += dataPieces.randomElement(using: &rng)! }
                else { data += (0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) } }
            }
            return (part, data)
        }
    }

    static func encode(_ parts: [(MultipartPart, [UInt8])], boundary: [UInt8]) -> [UInt8] {
        var enc = MultipartEncoder(boundary: boundary)
        var out: [UInt8] = []
        for (p, d) in parts {
            enc.writePartHead(p, into: &out)
            out += d
        }
        enc.writeClose(into: &out)
        return out
    }

    @Test func roundTripIsCanonical() throws {
        var rng = SplitMix64(seed: 0xF0_F0_01)
        let boundary = try #require(SecureRandom.boundary())
        for iteration in 0..<300 {
            let parts = Self.randomParts(&rng, boundary: boundary)
            let body = Self.encode(parts, boundary: boundary)
            let r = parse(body, boundary: boundary, cuts: [Int.random(in: 0...body.count, using: &rng)].filter { $0 > 0 && $0 < body.count })
            #expect(r.error == nil, "iteration \(iteration)")
            #expect(r.anomalies.isEmpty, "iteration \(iteration): \(r.anomalies)")
            #expect(r.parts.count == parts.count)
            for (got, (p, d)) in zip(r.parts, parts) {
                // parse(encode(p)) == canonical(p): escaped name/filename, canonical type, no anomalies.
                var want = MultipartEncoder.canonical(p)
                want.anomalies = got.part.anomalies.subtracting(controlAndUTF8)
                #expect(got.part == want, "iteration \(iteration)")
                #expect(got.data == d)
                // Only control bytes or invalid UTF-8 the client sent can still raise part flags.
                #expect(got.part.anomalies.subtracting(controlAndUTF8).isEmpty)
                // And a canonical part survives a second round trip exactly.
                #expect(MultipartEncoder.canonical(got.part) == MultipartEncoder.canonical(want))
            }
        }
    }

    @Test func canonicalHeadersAreExact() {
        var enc = MultipartEncoder(boundary: b("B"))
        var out: [UInt8] = []
        enc.writePartHead(MultipartPart(name: b("a\"b\r\nc\\")), into: &out)
        out += b("v")
        enc.writePartHead(MultipartPart(name: b("f"), filename: b("x.png"), contentType: b(" Image/PNG ; q=1")), into: &out)
        enc.writeClose(into: &out)
        #expect(String(decoding: out, as: UTF8.self) ==
            "--B\r\nContent-Disposition: form-data; name=\"a%22b%0D%0Ac%5C\"\r\n\r\nv"
            + "\r\n--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.png\"\r\nContent-Type: image/png\r\n\r\n"
            + "\r\n--B--\r\n")
        var empty = MultipartEncoder(boundary: b("B"))
        var e: [UInt8] = []
        empty.writeClose(into: &e)
        #expect(e == b("--B--\r\n"))
        #expect(MultipartEncoder.canonicalContentType(nil) == b("application/octet-stream"))
        #expect(MultipartEncoder.canonicalContentType(b("text/plain; charset=\"UTF-8\"")) == b("text/plain; charset=utf-8"))
        #expect(MultipartEncoder.canonicalContentType(b("text/<script>")) == b("application/octet-stream"))
    }
}

let controlAndUTF8: MultipartAnomalies = {
    var s = MultipartAnomalies()
    s.insert(.controlCharacters)
    s.insert(.invalidUTF8)
    return s
}()

@Suite struct MultipartMemoryTests {
    /// A 1 GiB file part streamed through the parser in 64 KiB chunks (never materialised): the bytes the
    /// parser retains stay under its bound at every step, and every data byte comes back out.
    @Test func oneGiBPartKeepsRetainedBytesBounded() throws {
        let boundary = try #require(SecureRandom.boundary())
        let parser = MultipartParser(boundary: boundary)
        let bound = parser.limits.maxPartHeaderBytes + boundary.count + 4 + parser.limits.maxTransportPadding + 2
        var rng = SplitMix64(seed: 42)
        // Random bytes salted with CR, LF and delimiter prefixes so the held-back path runs constantly.
        var chunk = (0..<65_536).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let prefix = b("\r\n--") + boundary.prefix(boundary.count - 1)
        for at in stride(from: 1000, to: 65_536 - prefix.count - 1, by: 7919) {
            chunk.replaceSubrange(at..<(at + prefix.count), with: prefix)
            chunk[at + prefix.count] = UInt8(ascii: "!")   // never a boundary character: no delimiter completes
        }
        chunk.replaceSubrange((65_536 - prefix.count)..<65_536, with: prefix)   // straddles every chunk edge
        chunk[0] = UInt8(ascii: "!")   // never a boundary character: the straddling prefix must not complete
        let head = b("--") + boundary + b("\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big.bin\"\r\n\r\n")
        let tail = b("\r\n--") + boundary + b("--\r\n")
        let total: UInt64 = 1 << 30
        var dataBytes: UInt64 = 0
        var maxRetained = 0
        var events = 0
        func run(_ bytes: [UInt8]) throws(MultipartError) {
            let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
            defer { buf.deallocate() }
            buf.copyBytes(from: bytes)
            var consumed = 0
            while let e = try parser.next(UnsafeRawBufferPointer(buf), consumed: &consumed) {
                events += 1
                if case .partData(let span) = e { dataBytes += UInt64(span.count) }
                maxRetained = max(maxRetained, parser.retainedBytes)
            }
            maxRetained = max(maxRetained, parser.retainedBytes)
        }
        try run(head)
        let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk.count, alignment: 1)
        defer { buf.deallocate() }
        buf.copyBytes(from: chunk)
        for _ in 0..<(total / UInt64(chunk.count)) {
            var consumed = 0
            while let e = try parser.next(UnsafeRawBufferPointer(buf), consumed: &consumed) {
                if case .partData(let span) = e { dataBytes += UInt64(span.count) }
            }
            maxRetained = max(maxRetained, parser.retainedBytes)
        }
        try run(tail)
        try parser.finish()
        #expect(parser.isComplete)
        #expect(dataBytes == total)
        #expect(maxRetained <= bound)
        #expect(maxRetained > 0, "the held-back path was exercised")
        #expect(parser.anomalies.isEmpty)
    }
}
