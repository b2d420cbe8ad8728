import CZlib

// PNG disarm: a walk over the chunks (PNG spec §5) that keeps only what rendering needs.
//
//   89 50 4E 47 0D 0A 1A 0A ─▶ { length(4, BE, ≤ 2^31-1) type(4) data(length) CRC-32(type+data) } … IEND
//
//   kept:    the critical chunks IHDR, PLTE, IDAT, IEND, and the ancillary chunks that change how the image
//            renders, each up to its largest valid length (`keptTypes`): tRNS, gAMA, cHRM, sRGB, sBIT, bKGD,
//            pHYs, cICP and APNG's acTL, fcTL, fdAT; the first iCCP (before IDAT) when its profile inflates and
//            passes `ICCProfile.isAcceptable` (held while judged). Byte-identical: their CRCs stay valid
//   dropped: every other chunk, named by its chunk type in `removed`: tEXt, zTXt, iTXt (text), eXIf (EXIF,
//            GPS), tIME, private and unknown chunks, an allowed chunk longer than its largest valid length, an
//            iCCP that fails the test; bytes after IEND "trailing-data" (so appended archives do not pass)
//   errors:  a bad signature, a length over 2^31-1, a type byte that is not an ASCII letter, a first chunk
//            other than IHDR, an IHDR not 13 bytes long, a non-empty IEND, a CRC that does not match, the part
//            ending before IEND's CRC
//
// Memory: the 8-byte chunk header and the 4-byte CRC, and an iCCP chunk while it is judged (at most
// `ICCProfile.maximumSize` bytes, compressed); other chunk data streams through (copied or skipped).

/// Rewrites a PNG as it streams, keeping only the chunks rendering needs. See the file header for the rules.
final class PNGDisarmer: DisarmFormat {
    /// What happens to a chunk's bytes.
    private enum Fate {
        case copy
        case drop
        /// Held in `held` until its CRC was checked and its profile judged (iCCP).
        case hold
    }

    private enum State {
        /// Expecting signature byte `index`.
        case signature(index: Int)
        /// Collecting the 8-byte chunk header into `head`.
        case header
        /// `remaining` data bytes of the current chunk.
        case data(remaining: Int, fate: Fate)
        /// Collecting the 4 CRC bytes into `head` (after the header).
        case crc(fate: Fate)
        /// After IEND: everything is dropped.
        case trailing
    }

    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    /// The chunks kept, with the largest data length each may have (`Int.max`: any).
    static let keptTypes: [String: Int] = [
        "IHDR": 13, "PLTE": 768, "IDAT": .max, "IEND": 0,
        "tRNS": 256, "gAMA": 4, "cHRM": 32, "sRGB": 1, "sBIT": 4, "bKGD": 6, "pHYs": 9, "cICP": 4,
        "acTL": 8, "fcTL": 26, "fdAT": .max,
    ]

    private var state: State = .signature(index: 0)
    /// Chunk header (8 bytes) then CRC (4 bytes).
    private var head: [UInt8] = []
    private var crc: uLong = 0
    private var chunks = 0
    /// The iCCP chunk's data while it is judged.
    private var held: [UInt8] = []
    private var sawProfile = false
    private var sawImageData = false
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
            case .data(let remaining, let fate):
                let take = min(remaining, n - i)
                let piece = bytes.slice(i..<i + take)
                crc = crc32(crc, piece.baseAddress?.assumingMemoryBound(to: Bytef.self), uInt(take))
                switch fate {
                case .copy: emit(piece)
                case .hold: held.append(contentsOf: piece)
                case .drop: break
                }
                i += take
                state = take == remaining ? .crc(fate: fate) : .data(remaining: remaining - take, fate: fate)
            case .crc(let fate):
                let take = min(12 - head.count, n - i)
                head.append(contentsOf: bytes.slice(i..<i + take))
                i += take
                if head.count == 12 { try chunkEnd(fate, emit: emit) }
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
        if type == "IHDR" && length != 13 { throw .malformed("png: IHDR is \(length) bytes, not 13") }
        crc = head.withUnsafeBytes { raw in
            crc32(0, raw.baseAddress.map { $0.assumingMemoryBound(to: Bytef.self) + 4 }, 4)
        }
        let fate: Fate
        if type == "iCCP" {
            fate = !sawProfile && !sawImageData && length <= ICCProfile.maximumSize ? .hold : .drop
            sawProfile = true
        } else if let longest = PNGDisarmer.keptTypes[type], length <= longest {
            fate = .copy
        } else {
            fate = .drop
        }
        if type == "IDAT" { sawImageData = true }
        switch fate {
        case .copy: head.withUnsafeBytes { emit($0) }
        case .drop: log.note(type)
        case .hold: held.removeAll(keepingCapacity: false)
        }
        state = length == 0 ? .crc(fate: fate) : .data(remaining: length, fate: fate)
    }

    private func chunkEnd(_ fate: Fate, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        let stored = head[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard uLong(stored) == crc else {
            throw .malformed("png: CRC mismatch in chunk \(String(decoding: head[4..<8], as: UTF8.self))")
        }
        switch fate {
        case .copy:
            head.withUnsafeBytes { emit($0.slice(8..<12)) }
        case .hold:
            if held.withUnsafeBytes({ PNGDisarmer.profileIsAcceptable($0) }) {
                head.withUnsafeBytes { emit($0.slice(0..<8)) }
                held.withUnsafeBytes { emit($0) }
                head.withUnsafeBytes { emit($0.slice(8..<12)) }
            } else {
                log.note("iCCP")
            }
            held = []
        case .drop:
            break
        }
        let isEnd = head[4..<8].elementsEqual(Array("IEND".utf8))
        head.removeAll(keepingCapacity: true)
        state = isEnd ? .trailing : .header
    }

    /// Whether iCCP data (name, NUL, compression method 0, zlib stream) holds an acceptable ICC profile.
    private static func profileIsAcceptable(_ data: UnsafeRawBufferPointer) -> Bool {
        guard let nul = data.prefix(80).firstIndex(of: 0), nul >= 1, nul + 1 < data.count, data[nul + 1] == 0,
              let profile = ICCProfile.inflated(data.slice(nul + 2..<data.count)) else { return false }
        return profile.withUnsafeBytes { ICCProfile.isAcceptable($0) }
    }
}
