import Multipart
import Testing
@testable import Rules

/// Drives an evaluator the way the proxy does, without any I/O.
private struct Driver {
    var evaluator: PolicyEvaluator
    var index = 0

    init(_ source: String) throws { evaluator = PolicyEvaluator(policy: try policy(source)) }

    mutating func begin(_ method: String = "POST", _ path: String = "/up",
                        type: String? = "multipart/form-data; boundary=x",
                        length: UInt64? = nil) -> PolicyEvaluator.BeginDecision {
        evaluator.begin(method: method, path: path, contentType: type, contentLength: length)
    }

    /// One whole part: begin, data, sniff, value, end; returns the begin decision and the final action.
    mutating func part(_ name: String?, filename: String? = nil, type: String? = nil, bytes: Int = 0,
                       sniffed: String? = nil, value: String? = nil,
                       anomalies: MultipartAnomalies = MultipartAnomalies())
    -> (begin: PolicyEvaluator.PartDecision, end: PolicyEvaluator.Action) {
        let decision = evaluator.partBegin(index: index, name: name, filename: filename, declaredType: type,
                                           anomalies: anomalies)
        index += 1
        if case .reject = decision.action { return (decision, decision.action) }
        if bytes > 0 { _ = evaluator.partData(count: bytes) }
        if let sniffed { _ = evaluator.partSniffed(type: sniffed) }
        if let value { _ = evaluator.fieldValue(Array(value.utf8)) }
        return (decision, evaluator.partEnd())
    }

    var kinds: [String] { evaluator.findings.map(\.violation.kind.name) }
}

private func rejected(_ action: PolicyEvaluator.Action) -> ViolationKind? {
    if case .reject(let violation) = action { return violation.kind }
    return nil
}

private func rejected(_ decision: PolicyEvaluator.BeginDecision) -> ViolationKind? {
    if case .reject(let violation) = decision { return violation.kind }
    return nil
}

@Suite struct EvaluatorRequestTests {
    static let rules = """
        route /up {
            methods POST PUT;
            content-types multipart/form-data application/x-www-form-urlencoded;
            body-max 100;
            field a { max 5; }
        }
        route /any { content-types */*; }
        """

    @Test func methodNotAllowedIs405BeforeAnyBody() throws {
        var driver = try Driver(Self.rules)
        guard case .reject(let violation) = driver.begin("DELETE") else { Issue.record("not rejected"); return }
        #expect(violation.kind == .methodNotAllowed && violation.status == 405)
        #expect(violation.detail == "DELETE not in POST PUT")
        #expect(violation.rule?.description == "t.rules:1")
        #expect(driver.evaluator.rejection == violation)
        #expect(rejected(driver.evaluator.bodyData(count: 1)) == .methodNotAllowed)
    }

    @Test func contentTypeNotAllowedIs415() throws {
        var driver = try Driver(Self.rules)
        guard case .reject(let violation) = driver.begin(type: "application/json") else {
            Issue.record("not rejected")
            return
        }
        #expect(violation.kind == .contentTypeNotAllowed && violation.status == 415)
        #expect(violation.detail == "application/json not in multipart/form-data application/x-www-form-urlencoded")
        var missing = try Driver(Self.rules)
        #expect(rejected(missing.begin(type: nil, length: 10)) == .contentTypeNotAllowed)
        var noBody = try Driver(Self.rules)
        #expect(noBody.begin(type: nil, length: 0) == .proceed(.none))
    }

    @Test func bodyKinds() throws {
        var a = try Driver(Self.rules)
        #expect(a.begin(type: "Multipart/Form-Data; boundary=x") == .proceed(.multipart))
        var b = try Driver(Self.rules)
        #expect(b.begin(type: "application/x-www-form-urlencoded; charset=utf-8") == .proceed(.urlencoded))
        var c = try Driver(Self.rules)
        #expect(c.begin("POST", "/any", type: "application/json") == .proceed(.opaque))
        var d = try Driver(Self.rules)
        #expect(d.begin("POST", "/any", type: "multipart/mixed; boundary=x") == .proceed(.multipart))
    }

    @Test func earlyBodyTooLargeFromContentLengthAtTheBoundary() throws {
        var ok = try Driver(Self.rules)
        #expect(ok.begin(length: 100) == .proceed(.multipart))
        var tooBig = try Driver(Self.rules)
        guard case .reject(let violation) = tooBig.begin(length: 101) else { Issue.record("not rejected"); return }
        #expect(violation.kind == .bodyTooLarge && violation.status == 413 && violation.limit == 100)
        #expect(violation.detail == "101 B > 100 B (Content-Length)")
    }

    @Test func streamedBodyTooLargeAtTheBoundary() throws {
        var driver = try Driver(Self.rules)
        _ = driver.begin(length: nil)
        #expect(driver.evaluator.bodyData(count: 60) == .forward)
        #expect(driver.evaluator.bodyData(count: 40) == .forward)
        #expect(rejected(driver.evaluator.bodyData(count: 1)) == .bodyTooLarge)
        #expect(driver.evaluator.rejection?.detail == "101 B > 100 B")
    }

    @Test func malformedBodyIs400() throws {
        var driver = try Driver(Self.rules)
        _ = driver.begin()
        let action = driver.evaluator.malformed(detail: "missing close delimiter")
        #expect(rejected(action) == .malformedBody)
        #expect(action.violation?.status == 400)
    }

    @Test func implicitFallbackRejectsFormPartsButPassesOtherBodies() throws {
        var form = PolicyEvaluator(policy: Policy())
        #expect(form.begin(method: "POST", path: "/x", contentType: "multipart/form-data; boundary=b",
                           contentLength: 10) == .proceed(.multipart))
        let decision = form.partBegin(index: 0, name: "q", filename: nil, declaredType: nil,
                                      anomalies: MultipartAnomalies())
        #expect(rejected(decision.action) == .unknownPart)
        #expect(decision.action.violation?.status == 403)
        var json = PolicyEvaluator(policy: Policy())
        #expect(json.begin(method: "POST", path: "/x", contentType: "application/json", contentLength: 10)
            == .proceed(.opaque))
        #expect(rejected(PolicyEvaluator(policy: Policy()).beginning(length: (1 << 20) + 1)) == .bodyTooLarge)
        var get = PolicyEvaluator(policy: Policy())
        #expect(get.begin(method: "GET", path: "/", contentType: nil, contentLength: 0) == .proceed(.none))
        #expect(get.end() == .forward)
    }
}

extension PolicyEvaluator {
    fileprivate func beginning(length: UInt64) -> BeginDecision {
        var copy = self
        return copy.begin(method: "POST", path: "/", contentType: "text/plain", contentLength: length)
    }
}

@Suite struct EvaluatorPartTests {
    @Test func fieldMaxIsExact() throws {
        var driver = try Driver("route /up { field a { max 5; } field b { max 5; } }")
        _ = driver.begin()
        let five = driver.part("a", bytes: 5)
        #expect(five.begin.pending == [.size] && !five.begin.isFinal && !five.begin.mustHold)
        #expect(five.end == .forward)
        let decision = driver.evaluator.partBegin(index: 1, name: "b", filename: nil, declaredType: nil,
                                                  anomalies: MultipartAnomalies())
        #expect(decision.action == .forward)
        #expect(driver.evaluator.partData(count: 3) == .forward)
        #expect(driver.evaluator.partData(count: 2) == .forward)
        let crossed = driver.evaluator.partData(count: 1)
        #expect(rejected(crossed) == .fieldTooLarge)
        #expect(crossed.violation?.limit == 5)
        #expect(crossed.violation?.detail == "6 B > 5 B")
        #expect(crossed.violation?.part == "b" && crossed.violation?.partIndex == 1)
        #expect(crossed.violation?.rule?.description == "t.rules:1")
    }

    @Test func fileMaxWithStripHoldsThePart() throws {
        var driver = try Driver("route /up {\n file f { max 5MiB; action strip; }\n}")
        _ = driver.begin()
        let decision = driver.evaluator.partBegin(index: 0, name: "f", filename: "a.bin", declaredType: nil,
                                                  anomalies: MultipartAnomalies())
        #expect(decision.mustHold && decision.pending == [.size])
        #expect(driver.evaluator.partData(count: 5 << 20) == .forward)
        guard case .strip(let violation) = driver.evaluator.partData(count: 2_300_000) else {
            Issue.record("not stripped")
            return
        }
        #expect(violation.kind == .fileTooLarge && violation.status == 413 && violation.limit == 5 << 20)
        #expect(violation.detail == "7.2 MiB > 5 MiB")
        #expect(violation.rule?.description == "t.rules:2")
        #expect(driver.evaluator.partData(count: 10) == .strip(violation))
        #expect(driver.evaluator.partEnd() == .strip(violation))
        #expect(driver.evaluator.end() == .forward)
        #expect(driver.evaluator.findings.map(\.outcome) == [.strip])
    }

    @Test func everyRuleAction() throws {
        for (action, expected) in [("reject", "reject"), ("strip", "strip"), ("quarantine", "quarantine"),
                                   ("log", "forward")] {
            var driver = try Driver("route /up { field f { max 1; action \(action); } }")
            _ = driver.begin()
            let end = driver.part("f", bytes: 2).end
            let name: String
            switch end {
            case .forward: name = "forward"
            case .strip: name = "strip"
            case .quarantine: name = "quarantine"
            case .reject: name = "reject"
            }
            #expect(name == expected, "action \(action)")
            #expect(driver.evaluator.findings.first?.outcome.rawValue == action)
        }
    }

    @Test func partCountsAreEnforcedOnTheFirstPartOverTheLimit() throws {
        let rules = "anomaly empty-filename allow; route /up { parts-max 3; files-max 1; fields-max 2; field * { repeat 10; } file * { } }"
        var parts = try Driver(rules)
        _ = parts.begin()
        #expect(parts.part("a").end == .forward)
        #expect(parts.part("b").end == .forward)
        #expect(parts.part("c", filename: "").end == .forward)
        let fourth = parts.part("d", filename: "")
        #expect(rejected(fourth.end) == .tooManyParts)
        #expect(fourth.end.violation?.detail == "4 parts > 3" && fourth.end.violation?.limit == 3)

        var files = try Driver(rules)
        _ = files.begin()
        #expect(files.part("f", filename: "").end == .forward)
        #expect(rejected(files.part("g", filename: "").end) == .tooManyFiles)

        var fields = try Driver(rules)
        _ = fields.begin()
        #expect(fields.part("a").end == .forward)
        #expect(fields.part("a").end == .forward)
        let third = fields.part("a")
        #expect(rejected(third.end) == .tooManyFields)
        #expect(third.end.violation?.status == 413)
    }

    @Test func repeatLimit() throws {
        var driver = try Driver("route /up { field tags { repeat 2; } field one { } }")
        _ = driver.begin()
        #expect(driver.part("tags").end == .forward)
        #expect(driver.part("tags").end == .forward)
        let third = driver.part("tags")
        #expect(rejected(third.end) == .tooManyRepeats)
        #expect(third.end.violation?.limit == 2)
        #expect(third.end.violation?.detail == "'tags' given 3 times > 2")
        var once = try Driver("route /up { field one { } }")
        _ = once.begin()
        #expect(once.part("one").end == .forward)
        #expect(rejected(once.part("one").end) == .tooManyRepeats)
    }

    @Test func unknownPartActions() throws {
        var reject = try Driver("route /up { field a; }")
        _ = reject.begin()
        let part = reject.part("b")
        #expect(rejected(part.end) == .unknownPart)
        #expect(part.end.violation?.status == 403)
        #expect(part.end.violation?.detail == "no rule for field 'b'")

        var strip = try Driver("route /up { unknown strip; field a; }")
        _ = strip.begin()
        guard case .strip = strip.part("b").begin.action else { Issue.record("not stripped"); return }
        #expect(strip.part("a").end == .forward)

        var allow = try Driver("route /up { unknown allow; field a; }")
        _ = allow.begin()
        #expect(allow.part("b").end == .forward)
        #expect(allow.evaluator.findings.isEmpty)

        var wildcard = try Driver("route /up { field * { max 3; } }")
        _ = wildcard.begin()
        #expect(wildcard.part("anything", bytes: 3).end == .forward)
        #expect(rejected(wildcard.part("else", bytes: 4).end) == .fieldTooLarge)

        // A file sent under a field's name is unknown even with `file *`.
        var crossKind = try Driver("route /up { field a; file * { } }")
        _ = crossKind.begin()
        #expect(rejected(crossKind.part("a", filename: "x.txt").end) == .unknownPart)
    }

    @Test func requiredIsCheckedAtTheEnd() throws {
        let rules = "route /up {\n  field a { required; }\n  file f { required; }\n}"
        var missing = try Driver(rules)
        _ = missing.begin()
        #expect(missing.part("a").end == .forward)
        let end = missing.evaluator.end()
        #expect(rejected(end) == .missingRequired)
        #expect(end.violation?.status == 422 && end.violation?.part == "f")
        #expect(end.violation?.rule?.description == "t.rules:3")

        var complete = try Driver(rules)
        _ = complete.begin()
        _ = complete.part("a")
        _ = complete.part("f", filename: "x.bin", bytes: 3)
        #expect(complete.evaluator.end() == .forward)

        // "No file chosen" (empty filename, no data) does not satisfy `required`.
        var empty = try Driver(rules)
        _ = empty.begin()
        _ = empty.part("a")
        _ = empty.part("f", filename: "")
        #expect(rejected(empty.evaluator.end()) == .missingRequired)

        // A bodiless GET is not a form submission.
        var get = try Driver(rules)
        #expect(get.begin("GET", type: nil, length: 0) == .proceed(.none))
        #expect(get.evaluator.end() == .forward)
        var post = try Driver(rules)
        _ = post.begin("POST", type: nil, length: 0)
        #expect(rejected(post.evaluator.end()) == .missingRequired)
    }

    @Test func strippedPartDoesNotSatisfyRequired() throws {
        var driver = try Driver("route /up { field a { required; max 1; action strip; } }")
        _ = driver.begin()
        guard case .strip = driver.part("a", bytes: 2).end else { Issue.record("not stripped"); return }
        #expect(rejected(driver.evaluator.end()) == .missingRequired)
    }

    @Test func requiredWithLogActionOnlyLogs() throws {
        var driver = try Driver("route /up { field a { required; action log; } }")
        _ = driver.begin()
        #expect(driver.evaluator.end() == .forward)
        #expect(driver.kinds == ["missing_required"])
        #expect(driver.evaluator.findings.first?.outcome == .log)
    }

    @Test func patternMatchAndMismatch() throws {
        let rules = "route /up { field id { max 16; pattern \"^[0-9]+$\"; } field any { repeat 3; pattern \"x\"; } }"
        var driver = try Driver(rules)
        _ = driver.begin()
        let ok = driver.part("id", bytes: 3, value: "123")
        #expect(ok.begin.pending == [.size, .value])
        #expect(ok.end == .forward)
        var bad = try Driver(rules)
        _ = bad.begin()
        let mismatch = bad.part("id", bytes: 4, value: "123\n")
        #expect(rejected(mismatch.end) == .patternMismatch)
        #expect(mismatch.end.violation?.status == 422)
        #expect(mismatch.end.violation?.detail == "value does not match ^[0-9]+$")
        var search = try Driver(rules)
        _ = search.begin()
        #expect(search.part("any", bytes: 3, value: "axb").end == .forward)
        // An empty value the proxy never fed is checked as empty; a non-empty unchecked one fails closed.
        #expect(rejected(search.part("any").end) == .patternMismatch)
        var unchecked = try Driver(rules)
        _ = unchecked.begin()
        #expect(unchecked.part("any", bytes: 1).end.violation?.detail == "value was not checked")
        var invalid = try Driver(rules)
        _ = invalid.begin()
        _ = invalid.evaluator.partBegin(index: 0, name: "any", filename: nil, declaredType: nil,
                                        anomalies: MultipartAnomalies())
        #expect(invalid.evaluator.fieldValue([0x78, 0xFF]).violation?.detail == "value is not valid UTF-8")
    }
}

@Suite struct EvaluatorFileTests {
    static let rules = """
        # These suites judge a forwarded "no file chosen" (the default leaves it out: `empty-filename strip`).
        anomaly empty-filename allow;
        route /up {
            file avatar { max 5MiB; types image/png image/jpeg; extensions .png .jpg .jpeg; }
            file doc { types application/*; action quarantine; }
            file any { }
            file svg { extensions .svg; }
            file clean { filename sanitize; }
            file lenient { allow-filename path-separators dot-dot; }
            file free { filename allow; }
            file mixed { allow-type-mismatch; }
        }
        """

    @Test func typesMustMatchTheSniffedType() throws {
        var ok = try Driver(Self.rules)
        _ = ok.begin()
        let part = ok.part("avatar", filename: "a.png", type: "image/png", bytes: 10, sniffed: "image/png")
        #expect(part.begin.pending == [.size, .type])
        #expect(part.end == .forward)

        var wrong = try Driver(Self.rules)
        _ = wrong.begin()
        let gif = wrong.part("avatar", filename: "a.png", type: "application/octet-stream", bytes: 10,
                             sniffed: "image/gif")
        #expect(rejected(gif.end) == .typeNotAllowed)
        #expect(gif.end.violation?.status == 415)
        #expect(gif.end.violation?.detail == "sniffed image/gif not in image/png image/jpeg")
    }

    @Test func declaredTypeOutsideTypesIsRejectedAtPartBegin() throws {
        var driver = try Driver(Self.rules)
        _ = driver.begin()
        let decision = driver.part("avatar", filename: "a.png", type: "image/gif").begin
        #expect(rejected(decision.action) == .typeNotAllowed)
        #expect(decision.action.violation?.detail == "declared image/gif not in image/png image/jpeg")
    }

    @Test func typeMismatch() throws {
        var driver = try Driver(Self.rules)
        _ = driver.begin()
        let part = driver.part("any", filename: "a.png", type: "image/png", bytes: 10,
                               sniffed: "application/x-msdownload")
        #expect(part.begin.pending == [.type])
        #expect(rejected(part.end) == .typeMismatch)
        #expect(part.end.violation?.status == 415)
        #expect(part.end.violation?.detail == "declared image/png, sniffed application/x-msdownload")

        var aliases = try Driver(Self.rules)
        _ = aliases.begin()
        #expect(aliases.part("avatar", filename: "a.jpg", type: "image/jpg", bytes: 3, sniffed: "image/jpeg").end
            == .forward)

        var tolerated = try Driver(Self.rules)
        _ = tolerated.begin()
        #expect(tolerated.part("mixed", filename: "a.png", type: "image/png", bytes: 3, sniffed: "text/html").end
            == .forward)
    }

    @Test func unsniffedTypedFileFailsClosed() throws {
        var driver = try Driver(Self.rules)
        _ = driver.begin()
        let part = driver.part("avatar", filename: "a.png", type: "image/png", bytes: 10)
        #expect(part.end.violation?.detail == "content type was not sniffed")
    }

    @Test func quarantineAction() throws {
        var driver = try Driver(Self.rules)
        _ = driver.begin()
        let decision = driver.evaluator.partBegin(index: 0, name: "doc", filename: "a.pdf",
                                                  declaredType: "application/pdf", anomalies: MultipartAnomalies())
        #expect(decision.mustHold && decision.pending == [.type])
        #expect(driver.evaluator.partData(count: 8) == .forward)  // a sniffed type describes data already counted
        guard case .quarantine(let violation) = driver.evaluator.partSniffed(type: "image/png") else {
            Issue.record("not quarantined")
            return
        }
        #expect(violation.kind == .typeNotAllowed)
        #expect(driver.kinds == ["type_not_allowed", "type_mismatch"])
        #expect(driver.evaluator.partEnd() == .quarantine(violation))
        #expect(driver.evaluator.end() == .forward)
    }

    @Test func extensionNotAllowed() throws {
        var driver = try Driver(Self.rules)
        _ = driver.begin()
        let part = driver.part("avatar", filename: "a.gif", type: "image/png")
        #expect(rejected(part.begin.action) == .extensionNotAllowed)
        #expect(part.begin.action.violation?.status == 415)
        #expect(part.begin.action.violation?.detail == ".gif not in .png .jpg .jpeg")
        var upper = try Driver(Self.rules)
        _ = upper.begin()
        #expect(upper.part("avatar", filename: "A.JPG", type: "image/jpeg").begin.action == .forward)
    }

    @Test(arguments: [
        ("../x.txt", "filename_path_separators", 400),
        ("a\u{0}.txt", "filename_control_characters", 400),
        ("x\u{202E}txt.exe", "filename_bidi_controls", 400),
        ("a.txt.", "filename_trailing_dots_spaces", 400),
        ("invoice.pdf.exe", "filename_dangerous_extension", 415),
        ("NUL.txt", "filename_reserved_name", 400),
    ])
    func filenameProblemsReject(filename: String, kind: String, status: Int) throws {
        var driver = try Driver(Self.rules)
        _ = driver.begin()
        let action = driver.part("any", filename: filename).begin.action
        #expect(action.violation?.kind.name == kind)
        #expect(action.violation?.status == status)
    }

    @Test func tooLongAndDotDotFilenames() throws {
        var long = try Driver(Self.rules)
        _ = long.begin()
        #expect(long.part("any", filename: String(repeating: "a", count: 256)).begin.action.violation?.kind
            == .filename(.tooLong))
        var dots = try Driver(Self.rules)
        _ = dots.begin()
        #expect(dots.part("lenient", filename: "../x.txt").begin.action == .forward)
        var dotDot = try Driver(Self.rules)
        _ = dotDot.begin()
        #expect(dotDot.part("lenient", filename: "..").begin.action.violation?.kind == .filename(.trailingDotsSpaces))
    }

    @Test func explicitExtensionExemptsTheDangerousList() throws {
        var driver = try Driver(Self.rules)
        _ = driver.begin()
        #expect(driver.part("svg", filename: "logo.svg").begin.action == .forward)
        var other = try Driver(Self.rules)
        _ = other.begin()
        #expect(other.part("any", filename: "logo.svg").begin.action.violation?.kind == .filename(.dangerousExtension))
    }

    @Test func sanitizeRewritesTheFilename() throws {
        var driver = try Driver(Self.rules)
        _ = driver.begin()
        let decision = driver.part("clean", filename: "C:\\Users\\me\\photo.png ").begin
        #expect(decision.action == .forward)
        #expect(decision.filename == "photo.png")
        #expect(driver.evaluator.findings.map(\.outcome) == [.sanitize, .sanitize])
        #expect(driver.kinds == ["filename_path_separators", "filename_trailing_dots_spaces"])

        var dangerous = try Driver(Self.rules)
        _ = dangerous.begin()
        let exe = dangerous.part("clean", filename: "../payload.exe").begin
        #expect(rejected(exe.action) == .filename(.dangerousExtension))
    }

    @Test func filenameAllowSkipsChecks() throws {
        var driver = try Driver(Self.rules)
        _ = driver.begin()
        #expect(driver.part("free", filename: "../../x.exe").begin.action == .forward)
    }

    @Test func noFileChosenIsFine() throws {
        var driver = try Driver(Self.rules)
        _ = driver.begin()
        let part = driver.part("avatar", filename: "", type: "application/octet-stream")
        #expect(part.end == .forward)
    }
}

/// Empty file parts (0 bytes of data), as browsers send them. "No file chosen" is `filename=""`; a named empty
/// file is `filename="leer.txt"`. Both are sniffed as `application/x-empty` by the proxy, which has no content
/// to judge: `types` and the declared type are not checked against it (docs/rules.md, "Empty file parts").
@Suite struct EvaluatorEmptyFileTests {
    static let rules = """
        # These suites judge a forwarded "no file chosen" (the default leaves it out: `empty-filename strip`).
        anomaly empty-filename allow;
        route /up {
            file photo { max 1MiB; types image/png; }
            file need { types image/png; required; }
            file plain { }
            file tolerant { types image/png; allow-type-mismatch; }
            file picky { types image/png; extensions .png; action strip; }
        }
        route /loose { unknown allow; }
        """
    static let empty = "application/x-empty"

    /// One empty part, sniffed at its end the way the proxy does it.
    private func emptyPart(_ name: String, filename: String, type: String?, path: String = "/up",
                           sniff: Bool = true) throws -> (part: (begin: PolicyEvaluator.PartDecision,
                                                                 end: PolicyEvaluator.Action), driver: Driver) {
        var driver = try Driver(Self.rules)
        _ = driver.begin("POST", path)
        let part = driver.part(name, filename: filename, type: type, sniffed: sniff ? Self.empty : nil)
        return (part, driver)
    }

    @Test(arguments: ["photo", "plain", "tolerant", "picky"])
    func noFileChosenIsForwardedWithoutFindings(name: String) throws {
        let (part, driver) = try emptyPart(name, filename: "", type: "application/octet-stream")
        #expect(part.begin.action == .forward)
        #expect(part.end == .forward)
        #expect(driver.kinds == [])
    }

    @Test func noFileChosenWithoutAnySniffIsForwarded() throws {
        let (part, driver) = try emptyPart("photo", filename: "", type: "application/octet-stream", sniff: false)
        #expect(part.end == .forward)
        #expect(driver.kinds == [])
    }

    @Test func namedEmptyFileIsNeverATypeMismatch() throws {
        // The Chromium case: `leer.txt`, 0 bytes, declared text/plain.
        let (plain, plainDriver) = try emptyPart("plain", filename: "leer.txt", type: "text/plain")
        #expect(plain.end == .forward)
        #expect(plainDriver.kinds == [])
        let (unknown, unknownDriver) = try emptyPart("x", filename: "leer.pdf", type: "application/pdf",
                                                     path: "/loose")
        #expect(unknown.end == .forward)
        #expect(unknownDriver.kinds == [])
    }

    @Test(arguments: ["photo", "tolerant", "picky"])
    func namedEmptyFileIsNotRejectedByTypes(name: String) throws {
        for type in ["image/png", "application/octet-stream", nil] as [String?] {
            let (part, driver) = try emptyPart(name, filename: "leer.png", type: type)
            #expect(part.begin.action == .forward, "declared \(type ?? "nothing")")
            #expect(part.end == .forward, "declared \(type ?? "nothing")")
            #expect(driver.kinds == [], "declared \(type ?? "nothing")")
        }
        let (unsniffed, _) = try emptyPart(name, filename: "leer.png", type: "image/png", sniff: false)
        #expect(unsniffed.end == .forward)
    }

    @Test func emptyFileKeepsItsNameAndDeclaredTypeChecks() throws {
        // The declared type and the filename are claims that exist without content: still checked.
        let (declared, _) = try emptyPart("photo", filename: "leer.txt", type: "text/plain")
        #expect(rejected(declared.begin.action) == .typeNotAllowed)
        #expect(declared.begin.action.violation?.detail == "declared text/plain not in image/png")
        let (noFile, _) = try emptyPart("photo", filename: "", type: "text/html")
        #expect(rejected(noFile.begin.action) == .typeNotAllowed)
        let (ext, extDriver) = try emptyPart("picky", filename: "leer.gif", type: "application/octet-stream")
        guard case .strip(let violation) = ext.end else { Issue.record("not stripped: \(ext.end)"); return }
        #expect(violation.kind == .extensionNotAllowed)
        #expect(extDriver.kinds == ["extension_not_allowed"])
        let (exe, _) = try emptyPart("plain", filename: "run.exe", type: "application/octet-stream")
        #expect(rejected(exe.begin.action) == .filename(.dangerousExtension))
    }

    @Test func requiredInputLeftEmptyIsMissingButAnEmptyChosenFileIsNot() throws {
        var noFile = try Driver(Self.rules)
        _ = noFile.begin()
        #expect(noFile.part("need", filename: "", type: "application/octet-stream", sniffed: Self.empty).end
            == .forward)
        let missing = noFile.evaluator.end()
        #expect(rejected(missing) == .missingRequired)
        #expect(missing.violation?.part == "need" && missing.violation?.status == 422)

        var chosen = try Driver(Self.rules)
        _ = chosen.begin()
        #expect(chosen.part("need", filename: "leer.png", type: "image/png", sniffed: Self.empty).end == .forward)
        #expect(chosen.evaluator.end() == .forward)
        #expect(chosen.kinds == [])
    }

    @Test func nonEmptyPartsAreCheckedAsBefore() throws {
        var mismatch = try Driver(Self.rules)
        _ = mismatch.begin()
        let text = mismatch.part("plain", filename: "a.txt", type: "text/plain", bytes: 3, sniffed: "image/png")
        #expect(rejected(text.end) == .typeMismatch)
        #expect(text.end.violation?.detail == "declared text/plain, sniffed image/png")

        var notAllowed = try Driver(Self.rules)
        _ = notAllowed.begin()
        let gif = notAllowed.part("photo", filename: "a.png", type: "application/octet-stream", bytes: 3,
                                  sniffed: "image/gif")
        #expect(gif.end.violation?.detail == "sniffed image/gif not in image/png")

        var tolerated = try Driver(Self.rules)
        _ = tolerated.begin()
        let html = tolerated.part("tolerant", filename: "a.png", type: "image/png", bytes: 3, sniffed: "text/html")
        #expect(rejected(html.end) == .typeNotAllowed)
        #expect(tolerated.kinds == ["type_not_allowed"])

        // An empty filename with data is a file, not "no file chosen": typed, and it satisfies no `required`.
        var nameless = try Driver(Self.rules)
        _ = nameless.begin()
        #expect(rejected(nameless.part("photo", filename: "", type: "application/octet-stream", bytes: 3,
                                       sniffed: "text/plain").end) == .typeNotAllowed)
        var namelessPNG = try Driver(Self.rules)
        _ = namelessPNG.begin()
        #expect(namelessPNG.part("need", filename: "", bytes: 3, sniffed: "image/png").end == .forward)
        #expect(rejected(namelessPNG.evaluator.end()) == .missingRequired)

        // A non-empty typed file whose content was never sniffed still fails closed.
        var unsniffed = try Driver(Self.rules)
        _ = unsniffed.begin()
        #expect(unsniffed.part("photo", filename: "", bytes: 3).end.violation?.detail
            == "content type was not sniffed")
    }

    @Test func aSniffReportedBeforeAnyDataIsNotTrusted() throws {
        // A caller that reports an (empty) sniff and then feeds data: the data was never sniffed, so it fails closed.
        var driver = try Driver(Self.rules)
        _ = driver.begin()
        _ = driver.evaluator.partBegin(index: 0, name: "photo", filename: "a.png", declaredType: "image/png",
                                       anomalies: MultipartAnomalies())
        #expect(driver.evaluator.partSniffed(type: Self.empty) == .forward)
        _ = driver.evaluator.partData(count: 3)
        let end = driver.evaluator.partEnd()
        #expect(rejected(end) == .typeNotAllowed)
        #expect(end.violation?.detail == "content type was not sniffed")
    }

    @Test func monitorModeRecordsNoTypeFindingsForEmptyParts() throws {
        var driver = try Driver("mode monitor;\n" + Self.rules)
        _ = driver.begin()
        _ = driver.part("photo", filename: "", type: "application/octet-stream", sniffed: Self.empty)
        _ = driver.part("plain", filename: "leer.txt", type: "text/plain", sniffed: Self.empty)
        _ = driver.part("need", filename: "", type: "application/octet-stream", sniffed: Self.empty)
        #expect(driver.evaluator.end() == .forward)
        #expect(driver.kinds == ["missing_required"])
    }
}

@Suite struct EvaluatorAnomalyTests {
    @Test func defaultsPerFlag() throws {
        var driver = try Driver("route /up { field a; }")
        _ = driver.begin()
        var flags = MultipartAnomalies()
        flags.insert(.dataBefore)
        #expect(driver.evaluator.anomalies(flags) == .forward)
        #expect(driver.kinds == ["anomaly_data_before"])
        var folding = MultipartAnomalies()
        folding.insert(.headerFolding)
        let part = driver.part("a", anomalies: folding)
        #expect(rejected(part.end) == .anomaly(.headerFolding))
        #expect(part.end.violation?.status == 400)
        #expect(part.end.violation?.partIndex == 0)
    }

    @Test func routeOverrideBeatsGlobalBeatsDefault() throws {
        let rules = """
            anomaly lf-line allow;
            anomaly header-folding log;
            route /strict { field a; anomaly lf-line reject; }
            route /loose { field a; }
            """
        var lf = MultipartAnomalies()
        lf.insert(.lfLine)
        var strict = try Driver(rules)
        _ = strict.begin("POST", "/strict")
        #expect(rejected(strict.evaluator.anomalies(lf)) == .anomaly(.lfLine))
        var loose = try Driver(rules)
        _ = loose.begin("POST", "/loose")
        #expect(loose.evaluator.anomalies(lf) == .forward)
        #expect(loose.evaluator.findings.isEmpty)
        var folding = MultipartAnomalies()
        folding.insert(.headerFolding)
        #expect(loose.part("a", anomalies: folding).end == .forward)
        #expect(loose.kinds == ["anomaly_header_folding"])
    }

    @Test func everyFlagRejectsWithItsOwnKindWhenSetToReject() throws {
        for flag in MultipartAnomaly.allCases {
            var driver = try Driver("anomaly \(flag.name) reject;\nroute /up { field a; }")
            _ = driver.begin()
            var flags = MultipartAnomalies()
            flags.insert(flag)
            let action = driver.evaluator.anomalies(flags)
            #expect(action.violation?.kind.name == "anomaly_" + flag.name.replacingOccurrences(of: "-", with: "_"))
            #expect(action.violation?.status == 400)
        }
    }
}

@Suite struct EvaluatorMonitorTests {
    @Test func monitorForwardsEverythingAndRecordsWhatEnforceWouldDo() throws {
        let rules = """
            mode monitor;
            route /up {
                methods POST;
                body-max 10;
                parts-max 1;
                field a { max 2; action strip; }
                file f { filename sanitize; }
            }
            """
        var driver = try Driver(rules)
        #expect(driver.begin("PUT", length: 50) == .proceed(.multipart))
        let a = driver.part("a", bytes: 3)
        #expect(a.begin.action == .forward && !a.begin.mustHold)
        #expect(a.end == .forward)
        let f = driver.part("f", filename: "../x.txt")
        #expect(f.begin.action == .forward && f.begin.filename == nil)
        let b = driver.part("b")
        #expect(b.end == .forward)
        #expect(driver.evaluator.end() == .forward)
        #expect(driver.evaluator.rejection == nil)
        #expect(driver.kinds == ["method_not_allowed", "body_too_large", "field_too_large", "too_many_parts",
                                 "filename_path_separators", "filename_dot_dot", "too_many_parts", "unknown_part"])
        #expect(driver.evaluator.findings.allSatisfy { !$0.enforced })
        #expect(driver.evaluator.findings.map(\.outcome) == [.reject, .reject, .strip, .reject, .sanitize, .sanitize,
                                                              .reject, .reject])
    }
}

/// A stripped part goes nowhere: no later check (sniffed type, declared-versus-sniffed, max) applies to it, in
/// enforce mode and, following enforce's logic, in monitor mode.
@Suite struct EvaluatorStrippedPartTests {
    static let rules = """
        route /up {
            unknown strip;
            field title;
            file doc { types image/png; max 10; action strip; }
        }
        """

    @Test(arguments: ["", "mode monitor;\n"])
    func unknownStrippedFileIsNotTypeChecked(prefix: String) throws {
        var driver = try Driver(prefix + Self.rules)
        _ = driver.begin()
        _ = driver.part("title", bytes: 3)
        let extra = driver.part("extra", filename: "x.png", type: "image/png", bytes: 20, sniffed: "text/plain")
        #expect(driver.evaluator.end() == .forward)
        #expect(driver.kinds == ["unknown_part"])
        #expect(driver.evaluator.findings.map(\.outcome) == [.strip])
        #expect(driver.evaluator.rejection == nil)
        if prefix.isEmpty {
            guard case .strip = extra.end else { Issue.record("not stripped: \(extra.end)"); return }
        }
    }

    @Test func fileStrippedForItsDeclaredTypeIsNotCheckedAgain() throws {
        var driver = try Driver(Self.rules)
        _ = driver.begin()
        let doc = driver.part("doc", filename: "r.pdf", type: "application/pdf", bytes: 50,
                              sniffed: "application/pdf")
        guard case .strip = doc.end else { Issue.record("not stripped: \(doc.end)"); return }
        #expect(driver.kinds == ["type_not_allowed"])
    }

    @Test func unknownAllowedFileMismatchNamesTheRoute() throws {
        var driver = try Driver("route /up { unknown allow; }")
        _ = driver.begin()
        let extra = driver.part("extra", filename: "x.png", type: "image/png", bytes: 20, sniffed: "application/pdf")
        #expect(rejected(extra.end) == .typeMismatch)
        #expect(driver.evaluator.findings.first?.violation.rule != nil)
    }
}

@Suite struct ViolationKindTests {
    @Test func namesAndStatuses() {
        let table: [(ViolationKind, String, Int)] = [
            (.methodNotAllowed, "method_not_allowed", 405),
            (.contentTypeNotAllowed, "content_type_not_allowed", 415),
            (.headerRequired, "header_required", 400),
            (.ambiguousPath, "ambiguous_path", 400),
            (.bodyTooLarge, "body_too_large", 413),
            (.fieldTooLarge, "field_too_large", 413),
            (.fileTooLarge, "file_too_large", 413),
            (.fieldTooSmall, "field_too_small", 422),
            (.fileTooSmall, "file_too_small", 422),
            (.tooManyParts, "too_many_parts", 413),
            (.tooManyFiles, "too_many_files", 413),
            (.tooManyFields, "too_many_fields", 413),
            (.tooManyRepeats, "too_many_repeats", 413),
            (.typeNotAllowed, "type_not_allowed", 415),
            (.sniffedNotAllowed, "sniffed_not_allowed", 415),
            (.embeddedMarkup, "embedded_markup", 415),
            (.typeMismatch, "type_mismatch", 415),
            (.extensionNotAllowed, "extension_not_allowed", 415),
            (.unknownPart, "unknown_part", 403),
            (.missingRequired, "missing_required", 422),
            (.patternMismatch, "pattern_mismatch", 422),
            (.malformedBody, "malformed_body", 400),
            (.anomaly(.headerFolding), "anomaly_header_folding", 400),
            (.anomaly(.duplicateContentDisposition), "anomaly_duplicate_content_disposition", 400),
            (.filename(.pathSeparators), "filename_path_separators", 400),
            (.filename(.dangerousExtension), "filename_dangerous_extension", 415),
            (.encodingNotSupported, "encoding_not_supported", 415),
            (.tooManyEncodings, "too_many_encodings", 415),
            (.compressionRatioExceeded, "compression_ratio_exceeded", 413),
            (.badContentEncoding, "bad_content_encoding", 400),
            (.nameCharacter, "name_character", 400),
            (.filenameCharacter, "filename_character", 400),
            (.filename(.restrictedName), "filename_restricted_name", 403),
        ]
        for (kind, name, status) in table {
            #expect(kind.name == name)
            #expect(kind.status == status)
            #expect(ViolationKind(name: name) == kind)
        }
        let names = ViolationKind.allCases.map(\.name)
        #expect(Set(names).count == names.count)
        #expect(names.count == 31 + MultipartAnomaly.allCases.count + FilenameProblem.allCases.count
            + ArchiveProblemKind.allCases.count)
    }

    @Test func mimeCompatibility() {
        #expect(MediaTypeCompatibility.compatible(declared: "image/png", sniffed: "image/png"))
        #expect(MediaTypeCompatibility.compatible(declared: "IMAGE/JPG", sniffed: "image/jpeg"))
        #expect(MediaTypeCompatibility.compatible(declared: "text/csv", sniffed: "text/plain"))
        #expect(MediaTypeCompatibility.compatible(declared: "image/svg+xml", sniffed: "application/xml"))
        #expect(MediaTypeCompatibility.compatible(
            declared: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            sniffed: "application/zip"))
        #expect(MediaTypeCompatibility.compatible(declared: "application/octet-stream", sniffed: "image/png"))
        #expect(MediaTypeCompatibility.compatible(declared: "image/png", sniffed: "application/octet-stream"))
        #expect(!MediaTypeCompatibility.compatible(declared: "image/png", sniffed: "text/plain"))
        #expect(!MediaTypeCompatibility.compatible(declared: "application/pdf", sniffed: "application/zip"))
    }
}
