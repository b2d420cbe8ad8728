/// A problem found in a rule file, with the position it refers to.
///
/// Renders as `file:line:col: error: message`, the format compilers use, so editors and CI can
/// link straight to it.
public struct Diagnostic: Sendable, Hashable, CustomStringConvertible {
    /// How serious a diagnostic is.
    public enum Severity: String, Sendable, Hashable {
        /// The policy cannot be loaded.
        case error
        /// Suspicious but valid; the policy still loads.
        case warning
    }

    /// The file the problem is in.
    public var file: String
    /// The 1-based line.
    public var line: Int
    /// The 1-based column, counted in Unicode scalars.
    public var column: Int
    /// Error or warning.
    public var severity: Severity
    /// A one-line explanation.
    public var message: String

    /// Creates a diagnostic.
    public init(file: String, line: Int, column: Int, severity: Severity, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.severity = severity
        self.message = message
    }

    /// Creates a diagnostic at `location`.
    public init(_ severity: Severity, at location: SourceLocation, _ message: String) {
        self.init(file: location.file, line: location.line, column: location.column, severity: severity,
                  message: message)
    }

    /// `file:line:col: error: message`.
    public var description: String { "\(file):\(line):\(column): \(severity.rawValue): \(message)" }
}

/// The error thrown by `Policy.load(paths:)`: the policy had at least one error diagnostic.
public struct PolicyLoadError: Error, Sendable, CustomStringConvertible {
    /// Every diagnostic found, warnings included, in file order.
    public let diagnostics: [Diagnostic]

    /// Creates the error from the checker's diagnostics.
    public init(diagnostics: [Diagnostic]) { self.diagnostics = diagnostics }

    /// The diagnostics, one per line.
    public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
}
