import Multipart

extension MultipartAnomaly {
    /// The action taken for this flag when no `anomaly` directive names it.
    ///
    /// Strict on anything two parsers could read differently; `log` only for input that is legal
    /// or that canonical re-encoding makes harmless (preamble, epilogue, quoted boundary,
    /// delimiter look-alikes inside data, extra part headers, which are not forwarded). Of the semantic flags,
    /// `name-brackets` is logged (every PHP and Rails form uses it, and a bracket name reaches each framework
    /// whole), and `duplicate-name` too: it only concerns parts no rule names, which a route lets through with
    /// `unknown allow`, and multiple-file inputs and checkbox groups repeat names (docs/rules.md,
    /// "Names, charsets and duplicates").
    public var defaultAction: AnomalyAction {
        switch self {
        case .boundaryQuoted, .dataBefore, .dataAfter, .delimiterLookalike, .unknownPartHeader,
             .duplicateName, .nameBrackets:
            return .log
        case .boundaryWhitespace, .headerFolding, .lfLine, .missingSemicolon, .invalidQuoting, .backslashEscape,
             .duplicateContentDisposition, .duplicateHeader, .duplicateParameter, .unknownParameter,
             .dispositionNotFormData, .missingContentDisposition, .filenameMismatch, .invalidExtendedValue,
             .controlCharacters, .invalidUTF8, .contentTransferEncoding, .missingName, .nestedMultipart,
             .nameCollision, .nameRewritten, .percentEscape, .partCharset, .charsetField, .invalidUTF8Value,
             .nonASCIIName, .emptyName, .prototypeName, .queryCollision, .byteOrderMark:
            return .reject
        case .emptyFilename:
            // "No file chosen" is ordinary browser traffic; no framework reads it like another, and leaving the
            // part out is read alike by all (the field is absent).
            return .strip
        }
    }

    /// Whether `anomaly <flag> strip;` is allowed: the flags found from a part's name, filename or type when it
    /// begins, so the part can be left out before any of its bytes went upstream, and `charset-field`, whose
    /// `_charset_` field is then held until its value is judged.
    public var canStrip: Bool {
        switch self {
        case .duplicateName, .nameCollision, .nameBrackets, .nameRewritten, .percentEscape, .partCharset,
             .charsetField, .nonASCIIName, .emptyName, .emptyFilename, .prototypeName:
            return true
        default: return false
        }
    }
}

/// The action for every anomaly flag: explicit settings over the built-in defaults.
public struct AnomalyActions: Sendable, Hashable {
    /// Flags set explicitly, with the location of the directive that set them.
    public private(set) var explicit: [MultipartAnomaly: AnomalyAction] = [:]

    /// No explicit settings: every flag has its `defaultAction`.
    public init() {}

    /// The action for `flag`.
    public subscript(flag: MultipartAnomaly) -> AnomalyAction {
        get { explicit[flag] ?? flag.defaultAction }
        set { explicit[flag] = newValue }
    }

    /// These actions with `overrides`' explicit settings on top.
    public func overridden(by overrides: AnomalyActions) -> AnomalyActions {
        var result = self
        result.explicit.merge(overrides.explicit) { _, new in new }
        return result
    }
}
