import Testing
@testable import Rules

// `archive-*` directives: safe defaults everywhere, main and route defaults inherited by file rules, explicit
// relaxation, and the checker's errors.
@Suite struct ArchiveSettingsTests {
    @Test func defaultsApplyWithoutAnyDirective() throws {
        let policy = try Policy.parse("route /a { file doc; unknown allow; }")
        let route = try #require(policy.routes.first)
        for settings in [route.archive, try #require(route.files.first).archive, policy.fallback.archive] {
            #expect(settings.inspect && settings.entriesMax == 1000 && settings.ratioMax == 100)
            #expect(settings.depthMax == 2 && settings.sizeMax == 1 << 30)
            #expect(settings.denyExtensions.contains("exe") && settings.denyExtensions.contains("php"))
            #expect(!settings.allowEncrypted && !settings.allowExecutables)
        }
    }

    @Test func routeDefaultsAreInheritedAndRulesOverride() throws {
        let policy = try Policy.parse("""
        archive-ratio-max 500;
        route /a {
            archive-entries-max 10;
            file doc { archive-allow executables encrypted; archive-deny-extensions .php phtml; }
            file img { archive-inspect off; }
        }
        """)
        let route = try #require(policy.routes.first)
        #expect(route.archive.entriesMax == 10 && route.archive.ratioMax == 500)
        let doc = try #require(route.files.first { $0.name == "doc" })
        #expect(doc.archive.entriesMax == 10 && doc.archive.ratioMax == 500)
        #expect(doc.archive.allowExecutables && doc.archive.allowEncrypted)
        #expect(doc.archive.denyExtensions == ["php", "phtml"])
        let img = try #require(route.files.first { $0.name == "img" })
        #expect(!img.archive.inspect)
    }

    /// A file rule whose `types` name an executable's sniffed type lets its archives hold executables; the flag
    /// follows `types` when they change.
    @Test func typesNamingAnExecutableAllowExecutables() throws {
        let policy = try Policy.parse("""
        route /a { file kit { types application/zip application/x-elf; } file doc { types application/pdf; } }
        """)
        let route = try #require(policy.routes.first)
        var kit = try #require(route.files.first { $0.name == "kit" })
        let doc = try #require(route.files.first { $0.name == "doc" })
        #expect(kit.namesExecutable && !doc.namesExecutable)
        kit.types = [try #require(MediaTypePattern("image/png"))]
        #expect(!kit.namesExecutable)
        kit.types = [try #require(MediaTypePattern("*/*"))]
        #expect(kit.namesExecutable)
    }

    @Test func mistakesAreErrors() {
        for text in ["route /a { archive-inspect maybe; }", "route /a { archive-depth-max 0; }",
                     "route /a { file f { archive-allow everything; } }", "route /a { field f { archive-ratio-max 5; } }"] {
            let diagnostics = RuleChecker.compile(source: text, file: "t.rules").diagnostics
            #expect(diagnostics.contains { $0.severity == .error }, "\(text)")
        }
    }

    @Test func violationNamesAndStatuses() {
        #expect(ViolationKind.archive(.bomb).name == "archive_bomb")
        #expect(ViolationKind.archive(.bomb).status == 413)
        #expect(ViolationKind.archive(.traversal).name == "archive_traversal")
        #expect(ViolationKind.archive(.executableMember).status == 415)
        #expect(ViolationKind(name: "archive_too_many_entries") == .archive(.tooManyEntries))
    }
}
