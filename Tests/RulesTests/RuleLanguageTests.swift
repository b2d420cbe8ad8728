import Multipart
import Testing
@testable import Rules

private func rejection(_ action: PolicyEvaluator.Action) -> (kind: String, status: Int)? {
    if case .reject(let violation) = action { return (violation.kind.name, violation.status) }
    return nil
}

private func isForward(_ action: PolicyEvaluator.Action) -> Bool { action == .forward }

// MARK: - 1. Sizes

@Suite struct SizeUnitTests {
    @Test func nginxStyleSingleLetterUnitsAreBinary() {
        #expect(ByteSize.parse("10k") == 10 << 10)
        #expect(ByteSize.parse("10K") == 10 << 10)
        #expect(ByteSize.parse("10m") == 10 << 20)
        #expect(ByteSize.parse("10M") == 10 << 20)
        #expect(ByteSize.parse("1g") == 1 << 30)
        #expect(ByteSize.parse("1G") == 1 << 30)
        #expect(ByteSize.parse("1t") == 1 << 40)
    }

    @Test func binaryUnitsAreCaseInsensitive() {
        #expect(ByteSize.parse("10mib") == 10 << 20)
        #expect(ByteSize.parse("10MIB") == 10 << 20)
        #expect(ByteSize.parse("2kib") == 2 << 10)
        #expect(ByteSize.parse("512b") == 512)
    }

    @Test func decimalLookingUnitsAreRefused() {
        for bad in ["10MB", "10mb", "10kB", "1GB", "10Mb", "10 m", "1.5m", "m", "10x"] {
            #expect(ByteSize.parse(bad) == nil, "\(bad)")
        }
    }

    @Test func theMaximumIsOneTiBInclusiveWhateverTheUnit() {
        #expect(ByteSize.parse("1TiB") == 1 << 40)
        #expect(ByteSize.parse("1tib") == 1 << 40)
        #expect(ByteSize.parse("1024GiB") == 1 << 40)
        #expect(ByteSize.parse("1099511627776") == 1 << 40)
        #expect(ByteSize.parse("1099511627777") == nil)
        #expect(ByteSize.parse("2TiB") == nil)
        #expect(ByteSize.parse("1025g") == nil)
        #expect(ByteSize.format(1 << 40) == "1 TiB")
    }

    @Test func sizesInRuleFiles() throws {
        let route = try policy("route / { body-max 1TiB; field a { max 10k; } file b { max 10m; } }").fallback
        #expect(route.limits.bodyMax == 1 << 40)
        #expect(route.fields[0].max == 10 << 10)
        #expect(route.files[0].max == 10 << 20)
    }
}

// MARK: - 2. Size floors

@Suite struct SizeFloorTests {
    static let rules = """
        anomaly empty-filename allow;
        route /up {
            file doc { min 1KiB; }
            file photo { not-empty; }
            field note { min 3; }
            field title { not-empty; }
        }
        """

    @Test func aFileBelowItsMinIsFileTooSmall() throws {
        var request = try PolicyRequest(Self.rules)
        let verdict = rejection(request.part("doc", filename: "a.txt", bytes: 1023))
        #expect(verdict?.kind == "file_too_small" && verdict?.status == 422)
        #expect(request.evaluator.findings.first?.violation.limit == 1024)
        var enough = try PolicyRequest(Self.rules)
        #expect(isForward(enough.part("doc", filename: "a.txt", bytes: 1024)))
    }

    @Test func aFieldBelowItsMinIsFieldTooSmall() throws {
        var request = try PolicyRequest(Self.rules)
        #expect(rejection(request.part("note", bytes: 2))?.kind == "field_too_small")
        var enough = try PolicyRequest(Self.rules)
        #expect(isForward(enough.part("note", bytes: 3)))
    }

    @Test func notEmptyRefusesAnEmptyFileButNotNoFileChosen() throws {
        var empty = try PolicyRequest(Self.rules)
        #expect(rejection(empty.part("photo", filename: "leer.png", bytes: 0))?.kind == "file_too_small")
        // filename="" with no data is a file input left empty: not a file, so no floor applies to it.
        var none = try PolicyRequest(Self.rules)
        #expect(isForward(none.part("photo", filename: "", bytes: 0)))
        #expect(isForward(none.part("doc", filename: "", bytes: 0)))
        var data = try PolicyRequest(Self.rules)
        #expect(isForward(data.part("photo", filename: "a.png", bytes: 1)))
    }

    @Test func notEmptyOnAField() throws {
        var request = try PolicyRequest(Self.rules)
        #expect(rejection(request.part("title", bytes: 0))?.kind == "field_too_small")
    }

    @Test func floorsFollowTheRuleAction() throws {
        var request = try PolicyRequest("route /up { file doc { min 10; action strip; } }")
        let decision = request.evaluator.partBegin(index: 0, name: "doc", filename: "a.txt", declaredType: nil,
                                                   anomalies: MultipartAnomalies())
        #expect(decision.mustHold)
        _ = request.evaluator.partData(count: 5)
        if case .strip(let violation) = request.evaluator.partEnd() {
            #expect(violation.kind.name == "file_too_small")
        } else {
            Issue.record("not stripped")
        }
        #expect(isForward(request.evaluator.end()))
    }

    @Test func theNewKindsAreInTheTable() {
        #expect(ViolationKind(name: "file_too_small")?.status == 422)
        #expect(ViolationKind(name: "field_too_small")?.status == 422)
    }

    @Test func aMinAboveTheMaxIsAWarning() {
        #expect(rendered("route / { file a { min 2KiB; max 1KiB; } }") == [
            "t.rules:1:11: warning: file 'a' min 2 KiB is above its max 1 KiB: it can never pass",
        ])
    }
}

// MARK: - 3. Unknown fields and files

@Suite struct UnknownKindTests {
    @Test func fieldsAndFilesAreHandledSeparately() throws {
        let rules = "route /up { unknown-fields allow; unknown-files reject; }"
        var field = try PolicyRequest(rules)
        #expect(isForward(field.part("comment", bytes: 3)))
        #expect(field.kinds.isEmpty)
        var file = try PolicyRequest(rules)
        #expect(rejection(file.part("x", filename: "x.txt", bytes: 3))?.kind == "unknown_part")
    }

    @Test func theSpecificSettingBeatsUnknown() throws {
        let rules = "route /up { unknown reject; unknown-files strip; }"
        var file = try PolicyRequest(rules)
        if case .strip(let violation) = file.part("x", filename: "x.txt", bytes: 3) {
            #expect(violation.kind.name == "unknown_part")
        } else {
            Issue.record("not stripped")
        }
        #expect(rejection(file.part("f", bytes: 1))?.kind == "unknown_part")
    }

    @Test func aRoutesUnknownBeatsTheMainContextsSpecificSetting() throws {
        let source = "unknown-fields allow;\nroute /up { unknown reject; }\nroute /other { }"
        var up = try PolicyRequest(source)
        #expect(rejection(up.part("f", bytes: 1))?.kind == "unknown_part")
        var other = try PolicyRequest(source, path: "/other")
        #expect(isForward(other.part("f", bytes: 1)))
        #expect(rejection(other.part("g", filename: "g.txt", bytes: 1))?.kind == "unknown_part")
        let compiled = try policy(source)
        #expect(compiled.route(for: "/up")?.unknownAction(isFile: false) == .reject)
        #expect(compiled.route(for: "/other")?.unknownAction(isFile: false) == .allow)
        #expect(compiled.fallback.unknownAction(isFile: false) == .reject)
        // The implicit fallback never forwards a form part unfiltered.
        var fallback = try PolicyRequest(source, path: "/nowhere")
        #expect(rejection(fallback.part("f", bytes: 1))?.kind == "unknown_part")
    }

    @Test func badKeywords() {
        #expect(rendered("route / { unknown-files keep; }") == [
            "t.rules:1:25: error: unknown action 'keep': expected reject, strip or allow",
        ])
    }
}

// MARK: - 4. Per-route mode

@Suite struct RouteModeTests {
    static let rules = """
        mode enforce;
        route /up { mode monitor; field a { max 1; } }
        route /strict { field a { max 1; } }
        """

    @Test func aRoutesModeBeatsTheMainOne() throws {
        var monitored = try PolicyRequest(Self.rules)
        #expect(isForward(monitored.part("a", bytes: 5)))
        #expect(monitored.evaluator.mode == .monitor)
        #expect(monitored.evaluator.wouldReject?.kind.name == "field_too_large")
        var enforced = try PolicyRequest(Self.rules, path: "/strict")
        #expect(rejection(enforced.part("a", bytes: 5))?.kind == "field_too_large")
    }

    @Test func anEnforcingRouteUnderAMonitoringPolicy() throws {
        let rules = "mode monitor;\nroute /up { mode enforce; field a { max 1; } }\nroute /x { field a { max 1; } }"
        var enforced = try PolicyRequest(rules)
        #expect(rejection(enforced.part("a", bytes: 5))?.kind == "field_too_large")
        var monitored = try PolicyRequest(rules, path: "/x")
        #expect(isForward(monitored.part("a", bytes: 5)))
    }
}

// MARK: - 5. Status overrides

@Suite struct StatusOverrideTests {
    @Test func aRulesStatusReplacesTheViolationsStatus() throws {
        let rules = """
            route /up {
                file doc { max 10; types application/pdf; status 400; }
                field a { required; status 409; }
                field b { max 1; }
            }
            """
        var large = try PolicyRequest(rules)
        let tooLarge = rejection(large.part("doc", filename: "a.pdf", bytes: 11))
        #expect(tooLarge?.kind == "file_too_large" && tooLarge?.status == 400)
        var typed = try PolicyRequest(rules)
        #expect(rejection(typed.part("doc", filename: "a.pdf", bytes: 5, sniffed: "image/png"))?.status == 400)
        var missing = try PolicyRequest(rules)
        let missed = rejection(missing.evaluator.end())
        #expect(missed?.kind == "missing_required" && missed?.status == 409)
        var other = try PolicyRequest(rules)
        #expect(rejection(other.part("b", bytes: 2))?.status == 413)
    }

    @Test func routeLevelViolationsKeepTheirStatus() throws {
        var request = try PolicyRequest("route /up { files-max 0; file doc { status 400; } }")
        let verdict = rejection(request.part("doc", filename: "a.pdf", bytes: 1))
        #expect(verdict?.kind == "too_many_files" && verdict?.status == 413)
    }

    @Test func statusBounds() {
        #expect(rendered("route / { file a { status 500; } }") == [
            "t.rules:1:27: error: 'status' must be between 400 and 499, got 500",
        ])
        #expect(rendered("route / { field a { status 399; } }") == [
            "t.rules:1:28: error: 'status' must be between 400 and 499, got 399",
        ])
    }
}
