/// One row of the directive table: where a directive may appear and what it takes (nginx style).
public struct RuleDirective: Sendable, Hashable {
    /// Where a statement sits.
    public enum Context: String, Sendable, Hashable, CaseIterable {
        /// The top level of a file.
        case main
        /// Inside `route … { }`.
        case route
        /// Inside `field … { }`.
        case field
        /// Inside `file … { }`.
        case file
    }

    /// Whether a directive carries a `{ … }` block.
    public enum Block: Sendable, Hashable {
        /// Ends in `;`.
        case none
        /// Must carry a block.
        case required
        /// May end in `;` or carry a block.
        case optional
    }

    /// The directive name.
    public let name: String
    /// The contexts it is allowed in.
    public let contexts: Set<Context>
    /// How many arguments it takes.
    public let arguments: ClosedRange<Int>
    /// Whether it carries a block.
    public let block: Block
    /// The range a numeric argument must fall in, if it takes one.
    public let bounds: ClosedRange<UInt64>?
    /// Whether it may appear only once per context.
    public let unique: Bool

    init(_ name: String, _ contexts: Set<Context>, arguments: ClosedRange<Int>, block: Block = .none,
         bounds: ClosedRange<UInt64>? = nil, unique: Bool = true) {
        self.name = name
        self.contexts = contexts
        self.arguments = arguments
        self.block = block
        self.bounds = bounds
        self.unique = unique
    }

    static let many = Int.max

    /// Every directive. Limits in the main context are defaults for every route.
    public static let table: [RuleDirective] = [
        RuleDirective("include", [.main], arguments: 1...1, unique: false),
        RuleDirective("mode", [.main, .route], arguments: 1...1),
        RuleDirective("anomaly", [.main, .route], arguments: 2...2, unique: false),
        RuleDirective("route", [.main], arguments: 1...2, block: .required, unique: false),
        RuleDirective("ambiguous-paths", [.main], arguments: 1...1),
        RuleDirective("host", [.route], arguments: 1...many),
        RuleDirective("require-header", [.route], arguments: 1...2, unique: false),
        RuleDirective("methods", [.route], arguments: 1...many),
        RuleDirective("content-types", [.route], arguments: 1...many),
        RuleDirective("body-max", [.main, .route], arguments: 1...1, bounds: 0...ByteSize.maximum),
        RuleDirective("parts-max", [.main, .route], arguments: 1...1, bounds: 1...100_000),
        RuleDirective("files-max", [.main, .route], arguments: 1...1, bounds: 0...10_000),
        RuleDirective("fields-max", [.main, .route], arguments: 1...1, bounds: 0...100_000),
        RuleDirective("unknown", [.main, .route], arguments: 1...1),
        RuleDirective("unknown-fields", [.main, .route], arguments: 1...1),
        RuleDirective("unknown-files", [.main, .route], arguments: 1...1),
        RuleDirective("upstream-body", [.main, .route], arguments: 1...1),
        RuleDirective("modified-header", [.main, .route], arguments: 1...1),
        RuleDirective("preflight", [.main, .route], arguments: 1...1),
        RuleDirective("encodings-max", [.main, .route], arguments: 1...1, bounds: 0...4),
        RuleDirective("compression-ratio-max", [.main, .route], arguments: 1...1, bounds: 1...100_000),
        RuleDirective("unknown-encoding", [.main, .route], arguments: 1...1),
        RuleDirective("part-charsets", [.main, .route], arguments: 1...many),
        RuleDirective("archive-inspect", [.main, .route, .file], arguments: 1...1),
        RuleDirective("archive-entries-max", [.main, .route, .file], arguments: 1...1, bounds: 1...1_000_000),
        RuleDirective("archive-size-max", [.main, .route, .file], arguments: 1...1, bounds: 1...ByteSize.maximum),
        RuleDirective("archive-ratio-max", [.main, .route, .file], arguments: 1...1, bounds: 1...100_000),
        RuleDirective("archive-depth-max", [.main, .route, .file], arguments: 1...1, bounds: 1...8),
        RuleDirective("archive-deny-extensions", [.main, .route, .file], arguments: 1...many),
        RuleDirective("archive-allow", [.main, .route, .file], arguments: 1...2),
        RuleDirective("reencode", [.route], arguments: 1...1),
        RuleDirective("upstream", [.route], arguments: 1...1),
        RuleDirective("field", [.route], arguments: 1...1, block: .optional, unique: false),
        RuleDirective("file", [.route], arguments: 1...1, block: .optional, unique: false),
        RuleDirective("max", [.field, .file], arguments: 1...1, bounds: 0...ByteSize.maximum),
        RuleDirective("min", [.field, .file], arguments: 1...1, bounds: 0...ByteSize.maximum),
        RuleDirective("not-empty", [.field, .file], arguments: 0...0),
        RuleDirective("required", [.field, .file], arguments: 0...0),
        RuleDirective("pattern", [.field], arguments: 1...1),
        RuleDirective("repeat", [.field, .file], arguments: 1...1, bounds: 1...10_000),
        RuleDirective("types", [.file], arguments: 1...many),
        RuleDirective("extensions", [.file], arguments: 1...many),
        RuleDirective("categories", [.file], arguments: 1...many),
        RuleDirective("labels", [.file], arguments: 1...many),
        RuleDirective("deny-embedded-markup", [.file], arguments: 0...1),
        RuleDirective("disarm", [.file], arguments: 0...1),
        RuleDirective("action", [.field, .file], arguments: 1...1),
        RuleDirective("status", [.field, .file], arguments: 1...1, bounds: 400...499),
        RuleDirective("filename", [.main, .route, .file], arguments: 1...1),
        RuleDirective("allow-filename", [.main, .route, .file], arguments: 1...many, unique: false),
        RuleDirective("allow-type-mismatch", [.main, .route, .file], arguments: 0...0),
        RuleDirective("restricted-filenames", [.main, .route, .file], arguments: 1...many, unique: false),
        RuleDirective("name-deny-chars", [.main, .route, .field, .file], arguments: 1...many),
        RuleDirective("name-allow-chars", [.main, .route, .field, .file], arguments: 1...many),
        RuleDirective("filename-deny-chars", [.main, .route, .file], arguments: 1...many),
        RuleDirective("filename-allow-chars", [.main, .route, .file], arguments: 1...many),
        RuleDirective("character-references", [.main, .route, .field, .file], arguments: 1...1),
    ]

    /// Every directive name.
    public static let names: Set<String> = Set(table.map(\.name))

    /// Looks a directive up by name.
    public static func named(_ name: String) -> RuleDirective? { table.first { $0.name == name } }
}
