import Multipart

/// Why a request or part broke the policy, with a stable snake_case `name` and an HTTP status.
public enum ViolationKind: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// 405: the method is not in the route's `methods`.
    case methodNotAllowed
    /// 415: the request Content-Type is not in the route's `content-types`.
    case contentTypeNotAllowed
    /// 400: a field named by the route's `require-header` is missing or a value does not match its regex.
    case headerRequired
    /// 400: backends read the request path as another route's path than formwall does (`ambiguous-paths`).
    case ambiguousPath
    /// 413: the body (Content-Length or bytes received) exceeds `body-max`.
    case bodyTooLarge
    /// 413: a field's value exceeds its `max`.
    case fieldTooLarge
    /// 413: a file's data exceeds its `max`.
    case fileTooLarge
    /// 422: a field's value is below its `min` (or empty under `not-empty`).
    case fieldTooSmall
    /// 422: a file's data is below its `min` (or empty under `not-empty`).
    case fileTooSmall
    /// 413: more parts than `parts-max`.
    case tooManyParts
    /// 413: more file parts than `files-max`.
    case tooManyFiles
    /// 413: more field parts than `fields-max`.
    case tooManyFields
    /// 413: a name given more times than its rule's `repeat`.
    case tooManyRepeats
    /// 415: the file's type (declared or sniffed) is not in `types`.
    case typeNotAllowed
    /// 415: the sniffed category or label is not in `categories` / `labels`.
    case sniffedNotAllowed
    /// 415: the content also carries HTML, script or server-side markup (PHP, ASP, JSP, ColdFusion, SSI), with
    /// `deny-embedded-markup`.
    case embeddedMarkup
    /// 415: the declared Content-Type contradicts the sniffed type.
    case typeMismatch
    /// 415: the filename's extension is not in `extensions`.
    case extensionNotAllowed
    /// 403: a part named by no rule, with `unknown reject`.
    case unknownPart
    /// 422: a `required` field or file never arrived.
    case missingRequired
    /// 422: a field value does not match its `pattern`.
    case patternMismatch
    /// 400: the body could not be parsed as the declared form type.
    case malformedBody
    /// 415: a Content-Encoding Formwall cannot decode.
    case encodingNotSupported
    /// 415: more stacked content codings than `encodings-max`.
    case tooManyEncodings
    /// 413: a compressed body that expands more than `compression-ratio-max` times.
    case compressionRatioExceeded
    /// 400: a gzip or deflate body that does not decode (corrupt, truncated, or bytes after its end).
    case badContentEncoding
    /// 400: the multipart parser reported this anomaly and its action is `reject`.
    case anomaly(MultipartAnomaly)
    /// An archive file part broke an archive limit (docs/rules.md, "Archives").
    case archive(ArchiveProblemKind)
    /// 403: the antivirus found malware in a file part.
    case malware
    /// 422: a file to `disarm` could not be rewritten (a broken image, or an SVG with active content under
    /// `disarm reject`).
    case disarmFailed
    /// 400 (415 for `dangerous-extension`, 403 for `restricted-name`): a filename problem.
    case filename(FilenameProblem)
    /// 400: a field or part name holds a character its `name-deny-chars` / `name-allow-chars` list refuses.
    case nameCharacter
    /// 400: a filename holds a character its `filename-deny-chars` / `filename-allow-chars` list refuses.
    case filenameCharacter
    /// 500: the proxy drove the evaluator or a body stage out of order (a Formwall bug, never the
    /// client's); it ends that one request instead of the process.
    case internalError

    /// Every kind, anomalies and filename problems expanded.
    public static var allCases: [ViolationKind] {
        [.methodNotAllowed, .contentTypeNotAllowed, .headerRequired, .ambiguousPath, .bodyTooLarge, .fieldTooLarge,
         .fileTooLarge, .fieldTooSmall,
         .fileTooSmall, .tooManyParts,
         .tooManyFiles, .tooManyFields, .tooManyRepeats, .typeNotAllowed, .sniffedNotAllowed, .embeddedMarkup, .typeMismatch, .extensionNotAllowed,
         .unknownPart, .missingRequired, .patternMismatch, .malformedBody, .encodingNotSupported, .tooManyEncodings,
         .compressionRatioExceeded, .badContentEncoding, .malware, .disarmFailed, .nameCharacter,
         .filenameCharacter, .internalError]
            + MultipartAnomaly.allCases.map(ViolationKind.anomaly)
            + FilenameProblem.allCases.map(ViolationKind.filename)
            + ArchiveProblemKind.allCases.map(ViolationKind.archive)
    }

    /// The stable machine name used in audit records and response bodies.
    public var name: String {
        switch self {
        case .methodNotAllowed: return "method_not_allowed"
        case .contentTypeNotAllowed: return "content_type_not_allowed"
        case .headerRequired: return "header_required"
        case .ambiguousPath: return "ambiguous_path"
        case .bodyTooLarge: return "body_too_large"
        case .fieldTooLarge: return "field_too_large"
        case .fileTooLarge: return "file_too_large"
        case .fieldTooSmall: return "field_too_small"
        case .fileTooSmall: return "file_too_small"
        case .tooManyParts: return "too_many_parts"
        case .tooManyFiles: return "too_many_files"
        case .tooManyFields: return "too_many_fields"
        case .tooManyRepeats: return "too_many_repeats"
        case .typeNotAllowed: return "type_not_allowed"
        case .sniffedNotAllowed: return "sniffed_not_allowed"
        case .embeddedMarkup: return "embedded_markup"
        case .typeMismatch: return "type_mismatch"
        case .extensionNotAllowed: return "extension_not_allowed"
        case .unknownPart: return "unknown_part"
        case .missingRequired: return "missing_required"
        case .patternMismatch: return "pattern_mismatch"
        case .malformedBody: return "malformed_body"
        case .encodingNotSupported: return "encoding_not_supported"
        case .tooManyEncodings: return "too_many_encodings"
        case .compressionRatioExceeded: return "compression_ratio_exceeded"
        case .badContentEncoding: return "bad_content_encoding"
        case .anomaly(let flag): return "anomaly_" + flag.name.replacingHyphens()
        case .filename(let problem): return "filename_" + problem.name.replacingHyphens()
        case .archive(let problem): return "archive_" + problem.rawValue.replacingHyphens()
        case .malware: return "malware"
        case .disarmFailed: return "disarm_failed"
        case .nameCharacter: return "name_character"
        case .filenameCharacter: return "filename_character"
        case .internalError: return "internal_error"
        }
    }

    /// Looks a kind up by its stable name.
    public init?(name: String) {
        guard let found = ViolationKind.allCases.first(where: { $0.name == name }) else { return nil }
        self = found
    }

    /// The HTTP status the proxy answers with when this kind rejects a request.
    public var status: Int {
        switch self {
        case .methodNotAllowed: return 405
        case .bodyTooLarge, .fieldTooLarge, .fileTooLarge, .tooManyParts, .tooManyFiles, .tooManyFields,
             .tooManyRepeats, .compressionRatioExceeded:
            return 413
        case .encodingNotSupported, .tooManyEncodings:
            return 415
        case .contentTypeNotAllowed, .typeNotAllowed, .sniffedNotAllowed, .embeddedMarkup, .typeMismatch, .extensionNotAllowed,
             .filename(.dangerousExtension):
            return 415
        case .unknownPart, .filename(.restrictedName): return 403
        case .missingRequired, .patternMismatch, .fieldTooSmall, .fileTooSmall: return 422
        case .malformedBody, .anomaly, .filename, .headerRequired, .ambiguousPath, .badContentEncoding, .nameCharacter,
             .filenameCharacter:
            return 400
        case .archive(let problem): return problem.status
        case .malware: return 403
        case .disarmFailed: return 422
        case .internalError: return 500
        }
    }

    /// The stable name.
    public var description: String { name }
}

extension String {
    func replacingHyphens() -> String { String(map { $0 == "-" ? "_" : $0 }) }
}
