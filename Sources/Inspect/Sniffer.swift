// Content sniffing for one multipart part.
//
//   part body chunks ──feed──▶ Sniffer ──(prefix full, or finish())──▶ SniffClassifier ──▶ SniffResult
//                               │ retains the first prefixLimit bytes          │
//                               │ (default 4 KiB), then ignores the rest       ├─ +Magic   fixed-offset signatures
//                               ▼                                              ├─ +Zip     OOXML / ODF / EPUB / JAR
//                           decided once, deterministically                    ├─ +Markup  HTML / SVG / XML
//                                                                              ├─ +Text    #!, UTF-8 text
//                                                                              └─ +Polyglot PHP and HTML tags anywhere
//
// The classifier always sees the same bytes (the first min(size, prefixLimit) bytes of the part),
// whatever the chunking, so the result never depends on how the body arrived.

/// A streaming content sniffer for one uploaded part.
///
/// Feed it the part's body as it streams past, in chunks of any size. It copies the first
/// `prefixLimit` bytes (default `Sniffer.defaultPrefixLimit`, 4 KiB) into storage reserved once at
/// `init`, and classifies them as soon as that prefix is full; after that `feed(_:)` returns
/// immediately without touching the bytes. For a part shorter than the prefix, call `finish()` at the
/// end of the part. The decision is made exactly once, on exactly the retained prefix, so the result
/// is independent of chunking.
///
/// ```swift
/// var sniffer = Sniffer()
/// for chunk in partBody { sniffer.feed(chunk) }   // UnsafeRawBufferPointer chunks
/// let result = sniffer.finish()                    // image/png, application/x-php, …
/// if !result.isCompatible(withDeclared: part.contentType) { /* type_mismatch */ }
/// ```
///
/// 4 KiB is enough for everything in the table: tar's `ustar` at 257, ZIP local-header names of the
/// first entries, `ftyp` compatible brands, RIFF subtypes, EBML DocType, a PE header at a typical
/// `e_lfanew`, and markup after a BOM, whitespace, an XML declaration and comments.
public struct Sniffer: Sendable {
    /// The default number of leading bytes retained and classified: 4096.
    public static let defaultPrefixLimit = 4096
    /// The smallest accepted `prefixLimit`: 512 (tar needs 262 bytes, PE headers usually sit below 512).
    public static let minimumPrefixLimit = 512
    /// The largest accepted `prefixLimit`: 64 KiB.
    public static let maximumPrefixLimit = 65536

    /// How many leading bytes this sniffer retains and classifies.
    public let prefixLimit: Int
    private var prefix: [UInt8]
    private var decided: SniffResult?

    /// Creates a sniffer retaining at most `prefixLimit` bytes (clamped to
    /// `minimumPrefixLimit...maximumPrefixLimit`). The storage is reserved here, once.
    public init(prefixLimit: Int = Sniffer.defaultPrefixLimit) {
        self.prefixLimit = min(max(prefixLimit, Sniffer.minimumPrefixLimit), Sniffer.maximumPrefixLimit)
        self.prefix = []
        self.prefix.reserveCapacity(self.prefixLimit)
    }

    /// The result, once decided: after `prefixLimit` bytes were fed or after `finish()`; nil before.
    public var result: SniffResult? { decided }

    /// True once the result is decided; further `feed(_:)` calls are no-ops.
    public var isDecided: Bool { decided != nil }

    /// How many bytes are currently retained (at most `prefixLimit`).
    public var retainedCount: Int { prefix.count }

    /// Offers the next bytes of the part. Copies at most what is missing from the prefix; once the
    /// prefix is full the result is decided and later calls return at once.
    @inline(__always)
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        guard decided == nil, bytes.count > 0 else { return }
        let take = min(prefixLimit - prefix.count, bytes.count)
        prefix.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[0..<take]))
        if prefix.count == prefixLimit { decide(complete: false) }
    }

    /// Offers the next bytes of the part (convenience for tests and small inputs).
    public mutating func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// Declares the end of the part and returns the result. Idempotent: if the prefix filled up
    /// earlier, that decision is returned unchanged. A part with no bytes sniffs as `.empty`
    /// (`application/x-empty`).
    @discardableResult
    public mutating func finish() -> SniffResult {
        if let decided { return decided }
        decide(complete: true)
        return decided ?? SniffResult(kind: .binary)
    }

    /// Forgets the current part and keeps the reserved storage, for sniffing the next part.
    public mutating func reset() {
        prefix.removeAll(keepingCapacity: true)
        decided = nil
    }

    /// Sniffs a whole buffer at once: the same as feeding it and calling `finish()`.
    public static func sniff(_ bytes: UnsafeRawBufferPointer, prefixLimit: Int = Sniffer.defaultPrefixLimit)
        -> SniffResult
    {
        var s = Sniffer(prefixLimit: prefixLimit)
        s.feed(bytes)
        return s.finish()
    }

    /// Sniffs a whole array at once.
    public static func sniff(_ bytes: [UInt8], prefixLimit: Int = Sniffer.defaultPrefixLimit) -> SniffResult {
        bytes.withUnsafeBytes { sniff($0, prefixLimit: prefixLimit) }
    }

    private mutating func decide(complete: Bool) {
        decided = prefix.withUnsafeBytes { SniffClassifier(SniffBytes($0), complete: complete).classify() }
    }
}

/// Classifies one retained prefix. `complete` is true when the prefix is the whole part (it ended
/// before the prefix filled), so a truncated trailing UTF-8 sequence is an error rather than a cut.
struct SniffClassifier {
    let bytes: SniffBytes
    let complete: Bool
    let inflatesGzip: Bool

    init(_ bytes: SniffBytes, complete: Bool, inflatesGzip: Bool = true) {
        self.bytes = bytes
        self.complete = complete
        self.inflatesGzip = inflatesGzip
    }

    /// Runs the table in a fixed order:
    ///
    /// 1. empty input;
    /// 2. `#!` at offset 0;
    /// 3. fixed-offset binary signatures (images, archives, media, executables, ZIP containers);
    /// 4. markup after an optional UTF-8 BOM and whitespace;
    /// 5. `%PDF-` within the first 1024 bytes;
    /// 6. UTF-8 text, else binary.
    ///
    /// Then the polyglot rule: if the prefix contains a PHP open tag, the kind becomes `.php` whatever
    /// matched above, and the earlier match is kept in `disguisedAs`.
    func classify() -> SniffResult {
        if bytes.count == 0 { return SniffResult(kind: .empty) }
        var interpreter: String?
        var kind: SniffKind
        if let shebang = shebangKind() {
            kind = shebang.kind
            interpreter = shebang.interpreter
        } else if let magic = magicKind() {
            kind = magic
        } else if let markup = markupKind() {
            kind = markup
        } else if bytes.find("%PDF-", to: 1024) != nil {
            kind = .pdf
        } else {
            kind = isText() ? .text : .binary
        }

        let tags = scanTags()
        var disguisedAs: SniffKind?
        if tags.php && kind != .php {
            if kind != .text && kind != .binary { disguisedAs = kind }
            kind = .php
        }
        var flags: SniffFlags = []
        if tags.html && kind.category != .markup { flags.insert(.embeddedHTML) }
        let inner = kind == .gzip && inflatesGzip ? GzipSniff.innerKind(of: bytes.raw) : nil
        return SniffResult(kind: kind, interpreter: interpreter, disguisedAs: disguisedAs, inner: inner, flags: flags)
    }
}
