import HTTP1
import Multipart
import Reactor

// The request body as a chain of small stages:
//
//   client bytes ─► framing decode (Content-Length count | ChunkedDecoder) ─► transform ─► upstream sink
//                                                                             │
//                      passthrough: bytes unchanged ───────────────────────────┤
//                      multipart:   MultipartPipeline (decode → summarise → canonical encode) ┘
//
//   upstream sink: raw (Content-Length) | chunked framing | spool file (Content-Length after the fact)
//
// The stage is pure: it is handed input spans and writes into buffers it is given; the connection does I/O.

/// Where transformed body bytes go.
final class UpstreamSink {
    enum Kind {
        /// Bytes appended as they are (Content-Length passthrough).
        case raw
        /// Each write framed as one HTTP chunk.
        case chunked
        /// Appended to a temporary file; sent later with a Content-Length.
        case spool(TemporaryFile)
    }

    let kind: Kind
    let buffer: ByteBuffer
    /// Bytes of body payload handed to the sink (before chunk framing).
    private(set) var payloadBytes: UInt64 = 0
    /// A failure while writing (buffer over its hard cap, spool write error); checked after each step.
    private(set) var failure: Error?
    private var header: [UInt8] = []

    init(kind: Kind, buffer: ByteBuffer) {
        self.kind = kind
        self.buffer = buffer
        header.reserveCapacity(24)
    }

    func write(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty, failure == nil else { return }
        payloadBytes += UInt64(bytes.count)
        do {
            switch kind {
            case .raw:
                try buffer.writeBytes(bytes)
            case .chunked:
                header.removeAll(keepingCapacity: true)
                ChunkedEncoder.writeChunkHeader(size: bytes.count, into: &header)
                try buffer.writeBytes(header)
                try buffer.writeBytes(bytes)
                try buffer.writeBytes(crlf)
            case .spool(let file):
                try file.write(bytes)
            }
        } catch {
            failure = error
        }
    }

    /// Ends the body (the last chunk for chunked framing).
    func finish() {
        guard failure == nil, case .chunked = kind else { return }
        var last: [UInt8] = []
        ChunkedEncoder.writeLastChunk(into: &last)
        do { try buffer.writeBytes(last) } catch { failure = error }
    }

    private let crlf: [UInt8] = [0x0D, 0x0A]
}

/// Why a request body failed.
enum RequestBodyError: Error {
    /// Bad chunked framing from the client (400).
    case framing(HTTPParseError)
    /// A malformed multipart body (400).
    case multipart(MultipartError)
}

/// Decodes the client's framing and feeds the transform.
final class RequestBodyStage {
    enum Framing {
        case none
        case length(remaining: UInt64)
        case chunked(ChunkedDecoder)
    }

    enum Transform {
        case passthrough
        case multipart(MultipartPipeline)
    }

    private(set) var framing: Framing
    let transform: Transform
    let sink: UpstreamSink
    /// Body payload bytes received from the client (after de-chunking).
    private(set) var bytesIn: UInt64 = 0
    /// Whether the client's body is complete (and the transform finished).
    private(set) var isComplete = false

    init(framing: BodyFraming, limits: HTTPLimits, transform: Transform, sink: UpstreamSink) {
        switch framing {
        case .none, .closeDelimited: self.framing = .length(remaining: 0)
        case .contentLength(let n): self.framing = .length(remaining: n)
        case .chunked: self.framing = .chunked(ChunkedDecoder(limits: limits))
        }
        self.transform = transform
        self.sink = sink
        if case .length(0) = self.framing { try? completeIfDone() }
    }

    /// Consumes a prefix of `input`; returns how many bytes were used. Once `isComplete`, it consumes nothing,
    /// so the rest of `input` is the next pipelined request.
    func process(_ input: UnsafeRawBufferPointer) throws(RequestBodyError) -> Int {
        guard !isComplete else { return 0 }
        switch framing {
        case .none:
            return 0
        case .length(let remaining):
            let n = Int(min(UInt64(input.count), remaining))
            try deliver(UnsafeRawBufferPointer(rebasing: input[0..<n]))
            framing = .length(remaining: remaining - UInt64(n))
            try completeIfDone()
            return n
        case .chunked(var decoder):
            var offset = 0
            defer { if !isComplete { framing = .chunked(decoder) } }
            while true {
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
        }
    }

    private func deliver(_ span: UnsafeRawBufferPointer) throws(RequestBodyError) {
        guard !span.isEmpty else { return }
        bytesIn += UInt64(span.count)
        switch transform {
        case .passthrough:
            sink.write(span)
        case .multipart(let pipeline):
            do { try pipeline.feed(span) { sink.write($0) } } catch { throw .multipart(error) }
        }
    }

    private func completeIfDone() throws(RequestBodyError) {
        guard case .length(0) = framing, !isComplete else { return }
        if case .multipart(let pipeline) = transform {
            do { try pipeline.finish() } catch { throw .multipart(error) }
        }
        isComplete = true
        sink.finish()
    }
}
