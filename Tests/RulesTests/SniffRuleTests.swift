import Multipart
import Testing
@testable import Rules

/// `categories`, `labels` and `deny-embedded-markup`: file rules on what the sniffer found.
@Suite struct SniffRuleTests {
    private static let rules = """
    route /up {
        file photo { types image/*; categories image; labels png gif; deny-embedded-markup; }
        file doc { categories document archive; }
    }
    """

    /// Drives one file part through `partSniffed(_:)` and returns its final action and finding kinds.
    private func judge(_ name: String, type: String, _ content: SniffedContent,
                       source: String = rules) throws -> (PolicyEvaluator.Action, [String]) {
        var evaluator = PolicyEvaluator(policy: try policy(source))
        _ = evaluator.begin(method: "POST", path: "/up", contentType: "multipart/form-data; boundary=x",
                            contentLength: nil)
        let decision = evaluator.partBegin(index: 0, name: name, filename: "f.bin", declaredType: type,
                                           anomalies: MultipartAnomalies())
        #expect(decision.pending.contains(.type))
        _ = evaluator.partData(count: 10)
        var action = evaluator.partSniffed(content)
        if action == .forward { action = evaluator.partEnd() }
        return (action, evaluator.findings.map(\.violation.kind.name))
    }

    private func status(_ action: PolicyEvaluator.Action) -> Int? {
        if case .reject(let violation) = action { return violation.status }
        return nil
    }

    @Test func cleanImagePasses() throws {
        let png = SniffedContent(mimeType: "image/png", label: "png", category: "image")
        #expect(try judge("photo", type: "image/png", png).0 == .forward)
    }

    @Test func imageCarryingScriptIsEmbeddedMarkup() throws {
        let gif = SniffedContent(mimeType: "image/gif", label: "gif", category: "image",
                                 embeddedMarkup: "an HTML tag")
        let (action, kinds) = try judge("photo", type: "image/gif", gif)
        #expect(status(action) == 415)
        #expect(kinds == ["embedded_markup"])
        // Without the directive the same content passes: the rule is opt-in.
        let lax = "route /up { file photo { types image/*; } }"
        #expect(try judge("photo", type: "image/gif", gif, source: lax).0 == .forward)
    }

    @Test func categoryAndLabelAllowLists() throws {
        let webp = SniffedContent(mimeType: "image/webp", label: "webp", category: "image")
        let (action, kinds) = try judge("photo", type: "image/webp", webp)
        #expect(status(action) == 415)
        #expect(kinds == ["sniffed_not_allowed"])
        let pdf = SniffedContent(mimeType: "application/pdf", label: "pdf", category: "document")
        #expect(try judge("doc", type: "application/pdf", pdf).0 == .forward)
        let elf = SniffedContent(mimeType: "application/x-executable", label: "elf", category: "executable")
        #expect(try judge("doc", type: "application/octet-stream", elf).1 == ["sniffed_not_allowed"])
    }

    /// Facts the caller did not give fail closed against a rule that names them.
    @Test func missingFactsFailClosed() throws {
        let bare = SniffedContent(mimeType: "application/pdf")
        #expect(try status(judge("doc", type: "application/pdf", bare).0) == 415)
    }

    @Test func namesAreValidatedWithSuggestions() {
        #expect(rendered("route / { file a { categories imag; } }") == [
            "t.rules:1:31: error: unknown sniffed category 'imag'; did you mean 'image'?",
        ])
        #expect(rendered("route / { file a { labels pnj; } }") == [
            "t.rules:1:27: error: unknown sniffed label 'pnj'; did you mean 'png'?",
        ])
        #expect(rendered("route / { field a { deny-embedded-markup; } }").first?.contains("not allowed") == true)
        #expect(rendered("route / { file a { deny-embedded-markup short; } }") == [
            "t.rules:1:41: error: unknown deny-embedded-markup option 'short': expected php-short-tags",
        ])
        #expect(rendered("route / { file a { deny-embedded-markup php-short-tags; } }") == [])
    }
}
