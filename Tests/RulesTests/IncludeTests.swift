import Foundation
import Testing
@testable import Rules

@Suite struct IncludeTests {
    @Test func includeIsRelativeToTheIncludingFile() throws {
        let directory = try temporaryDirectory([
            "main.rules": "include \"sub/routes.rules\";\nmode monitor;\n",
            "sub/routes.rules": "include \"more.rules\";\nroute /a { field x; }\n",
            "sub/more.rules": "route /b { }\n",
        ])
        let policy = try Policy.load(paths: [directory + "/main.rules"])
        #expect(policy.mode == .monitor)
        #expect(Set(policy.routes.map(\.prefix)) == ["/a", "/b"])
        #expect(policy.route(for: "/a")?.location?.file == directory + "/sub/routes.rules")
    }

    @Test func includeGlob() throws {
        let directory = try temporaryDirectory([
            "main.rules": "include \"conf.d/*.rules\";\n",
            "conf.d/1.rules": "route /one { }\n",
            "conf.d/2.rules": "route /two { }\n",
            "conf.d/skip.txt": "nonsense\n",
        ])
        let policy = try Policy.load(paths: [directory + "/main.rules"])
        #expect(Set(policy.routes.map(\.prefix)) == ["/one", "/two"])
    }

    @Test func includeCycleIsReportedAtTheInclude() throws {
        let directory = try temporaryDirectory([
            "a.rules": "mode enforce;\ninclude \"b.rules\";\n",
            "b.rules": "\n\n  include \"a.rules\";\n",
        ])
        let a = directory + "/a.rules"
        let b = directory + "/b.rules"
        #expect(RuleChecker.check(paths: [a]).map(\.description) == [
            "\(b):3:11: error: include cycle: \(a) -> \(b) -> \(a)",
        ])
    }

    @Test func selfIncludeIsACycle() throws {
        let directory = try temporaryDirectory(["a.rules": "include \"a.rules\";\n"])
        let a = directory + "/a.rules"
        #expect(RuleChecker.check(paths: [a]).map(\.description) == ["\(a):1:9: error: include cycle: \(a) -> \(a)"])
    }

    @Test func missingIncludeAndMissingFile() throws {
        let directory = try temporaryDirectory(["a.rules": "mode enforce;\ninclude \"nope.rules\";\n"])
        #expect(RuleChecker.check(paths: [directory + "/a.rules"]).map(\.description) == [
            "\(directory)/a.rules:2:9: error: include file not found: '\(directory)/nope.rules'",
        ])
        #expect(RuleChecker.check(paths: [directory + "/gone.rules"]).map(\.description) == [
            "\(directory)/gone.rules:1:1: error: cannot read '\(directory)/gone.rules': no such file or directory",
        ])
    }

    @Test func diamondIncludeLoadsEachFileOnce() throws {
        let directory = try temporaryDirectory([
            "a.rules": "include \"b.rules\";\ninclude \"c.rules\";\n",
            "b.rules": "include \"common.rules\";\n",
            "c.rules": "include \"common.rules\";\n",
            "common.rules": "route /x { }\n",
        ])
        #expect(RuleChecker.check(paths: [directory + "/a.rules"]).isEmpty)
    }

    @Test func directoryMeansItsRuleFilesSorted() throws {
        let directory = try temporaryDirectory([
            "b.rules": "route /b { }\n",
            "a.rules": "mode monitor;\n",
            "c.txt": "not rules\n",
        ])
        let policy = try Policy.load(paths: [directory])
        #expect(policy.mode == .monitor)
        #expect(policy.routes.map(\.prefix) == ["/b"])
        #expect(RuleLoader.ruleFiles(in: directory) == [directory + "/a.rules", directory + "/b.rules"])
    }

    @Test func aPolicyCompilesAgainFromItsSourcesWhateverTheDiskHoldsNow() throws {
        let directory = try temporaryDirectory([
            "main.rules": "include \"conf.d/*.rules\";\nmode monitor;\n",
            "conf.d/1.rules": "route /one { field a; }\n",
            "conf.d/2.rules": "include \"../shared/x.rules\";\n",
            "shared/x.rules": "route /two { }\n",
            "more/b.rules": "route /b { }\n",
            "more/a.rules": "route /a { }\n",
        ])
        let paths = [directory + "/main.rules", directory + "/more"]
        let policy = try Policy.load(paths: paths)
        // The disk changes: a file broken, one removed, one added.
        try "bogus;\n".write(toFile: directory + "/conf.d/1.rules", atomically: true, encoding: .utf8)
        try FileManager.default.removeItem(atPath: directory + "/shared/x.rules")
        try "route /c { }\n".write(toFile: directory + "/more/c.rules", atomically: true, encoding: .utf8)
        #expect(throws: PolicyLoadError.self) { try Policy.load(paths: paths) }
        let again = try Policy.load(paths: paths, from: policy.sources)
        #expect(again == policy)
        #expect(again.routes.map(\.prefix) == ["/one", "/two", "/a", "/b"])
        // A path the sources never held is missing, as on a disk without it.
        #expect(throws: PolicyLoadError.self) { try Policy.load(paths: [directory + "/other.rules"], from: policy.sources) }
    }

    @Test func diagnosticsAcrossFilesNameTheirFile() throws {
        let directory = try temporaryDirectory([
            "a.rules": "route /x { }\n",
            "b.rules": "\nroute /x/ { }\n",
        ])
        #expect(RuleChecker.check(paths: [directory]).map(\.description) == [
            "\(directory)/b.rules:2:7: error: route '/x/' is shadowed by route '/x' at \(directory)/a.rules:1 "
                + "(both normalise to '/x')",
        ])
    }
}

@Suite struct RuleFilesTests {
    @Test func everyShippedRuleFileIsClean() throws {
        let directory = repositoryRoot() + "/rules"
        let files = RuleLoader.ruleFiles(in: directory)
        #expect(files.count >= 4)
        for name in ["avatar.rules", "documents.rules", "catch-all.rules", "demo.rules"] {
            #expect(files.contains(directory + "/" + name), "\(name) missing")
        }
        for file in files {
            #expect(RuleChecker.check(paths: [file]) == [], "\(file)")
        }
        #expect(RuleChecker.check(paths: [directory]) == [])
    }

    @Test func demoPolicyShape() throws {
        let policy = try Policy.load(paths: [repositoryRoot() + "/rules/demo.rules"])
        let route = try #require(policy.route(for: "/upload"))
        let image = try #require(route.rule(forPart: "image", isFile: true))
        #expect(image.max == 5 << 20)
        #expect(route.rule(forPart: "caption", isFile: false) != nil)
    }
}

@Suite struct DocumentationTests {
    @Test func rulesExamplesInTheReferenceAreClean() throws {
        let text = try String(contentsOfFile: repositoryRoot() + "/docs/rules.md", encoding: .utf8)
        let blocks = text.components(separatedBy: "```")
        let examples = stride(from: 1, to: blocks.count, by: 2).map { blocks[$0] }
            .filter { $0.contains("route /") && !$0.contains("…") }
        #expect(!examples.isEmpty)
        for example in examples {
            #expect(RuleChecker.compile(source: example, file: "doc.rules").diagnostics == [], "\(example)")
        }
    }

    @Test func everyDirectiveAndFlagIsDocumented() throws {
        let text = try String(contentsOfFile: repositoryRoot() + "/docs/rules.md", encoding: .utf8)
        for directive in RuleDirective.names { #expect(text.contains("`\(directive)"), "\(directive)") }
        for kind in ViolationKind.allCases where !kind.name.hasPrefix("anomaly_") {
            #expect(text.contains("`\(kind.name)`"), "\(kind.name)")
        }
        for flag in MultipartAnomalyNames.all { #expect(text.contains("`\(flag)`"), "\(flag)") }
    }
}
