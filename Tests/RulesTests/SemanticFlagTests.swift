import Multipart
import Testing
import TestRandom
@testable import Rules

/// One request's parts through an evaluator; returns each part's final action and the findings' kind/outcome.
private func run(_ source: String, _ parts: [(name: String, filename: String?, type: String?)],
                 values: [String: [UInt8]] = [:]) throws
    -> (actions: [String], findings: [String], flags: [[String]]) {
    var ev = PolicyEvaluator(policy: try policy(source))
    _ = ev.begin(method: "POST", path: "/up", contentType: "multipart/form-data; boundary=x", contentLength: nil)
    var actions: [String] = []
    var flags: [[String]] = []
    for (i, p) in parts.enumerated() {
        let d = ev.partBegin(index: i, name: p.name, filename: p.filename, declaredType: p.type,
                             anomalies: MultipartAnomalies())
        flags.append(d.flags.names)
        var action = d.action
        if action == .forward, p.filename == nil {
            var text = UTF8Validity()
            text.feed(values[p.name] ?? Array("v".utf8))
            action = ev.fieldText(text)
            if action == .forward, d.pending.contains(.value) {
                action = ev.fieldValue(values[p.name] ?? Array("v".utf8))
            }
        }
        if case .reject = action {
            actions.append("reject")
            break
        }
        let end = ev.partEnd()
        switch end {
        case .forward: actions.append("forward")
        case .strip: actions.append("strip")
        case .quarantine: actions.append("quarantine")
        case .reject: actions.append("reject")
        }
        if case .reject = end { break }
    }
    return (actions, ev.findings.map { "\($0.violation.kind.name):\($0.outcome.rawValue)" }, flags)
}

private func field(_ name: String) -> (name: String, filename: String?, type: String?) { (name, nil, nil) }
private func file(_ name: String, _ filename: String) -> (name: String, filename: String?, type: String?) {
    (name, filename, nil)
}

@Suite struct FormNameMeaningTests {
    @Test(arguments: [
        ("user", "plain"), ("user_role", "plain"), ("é", "plain"), ("a]", "rewritten"), ("user.role", "rewritten"),
        ("user role", "rewritten"), (" user", "rewritten"), ("a[b]", "brackets"), ("a[]", "brackets"),
        ("a[b][c]", "brackets"), ("a[b.c d]", "brackets"), ("a[b", "rewritten"), ("a[b]c", "rewritten"),
        ("[a]", "rewritten"), ("a[b[c]]", "rewritten"), ("a.b[c]", "rewritten"), ("a[b]]", "rewritten"),
        ("a[b][", "rewritten"), ("", "plain"),
    ])
    func shapes(_ name: String, _ expected: String) {
        let shape: String
        switch FormNameMeaning.shape(of: name) {
        case .plain: shape = "plain"
        case .brackets: shape = "brackets"
        case .rewritten: shape = "rewritten"
        }
        #expect(shape == expected, "\(name)")
    }

    @Test func pathsAreWhatPHPBuilds() {
        #expect(FormNameMeaning.path(of: "user[role][0]") == ["user", "role", "0"])
        #expect(FormNameMeaning.path(of: "a[]") == ["a", ""])
        #expect(FormNameMeaning.path(of: "user") == ["user"])
        #expect(FormNameMeaning.path(of: "a.b[c]") == ["a.b[c]"])
    }

    @Test(arguments: [
        ("a%22b", true), ("a%2", false), ("100%", false), ("%zz", false), ("%0a", true), ("a\"b", true),
        ("a\\b", true), ("a\rb", true), ("plain.txt", false), ("50%off%2Fx", true),
    ])
    func percentEscapes(_ text: String, _ expected: Bool) {
        #expect(FormNameMeaning.hasPercentEscape(text) == expected, "\(text)")
    }

    @Test(arguments: [
        ("text/plain", false), ("text/plain; charset=utf-8", false), ("text/plain; charset=\"UTF-8\"", false),
        ("text/plain;charset=US-ASCII", false), ("text/plain; charset=ISO-8859-1", false),
        ("text/plain; charset=iso-8859-15", false), ("text/plain; charset=\"Windows-1252\"", false),
        ("text/plain; charset=utf-16", true), ("text/plain; format=flowed; charset=cp037", true),
        ("text/plain; charset=utf8", true), ("text/plain; charset = \"latin1\"", true),
        ("text/plain; charset=utf-7", true), ("text/plain; charset=utf-", true), ("text/plain; charset=", true),
        ("text/plain; charset=shift-jis", true),
    ])
    func charsets(_ type: String, _ foreign: Bool) {
        #expect(FormNameMeaning.hasForeignCharset(type) == foreign, "\(type)")
    }

    /// Every byte string of a generated set is judged as Swift's own UTF-8 decoder judges it, whole and cut at
    /// every split point.
    @Test func utf8ValidityAgreesWithTheStandardLibraryAtEverySplit() {
        var rng = SystemRandomNumberGenerator()
        let interesting: [UInt8] = [0x00, 0x41, 0x7F, 0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xA0, 0x9F, 0xED,
                                    0xEF, 0xF0, 0x90, 0x8F, 0xF4, 0xF5, 0xFF, 0xA9, 0xC3]
        for _ in 0..<3000 {
            let length = Int.random(in: 0...6, using: &rng)
            let bytes = (0..<length).map { _ in interesting.randomElement(using: &rng) ?? 0 }
            let expected = String(validating: bytes, as: UTF8.self) != nil
            for split in 0...bytes.count {
                var v = UTF8Validity()
                v.feed(Array(bytes[..<split]))
                v.feed(Array(bytes[split...]))
                #expect(v.isComplete == expected, "\(bytes) split at \(split)")
            }
        }
    }
}

@Suite struct SemanticFlagTests {
    let open = "route /up { unknown allow; }"

    @Test func repeatedUnknownFieldsAreLoggedByDefaultSoCheckboxGroupsWork() throws {
        let r = try run(open, [field("color"), field("color"), file("docs", "a.txt"), file("docs", "b.txt")])
        #expect(r.actions == ["forward", "forward", "forward", "forward"])
        #expect(r.findings == ["anomaly_duplicate_name:log", "anomaly_duplicate_name:log"])
        #expect(r.flags[1] == ["duplicate-name"] && r.flags[0].isEmpty)
    }

    @Test func aRouteCanRejectOrStripRepeatedNames() throws {
        let rejected = try run("route /up { unknown allow; anomaly duplicate-name reject; }",
                               [field("role"), field("role")])
        #expect(rejected.actions == ["forward", "reject"])
        let stripped = try run("route /up { unknown allow; anomaly duplicate-name strip; }",
                               [field("role"), field("other"), field("role"), field("role")])
        #expect(stripped.actions == ["forward", "forward", "strip", "strip"])
    }

    @Test func aRuledNameRepeatsOnlyAsItsRuleSaysAndTheRepetitionIsAudited() throws {
        let strict = try run("route /up { field role; }", [field("role"), field("role")])
        #expect(strict.actions == ["forward", "reject"])
        #expect(strict.findings == ["too_many_repeats:reject"])
        let allowed = try run("route /up { file docs { repeat 3; } }", [file("docs", "a.txt"), file("docs", "b.txt")])
        #expect(allowed.actions == ["forward", "forward"])
        #expect(allowed.findings == ["anomaly_duplicate_name:log"])
        let silent = try run("route /up { anomaly duplicate-name allow; file docs { repeat 3; } }",
                             [file("docs", "a.txt"), file("docs", "b.txt")])
        #expect(silent.findings.isEmpty)
    }

    @Test func aPlainNameAndABracketNameOnItCollideInEitherOrder() throws {
        let r1 = try run(open, [field("a"), field("a[b]")])
        #expect(r1.actions == ["forward", "reject"])
        #expect(r1.findings.last == "anomaly_name_collision:reject")
        let r2 = try run(open, [field("a[b]"), field("a")])
        #expect(r2.actions == ["forward", "reject"])
        let r3 = try run(open, [field("a[b]"), field("a[c]"), field("ab")])
        #expect(r3.actions == ["forward", "forward", "forward"])
    }

    @Test func bracketNamesAreLoggedAndRewrittenNamesRejected() throws {
        let brackets = try run(open, [field("user[email]")])
        #expect(brackets.actions == ["forward"] && brackets.findings == ["anomaly_name_brackets:log"])
        for name in ["user.role", "user role", " user", "a[b", "a[b]c", "[a]"] {
            let r = try run(open, [field(name)])
            #expect(r.actions == ["reject"], "\(name)")
            #expect(r.findings == ["anomaly_name_rewritten:reject"], "\(name)")
        }
        let allowed = try run("route /up { unknown allow; anomaly name-rewritten allow; }", [field("user.role")])
        #expect(allowed.actions == ["forward"] && allowed.findings.isEmpty)
    }

    @Test func percentEscapesCharsetsAndTheCharsetField() throws {
        #expect(try run(open, [field("a%41")]).findings == ["anomaly_percent_escape:reject"])
        #expect(try run(open, [file("f", "a%22.txt")]).findings == ["anomaly_percent_escape:reject"])
        #expect(try run(open, [("t", nil, "text/plain; charset=UTF-7")]).findings
            == ["anomaly_part_charset:reject"])
        #expect(try run(open, [("t", nil, "text/plain; charset=UTF-8")]).findings.isEmpty)
        #expect(try run(open, [field("_charset_")]).findings == ["anomaly_charset_field:reject"])
        let stripped = try run("route /up { unknown allow; anomaly charset-field strip; }",
                               [field("_charset_"), field("a")])
        #expect(stripped.actions == ["strip", "forward"])
    }

    /// CRS 922110's allowed charsets (`tx.allowed_request_content_type_charset`) pass by default; the rest, and
    /// everything a route's `part-charsets` leaves out, is `part-charset`.
    @Test func partCharsetsHaveCRSDefaultsAndARouteCanNarrowThem() throws {
        for charset in ["utf-8", "UTF-8", "us-ascii", "iso-8859-1", "ISO-8859-15", "windows-1252", "\"utf-8\""] {
            #expect(try run(open, [("t", nil, "text/plain; charset=" + charset)]).findings.isEmpty, "\(charset)")
        }
        for charset in ["utf-7", "utf-16", "ibm037", "shift-jis", "latin1", "utf8", "utf-"] {
            #expect(try run(open, [("t", nil, "text/plain; charset=" + charset)]).findings
                == ["anomaly_part_charset:reject"], "\(charset)")
        }
        let narrow = "part-charsets utf-8; route /up { unknown allow; } "
            + "route /wide { unknown allow; part-charsets utf-8 shift_jis; }"
        #expect(try run(narrow, [("t", nil, "text/plain; charset=iso-8859-1")]).findings
            == ["anomaly_part_charset:reject"])
        #expect(try run(narrow, [("t", nil, "text/plain; charset=utf-8")]).findings.isEmpty)
        var wide = PolicyEvaluator(policy: try policy(narrow))
        _ = wide.begin(method: "POST", path: "/wide", contentType: "multipart/form-data; boundary=x",
                       contentLength: nil)
        #expect(wide.partBegin(index: 0, name: "t", filename: nil, declaredType: "text/plain; charset=Shift_JIS",
                               anomalies: MultipartAnomalies()).action == .forward)
    }

    /// The HTML standard's `_charset_` field, which a browser fills with the form's encoding, passes when its value
    /// is an allowed charset (CRS 922100 judges it against the same list, whole: `utf-` is refused).
    @Test func theCharsetFieldIsJudgedByItsValue() throws {
        for value in ["utf-8", "UTF-8", "iso-8859-1", "windows-1252"] {
            let r = try run(open, [field("_charset_"), field("a")], values: ["_charset_": Array(value.utf8)])
            #expect(r.actions == ["forward", "forward"] && r.findings.isEmpty, "\(value)")
        }
        for value in ["UTF-7", "ibm037", "utf-", "", "utf-8 ", "utf-16"] {
            let r = try run(open, [field("_charset_")], values: ["_charset_": Array(value.utf8)])
            #expect(r.actions == ["reject"] && r.findings == ["anomaly_charset_field:reject"], "\(value)")
        }
        let r = try run(open, [field("_CHARSET_")], values: ["_CHARSET_": Array("utf-7".utf8)])
        #expect(r.findings == ["anomaly_charset_field:reject"])
        // A file named `_charset_` is refused at its head, whatever it holds.
        #expect(try run(open, [file("_charset_", "a.txt")]).findings == ["anomaly_charset_field:reject"])
        // The route's list decides, and `allow` turns the check off.
        let narrow = try run("part-charsets iso-8859-1; route /up { unknown allow; }", [field("_charset_")],
                             values: ["_charset_": Array("utf-8".utf8)])
        #expect(narrow.findings == ["anomaly_charset_field:reject"])
        let allowed = try run("route /up { unknown allow; anomaly charset-field allow; }", [field("_charset_")],
                              values: ["_charset_": Array("utf-7".utf8)])
        #expect(allowed.actions == ["forward"] && allowed.findings.isEmpty)
        let logged = try run("route /up { unknown allow; anomaly charset-field log; }", [field("_charset_")],
                             values: ["_charset_": Array("utf-7".utf8)])
        #expect(logged.actions == ["forward"] && logged.findings == ["anomaly_charset_field:log"])
    }

    @Test func aCharsetFieldIsHeldWhenItMayBeStrippedAndFailsClosedUnjudged() throws {
        var ev = PolicyEvaluator(policy: try policy("route /up { unknown allow; anomaly charset-field strip; }"))
        _ = ev.begin(method: "POST", path: "/up", contentType: "multipart/form-data; boundary=x", contentLength: nil)
        let held = ev.partBegin(index: 0, name: "_charset_", filename: nil, declaredType: nil,
                                anomalies: MultipartAnomalies())
        #expect(held.pending.contains(.value) && held.mustHold)
        #expect(ev.valueFlags(Array("utf-7".utf8)).names == ["charset-field"])
        #expect(ev.valueFlags(Array("utf-8".utf8)).isEmpty)
        // The proxy calls `fieldValue` unless the value outgrew what it holds: such a value names no charset.
        #expect(ev.partEnd() != .forward)
        #expect(ev.findings.map(\.violation.detail) == ["anomaly charset-field: _charset_ value was not checked"])
    }

    @Test func partCharsetsAreValidated() {
        #expect(rendered("part-charsets \"utf 8\";").first?.hasPrefix(
            "t.rules:1:15: error: invalid charset name 'utf 8' for 'part-charsets'") == true)
        #expect(rendered("route /up { part-charsets utf-8; file f { part-charsets utf-8; } }")
            == ["t.rules:1:43: error: 'part-charsets' is not allowed in file context (allowed in: main, route)"])
        #expect(rendered("part-charsets utf-8 UTF-7;")
            == ["t.rules:1:21: warning: 'part-charsets' allows UTF-7, which writes ASCII characters as other bytes: "
                + "a value in it can carry markup or quotes that no check reading ASCII sees"])
        #expect(rendered("part-charsets utf-8 iso-8859-2 koi8-r;").isEmpty)
        #expect(rendered("part-charsets;").count == 1)
    }

    @Test func invalidUTF8ValuesAreRejectedByDefault() throws {
        let r = try run(open, [field("a"), field("b")], values: ["b": [0x61, 0xFF]])
        #expect(r.actions == ["forward", "reject"])
        #expect(r.findings == ["anomaly_invalid_utf8_value:reject"])
        let logged = try run("route /up { unknown allow; anomaly invalid-utf8-value log; }", [field("b")],
                             values: ["b": [0xC3]])
        #expect(logged.actions == ["forward"] && logged.findings == ["anomaly_invalid_utf8_value:log"])
        // Files are bytes: never judged as text.
        var ev = PolicyEvaluator(policy: try policy(open))
        _ = ev.begin(method: "POST", path: "/up", contentType: "multipart/form-data; boundary=x", contentLength: nil)
        _ = ev.partBegin(index: 0, name: "f", filename: "a.bin", declaredType: nil, anomalies: MultipartAnomalies())
        var invalid = UTF8Validity()
        invalid.feed([0xFF])
        #expect(ev.fieldText(invalid) == .forward)
    }

    @Test func namesOutsideASCIIEmptyNamesAndPrototypeKeysAreRejected() throws {
        for name in ["prénom", "\u{FF52}ole", "a\u{00A0}b", "\u{FEFF}a", "a\u{200B}b"] {
            #expect(try run(open, [field(name)]).findings == ["anomaly_non_ascii_name:reject"], "\(name)")
        }
        #expect(try run(open, [field("")]).findings == ["anomaly_empty_name:reject"])
        for name in ["__proto__", "constructor", "a[__proto__][x]", "a[prototype]"] {
            #expect(try run(open, [field(name)]).findings.contains("anomaly_prototype_name:reject"), "\(name)")
        }
        #expect(try run(open, [field("proto"), field("a[constructors]")]).actions == ["forward", "forward"])
    }

    @Test func noFileChosenIsStrippedByDefault() throws {
        let r = try run(open, [file("avatar", ""), field("a")])
        #expect(r.actions == ["strip", "forward"])
        #expect(r.findings == ["anomaly_empty_filename:strip"])
        let kept = try run("route /up { unknown allow; anomaly empty-filename allow; }", [file("avatar", "")])
        #expect(kept.actions == ["forward"] && kept.findings.isEmpty)
    }

    @Test func aFieldAndAFileOfOneNameCollide() throws {
        #expect(try run(open, [field("doc"), file("doc", "x.txt")]).actions == ["forward", "reject"])
        #expect(try run(open, [file("doc", "x.txt"), field("doc")]).findings.last == "anomaly_name_collision:reject")
    }

    @Test func appendedAndNumberedKeysAndNestedArraysCollide() throws {
        #expect(try run(open, [field("a[]"), field("a[0]")]).actions == ["forward", "reject"])
        #expect(try run(open, [field("a[0]"), field("a[]")]).actions == ["forward", "reject"])
        #expect(try run(open, [field("a[b]"), field("a[b][c]")]).actions == ["forward", "reject"])
        #expect(try run(open, [field("a[b][c]"), field("a[b]")]).actions == ["forward", "reject"])
        let fine = try run(open, [field("a[0]"), field("a[1]"), field("b[x]"), field("b[y]"), field("c[]")])
        #expect(fine.actions == ["forward", "forward", "forward", "forward", "forward"])
    }

    @Test func aBodyFieldNamedLikeAQueryParameterIsRejected() throws {
        var ev = PolicyEvaluator(policy: try policy(open))
        _ = ev.begin(method: "POST", path: "/up?role=admin&%78y=1&%72ole2=1", contentType: "multipart/form-data; boundary=x",
                     contentLength: nil)
        for name in ["role", "xy", "role2", "role[a]"] {
            var probe = ev
            let d = probe.partBegin(index: 0, name: name, filename: nil, declaredType: nil,
                                    anomalies: MultipartAnomalies())
            #expect(d.action.violation?.kind == .anomaly(.queryCollision), "\(name)")
        }
        let other = ev.partBegin(index: 0, name: "user", filename: nil, declaredType: nil, anomalies: MultipartAnomalies())
        #expect(other.action == .forward)
        #expect(PolicyEvaluator.queryNames(of: "/p?a=1&b&=3&c=%zz&d%&e+f") == ["a", "b", "c", "d%", "e f"])
    }

    @Test func aValueStartingWithAByteOrderMarkIsRejected() throws {
        let r = try run(open, [field("a")], values: ["a": [0xEF, 0xBB, 0xBF, 0x61]])
        #expect(r.findings == ["anomaly_byte_order_mark:reject"])
        let split = UTF8Validity.self
        var v = split.init()
        v.feed([0xEF])
        v.feed([0xBB, 0xBF])
        #expect(v.startsWithByteOrderMark && v.isComplete)
        var later = split.init()
        later.feed([0x61, 0xEF, 0xBB, 0xBF])
        #expect(!later.startsWithByteOrderMark)
    }

    @Test func anEmptyMultipartBodyIsMalformed() throws {
        var ev = PolicyEvaluator(policy: try policy(open))
        let decision = ev.begin(method: "POST", path: "/up", contentType: "multipart/form-data; boundary=x",
                                contentLength: 0)
        guard case .reject(let v) = decision else {
            Issue.record("expected a rejection, got \(decision)")
            return
        }
        #expect(v.kind == .malformedBody && v.status == 400)
        var urlencoded = PolicyEvaluator(policy: try policy(open))
        #expect(urlencoded.begin(method: "POST", path: "/up", contentType: "application/x-www-form-urlencoded",
                                 contentLength: 0) == .proceed(.none))
    }

    @Test func monitorModeRecordsWithoutActing() throws {
        let r = try run("mode monitor; route /up { unknown allow; }", [field("user.role")])
        #expect(r.actions == ["forward"])
        #expect(r.findings == ["anomaly_name_rewritten:reject"])
    }

    @Test func stripIsRefusedForFlagsThatCannotStripAPartInTime() {
        let diagnostics = rendered("anomaly lf-line strip;\nanomaly invalid-utf8-value strip;\nanomaly duplicate-name strip;")
        #expect(diagnostics.count == 2, "\(diagnostics)")
        #expect(diagnostics.allSatisfy { $0.contains("'strip' is not an action for anomaly") })
    }
}

/// `FormNameRegistry` against a reference that keeps every table as a hash table (as the registry did before it
/// kept a body's first names in a list): the same findings for random bodies of plain and bracketed names, long
/// enough to pass the list's limit.
@Suite struct FormNameRegistryTests {
    private struct Reference {
        var paths: [String: Bool] = [:]
        var prefixes: Set<String> = []
        var appendParents: Set<String> = []
        var numericParents: Set<String> = []

        mutating func register(_ path: [Substring], isFile: Bool) -> (repeated: Bool, collides: Bool) {
            func join(_ p: ArraySlice<Substring>) -> String { p.joined(separator: "\u{0}") }
            let joined = join(path[...])
            var repeated = false
            var collides = prefixes.contains(joined)
            if let first = paths[joined] {
                if first == isFile { repeated = true } else { collides = true }
            } else {
                paths[joined] = isFile
            }
            for end in path.indices.dropFirst() {
                let prefix = join(path[..<end])
                if paths[prefix] != nil { collides = true }
                prefixes.insert(prefix)
            }
            if path.count > 1, let last = path.last {
                let parent = join(path.dropLast())
                if last.isEmpty {
                    if numericParents.contains(parent) { collides = true }
                    appendParents.insert(parent)
                } else if last.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
                    if appendParents.contains(parent) { collides = true }
                    numericParents.insert(parent)
                }
            }
            return (repeated, collides)
        }
    }

    @Test func agreesWithHashTablesPastTheListLimit() {
        let names = (0..<30).map { "n\($0)" } + ["a", "a[b]", "a[]", "a[0]", "a[b][c]", "b[]", "b[1]", "a.b", "x"]
        var generator = SplitMix64(seed: 0x4E4D_E5)
        var repeats = 0
        var collisions = 0
        for _ in 0..<400 {
            var registry = FormNameRegistry()
            var reference = Reference()
            for _ in 0..<Int.random(in: 1...60, using: &generator) {
                let name = names[Int.random(in: 0..<names.count, using: &generator)]
                let isFile = Int.random(in: 0..<5, using: &generator) == 0
                let reading = FormNameMeaning.read(name)
                let found = registry.register(reading, isFile: isFile)
                let expected = reference.register(reading.path, isFile: isFile)
                #expect(found == expected, "\(name)")
                if found.repeated { repeats += 1 }
                if found.collides { collisions += 1 }
            }
        }
        #expect(repeats > 1_000 && collisions > 1_000)
    }
}
