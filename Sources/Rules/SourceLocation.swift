/// A position in a rule file: `file:line:column`, 1-based.
public struct SourceLocation: Sendable, Hashable, CustomStringConvertible {
    /// The file's path as it was given (or as resolved for an `include`).
    public var file: String
    /// The 1-based line.
    public var line: Int
    /// The 1-based column, counted in Unicode scalars.
    public var column: Int

    /// Creates a location.
    public init(file: String, line: Int, column: Int) {
        self.file = file
        self.line = line
        self.column = column
    }

    /// `file:line`, the form used in violations and audit records.
    public var description: String { "\(file):\(line)" }
}
