import Multipart
import Testing

@Suite struct MultipartParserTests {
    let boundary = b("AaB03x")

    @Test func simpleFieldAndFile() {
        let body = b("--AaB03x\r\nContent-Disposition: form-data; name=\"field1\"\r\n\r\nJoe Blow\r\nalmost tricked you!\r\n"
            + "--AaB03x\r\nContent-Disposition: form-data; name=\"pics\"; filename=\"file1.txt\"\r\n"
            + "Content-Type: text/plain\r\n\r\n... contents of file1.txt ...\r\r\n--AaB03x--\r\n")
        let r = parseAllWays(body, boundary: boundary)
        #expect(r.error == nil)
        #expect(r.sawEnd)
        #expect(r.anomalies == [])
        #expect(r.parts.count == 2)
        #expect(r.parts[0].part.name == b("field1"))
        #expect(r.parts[0].part.filename == nil)
        #expect(r.parts[0].data == b("Joe Blow\r\nalmost tricked you!"))
        #expect(r.parts[1].part.filename == b("file1.txt"))
        #expect(r.parts[1].part.contentType == b("text/plain"))
        #expect(r.parts[1].data == b("... contents of file1.txt ...\r"))
    }

    @Test func closeDelimiterWithoutFinalCRLFIsAccepted() {
        let r = parseAllWays(b("--AaB03x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--AaB03x--"),
                             boundary: boundary)
        #expect(r.error == nil && r.sawEnd && r.parts.count == 1 && r.anomalies == [])
    }

    @Test func missingCloseDelimiterIsAnError() {
        let r = parseAllWays(b("--AaB03x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--AaB03x\r\n"),
                             boundary: boundary)
        #expect(r.error == .truncated)
        let r2 = parseAllWays(b("--AaB03x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nxyz"), boundary: boundary)
        #expect(r2.error == .truncated)
        let r3 = parseAllWays(b("no delimiter at all"), boundary: boundary)
        #expect(r3.error == .missingInitialDelimiter)
        let r4 = parseAllWays(b(""), boundary: boundary)
        #expect(r4.error == .missingInitialDelimiter)
    }

    @Test func preambleAndEpilogueAreFlagged() {
        let r = parseAllWays(b("junk\r\n--AaB03x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--AaB03x--\r\ntrailer"),
                             boundary: boundary)
        #expect(r.error == nil && r.parts.count == 1)
        #expect(r.anomalies == ["data-before", "data-after"])
        // A bare CRLF before the first delimiter is RFC 2046's empty preamble, not data.
        let r2 = parseAllWays(b("\r\n--AaB03x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--AaB03x--\r\n"),
                              boundary: boundary)
        #expect(r2.anomalies == [] && r2.parts.count == 1)
    }

    @Test func delimiterLookalikesAreData() {
        let data = "--AaB03xZ\r\n--AaB03x-Q\r\n--AaB03x\rQ\r\n--AaB03x  Q\r\n--AaB0\r\n\r\r\n--A"
        let r = parseAllWays(b("--AaB03x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n" + data + "\r\n--AaB03x--"),
                             boundary: boundary)
        #expect(r.error == nil)
        #expect(r.parts.first?.data == b(data))
        #expect(r.anomalies == ["delimiter-lookalike"])
    }

    @Test func transportPaddingAfterDelimiterIsAccepted() {
        let r = parseAllWays(b("--AaB03x \t\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--AaB03x--"),
                             boundary: boundary)
        #expect(r.error == nil && r.parts.first?.data == b("x") && r.anomalies == [])
    }

    @Test func bareLFIsToleratedAndFlagged() {
        let r = parseAllWays(b("--AaB03x\nContent-Disposition: form-data; name=\"a\"\n\nline1\r\nline2\n--AaB03x--\n"),
                             boundary: boundary)
        #expect(r.error == nil)
        #expect(r.parts.first?.data == b("line1\r\nline2"))
        #expect(r.anomalies.contains("lf-line"))
        #expect(r.parts.first?.part.anomalies.contains(.lfLine) == true)
    }

    @Test func headerFoldingIsUnfoldedAndFlagged() {
        let r = parseAllWays(b("--AaB03x\r\nContent-Disposition: form-data;\r\n name=\"a\"\r\n\r\nx\r\n--AaB03x--"),
                             boundary: boundary)
        #expect(r.error == nil)
        #expect(r.parts.first?.part.name == b("a"))
        #expect(r.parts.first?.part.anomalies.contains(.headerFolding) == true)
    }

    @Test func partHeaderErrors() {
        func err(_ headers: String) -> MultipartError.Kind? {
            parseAllWays(b("--AaB03x\r\n" + headers + "\r\n\r\nx\r\n--AaB03x--"), boundary: boundary).error
        }
        #expect(err("Content-Disposition form-data") == .malformedPartHeader)
        #expect(err(": foo") == .malformedPartHeader)
        #expect(err("Bad<Name: x") == .malformedPartHeader)
        #expect(err("Content-Disposition : form-data; name=a") == .malformedPartHeader)
        #expect(err("Content-Disposition: form-data;\r name=a") == .bareCR)
        #expect(err(" folded-first: x") == .malformedPartHeader)
        #expect(err("Content-Disposition: form-data; name=\"a\"") == nil)
    }

    @Test func partHeaderBlockLimit() {
        var limits = MultipartLimits()
        limits.maxPartHeaderBytes = 64
        let ok = "Content-Disposition: form-data; name=\"a\""     // 40 + CRLF + CRLF = 44
        let r = parse(b("--AaB03x\r\n" + ok + "\r\n\r\nx\r\n--AaB03x--"), boundary: boundary, cuts: [], limits: limits)
        #expect(r.error == nil)
        let big = ok + "\r\nX-Pad: " + String(repeating: "p", count: 40)
        let r2 = parseAllWays(b("--AaB03x\r\n" + big + "\r\n\r\nx\r\n--AaB03x--"), boundary: boundary, limits: limits)
        #expect(r2.error == .partHeadersTooLarge)
    }

    @Test func partCountLimit() {
        var limits = MultipartLimits()
        limits.maxParts = 2
        let part = "--AaB03x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n"
        #expect(parse(b(part + part + "--AaB03x--"), boundary: boundary, cuts: [], limits: limits).error == nil)
        #expect(parse(b(part + part + part + "--AaB03x--"), boundary: boundary, cuts: [], limits: limits).error
            == .tooManyParts)
    }

    @Test func dispositionAnomalies() {
        func flags(_ cd: String, extra: String = "") -> [String] {
            let r = parseAllWays(b("--AaB03x\r\nContent-Disposition: " + cd + "\r\n" + extra + "\r\nx\r\n--AaB03x--"),
                                 boundary: boundary)
            #expect(r.error == nil)
            return r.parts.first?.part.anomalies.names ?? ["<no part>"]
        }
        #expect(flags("form-data; name=\"a\"") == [])
        #expect(flags("form-data; name=a; filename=photo.bmp") == [])
        #expect(flags("form-data; name=\"a\"; filename=\"abc.png\" ") == [])
        #expect(flags("form-data; name=\"a\" filename=\"x\"") == ["missing-semicolon"])
        #expect(flags("form-data; name='a'") == ["invalid-quoting"])
        #expect(flags("form-data; name=\"a") == ["invalid-quoting"])
        #expect(flags("form-data; name=\"a\\\"b\"") == ["backslash-escape"])
        #expect(flags("form-data; name=\"a\"; name=\"b\"") == ["duplicate-parameter"])
        #expect(flags("form-data; name=\"a\"; size=3") == ["unknown-parameter"])
        #expect(flags("attachment; name=\"a\"") == ["disposition-not-form-data"])
        #expect(flags("form-data; filename=\"x\"") == ["missing-name"])
        #expect(flags("form-data; name=\"a\"; filename=\"x\"; filename*=UTF-8''y") == ["filename-mismatch"])
        #expect(flags("form-data; name=\"a\"; filename*=UTF-8''%ZZ") == ["invalid-extended-value"])
        #expect(flags("form-data; name=\"a\u{01}\"") == ["control-characters"])
        #expect(flags("form-data; name=\"a\"", extra: "Content-Disposition: form-data; name=\"b\"\r\n")
            == ["duplicate-content-disposition"])
        #expect(flags("form-data; name=\"a\"", extra: "Content-Type: a/b\r\nContent-Type: c/d\r\n")
            == ["duplicate-header"])
        #expect(flags("form-data; name=\"a\"", extra: "Content-Transfer-Encoding: base64\r\n")
            == ["content-transfer-encoding"])
        #expect(flags("form-data; name=\"a\"", extra: "Content-Type: multipart/mixed; boundary=x\r\n")
            == ["nested-multipart"])
        #expect(flags("form-data; name=\"a\"", extra: "X-Other: 1\r\n") == ["unknown-part-header"])
    }

    @Test func missingContentDisposition() {
        let r = parseAllWays(b("--AaB03x\r\nContent-Type: text/plain\r\n\r\nx\r\n--AaB03x--"), boundary: boundary)
        #expect(r.parts.first?.part.anomalies.names == ["missing-content-disposition", "missing-name"])
        let r2 = parseAllWays(b("--AaB03x\r\n\r\nx\r\n--AaB03x--"), boundary: boundary)
        #expect(r2.parts.first?.part.name == nil && r2.parts.first?.data == b("x"))
    }

    @Test func filenameStarIsFoldedIntoFilename() {
        let r = parseAllWays(b("--AaB03x\r\nContent-Disposition: form-data; name=\"f\"; filename=\"EUR rates.txt\"; "
            + "filename*=UTF-8''%E2%82%AC%20rates.txt\r\n\r\nx\r\n--AaB03x--"), boundary: boundary)
        #expect(r.parts.first?.part.filenameString == "€ rates.txt")
        #expect(r.parts.first?.part.anomalies.names == ["filename-mismatch"])
        let r2 = parseAllWays(b("--AaB03x\r\nContent-Disposition: form-data; name=\"f\"; "
            + "filename*=iso-8859-1'en'%A3%20rates.txt\r\n\r\nx\r\n--AaB03x--"), boundary: boundary)
        #expect(r2.parts.first?.part.filenameString == "£ rates.txt")
        #expect(r2.parts.first?.part.anomalies.isEmpty == true)
    }

    @Test func emptyBodyAndEmptyParts() {
        let r = parseAllWays(b("--AaB03x--\r\n"), boundary: boundary)
        #expect(r.error == nil && r.sawEnd && r.parts.isEmpty)
        let r2 = parseAllWays(b("--AaB03x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n\r\n--AaB03x--"),
                              boundary: boundary)
        #expect(r2.parts.count == 1 && r2.parts[0].data.isEmpty)
    }

    @Test func crlfDenseDataAtEverySplit() {
        let data = "\r\r\n\r\n\n\r\r\n-\r\n--\r\n--A\r\n--AaB03\r\r\n--AaB03x"
        let r = parseAllWays(b("--AaB03x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n" + data + "x\r\n--AaB03x--"),
                             boundary: boundary)
        #expect(r.error == nil)
        #expect(r.parts.first?.data == b(data + "x"))
    }
}

@Suite struct BoundaryTests {
    /// Every byte value alone, between two letters and at the end: valid exactly when RFC 2046 lists it as a
    /// `bchars` (DIGIT / ALPHA / `'()+_,-./:=?` / space, and a space not last).
    @Test func everyByteValueIsJudgedAsRFC2046Says() {
        let bchars = Set(Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'()+_,-./:=? ".utf8))
        for value in 0...255 {
            let c = UInt8(value)
            #expect(MultipartBoundary.isValid([0x61, c, 0x62]) == bchars.contains(c), "byte \(value)")
            #expect(MultipartBoundary.isValid([0x61, c]) == (bchars.contains(c) && c != 0x20), "byte \(value) last")
        }
    }

    @Test func extraction() throws {
        #expect(try MultipartBoundary.parse(contentType: b("multipart/form-data; boundary=abc")).boundary == b("abc"))
        let q = try MultipartBoundary.parse(contentType: b("Multipart/Form-Data; BOUNDARY=\"a b:c\""))
        #expect(q.boundary == b("a b:c"))
        #expect(q.anomalies.names == ["boundary-quoted", "boundary-whitespace"])
        let ws = try MultipartBoundary.parse(contentType: b("multipart/form-data; boundary = abc"))
        #expect(ws.anomalies.names == ["boundary-whitespace"])
        // A boundary hidden inside another parameter's quoted value is not the boundary.
        let hidden = try MultipartBoundary.parse(contentType: b("multipart/form-data; x=\"; boundary=evil\"; boundary=real"))
        #expect(hidden.boundary == b("real"))
    }

    @Test func rejections() {
        func kind(_ ct: String) -> MultipartError.Kind? {
            do { _ = try MultipartBoundary.parse(contentType: b(ct)); return nil } catch { return error.kind }
        }
        #expect(kind("multipart/mixed; boundary=abc") == .notMultipart)
        #expect(kind("text/plain") == .notMultipart)
        #expect(kind("multipart/form-data") == .missingBoundary)
        #expect(kind("multipart/form-data; boundary=a; boundary=b") == .duplicateBoundary)
        #expect(kind("multipart/form-data; boundary=") == .invalidBoundary)
        #expect(kind("multipart/form-data; boundary=" + String(repeating: "a", count: 71)) == .invalidBoundary)
        #expect(kind("multipart/form-data; boundary=" + String(repeating: "a", count: 70)) == nil)
        #expect(kind("multipart/form-data; boundary=a{b}") == .invalidBoundary)
        #expect(kind("multipart/form-data; boundary=\"ab \"") == .invalidBoundary)
        #expect(kind("multipart/form-data; boundary=abc" + String(repeating: " ", count: 1100)) == .contentTypeTooLong)
    }
}
