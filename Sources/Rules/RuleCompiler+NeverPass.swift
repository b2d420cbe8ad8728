/// `formwall check` warnings for a route that can never pass, or a rule that can never be satisfied.
/// They are warnings, not errors: the policy is valid and loads; it just refuses what it seems to ask for.
extension RuleCompiler {
    /// Methods whose requests carry no form body (RFC 9110 defines no meaning for one).
    static let bodylessMethods: Set<String> = ["GET", "HEAD", "DELETE", "OPTIONS", "TRACE", "CONNECT"]

    /// Common file extensions and the media types they stand for: enough to tell that a `types` list and an
    /// `extensions` list have nothing in common. Extensions or types not in it are never warned about.
    static let extensionTypes: [String: [String]] = [
        "png": ["image/png"], "jpg": ["image/jpeg"], "jpeg": ["image/jpeg"], "jpe": ["image/jpeg"],
        "gif": ["image/gif"], "webp": ["image/webp"], "bmp": ["image/bmp"], "tif": ["image/tiff"],
        "tiff": ["image/tiff"], "svg": ["image/svg+xml"], "ico": ["image/vnd.microsoft.icon", "image/x-icon"],
        "heic": ["image/heic"], "heif": ["image/heif"], "avif": ["image/avif"],
        "pdf": ["application/pdf"], "zip": ["application/zip"], "gz": ["application/gzip"],
        "tgz": ["application/gzip"], "txt": ["text/plain"], "csv": ["text/csv"], "json": ["application/json"],
        "xml": ["application/xml", "text/xml"], "html": ["text/html"], "htm": ["text/html"],
        "doc": ["application/msword"], "xls": ["application/vnd.ms-excel"],
        "ppt": ["application/vnd.ms-powerpoint"],
        "docx": ["application/vnd.openxmlformats-officedocument.wordprocessingml.document"],
        "xlsx": ["application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"],
        "pptx": ["application/vnd.openxmlformats-officedocument.presentationml.presentation"],
        "odt": ["application/vnd.oasis.opendocument.text"],
        "ods": ["application/vnd.oasis.opendocument.spreadsheet"],
        "mp3": ["audio/mpeg"], "wav": ["audio/wav", "audio/x-wav"], "ogg": ["audio/ogg"], "mp4": ["video/mp4"],
        "webm": ["video/webm"], "mov": ["video/quicktime"],
    ]

    mutating func warnNeverPass(_ route: Route, text: String, location: SourceLocation) {
        let label: (PartRule) -> String = { "\($0.kind.rawValue) '\($0.name ?? "*")'" }
        if route.limits.filesMax == 0 {
            for rule in route.files + [route.otherFiles].compactMap({ $0 }) {
                warn(at: rule.location, "\(label(rule)) can never arrive: the route's files-max is 0")
            }
        }
        let required = route.requiredRules
        let fields = required.count { $0.kind == .field }
        let files = required.count { $0.kind == .file }
        if fields > route.limits.fieldsMax {
            warn(at: location, "route '\(text)' can never pass: it requires \(fields) fields but fields-max is "
                + "\(route.limits.fieldsMax)")
        }
        if files > route.limits.filesMax, route.limits.filesMax > 0 {
            warn(at: location, "route '\(text)' can never pass: it requires \(files) files but files-max is "
                + "\(route.limits.filesMax)")
        }
        if let methods = route.methods, !methods.isEmpty, methods.allSatisfy(Self.bodylessMethods.contains) {
            for rule in required {
                warn(at: rule.location, "required \(label(rule)) can never arrive: route '\(text)' allows only "
                    + "\(methods.joined(separator: " ")), which carry no form body")
            }
        }
        for rule in route.files + [route.otherFiles].compactMap({ $0 }) where Self.typesMissExtensions(rule) {
            warn(at: rule.location, "\(label(rule)): types \(rule.types.map(\.description).joined(separator: " ")) "
                + "and extensions \(rule.extensions.joined(separator: " ")) have no type in common: only a file "
                + "whose name contradicts its content can pass")
        }
    }

    /// Whether every extension and every type pattern is in the table and no extension's type is allowed.
    static func typesMissExtensions(_ rule: PartRule) -> Bool {
        guard !rule.types.isEmpty, !rule.extensions.isEmpty else { return false }
        let known = Set(extensionTypes.values.joined())
        func allows(_ pattern: MediaTypePattern, _ type: String) -> Bool {
            pattern.matches(type) || MediaTypeCompatibility.canonical(pattern.description) == type
                || MediaTypeCompatibility.canonical(type).map { pattern.matches($0) } == true
        }
        // A pattern the table cannot speak for (`*/*`, an unlisted type) may match anything.
        guard rule.types.allSatisfy({ pattern in pattern.type != "*" && known.contains { allows(pattern, $0) } })
        else { return false }
        var extensionTypes: [String] = []
        for ext in rule.extensions {
            guard let last = ext.split(separator: ".").last, let types = Self.extensionTypes[String(last)] else {
                return false
            }
            extensionTypes += types
        }
        return !extensionTypes.contains { type in rule.types.contains { allows($0, type) } }
    }

    mutating func warn(at location: SourceLocation, _ message: String) {
        diagnostics.append(Diagnostic(.warning, at: location, message))
    }
}
