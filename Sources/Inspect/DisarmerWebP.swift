// WebP disarm: a walk over the RIFF chunks (RFC 9649) that keeps only what rendering needs.
//
//   "RIFF" size(4, LE) "WEBP" { FourCC(4) size(4, LE) data(size) [pad 00 when size is odd] } (size bytes)
//   ANMF data: frame header(16) { ALPH | VP8␠ | VP8L chunk }
//
//   kept:    the first chunk, which must be VP8␠ (lossy), VP8L (lossless) or VP8X (extended); in an extended
//            file ALPH, ANIM, ANMF (frames, whose nested chunks must be ALPH, VP8␠ or VP8L) and VP8␠/VP8L; the
//            first ICCP of an extended file when its profile passes `ICCProfile.isAcceptable` (held while
//            judged). Byte for byte, except: pad bytes are written as 00; VP8X is rewritten with only its alpha
//            and animation flags (EXIF, XMP and reserved bits and bytes cleared) and its ICC flag set when an
//            ICCP was kept; the RIFF size is the output's. Both are known only at the end: they are `patches`
//            (the caller holds the output, so it writes them over the bytes first emitted there)
//   dropped: EXIF "exif", "XMP " "xmp", an ICCP that fails the test or comes too late or twice "icc", every
//            other chunk "unknown-chunk", bytes after the RIFF size "trailing-data"
//   errors:  no RIFF/WEBP header, a first chunk other than VP8␠/VP8L/VP8X, a VP8X not 10 bytes long, an ANIM
//            not 6 bytes long, a chunk
//            longer than what is left of the RIFF (or its frame), an ANMF under 16 bytes or holding another
//            chunk, the part ending before the RIFF size
//
// Memory: a chunk header and VP8X's 10 bytes, and an ICCP chunk while it is judged (at most
// `ICCProfile.maximumSize` bytes); other chunk data streams through (copied or skipped).

/// Rewrites a WebP as it streams, keeping only the chunks rendering needs. See the file header for the rules.
final class WebPDisarmer: DisarmFormat {
    /// What happens to a chunk's data.
    private enum Fate {
        case copy
        case drop
        /// Held in `held` until its end, then judged (ICCP).
        case hold
    }

    private enum State {
        /// Collecting the 12-byte RIFF header into `head`.
        case riff
        /// Collecting an 8-byte chunk header into `head`.
        case chunkHeader
        /// Collecting VP8X's 10 bytes into `head` (after its header).
        case extended
        /// `remaining` data bytes of the current chunk, then `pad` pad bytes.
        case data(remaining: Int, fate: Fate, pad: Int)
        /// `remaining` pad bytes (read, written as 00 when kept).
        case pad(remaining: Int, fate: Fate)
        /// After the RIFF size: everything is dropped.
        case trailing
    }

    /// VP8X flag bits: ICC profile, alpha, EXIF, XMP, animation.
    private static let iccFlag: UInt8 = 0x20
    private static let keptFlags: UInt8 = 0x10 | 0x02

    private var state: State = .riff
    private var head: [UInt8] = []
    /// RIFF payload bytes still to read (after "WEBP").
    private var left = 0
    /// Bytes still to read of the ANMF frame being walked; nil outside one.
    private var frameLeft: Int?
    /// Pad bytes after the ANMF frame being walked.
    private var framePad = 0
    private var chunks = 0
    private var extended = false
    /// Output offset of VP8X's flags byte, and the flags written there.
    private var flagsAt: Int?
    private var flags: UInt8 = 0
    private var sawProfile = false
    private var keptProfile = false
    private var held: [UInt8] = []
    /// Bytes emitted so far.
    private var written = 0
    private var log = DisarmLog()

    var removed: [String] { log.names }

    var patches: [DisarmPatch] {
        guard case .trailing = state else { return [] }
        let size = UInt32(truncatingIfNeeded: written - 8)
        var out = [DisarmPatch(offset: 4, bytes: [
            UInt8(truncatingIfNeeded: size), UInt8(truncatingIfNeeded: size >> 8),
            UInt8(truncatingIfNeeded: size >> 16), UInt8(truncatingIfNeeded: size >> 24),
        ])]
        if keptProfile, let flagsAt { out.append(DisarmPatch(offset: flagsAt, bytes: [flags | Self.iccFlag])) }
        return out
    }

    init() { head.reserveCapacity(12) }

    func end(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        guard case .trailing = state else { throw .malformed("webp: truncated (ended before the RIFF size)") }
    }

    func run(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        var i = 0
        let n = bytes.count
        while i < n {
            switch state {
            case .riff:
                let take = min(12 - head.count, n - i)
                head.append(contentsOf: bytes.slice(i..<i + take))
                i += take
                if head.count == 12 { try riffHeader(emit: emit) }
            case .chunkHeader:
                let take = min(8 - head.count, n - i)
                head.append(contentsOf: bytes.slice(i..<i + take))
                i += take
                consume(take)
                if head.count == 8 { try chunkHeader(emit: emit) }
            case .extended:
                let take = min(18 - head.count, n - i)
                head.append(contentsOf: bytes.slice(i..<i + take))
                i += take
                consume(take)
                if head.count == 18 {
                    flags = head[8] & Self.keptFlags
                    head[8] = flags
                    head[9] = 0
                    head[10] = 0
                    head[11] = 0
                    flagsAt = written + 8
                    head.withUnsafeBytes { out($0, emit) }
                    next()
                }
            case .data(let remaining, let fate, let pad):
                let take = min(remaining, n - i)
                let piece = bytes.slice(i..<i + take)
                switch fate {
                case .copy: out(piece, emit)
                case .hold: held.append(contentsOf: piece)
                case .drop: break
                }
                i += take
                consume(take)
                if take < remaining {
                    state = .data(remaining: remaining - take, fate: fate, pad: pad)
                } else if pad > 0 {
                    state = .pad(remaining: pad, fate: fate)
                } else {
                    chunkEnded(fate, emit: emit)
                }
            case .pad(let remaining, let fate):
                i += 1
                consume(1)
                if remaining > 1 {
                    state = .pad(remaining: remaining - 1, fate: fate)
                } else {
                    if case .copy = fate { emitZero(emit) }
                    chunkEnded(fate, emit: emit)
                }
            case .trailing:
                log.note("trailing-data")
                i = n
            }
        }
    }

    /// Counts `count` bytes read inside the RIFF payload (and the frame being walked).
    private func consume(_ count: Int) {
        left -= count
        if let frame = frameLeft { frameLeft = frame - count }
    }

    /// Emits `bytes`, counting them.
    private func out(_ bytes: UnsafeRawBufferPointer, _ emit: (UnsafeRawBufferPointer) -> Void) {
        written += bytes.count
        emit(bytes)
    }

    private func emitZero(_ emit: (UnsafeRawBufferPointer) -> Void) {
        var zero: UInt8 = 0
        withUnsafeBytes(of: &zero) { out($0, emit) }
    }

    private func riffHeader(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        guard head[0..<4].elementsEqual(Array("RIFF".utf8)), head[8..<12].elementsEqual(Array("WEBP".utf8)) else {
            throw .malformed("webp: no RIFF WEBP header")
        }
        left = Self.le32(head, 4) - 4
        guard left >= 8 else { throw .malformed("webp: RIFF size \(left + 4) leaves no chunk") }
        head.withUnsafeBytes { out($0, emit) }  // the size is patched at the end
        head.removeAll(keepingCapacity: true)
        state = .chunkHeader
    }

    private static func le32(_ b: [UInt8], _ at: Int) -> Int {
        Int(b[at]) | Int(b[at + 1]) << 8 | Int(b[at + 2]) << 16 | Int(b[at + 3]) << 24
    }

    private func chunkHeader(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        let type = String(decoding: head[0..<4], as: UTF8.self)
        let size = Self.le32(head, 4)
        let pad = size & 1
        guard size + pad <= left, frameLeft.map({ size + pad <= $0 }) ?? true else {
            throw .malformed("webp: chunk of \(size) bytes overruns its container")
        }
        chunks += 1
        if frameLeft != nil {
            guard type == "ALPH" || type == "VP8 " || type == "VP8L" else {
                throw .malformed("webp: an animation frame holds another chunk")
            }
            start(size: size, pad: pad, fate: .copy, emit: emit)
            return
        }
        if chunks == 1 {
            switch type {
            case "VP8X":
                guard size == 10 else { throw .malformed("webp: VP8X is \(size) bytes, not 10") }
                extended = true
                state = .extended
                return
            case "VP8 ", "VP8L":
                break
            default:
                throw .malformed("webp: first chunk is not VP8, VP8L or VP8X")
            }
        }
        switch type {
        case "VP8 ", "VP8L":
            start(size: size, pad: pad, fate: .copy, emit: emit)
        case "ALPH" where extended:
            start(size: size, pad: pad, fate: .copy, emit: emit)
        case "ANIM" where extended:
            guard size == 6 else { throw .malformed("webp: ANIM is \(size) bytes, not 6") }
            start(size: size, pad: pad, fate: .copy, emit: emit)
        case "ANMF" where extended:
            guard size >= 16 else { throw .malformed("webp: ANMF of \(size) bytes") }
            head.withUnsafeBytes { out($0, emit) }
            head.removeAll(keepingCapacity: true)
            frameLeft = size
            framePad = pad
            state = .data(remaining: 16, fate: .copy, pad: 0)
        case "ICCP" where extended && !sawProfile && size <= ICCProfile.maximumSize:
            sawProfile = true
            held.removeAll(keepingCapacity: false)
            start(size: size, pad: pad, fate: .hold, emit: emit)
        default:
            switch type {
            case "EXIF": log.note("exif")
            case "XMP ": log.note("xmp")
            case "ICCP": log.note("icc")
            default: log.note("unknown-chunk")
            }
            start(size: size, pad: pad, fate: .drop, emit: emit)
        }
    }

    /// Starts the data of the chunk whose header is in `head`: emits the header when it is copied.
    private func start(size: Int, pad: Int, fate: Fate, emit: (UnsafeRawBufferPointer) -> Void) {
        if case .copy = fate { head.withUnsafeBytes { out($0, emit) } }
        if size > 0 {
            state = .data(remaining: size, fate: fate, pad: pad)
        } else {
            chunkEnded(fate, emit: emit)
        }
    }

    /// A chunk's data and pad were read: a held ICCP is judged; then the next chunk, the frame's end or the end.
    private func chunkEnded(_ fate: Fate, emit: (UnsafeRawBufferPointer) -> Void) {
        if case .hold = fate {
            if held.withUnsafeBytes({ ICCProfile.isAcceptable($0) }) {
                head.withUnsafeBytes { out($0, emit) }
                held.withUnsafeBytes { out($0, emit) }
                if held.count & 1 == 1 { emitZero(emit) }
                keptProfile = true
            } else {
                log.note("icc")
            }
            held = []
        }
        next()
    }

    /// After a chunk: the frame ends when its bytes are read (then its pad), the file when the RIFF's are.
    private func next() {
        head.removeAll(keepingCapacity: true)
        if frameLeft == 0 {
            frameLeft = nil
            if framePad > 0 {
                let pad = framePad
                framePad = 0
                state = .pad(remaining: pad, fate: .copy)
                return
            }
        }
        state = left == 0 ? .trailing : .chunkHeader
    }
}
