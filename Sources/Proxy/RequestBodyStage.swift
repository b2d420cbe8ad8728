import HTTP1
import Inspect
import Multipart
import Reactor
import Rules

// The request body as a chain of small stages:
//
//   client bytes ─► framing decode (Content-Length count | ChunkedDecoder) ─► content decode ─► transform ─► sink
//                                                           (gzip/deflate layers, form bodies only; optional)
//                                                                             │
//                      passthrough: bytes unchanged ───────────────────────────┤
//                      multipart:   MultipartPipeline (decode → summarise → canonical encode) ┘
//
//   upstream sink: raw (Content-Length) | chunked framing | spool file (Content-Length after the fact)
//
// The stage is pure: it is handed input spans and writes into buffers it is given; the connection does I/O.

/// Where transformed body bytes go: the upstream connection's output queue (raw or chunk-framed), or a spool
/// file. Part data that lies in the client's input slice is lent to the queue, not copied (`OutputQueue.append`). A held multipart part is spliced in as a file (`enqueue`), which the upstream connection streams
/// after everything already queued.
final class UpstreamSink: FormOutput {
    enum Kind {
        /// Bytes appended as they are (Content-Length passthrough).
        case raw
        /// Each write framed as one HTTP chunk.
        case chunked
        /// Appended to a temporary file; sent later with a Content-Length.
        case spool(TemporaryFile)
    }

    let kind: Kind
    let buffer: OutputQueue
    /// A file being streamed into `buffer` as it drains (a held part, or the spooled body once complete), and
    /// how much of it was read. `ConnectionMachine` refills from it.
    var sending: (file: TemporaryFile, offset: UInt64)?
    /// Reading `sending` failed (a local disk error).
    private(set) var fileFailure: Error?
    /// Bytes of body payload handed to the sink (before chunk framing).
    private(set) var payloadBytes: UInt64 = 0
    /// A failure while writing (buffer over its hard cap, spool write error); checked after each step.
    private(set) var failure: Error?
    /// Trailer fields for the last chunk (`Name: value\r\n` each), asked for when the body ends; nil or empty:
    /// none. Set for re-encoded chunked bodies whose route names a `modified-header`.
    var trailer: (() -> [UInt8]?)?
    /// A chunk whose data is an enqueued file still needs its closing CRLF.
    private var pendingChunkEnd = false

    init(kind: Kind, buffer: OutputQueue) {
        self.kind = kind
        self.buffer = buffer
    }

    var isReplaying: Bool { sending != nil }

    /// Records a failure reading the file being sent; the body stops with 500.
    func fileFailed(_ error: Error) {
        fileFailure = error
        failure = error
        sending?.file.close()
        sending = nil
    }

    /// Closes every file the sink holds (on abort).
    func releaseFiles() {
        sending?.file.close()
        sending = nil
        if case .spool(let file) = kind { file.close() }
    }

    func write(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty, failure == nil else { return }
        payloadBytes += UInt64(bytes.count)
        do {
            switch kind {
            case .raw:
                try buffer.append(bytes)
            case .chunked:
                try writeChunkHeader(size: bytes.count)
                try buffer.append(bytes)
                // The chunk's CRLF goes out with the next chunk's header (or the last chunk): one write, not two.
                pendingChunkEnd = true
            case .spool(let file):
                try file.write(bytes)
            }
        } catch {
            failure = error
        }
    }

    func enqueue(_ file: TemporaryFile) -> Bool {
        guard failure == nil else { file.close(); return false }
        payloadBytes += file.size
        switch kind {
        case .chunked:
            do { try writeChunkHeader(size: Int(file.size)) } catch { failure = error; file.close(); return false }
            pendingChunkEnd = true
            sending = (file, 0)
            return true
        case .spool(let target):
            defer { file.close() }
            do { try file.forEachChunk { try target.write($0) } } catch { failure = error }
            return false
        case .raw:
            // A held part is only ever spliced into a re-encoded (chunked or spooled) body; should a raw sink
            // get one anyway, this request fails (500 `body_sink_failed`), not the process.
            failure = SinkError.fileIntoRawBody
            file.close()
            return false
        }
    }

    /// Ends the body (the last chunk for chunked framing).
    func finish() {
        guard failure == nil, case .chunked = kind else { return }
        do {
            // The previous chunk's CRLF, if it is still owed, goes out with the last chunk.
            let closing = pendingChunkEnd
            pendingChunkEnd = false
            if let fields = trailer?(), !fields.isEmpty {
                var last: [UInt8] = closing ? [0x0D, 0x0A] : []
                last.append(contentsOf: [0x30, 0x0D, 0x0A])   // "0\r\n", then the fields, then the empty line
                last.append(contentsOf: fields)
                last.append(0x0D)
                last.append(0x0A)
                try buffer.write(last)
            } else {
                try buffer.write(closing ? Self.crlfLastChunk : Self.lastChunk)
            }
        } catch {
            failure = error
        }
    }

    /// Queues `[CRLF ending the previous file chunk] <hex size> CRLF`, written in place in the queue.
    private func writeChunkHeader(size: Int) throws {
        let closing = pendingChunkEnd ? 2 : 0
        try buffer.reserveOwned(closing + ChunkedEncoder.maxChunkHeaderLength)
        let count = buffer.withOwnedWritable { out -> Int? in
            guard out.count >= closing else { return nil }
            if closing > 0 {
                out[0] = 0x0D
                out[1] = 0x0A
            }
            let header = UnsafeMutableRawBufferPointer(rebasing: out[closing...])
            return ChunkedEncoder.writeChunkHeader(size: size, to: header).map { closing + $0 }
        }
        guard let count else { throw SinkError.chunkHeader(size: size) }
        buffer.commitOwned(count)
        pendingChunkEnd = false
    }

    enum SinkError: Error {
        case fileIntoRawBody
        /// A chunk header could not be written (an empty chunk, or no room): this request fails with 500.
        case chunkHeader(size: Int)
    }

    private static var crlfLastChunk: UnsafeRawBufferPointer { UnsafeRawBufferPointer(staticString: "\r\n0\r\n\r\n") }
    private static var lastChunk: UnsafeRawBufferPointer { UnsafeRawBufferPointer(staticString: "0\r\n\r\n") }
}

extension UnsafeRawBufferPointer {
    /// The bytes of a string literal (static storage, valid for the life of the process).
    init(staticString s: StaticString) {
        self.init(start: s.utf8Start, count: s.utf8CodeUnitCount)
    }
}

/// Why a request body failed.
enum RequestBodyError: Error {
    /// Bad chunked framing from the client (400).
    case framing(HTTPParseError)
    /// The form stage stopped the request (malformed body, policy rejection, quarantine failure).
    case form(FormStageError)
    /// The policy rejected an opaque body (body-max).
    case rejected(Violation)
}

/// Decodes the client's framing and feeds the transform.
final class RequestBodyStage {
    enum Framing {
        /// Content-Length (an empty body is `length(0)`).
        case length(remaining: UInt64)
        case chunked(ChunkedDecoder)
    }

    enum Transform {
        /// Bytes unchanged; `evaluator` (if any) only counts them against body-max.
        case passthrough
        /// multipart/form-data: decode, apply the policy, re-encode.
        case form(FormStage)
        /// application/x-www-form-urlencoded under a policy: decode, apply the field rules, re-encode.
        case urlencoded(UrlencodedStage)
    }

    private(set) var framing: Framing
    let transform: Transform
    /// The policy for a passthrough body (a form stage owns its own).
    var evaluator: PolicyEvaluator? {
        get { evaluatorSlot.value }
        set { evaluatorSlot.value = newValue }
    }
    private var evaluatorSlot = EvaluatorSlot(nil)

    /// The evaluator, moved out of its slot to be updated and stored back (`EvaluatorSlot.take`).
    private func takeEvaluator() -> PolicyEvaluator? { evaluatorSlot.take() }
    private var inputDone = false
    let sink: UpstreamSink
    /// Body payload bytes received from the client (after de-chunking).
    private(set) var bytesIn: UInt64 = 0
    /// Whether the client's body is complete (and the transform finished).
    private(set) var isComplete = false
    /// Content codings to undo before the transform, outermost (the last one applied) first; empty: none.
    private let decoders: [StreamInflater]
    /// Largest decoded / compressed ratio (`compression-ratio-max`), and where it is set.
    private let ratioMax: UInt64
    private let ratioRule: SourceLocation?
    /// Decoding pauses while the upstream's queue holds this much (the output high-water mark): a compressed
    /// read can expand a hundredfold, past the queue's hard cap, so the decoders keep their input instead.
    private let highWater: Int

    init(framing: BodyFraming, limits: HTTPLimits, transform: Transform, sink: UpstreamSink,
         decoders: [StreamInflater] = [], ratioMax: Int = 100, ratioRule: SourceLocation? = nil,
         highWater: Int = ProxyConfiguration.Buffers().outputHighWater) {
        self.decoders = decoders
        self.highWater = highWater
        self.ratioMax = UInt64(max(1, ratioMax))
        self.ratioRule = ratioRule
        switch framing {
        case .none, .closeDelimited: self.framing = .length(remaining: 0)
        case .contentLength(let n): self.framing = .length(remaining: n)
        case .chunked: self.framing = .chunked(ChunkedDecoder(limits: limits))
        }
        self.transform = transform
        self.sink = sink
    }

    /// Completes an empty body at once (running the end-of-request checks); call right after creation.
    func start() throws(RequestBodyError) {
        try completeIfDone()
    }

    /// Whether the form stage waits for a held part to finish replaying (or decoded input waits for it).
    var isBlocked: Bool { transformBlocked || decoders.contains { $0.hasPending } }

    private var transformBlocked: Bool {
        if case .form(let stage) = transform { return stage.isBlocked }
        return false
    }

    /// The upstream's queue is at its high-water mark (a spooled body goes to its file, which has no mark).
    private var sinkFull: Bool {
        if case .spool = sink.kind { return false }
        return sink.buffer.pendingBytes >= highWater
    }

    /// Continues a blocked form stage once its replay is done, then the decoders' kept input (and completes the
    /// body if its input ended).
    func pumpPending() throws(RequestBodyError) {
        guard isBlocked, !sink.isReplaying else { return }
        if case .form(let stage) = transform, stage.isBlocked {
            do { try stage.resume(out: sink) } catch { throw .form(error) }
            if stage.isBlocked { return }
        }
        // Innermost layer first: its kept output feeds the transform; then the outer layers feed it.
        for layer in decoders.indices.reversed() where decoders[layer].hasPending {
            let done = try decoding(layer) { try decoders[layer].resume(consume: $0) }
            if !done { return }
        }
        if inputDone { try completeIfDone() }
    }

    /// Consumes a prefix of `input`; returns how many bytes were used. Once `isComplete`, it consumes nothing,
    /// so the rest of `input` is the next pipelined request. While the form stage is blocked it consumes
    /// nothing either.
    func process(_ input: UnsafeRawBufferPointer) throws(RequestBodyError) -> Int {
        try pumpPending()
        guard !isComplete, !isBlocked else { return 0 }
        switch framing {
        case .length(let remaining):
            let n = Int(min(UInt64(input.count), remaining))
            try deliver(UnsafeRawBufferPointer(rebasing: input[0..<n]))
            framing = .length(remaining: remaining - UInt64(n))
            try completeIfDone()
            return n
        case .chunked(var decoder):
            var offset = 0
            defer { if !inputDone { framing = .chunked(decoder) } }
            while !isBlocked {
                let event: ChunkedEvent?
                do { event = try decoder.decode(input, from: &offset) } catch { throw .framing(error) }
                guard let event else { return offset }
                switch event {
                case .data(let span):
                    try deliver(span)
                case .end:
                    framing = .length(remaining: 0)
                    try completeIfDone()
                    return offset
                }
            }
            return offset
        }
    }

    private func deliver(_ span: UnsafeRawBufferPointer) throws(RequestBodyError) {
        guard !span.isEmpty else { return }
        bytesIn += UInt64(span.count)
        guard !decoders.isEmpty else { return try deliverDecoded(span) }
        _ = try decode(span, layer: 0)
    }

    /// Hands `bytes` to decoder `layer` (or, past the last layer, to the transform). False when the transform
    /// blocked and the rest was kept.
    private func decode(_ bytes: UnsafeRawBufferPointer, layer: Int) throws(RequestBodyError) -> Bool {
        guard layer < decoders.count else {
            let within = ratioAllows(bytes.count)
            guard within == bytes.count else {
                // The allowance ends inside this piece: its bytes up to the limit are judged first, as they
                // would be had the piece ended there (the offset is the stream's, not the reads').
                if within > 0 { try deliverDecoded(UnsafeRawBufferPointer(rebasing: bytes.prefix(within))) }
                throw ratioExceeded()
            }
            try deliverDecoded(bytes)
            // A decoded piece is one read's worth at most; past the high-water mark the decoders stop and keep
            // the rest (`pumpPending` goes on once the upstream has taken some).
            return !transformBlocked && !sinkFull
        }
        return try decoding(layer) { try decoders[layer].feed(bytes, consume: $0) }
    }

    /// Runs one decoder call whose output goes to the next layer, turning zlib failures into
    /// `bad_content_encoding` and letting the transform's own errors through.
    private func decoding(_ layer: Int,
                          _ call: ((UnsafeRawBufferPointer) throws -> Bool) throws -> Bool) throws(RequestBodyError) -> Bool {
        do {
            return try call { piece in try self.decode(piece, layer: layer + 1) }
        } catch let error as RequestBodyError {
            throw error
        } catch {
            throw .rejected(Violation(kind: .badContentEncoding, detail: "\(error)"))
        }
    }

    /// `compression-ratio-max`: at most `ratioMax` decoded bytes per compressed byte, compressed input counted
    /// up to a block end (StreamInflater.blockEnd: 1, 2, 4, 8 KiB, then every 16 KiB by default), so that the
    /// limit falls at a decoded offset the stream fixes. Of the `count` bytes just decoded (already counted in
    /// `decodedBytes`), how many are within it.
    private func ratioAllows(_ count: Int) -> Int {
        guard let allowance = ratioAllowance, let decoded = decoders.last?.decodedBytes,
              decoded > allowance else { return count }
        let before = decoded - UInt64(count)
        return before < allowance ? Int(allowance - before) : 0
    }

    /// Decoded bytes allowed so far (nil: no decoding, or more than a UInt64 counts).
    private var ratioAllowance: UInt64? {
        guard let first = decoders.first else { return nil }
        let (allowance, overflow) = first.blockEnd.multipliedReportingOverflow(by: ratioMax)
        return overflow ? nil : allowance
    }

    private func ratioExceeded() -> RequestBodyError {
        let counted = decoders.first?.blockEnd ?? 0
        return .rejected(Violation(kind: .compressionRatioExceeded, rule: ratioRule,
                                   detail: "more than \(ratioAllowance ?? 0) bytes decoded from the first \(counted) compressed",
                                   limit: ratioMax))
    }

    private func deliverDecoded(_ span: UnsafeRawBufferPointer) throws(RequestBodyError) {
        switch transform {
        case .passthrough:
            if var ev = takeEvaluator() {
                let action = ev.bodyData(count: span.count)
                evaluatorSlot.put(consume ev)
                if case .reject(let v) = action { throw .rejected(v) }
            }
            sink.write(span)
        case .urlencoded(let stage):
            do { try stage.feedBody(span, out: sink) } catch { throw .form(error) }
        case .form(let stage):
            do { try stage.feedBody(span, out: sink) } catch { throw .form(error) }
        }
    }

    private func completeIfDone() throws(RequestBodyError) {
        guard case .length(0) = framing, !isComplete else { return }
        inputDone = true
        // Encoded input, or decoded bytes the form stage holds, still waiting for a held part: `pumpPending`
        // completes the body once they have drained. The decoders' end checks (a truncated stream) come after
        // every decoded byte was judged, as they do when the input arrives in other reads.
        if decoders.contains(where: { $0.hasPending }) || (!decoders.isEmpty && transformBlocked) { return }
        for decoder in decoders {
            do { try decoder.finish() } catch {
                throw .rejected(Violation(kind: .badContentEncoding, detail: error.description))
            }
        }
        switch transform {
        case .form(let stage):
            // The framing end is the request's end: the form stage runs its last anomaly check and the
            // policy's `end()` here, never at the close delimiter (bytes may follow it).
            if stage.isBlocked { return }
            do { try stage.finish(out: sink) } catch { throw .form(error) }
            if stage.isBlocked { return }
        case .urlencoded(let stage):
            do { try stage.finish(out: sink) } catch { throw .form(error) }
        case .passthrough:
            // Opaque and bodyless requests still get the policy's end-of-request checks (required parts).
            if var ev = takeEvaluator() {
                let action = ev.end()
                evaluatorSlot.put(consume ev)
                if case .reject(let v) = action { throw .rejected(v) }
            }
        }
        isComplete = true
        sink.finish()
    }
}
