/// How full the quarantine store is, as `/metrics` and `/readyz` report it.
public struct QuarantineUsage: Sendable, Equatable {
    /// Bytes of complete items (data plus sidecars) and of this process's writers in progress.
    public var bytes: Int64
    /// The cap, `--quarantine-max`.
    public var maxBytes: Int64
    /// No new item is accepted (`bytes >= maxBytes`); or a part did not fit, nothing was stored or removed
    /// since, and less than `QuarantineStore.fullMargin` is free.
    public var full: Bool

    /// Creates a usage report.
    public init(bytes: Int64, maxBytes: Int64, full: Bool) {
        self.bytes = bytes
        self.maxBytes = maxBytes
        self.full = full
    }
}
