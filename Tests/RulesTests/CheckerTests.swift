import Foundation
import Multipart
import Testing
@testable import Rules

@Suite struct CheckerTests {
    static let full = """
        mode monitor;
        anomaly header-folding log;
        anomaly lf-line allow;
        body-max 2MiB;
        unknown strip;

        route /api/avatar {
            methods POST PUT;
            content-types multipart/form-data application/x-www-form-urlencoded;
            body-max 10MiB;  parts-max 8;  files-max 2;  fields-max 6;
            unknown allow;
            anomaly lf-line reject;
            filename sanitize;
            allow-filename path-separators;
            field user_id  { max 64; required; pattern "^[0-9]+$"; }
            field tags     { max 1KiB; repeat 5; action strip; }
            file  avatar   { max 5MiB; required; types image/png image/*; extensions .png .JPG; action log;
                             filename reject; allow-filename trailing-dots-spaces; allow-type-mismatch; }
            file  *        { max 1MiB; types application/pdf; action quarantine; }
            field *        { max 512; }
        }
        route /other { }
        """

    @Test func everyDirectiveCompilesIntoThePolicy() throws {
        let policy = try policy(Self.full)
        #expect(policy.mode == .monitor)
        #expect(policy.anomalies[.headerFolding] == .log)
        #expect(policy.anomalies[.lfLine] == .allow)
        #expect(policy.anomalies[.duplicateHeader] == .reject)
        #expect(policy.routes.map(\.prefix) == ["/api/avatar", "/other"])

        let route = try #require(policy.route(for: "/api/avatar"))
        #expect(route.location == SourceLocation(file: "t.rules", line: 7, column: 1))
        #expect(route.methods == ["POST", "PUT"])
        #expect(route.contentTypes.map(\.description) == ["multipart/form-data", "application/x-www-form-urlencoded"])
        #expect(route.limits.bodyMax == 10 << 20)
        #expect(route.limits.partsMax == 8 && route.limits.filesMax == 2 && route.limits.fieldsMax == 6)
        #expect(route.unknown == .allow)
        #expect(route.anomalies[.lfLine] == .reject)
        #expect(route.anomalies[.headerFolding] == .log)
        #expect(route.filename == .sanitize)
        #expect(route.allowedFilenameProblems == [.pathSeparators])

        let userID = try #require(route.rule(forPart: "user_id", isFile: false))
        #expect(userID.kind == .field && userID.max == 64 && userID.required)
        #expect(userID.pattern?.source == "^[0-9]+$")
        #expect(userID.repeatLimit == 1 && userID.action == .reject)
        #expect(userID.location.description == "t.rules:15")
        #expect(userID.filename == .sanitize)

        let tags = try #require(route.rule(forPart: "tags", isFile: false))
        #expect(tags.max == 1024 && tags.repeatLimit == 5 && tags.action == .strip && !tags.required)

        let avatar = try #require(route.rule(forPart: "avatar", isFile: true))
        #expect(avatar.kind == .file && avatar.max == 5 << 20 && avatar.required && avatar.action == .log)
        #expect(avatar.types.map(\.description) == ["image/png", "image/*"])
        #expect(avatar.extensions == [".png", ".jpg"])
        #expect(avatar.filename == .reject)
        #expect(avatar.allowedFilenameProblems == [.pathSeparators, .trailingDotsSpaces])
        #expect(avatar.allowTypeMismatch)

        let otherFile = try #require(route.rule(forPart: "x", isFile: true))
        #expect(otherFile.name == nil && otherFile.action == .quarantine && otherFile.max == 1 << 20)
        let otherField = try #require(route.rule(forPart: "x", isFile: false))
        #expect(otherField.name == nil && otherField.max == 512)
        #expect(route.requiredRules.compactMap(\.name) == ["user_id", "avatar"])

        // A file under a field's name is unknown, even with `file *`.
        #expect(route.rule(forPart: "user_id", isFile: true) == nil)

        // Main-context limits are defaults for routes that set nothing.
        let other = try #require(policy.route(for: "/other"))
        #expect(other.limits.bodyMax == 2 << 20)
        #expect(other.unknown == .strip)
        #expect(other.methods == nil)
        #expect(other.contentTypes == Route.defaultContentTypes)
        #expect(other.anomalies[.lfLine] == .allow)
    }

    @Test func defaultsWhenNothingIsSet() throws {
        let policy = try policy("route /a { field f; file g; }")
        #expect(policy.mode == .enforce)
        let route = try #require(policy.route(for: "/a"))
        #expect(route.limits == RouteLimits())
        #expect(route.limits.bodyMax == 1 << 20)
        #expect(route.unknown == .reject)
        let field = try #require(route.rule(forPart: "f", isFile: false))
        #expect(field.max == 64 << 10 && field.repeatLimit == 1 && field.action == .reject)
        let file = try #require(route.rule(forPart: "g", isFile: true))
        #expect(file.max == nil && file.filename == .reject && !file.allowTypeMismatch)
        #expect(policy.route(for: "/b") == nil)
        #expect(policy.fallback.location == nil)
        #expect(policy.fallback.contentTypes.map(\.description) == ["*/*"])
    }

    @Test func sizes() {
        #expect(ByteSize.parse("0") == 0)
        #expect(ByteSize.parse("512") == 512)
        #expect(ByteSize.parse("512B") == 512)
        #expect(ByteSize.parse("2KiB") == 2048)
        #expect(ByteSize.parse("10MiB") == 10 << 20)
        #expect(ByteSize.parse("1GiB") == 1 << 30)
        #expect(ByteSize.parse("1024GiB") == 1 << 40)
        #expect(ByteSize.parse("1025GiB") == nil)
        #expect(ByteSize.parse("1TiB") == 1 << 40)
        for bad in ["", "MiB", "10MB", "10mb", "1.5MiB", "-1", "+1", "10 MiB", "99999999999999999999", "0x10"] {
            #expect(ByteSize.parse(bad) == nil, "\(bad)")
        }
        #expect(ByteSize.format(512) == "512 B")
        #expect(ByteSize.format(5 << 20) == "5 MiB")
        #expect(ByteSize.format(7_549_747) == "7.2 MiB")
        #expect(ByteSize.exceeds(7_549_747, 5 << 20) == "7.2 MiB > 5 MiB")
        #expect(ByteSize.exceeds((5 << 20) + 1, 5 << 20) == "5242881 B > 5242880 B")
    }

    @Test func numericBoundsAreInclusive() throws {
        #expect(try policy("route / { parts-max 1; files-max 0; fields-max 0; }").fallback.limits.partsMax == 1)
        #expect(try policy("route / { parts-max 100000; files-max 10000; fields-max 100000; }")
            .fallback.limits.filesMax == 10_000)
        #expect(try policy("route / { field a { repeat 10000; } }").fallback.fields[0].repeatLimit == 10_000)
        #expect(rendered("route / { parts-max 0; }") == [
            "t.rules:1:21: error: 'parts-max' must be between 1 and 100000, got 0",
        ])
        #expect(rendered("route / { files-max 10001; }") == [
            "t.rules:1:21: error: 'files-max' must be between 0 and 10000, got 10001",
        ])
        #expect(rendered("route / { field a { repeat 0; } }") == [
            "t.rules:1:28: error: 'repeat' must be between 1 and 10000, got 0",
        ])
    }

    @Test func mediaTypePatterns() throws {
        #expect(MediaTypePattern("image/*")?.matches("image/png") == true)
        #expect(MediaTypePattern("image/*")?.matches("IMAGE/PNG; q=1") == true)
        #expect(MediaTypePattern("image/*")?.matches("text/png") == false)
        #expect(MediaTypePattern("*/*")?.matches("application/json") == true)
        #expect(MediaTypePattern("*/*")?.matches("garbage") == false)
        #expect(MediaTypePattern("Image/PNG")?.matches("image/png ; charset=x") == true)
        #expect(MediaTypePattern("image/png")?.matches("image/pngx") == false)
        for bad in ["image", "*/png", "image/", "/png", "image/png; q=1", "ima*ge/png", "image/p*", "a/b/c"] {
            #expect(MediaTypePattern(bad) == nil, "\(bad)")
        }
    }
}
