import CZlib

// PNG metadata disarm: a walk over the chunks (PNG spec §5).
//
//   89 50 4E 47 0D 0A 1A 0A ─▶ { length(4, BE, ≤ 2^31-1) type(4) data(length) CRC-32(type+data) } … IEND
//
//   kept:    every chunk but the four below, byte-identical (their CRCs stay valid: chunks are independent)
//   dropped: tEXt, zTXt, iTXt (text), eXIf (EXIF, GPS) — each named by its chunk type in `removed`;
//            bytes after IEND "trailing-data" (dropped, like JPEG, so appended archives do not pass)
//   errors:  a bad signature, a length over 2^31-1, a type byte that is not an ASCII letter, a first chunk
//            other than IHDR, a non-empty IEND, a CRC that does not match, the part ending before IEND's CRC
//
// Memory: the 8-byte chunk header and the 4-byte CRC; chunk data streams through (copied or skipped).

/// Strips text and EXIF chunks from a PNG as it streams. See the file header for the rules.
final class PNGDisarmer: DisarmFormat {
    private enum State {
        /// Expecting signature byte `index`.
        case signature(index: Int)
        /// Collecting the 8-byte chunk header into `head`.
        case header
        /// `remaining` data bytes of the current chunk; `keep`: they are copied.
        case data(remaining: Int, keep: Bool)
        /// Collecting the 4 CRC bytes into `head` (after the header).
        case crc(keep: Bool)
        /// After IEND: everything is dropped.
        case trailing
    }

    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    static let droppedTypes: [String] = ["tEXt", "zTXt", "iTXt", "eXIf"]

    private var state: State = .signature(index: 0)
    /// Chunk header (8 bytes) then CRC (4 bytes).
    private var head: [UInt8] = []
    private var crc: uLong = 0
    private var chunks = 0
    private var log = DisarmLog()

    var removed: [String] { log.names }

    init() { head.reserveCapacity(12) }

    func end(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        switch state {
        case .trailing: return
        case .signature, .header, .data, .crc: throw .malformed("png: truncated (ended before IEND)")
        }
    }

    func run(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        var i = 0
        let n = bytes.count
        while i < n {
            switch state {
            case .signature(let index):
                guard bytes[i] == PNGDisarmer.signature[index] else { throw .malformed("png: bad signature") }
                i += 1
                if index == 7 {
                    PNGDisarmer.signature.withUnsafeBytes { emit($0) }
                    head.removeAll(keepingCapacity: true)
                    state = .header
                } else {
                    state = .signature(index: index + 1)
                }
            case .header:
                let take = min(8 - head.count, n - i)
                head.append(contentsOf: bytes.slice(i..<i + take))
                i += take
                if head.count == 8 { try chunkHeader(emit: emit) }
            case .data(let remaining, let keep):
                let take = min(remaining, n - i)
                let piece = bytes.slice(i..<i + take)
                crc = crc32(crc, piece.baseAddress?.assumingMemoryBound(to: Bytef.self), uInt(take))
                if keep { emit(piece) }
                i += take
                state = take == remaining ? .crc(keep: keep) : .data(remaining: remaining - take, keep: keep)
            case .crc(let keep):
                let take = min(12 - head.count, n - i)
                head.append(contentsOf: bytes.slice(i..<i + take))
                i += take
                if head.count == 12 { try chunkEnd(keep: keep, emit: emit) }
            case .trailing:
                log.note("trailing-data")
                i = n
            }
        }
    }

    private func chunkHeader(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        let length = head[0..<4].reduce(0) { $0 << 8 | Int($1) }
        guard length <= 0x7FFF_FFFF else { throw .malformed("png: chunk length \(length) over 2^31-1") }
        for b in head[4..<8] {
            guard (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) else {
                throw .malformed("png: chunk type is not four ASCII letters")
            }
        }
        let type = String(decoding: head[4..<8], as: UTF8.self)
        chunks += 1
        if chunks == 1 && type != "IHDR" { throw .malformed("png: first chunk is \(type), not IHDR") }
        if type == "IEND" && length != 0 { throw .malformed("png: IEND carries data") }
        crc = head.withUnsafeBytes { raw in
            crc32(0, raw.baseAddress.map { $0.assumingMemoryBound(to: Bytef.self) + 4 }, 4)
        }
        let keep = !PNGDisarmer.droppedTypes.contains(type)
        if keep {
            head.withUnsafeBytes { emit($0) }
        } else {
            log.note(type)
        }
        state = length == 0 ? .crc(keep: keep) : .data(remaining: length, keep: keep)
    }

    private func chunkEnd(keep: Bool, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        let stored = head[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard uLong(stored) == crc else {
            throw .malformed("png: CRC mismatch in chunk \(String(decoding: head[4..<8], as: UTF8.self))")
        }
        if keep { head.withUnsafeBytes { emit($0.slice(8..<12)) } }
        let isEnd = head[4..<8].elementsEqual(Array("IEND".utf8))
        head.removeAll(keepingCapacity: true)
        state = isEnd ? .trailing : .header
    }
}
