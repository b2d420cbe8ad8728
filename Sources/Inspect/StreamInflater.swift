import CZlib

// Decodes a `Content-Encoding: gzip` or `deflate` request body as it streams (RFC 9110 §8.4.1): zlib's inflate
// over whatever span arrives, output handed on in pieces of at most `pieceSize` bytes. Memory: zlib's 32 KiB
// window and state, one output piece, and — only while the consumer cannot take more — a copy of the compressed
// input not yet decoded (at most one input span).
//
//   compressed span ─► stash (if any) ─► inflate ─► piece (≤ 64 KiB) ─► consumer ─► true: go on
//                                                                            └─► false (blocked): keep the rest
//                                                                                of the span in the stash
//
// Pure: no I/O. Strict: a body that ends before the stream does, or carries bytes after it, is an error.
//
// Independent of the reads: zlib is given at most one compressed block per call (the first 1 KiB, then blocks
// doubling up to `block`, 16 KiB, then `block` each), and the output of a block is drained before the next
// block's first byte is given. zlib decodes as far as its input allows, so the decoded bytes handed on by the
// end of block k depend on the stream alone, not on how it was cut into spans; a consumer that judges output
// against `blockEnd` (the ratio limit) reaches the same verdict at the same decoded offset for any reads. Output
// produced by the call that finds a corrupt byte is handed on before the error.

/// One layer of content coding to undo.
public final class StreamInflater {
    /// The codings Formwall decodes.
    public enum Coding: String, Sendable, CaseIterable {
        /// RFC 1952 gzip (`x-gzip` too). One member; bytes after it are an error.
        case gzip
        /// RFC 1950 zlib-wrapped deflate, as RFC 9110 defines `deflate` (raw deflate is refused).
        case deflate

        /// Parses a coding name as a Content-Encoding lists it (case-insensitive); nil for any other.
        public init?(name: Substring) {
            switch name.lowercased() {
            case "gzip", "x-gzip": self = .gzip
            case "deflate": self = .deflate
            default: return nil
            }
        }
    }

    /// Why decoding stopped.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// Decoded bytes handed on per call of the consumer, at most, unless a smaller piece is asked for.
    public static let pieceSize = 64 * 1024

    /// This decoder's piece: `pieceSize`, or less for a consumer whose buffer holds less (at least 1 KiB).
    public let piece: Int

    /// Compressed bytes given to zlib per call once the stream is past its first `block` bytes (the blocks
    /// before double from 1 KiB: ends at 1, 2, 4, 8 and 16 KiB, then every 16 KiB), unless another is asked for:
    /// the unit in which compressed input is counted (`blockEnd`). The small first blocks keep a bomb's first
    /// check early (at the ratio times 1 KiB of decoded bytes).
    ///
    /// Smaller blocks cost time: a call copies its output into zlib's window and leaves the last bytes of its
    /// input to the slow path. Measured with bench/proxy/compressed.py (128 MiB of CSV gzipped 3.5:1), the
    /// decoding path ran 1.17x faster without blocks than with 1 KiB ones and 1.03x faster than with 16 KiB ones.
    public static let defaultBlock = 16 * 1024

    /// This decoder's block (at least 64 bytes).
    public let block: Int

    public let coding: Coding
    private var stream = z_stream()
    private var open = false
    private var ended = false
    /// Compressed input taken but not yet decoded (the consumer blocked).
    private var stash: [UInt8] = []
    /// The call that blocked ended on a full piece: zlib may hold decoded output the consumer could not take
    /// yet, so the next call drains it before it takes input.
    private var needsDrain = false
    /// The stream failed in the call whose output the consumer blocked on: thrown by `resume`.
    private var deferredFailure: Failure?
    /// Compressed bytes decoded so far (not counting kept input), and decoded bytes produced: their ratio is
    /// measured as the stream goes (against `blockEnd`), so a bomb is caught in its first KiB, not after a read.
    public private(set) var compressedBytes: UInt64 = 0
    public private(set) var decodedBytes: UInt64 = 0

    /// The end of the compressed block the latest output came from: `compressedBytes` rounded up to a block end
    /// (at least the first). Output handed on after block k's last byte was taken, and before block k+1's
    /// first, belongs to block k; which bytes those are is fixed by the stream, whatever the reads.
    public var blockEnd: UInt64 { blockEnd(atOrAfter: max(1, compressedBytes)) }

    /// The first block end at or after compressed offset `offset` (> 0): 1 KiB (or `block` if smaller), then
    /// doubling up to `block`, then multiples of `block`.
    private func blockEnd(atOrAfter offset: UInt64) -> UInt64 {
        let block = UInt64(self.block)
        var end = min(1024, block)
        while end < block && end < offset { end = min(end * 2, block) }
        if end >= offset { return end }
        return (offset + block - 1) / block * block
    }

    public init(_ coding: Coding, piece: Int = StreamInflater.pieceSize,
                block: Int = StreamInflater.defaultBlock) throws(Failure) {
        self.coding = coding
        self.piece = min(Self.pieceSize, max(1024, piece))
        self.block = min(1 << 30, max(64, block))
        let rc = czlib_inflate_init2(&stream, coding == .gzip ? 15 + 16 : 15)
        guard rc == Z_OK else { throw Failure("inflateInit2 failed (\(rc))") }
        open = true
    }

    deinit {
        if open { inflateEnd(&stream) }
    }

    /// Decoding stopped for the consumer: compressed input, or output zlib still holds, is waiting (`resume`).
    public var hasPending: Bool { !stash.isEmpty || needsDrain || deferredFailure != nil }

    /// The stream's end was decoded.
    public var isFinished: Bool { ended }

    /// Decodes `input` (all of it is taken), handing pieces to `consume`; when `consume` returns false (it
    /// cannot take more now) the undecoded rest is kept and this returns false. True when everything was
    /// decoded and handed on.
    public func feed(_ input: UnsafeRawBufferPointer,
                     consume: (UnsafeRawBufferPointer) throws -> Bool) throws -> Bool {
        guard !input.isEmpty else { return !hasPending }
        guard !hasPending else {
            stash.append(contentsOf: input)
            return false
        }
        return try run(input, consume: consume)
    }

    /// Decodes what was kept (after the consumer unblocked). True when nothing is pending any more.
    public func resume(consume: (UnsafeRawBufferPointer) throws -> Bool) throws -> Bool {
        guard hasPending else { return true }
        if let failure = deferredFailure {
            deferredFailure = nil
            throw failure
        }
        let pending = stash
        stash.removeAll(keepingCapacity: false)
        return try pending.withUnsafeBytes { try run($0, consume: consume) }
    }

    /// The body ended: the stream must have ended too, with nothing pending.
    public func finish() throws(Failure) {
        if let failure = deferredFailure { throw failure }
        guard stash.isEmpty else { throw Failure("input still pending") }
        guard ended else { throw Failure("the \(coding.rawValue) stream is truncated") }
    }

    private func run(_ input: UnsafeRawBufferPointer,
                     consume: (UnsafeRawBufferPointer) throws -> Bool) throws -> Bool {
        if ended && !input.isEmpty { throw Failure("data after the end of the \(coding.rawValue) stream") }
        var offset = 0
        // A full piece may mean zlib holds more output for input it already took: drain it (no new input)
        // before the next block's bytes.
        var full = needsDrain
        needsDrain = false
        return try withUnsafeTemporaryAllocation(byteCount: self.piece, alignment: 16) { piece in
            guard let out = piece.baseAddress else { return true }
            while true {
                let toBoundary = Int(blockEnd(atOrAfter: compressedBytes + 1) - compressedBytes)
                let limit = full ? 0 : min(input.count - offset, toBoundary)
                let (rc, taken, produced) = inflateStep(&stream, input, from: offset, count: limit,
                                                        into: out, capacity: piece.count)
                offset += taken
                compressedBytes &+= UInt64(taken)
                full = stream.avail_out == 0
                var failure: Failure?
                switch rc {
                case Z_OK, Z_BUF_ERROR:
                    break
                case Z_STREAM_END:
                    ended = true
                default:
                    let message = stream.msg.map { String(cString: $0) } ?? "error \(rc)"
                    failure = Failure("invalid \(coding.rawValue) data: \(message)")
                }
                if produced > 0 {
                    decodedBytes &+= UInt64(produced)
                    // Output decoded before a corrupt byte is judged first, whichever call found the byte; a
                    // consumer that blocked on it judges the rest later, so the failure waits for `resume`.
                    if try !consume(UnsafeRawBufferPointer(rebasing: piece.prefix(produced))) {
                        if let failure {
                            deferredFailure = failure
                            return false
                        }
                        if offset < input.count { stash.append(contentsOf: input[offset...]) }
                        needsDrain = full && !ended
                        return false
                    }
                }
                if let failure { throw failure }
                if ended {
                    if offset < input.count { throw Failure("data after the end of the \(coding.rawValue) stream") }
                    return true
                }
                if offset >= input.count && !full { return true }
                // zlib refused input without an error: never drop it silently.
                if taken == 0 && produced == 0 && !full && limit > 0 {
                    throw Failure("the \(coding.rawValue) stream stopped decoding")
                }
            }
        }
    }
}

/// One `inflate(Z_NO_FLUSH)` call over `input[offset...]` into `capacity` bytes at `out`: zlib's return code, the
/// input bytes it took and the output bytes it produced. Shared by `StreamInflater` and the archive inspector.
func inflateStep(_ stream: inout z_stream, _ input: UnsafeRawBufferPointer, from offset: Int, count: Int = .max,
                 into out: UnsafeMutableRawPointer, capacity: Int) -> (rc: Int32, taken: Int, produced: Int) {
    let chunk = min(max(0, input.count - offset), max(0, count), Int(UInt32.max))
    stream.next_in = chunk > 0 ? input.baseAddress.map {
        UnsafeMutablePointer(mutating: $0.advanced(by: offset).assumingMemoryBound(to: Bytef.self))
    } : nil
    stream.avail_in = uInt(chunk)
    stream.next_out = out.assumingMemoryBound(to: Bytef.self)
    stream.avail_out = uInt(capacity)
    let rc = inflate(&stream, Z_NO_FLUSH)
    return (rc, chunk - Int(stream.avail_in), capacity - Int(stream.avail_out))
}
