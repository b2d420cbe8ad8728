/// Facts noticed while sniffing that do not change the reported kind.
public struct SniffFlags: OptionSet, Sendable, Hashable {
    /// The raw flag bits.
    public let rawValue: UInt8

    /// Creates a flag set from raw bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// A non-markup result whose prefix contains an HTML tag a browser would act on
    /// (`<script`, `<html`, `<body`, `<iframe`, `<svg`, `<object`, `<embed`, `<img`, case-insensitive,
    /// followed by whitespace, `>` or `/`). Informational: old content-sniffing browsers rendered such
    /// "images" as HTML, and a policy may choose to reject them.
    public static let embeddedHTML = SniffFlags(rawValue: 1 << 0)
}

/// What a part's leading bytes really are.
///
/// Produced by `Sniffer`. `kind` determines `mimeType`, `label` and `category`; the remaining
/// fields add detail: the interpreter of a `#!` script, the format a PHP polyglot was disguised
/// as, and the content of a gzip stream.
public struct SniffResult: Sendable, Hashable, CustomStringConvertible {
    /// The row of the sniffing table that matched.
    public let kind: SniffKind
    /// For `#!` scripts: the interpreter's base name (`bash`, `python3`; after `env` and its options).
    public let interpreter: String?
    /// For PHP found inside another format (`GIF89a<?php …`): the kind the magic bytes claimed.
    public let disguisedAs: SniffKind?
    /// For gzip: the kind of the first inflated bytes (`tar` for a `.tar.gz`), when they could be inflated.
    public let inner: SniffKind?
    /// Additional observations; see `SniffFlags`.
    public let flags: SniffFlags

    /// Creates a result; normally only `Sniffer` does this.
    public init(
        kind: SniffKind,
        interpreter: String? = nil,
        disguisedAs: SniffKind? = nil,
        inner: SniffKind? = nil,
        flags: SniffFlags = []
    ) {
        self.kind = kind
        self.interpreter = interpreter
        self.disguisedAs = disguisedAs
        self.inner = inner
        self.flags = flags
    }

    /// The sniffed MIME type, e.g. `image/png`.
    public var mimeType: String { kind.mimeType }
    /// The short stable label, e.g. `png`.
    public var label: String { kind.label }
    /// The family of the sniffed type.
    public var category: SniffCategory { kind.category }

    /// `label`, plus detail: `php (disguised as gif)`, `shell-script (bash)`, `gzip (tar)`.
    public var description: String {
        var s = kind.label
        if let interpreter { s += " (\(interpreter))" }
        if let disguisedAs { s += " (disguised as \(disguisedAs.label))" }
        if let inner { s += " (\(inner.label))" }
        if flags.contains(.embeddedHTML) { s += " [embedded-html]" }
        return s
    }
}
