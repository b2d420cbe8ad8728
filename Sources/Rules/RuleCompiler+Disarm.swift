/// `formwall check` warning for a file rule with `disarm` whose `types` admit files `disarm` does not rewrite: they
/// pass unchanged, with whatever they carry (docs/rules.md, *Disarm*).
extension RuleCompiler {
    mutating func warnDisarmedTypes(_ route: Route) {
        for rule in route.files + [route.otherFiles].compactMap({ $0 }) where rule.disarm != nil {
            let passing = Self.typesNotDisarmed(rule.types)
            guard !passing.isEmpty else { continue }
            warn(at: rule.location, "\(rule.kind.rawValue) '\(rule.name ?? "*")': disarm rewrites only JPEG, PNG, "
                + "GIF, WebP and SVG; \(passing.joined(separator: " ")) would pass unchanged")
        }
    }

    /// What `types` admits that `disarm` does not rewrite: exact types outside `DisarmMode.rewrittenTypes`, and the
    /// known image types a wildcard matches; `*/*` is named as it is.
    static func typesNotDisarmed(_ types: [MediaTypePattern]) -> [String] {
        var out: [String] = []
        for pattern in types {
            if pattern.type == "*" {
                out.append(pattern.description)
            } else if pattern.subtype == "*" {
                out += DisarmMode.unchangedImageTypes.filter { pattern.matches($0) && !out.contains($0) }
                if pattern.type != "image" { out.append(pattern.description) }
            } else {
                let type = MediaTypeCompatibility.canonical(pattern.description) ?? pattern.description
                if !DisarmMode.rewrittenTypes.contains(type) && !out.contains(type) { out.append(type) }
            }
        }
        return out
    }
}
