import Testing

@testable import Multipart
import TestRandom

/// `MultipartPart.parse(headerBlock:)` as first written (line arrays, copies), kept as the specification
/// the in-place parser must match.
enum ReferencePartParser {
    static func parse(headerBlock block: UnsafeRawBufferPointer) throws(MultipartError) -> MultipartPart {
        var anomalies = MultipartAnomalies()
        // Logical header lines (after unfolding).
        var lines: [[UInt8]] = []
        var i = 0
        let n = block.count
        while i < n {
            var end = i
            while end < n, block[end] != ASCII.lf { end += 1 }
            var lineEnd = end
            if lineEnd > i, block[lineEnd - 1] == ASCII.cr {
                lineEnd -= 1
            } else if end < n {
                anomalies.insert(.lfLine)
            }
            let line = UnsafeRawBufferPointer(rebasing: block[i..<lineEnd])
            if line.contains(ASCII.cr) { throw MultipartError(.bareCR) }
            if let first = line.first, first == ASCII.space || first == ASCII.tab {
                guard !lines.isEmpty else { throw MultipartError(.malformedPartHeader) }
                anomalies.insert(.headerFolding)
                var rest = line[...]
                while let f = rest.first, f == ASCII.space || f == ASCII.tab { rest = rest.dropFirst() }
                lines[lines.count - 1].append(ASCII.space)
                lines[lines.count - 1].append(contentsOf: rest)
            } else {
                lines.append(Array(line))
            }
            i = end + 1
        }

        var disposition: [UInt8]?
        var contentType: [UInt8]?
        var seenCTE = false
        for line in lines {
            guard let colon = line.firstIndex(of: ASCII.colon), colon > 0 else {
                throw MultipartError(.malformedPartHeader)
            }
            let name = line[..<colon]
            guard name.allSatisfy(ASCII.isTChar) else { throw MultipartError(.malformedPartHeader) }
            var value = line[(colon + 1)...]
            while let f = value.first, f == ASCII.space || f == ASCII.tab { value = value.dropFirst() }
            while let l = value.last, l == ASCII.space || l == ASCII.tab { value = value.dropLast() }
            if value.contains(where: { ($0 < 0x20 && $0 != ASCII.tab) || $0 == 0x7F }) {
                anomalies.insert(.controlCharacters)
            }
            if !UTF8Check.isValid(value) { anomalies.insert(.invalidUTF8) }
            if ASCII.equalsLower(name, "content-disposition") {
                if disposition != nil { anomalies.insert(.duplicateContentDisposition) } else { disposition = Array(value) }
            } else if ASCII.equalsLower(name, "content-type") {
                if contentType != nil { anomalies.insert(.duplicateHeader) } else { contentType = Array(value) }
            } else if ASCII.equalsLower(name, "content-transfer-encoding") {
                if seenCTE { anomalies.insert(.duplicateHeader) }
                seenCTE = true
                anomalies.insert(.contentTransferEncoding)
            } else {
                anomalies.insert(.unknownPartHeader)
            }
        }

        var part = MultipartPart(name: nil, filename: nil, contentType: contentType, anomalies: anomalies)
        if let ct = contentType {
            let parsed = ReferenceParameters.parse(ct)
            if parsed.value.starts(with: Array("multipart/".utf8)) { part.anomalies.insert(.nestedMultipart) }
        }
        guard let disposition else {
            part.anomalies.insert(.missingContentDisposition)
            part.anomalies.insert(.missingName)
            return part
        }
        let cd = ReferenceParameters.parse(disposition)
        part.anomalies.formUnion(cd.anomalies)
        if cd.value != Array("form-data".utf8) { part.anomalies.insert(.dispositionNotFormData) }
        var plainFilename: [UInt8]?
        var starFilename: [UInt8]?
        var seen = Set<[UInt8]>()
        for p in cd.parameters {
            if !seen.insert(p.name).inserted { part.anomalies.insert(.duplicateParameter); continue }
            switch String(decoding: p.name, as: UTF8.self) {
            case "name":
                part.name = p.value
            case "filename":
                plainFilename = p.value
            case "filename*":
                if p.quoted { part.anomalies.insert(.invalidQuoting) }
                if let decoded = ExtendedValue.decode(p.value) {
                    starFilename = decoded
                } else {
                    part.anomalies.insert(.invalidExtendedValue)
                }
            default:
                part.anomalies.insert(.unknownParameter)
            }
        }
        if let star = starFilename {
            if let plain = plainFilename, plain != star { part.anomalies.insert(.filenameMismatch) }
            part.filename = star
        } else {
            part.filename = plainFilename
        }
        if part.name == nil { part.anomalies.insert(.missingName) }
        for v in [part.name, part.filename] {
            guard let v else { continue }
            if v.contains(where: { $0 < 0x20 || $0 == 0x7F }) { part.anomalies.insert(.controlCharacters) }
            if !UTF8Check.isValid(v) { part.anomalies.insert(.invalidUTF8) }
        }
        return part
    }
}

/// `HeaderParameters.parse` as first written.
enum ReferenceParameters {
    static func parse(_ bytes: some Collection<UInt8>) -> HeaderParameters {
        let b = Array(bytes)
        var i = 0
        var anomalies = MultipartAnomalies()
        let n = b.count
        @inline(__always) func skipOWS() { while i < n, b[i] == ASCII.space || b[i] == ASCII.tab { i += 1 } }

        skipOWS()
        let valueStart = i
        while i < n, b[i] != ASCII.semicolon { i += 1 }
        var valueEnd = i
        while valueEnd > valueStart, b[valueEnd - 1] == ASCII.space || b[valueEnd - 1] == ASCII.tab { valueEnd -= 1 }
        let value = ASCII.lowercased(b[valueStart..<valueEnd])

        var params: [HeaderParameters.Parameter] = []
        while i < n {
            // Separator: one `;`, possibly more (empty parameters are skipped).
            if b[i] == ASCII.semicolon {
                i += 1
                skipOWS()
                continue
            }
            // Parameter name.
            let nameStart = i
            while i < n, b[i] != ASCII.equals, b[i] != ASCII.semicolon, b[i] != ASCII.space, b[i] != ASCII.tab {
                i += 1
            }
            let name = ASCII.lowercased(b[nameStart..<i])
            var spaced = false
            if i < n, b[i] == ASCII.space || b[i] == ASCII.tab { spaced = true; skipOWS() }
            guard i < n, b[i] == ASCII.equals else {
                // A bare word: either a missing `=` or two parameters without `;`.
                if !name.isEmpty { anomalies.insert(.invalidQuoting) }
                params.append(HeaderParameters.Parameter(name: name, value: [], quoted: false, spaceAroundEquals: spaced))
                if i < n, b[i] != ASCII.semicolon { anomalies.insert(.missingSemicolon) }
                continue
            }
            i += 1
            if i < n, b[i] == ASCII.space || b[i] == ASCII.tab { spaced = true; skipOWS() }
            var val: [UInt8] = []
            var quoted = false
            if i < n, b[i] == ASCII.quote {
                quoted = true
                i += 1
                var closed = false
                while i < n {
                    let c = b[i]
                    if c == ASCII.quote { closed = true; i += 1; break }
                    if c == ASCII.backslash, i + 1 < n, b[i + 1] == ASCII.quote || b[i + 1] == ASCII.backslash {
                        anomalies.insert(.backslashEscape)
                        val.append(b[i + 1])
                        i += 2
                        continue
                    }
                    val.append(c)
                    i += 1
                }
                if !closed { anomalies.insert(.invalidQuoting) }
                skipOWS()
                if i < n, b[i] != ASCII.semicolon {
                    // Junk after the closing quote (`name="a"b`) or a missing `;`.
                    if b[i] == ASCII.quote { anomalies.insert(.invalidQuoting) } else { anomalies.insert(.missingSemicolon) }
                }
            } else {
                let start = i
                while i < n, b[i] != ASCII.semicolon { i += 1 }
                var end = i
                while end > start, b[end - 1] == ASCII.space || b[end - 1] == ASCII.tab { end -= 1 }
                val = Array(b[start..<end])
                if val.first == ASCII.apostrophe || val.contains(ASCII.quote)
                    || val.contains(ASCII.space) || val.contains(ASCII.tab) {
                    anomalies.insert(.invalidQuoting)
                }
            }
            params.append(HeaderParameters.Parameter(name: name, value: val, quoted: quoted, spaceAroundEquals: spaced))
        }
        return HeaderParameters(value: value, parameters: params, anomalies: anomalies)
    }
}

@Suite struct PartHeaderReferenceTests {
    static let lines = [
        "Content-Disposition: form-data; name=\"field\"",
        "content-disposition: form-data; name=file; filename=\"a.txt\"",
        "Content-Disposition: FORM-DATA; NAME=\"x\"; filename*=UTF-8''%C3%A9t%C3%A9.txt; filename=\"ete.txt\"",
        "Content-Disposition: attachment; name=\"a\"; name=\"b\"",
        "Content-Disposition: form-data; name=\"a\\\"b\"; filename=C:\\dir\\f.txt; x=1; y",
        "Content-Disposition:form-data;name=a b;filename='q'",
        "Content-Disposition: form-data; filename*=\"iso-8859-1''%E9\"; name=\"\u{01}\"",
        "Content-Disposition: form-data; name=\"\u{FF}\"; filename=\"\u{E9}\"",
        "Content-Type: text/plain",
        "Content-Type:  Multipart/Mixed; boundary=x",
        "Content-Type: multipart",
        "content-type: \tMULTIPART/ ",
        "Content-Transfer-Encoding: base64",
        "X-Other: \u{7F}v",
        "Bad Name: v",
        "NoColon",
        ": empty",
        "  folded continuation; filename=\"b\"",
        "\tname=\"c\"",
        "",
        "Content-Disposition: form-data; a=1; b=2; c=3; d=4; e=5; f=6; g=7; h=8; i=9; j=10; k=11; l=12; m=13; "
            + "n=14; o=15; p=16; q=17; a=18; name=z",
    ]
    static let endings = ["\r\n", "\r\n", "\r\n", "\n", "\r", ""]

    func outcome(_ parse: (UnsafeRawBufferPointer) throws(MultipartError) -> MultipartPart, _ block: [UInt8])
        -> Result<MultipartPart, MultipartError>
    {
        block.withUnsafeBytes { bytes in
            Result { () throws(MultipartError) -> MultipartPart in try parse(bytes) }
        }
    }

    @Test func partHeadersMatchTheReference() {
        var rng = SplitMix64(seed: 11)
        for _ in 0..<30_000 {
            var block: [UInt8] = []
            for _ in 0..<Int.random(in: 0...4, using: &rng) {
                block += Array(Self.lines.randomElement(using: &rng)!.utf8)
                block += Array(Self.endings.randomElement(using: &rng)!.utf8)
            }
            if Int.random(in: 0..<8, using: &rng) == 0, !block.isEmpty {
                block[Int.random(in: 0..<block.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            }
            let expected = outcome(
                { (b) throws(MultipartError) in try ReferencePartParser.parse(headerBlock: b) }, block)
            let actual = outcome({ (b) throws(MultipartError) in try MultipartPart.parse(headerBlock: b) }, block)
            #expect(actual == expected, "\(String(decoding: block, as: UTF8.self).debugDescription)")
        }
    }

    /// The usual Content-Disposition (`form-data; name="…"; filename="…"`) is read without the parameter parser
    /// (`MultipartPart.plainDisposition`): generated values near that form, half of them in it, must give what
    /// the reference gives.
    @Test func plainDispositionsMatchTheReference() {
        var rng = SplitMix64(seed: 12)
        let types = ["form-data", "Form-Data", "FORM-DATA", "form-datum", "form-data ", "attachment"]
        let separators = [";", "; ", ";  ", " ;", ";\t", ""]
        let keys = ["name=", "filename=", "NAME=", "name =", "name*=", "filename*=", "x="]
        let alphabet = Array("abc XYZ.09-_/\\\";\t'".utf8) + [0x01, 0x7F, 0xC3, 0xA9, 0xFF]
        var plain = 0
        for _ in 0..<20_000 {
            func value() -> [UInt8] {
                let pool = rng.below(3) == 0 ? alphabet.count : 14
                let body = (0..<rng.below(12)).map { _ in alphabet[rng.below(pool)] }
                return rng.below(6) == 0 ? body : [ASCII.quote] + body + (rng.below(8) == 0 ? [] : [ASCII.quote])
            }
            func pick(_ choices: [String], plain: Int) -> [UInt8] {
                Array(choices[rng.below(3) != 0 ? rng.below(plain) : rng.below(choices.count)].utf8)
            }
            var line = Array("Content-Disposition: ".utf8) + pick(types, plain: 3)
            line += pick(separators, plain: 2) + (rng.below(4) == 0 ? pick(keys, plain: 7) : Array("name=".utf8)) + value()
            if rng.below(2) == 0 {
                line += pick(separators, plain: 2) + (rng.below(4) == 0 ? pick(keys, plain: 7) : Array("filename=".utf8))
                line += value()
            }
            if rng.below(10) == 0 { line += Array("; x".utf8) }
            var block = line
            if rng.below(2) == 0 { block += Array("\r\nContent-Type: image/png".utf8) }
            let disposition = Array(line.dropFirst(21))
            if disposition.withUnsafeBytes({ MultipartPart.plainDisposition($0) }) != nil { plain += 1 }
            let expected = outcome(
                { (b) throws(MultipartError) in try ReferencePartParser.parse(headerBlock: b) }, block)
            let actual = outcome({ (b) throws(MultipartError) in try MultipartPart.parse(headerBlock: b) }, block)
            #expect(actual == expected, "\(String(decoding: block, as: UTF8.self).debugDescription)")
        }
        #expect(plain > 2_000 && plain < 18_000, "plain \(plain)")
    }

    @Test func parametersMatchTheReference() {
        for line in Self.lines {
            let value = Array(line.utf8.drop { $0 != UInt8(ascii: ":") }.dropFirst())
            #expect(HeaderParameters.parse(value) == ReferenceParameters.parse(value))
            #expect(HeaderParameters.parse(value.dropFirst()) == ReferenceParameters.parse(value.dropFirst()))
            #expect(HeaderParameters.parse(AnySequenceCollection(value)) == ReferenceParameters.parse(value))
        }
    }
}

/// A collection without contiguous storage, to take the copying path of `HeaderParameters.parse`.
struct AnySequenceCollection: Collection {
    let base: [UInt8]
    init(_ base: [UInt8]) { self.base = base }
    var startIndex: Int { base.startIndex }
    var endIndex: Int { base.endIndex }
    subscript(position: Int) -> UInt8 { base[position] }
    func index(after i: Int) -> Int { i + 1 }
}
