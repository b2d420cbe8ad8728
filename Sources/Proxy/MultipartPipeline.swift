import Inspect
import Multipart

// A request body as a chain of small stages, the way nginx chains body filters:
//
//   chunk ──► decode (MultipartParser) ──► observe (size, SHA-256 per part) ──► encode (MultipartEncoder) ──► sink
//
// The pipeline is pure: it is fed byte slices and hands canonical output bytes to a sink closure. Part data
// spans pass straight through from the parser to the sink; only part heads are written into a small scratch
// buffer. `formwall inspect` drives it from a file; the proxy drives it from a socket.

/// What the pipeline learned about one part.
public struct PartSummary: Sendable, Equatable {
    /// Zero-based position in the body.
    public var index: Int
    /// The part as parsed.
    public var part: MultipartPart
    /// Data bytes.
    public var size: UInt64
    /// Lowercase hex SHA-256 of the data, when hashing is on.
    public var sha256: String?
}

/// Decodes a multipart body, summarises each part and, optionally, re-encodes it canonically.
public final class MultipartPipeline {
    /// The parser (request-level anomalies, offset, completion).
    public let parser: MultipartParser
    /// Summaries of the parts completed so far.
    public private(set) var parts: [PartSummary] = []
    /// The canonical encoder, when re-encoding.
    public private(set) var encoder: MultipartEncoder?

    private let hashing: Bool
    private var current: PartSummary?
    private var hasher: SHA256Hasher?
    private var scratch: [UInt8] = []

    /// Creates a pipeline for a body with `boundary`; `reencodeBoundary` turns re-encoding on.
    public init(boundary: [UInt8], limits: MultipartLimits = MultipartLimits(),
                anomalies: MultipartAnomalies = MultipartAnomalies(),
                reencodeBoundary: [UInt8]? = nil, hashing: Bool = true) {
        parser = MultipartParser(boundary: boundary, limits: limits, anomalies: anomalies)
        encoder = reencodeBoundary.map { MultipartEncoder(boundary: $0) }
        self.hashing = hashing
        scratch.reserveCapacity(512)
    }

    /// Feeds one chunk; canonical output (if re-encoding) goes to `sink` before this returns.
    public func feed(_ chunk: UnsafeRawBufferPointer,
                     sink: (UnsafeRawBufferPointer) -> Void) throws(MultipartError) {
        var consumed = 0
        while let event = try parser.next(chunk, consumed: &consumed) {
            switch event {
            case .partBegin(let part):
                current = PartSummary(index: parts.count, part: part, size: 0, sha256: nil)
                hasher = hashing ? SHA256Hasher() : nil
                if encoder != nil {
                    scratch.removeAll(keepingCapacity: true)
                    encoder!.writePartHead(part, into: &scratch)
                    scratch.withUnsafeBytes { sink($0) }
                }
            case .partData(let span):
                current!.size += UInt64(span.count)
                hasher?.update(span)
                if encoder != nil { sink(span) }
            case .partEnd:
                var done = current!
                done.sha256 = hasher?.finalizeHex()
                hasher = nil
                current = nil
                parts.append(done)
            case .end:
                if encoder != nil {
                    scratch.removeAll(keepingCapacity: true)
                    encoder!.writeClose(into: &scratch)
                    scratch.withUnsafeBytes { sink($0) }
                }
            }
        }
    }

    /// Declares the end of the body; throws if it was incomplete.
    public func finish() throws(MultipartError) {
        try parser.finish()
    }
}
