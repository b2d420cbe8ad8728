// JPEG metadata disarm: a walk over the marker segments (ITU T.81 Annex B).
//
//   FFD8 ─▶ { [FF…]FFxx len(2, BE, counts itself) payload  |  FFD0–D7 / FF01 (standalone)
//           | FFDA len header ─▶ entropy-coded data (FF00 and FFD0–D7 inside) until another marker } ─▶ FFD9
//
//   kept:    SOI, EOI, DQT, DHT, SOFn, DRI, DNL, SOS + scan data, RSTn, TEM, every non-APP marker segment,
//            APP0 "JFIF\0", APP2 "ICC_PROFILE\0" (colour), APP14 "Adobe" (affects decoding)
//   dropped: APP1 (EXIF "exif" [+ "gps" when IFD0 has tag 0x8825], XMP "xmp", other "app1"), APP13 "iptc",
//            COM "comment", every other APPn "appN" (APP0 JFXX thumbnails, APP2 MPF/FlashPix, …),
//            bytes after EOI "trailing-data"; fill bytes (extra FF before a marker) are not copied
//   errors:  no SOI, a second SOI, FF00 or a reserved marker (02–BF) between segments, a length below 2,
//            anything but FF where a marker must start, the part ending before EOI
//
// Memory: a segment header and at most 12 identifying payload bytes; payloads stream through (copied or skipped).

/// Strips metadata segments from a JPEG as it streams. See the file header for the rules.
final class JPEGDisarmer: DisarmFormat {
    private enum State {
        /// Expecting byte `index` (0 or 1) of SOI.
        case soi(index: Int)
        /// Between segments: expecting FF.
        case marker
        /// Saw FF (held, not emitted): expecting a marker code; another FF is fill.
        case markerCode
        /// Reading the two length bytes of segment `marker`; `high` once the first one arrived.
        case length(marker: UInt8, high: UInt8?)
        /// Collecting `want` identifying payload bytes into `head` (after its 4 header bytes) to decide
        /// whether an APP0/APP2/APP14 segment stays; `remaining` payload bytes follow those.
        case identify(marker: UInt8, want: Int, remaining: Int)
        /// Copying `remaining` payload bytes; `thenScan`: entropy-coded data follows (SOS).
        case copy(remaining: Int, thenScan: Bool)
        /// Dropping `remaining` payload bytes; `exif`: they go through the APP1 scanner.
        case skip(remaining: Int, exif: Bool)
        /// Entropy-coded data: copied until FF.
        case scan
        /// Entropy-coded data, saw FF (held): 00 or RSTn continue the scan, FF is fill, anything else a marker.
        case scanFF
        /// After EOI: everything is dropped.
        case trailing
    }

    private var state: State = .soi(index: 0)
    private var head: [UInt8] = []
    private var exif = EXIFScan()
    private var log = DisarmLog()

    var removed: [String] { log.names }

    init() { head.reserveCapacity(16) }

    func end(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        switch state {
        case .trailing: return
        case .soi, .marker, .markerCode, .length, .identify, .copy, .skip, .scan, .scanFF:
            throw .malformed("jpeg: truncated (ended before EOI)")
        }
    }

    func run(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        var i = 0
        let n = bytes.count
        while i < n {
            switch state {
            case .soi(let index):
                let expected: UInt8 = index == 0 ? 0xFF : 0xD8
                guard bytes[i] == expected else { throw .malformed("jpeg: missing SOI") }
                i += 1
                if index == 0 {
                    state = .soi(index: 1)
                } else {
                    emitPair(0xFF, 0xD8, emit)
                    state = .marker
                }
            case .marker:
                guard bytes[i] == 0xFF else { throw .malformed("jpeg: expected a marker") }
                i += 1
                state = .markerCode
            case .markerCode:
                let code = bytes[i]
                i += 1
                try marker(code, emit: emit)
            case .length(let marker, let high):
                let b = bytes[i]
                i += 1
                guard let high else {
                    state = .length(marker: marker, high: b)
                    continue
                }
                try segment(marker, length: Int(high) << 8 | Int(b), emit: emit)
            case .identify(let marker, let want, let remaining):
                let take = min(want - (head.count - 4), n - i)
                head.append(contentsOf: bytes.slice(i..<i + take))
                i += take
                if head.count - 4 == want { decide(marker, remaining: remaining, emit: emit) }
            case .copy(let remaining, let thenScan):
                let take = min(remaining, n - i)
                emit(bytes.slice(i..<i + take))
                i += take
                if take == remaining {
                    state = thenScan ? .scan : .marker
                } else {
                    state = .copy(remaining: remaining - take, thenScan: thenScan)
                }
            case .skip(let remaining, let scanEXIF):
                let take = min(remaining, n - i)
                if scanEXIF { exif.take(bytes.slice(i..<i + take)) }
                i += take
                if take == remaining {
                    if scanEXIF { for name in exif.names() { log.note(name) } }
                    state = .marker
                } else {
                    state = .skip(remaining: remaining - take, exif: scanEXIF)
                }
            case .scan:
                var j = i
                while j < n && bytes[j] != 0xFF { j += 1 }
                if j > i { emit(bytes.slice(i..<j)) }
                if j < n {
                    state = .scanFF
                    j += 1
                }
                i = j
            case .scanFF:
                let code = bytes[i]
                i += 1
                switch code {
                case 0x00, 0xD0...0xD7:
                    emitPair(0xFF, code, emit)
                    state = .scan
                case 0xFF:
                    break  // fill
                default:
                    try marker(code, emit: emit)
                }
            case .trailing:
                log.note("trailing-data")
                i = n
            }
        }
    }

    /// Handles marker `code` after a held FF.
    private func marker(_ code: UInt8, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        switch code {
        case 0xFF:
            state = .markerCode  // fill byte
        case 0xD8:
            throw .malformed("jpeg: second SOI")
        case 0xD9:
            emitPair(0xFF, 0xD9, emit)
            state = .trailing
        case 0x01, 0xD0...0xD7:
            emitPair(0xFF, code, emit)
            state = .marker
        case 0x00, 0x02...0xBF:
            throw .malformed("jpeg: unexpected marker FF\(hex(code))")
        default:
            state = .length(marker: code, high: nil)
        }
    }

    /// Decides what happens to segment `marker` whose length field is `length`.
    private func segment(_ marker: UInt8, length: Int, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        guard length >= 2 else { throw .malformed("jpeg: segment FF\(hex(marker)) length \(length) below 2") }
        let payload = length - 2
        head.removeAll(keepingCapacity: true)
        head.append(0xFF)
        head.append(marker)
        head.append(UInt8(truncatingIfNeeded: length >> 8))
        head.append(UInt8(truncatingIfNeeded: length))
        switch marker {
        case 0xE1:
            exif = EXIFScan()
            state = .skip(remaining: payload, exif: true)
            if payload == 0 { log.note("app1"); state = .marker }
        case 0xED:
            log.note("iptc")
            state = .skip(remaining: payload, exif: false)
        case 0xFE:
            log.note("comment")
            state = .skip(remaining: payload, exif: false)
        case 0xE0, 0xE2, 0xEE:
            let want = min(payload, JPEGDisarmer.identifier(for: marker).count)
            state = .identify(marker: marker, want: want, remaining: payload - want)
            if want == 0 { decide(marker, remaining: payload, emit: emit) }
        case 0xE3...0xEC, 0xEF:
            log.note("app\(marker - 0xE0)")
            state = .skip(remaining: payload, exif: false)
        default:
            head.withUnsafeBytes { emit($0) }
            state = .copy(remaining: payload, thenScan: marker == 0xDA)
        }
        if case .copy(0, let thenScan) = state { state = thenScan ? .scan : .marker }
        if case .skip(0, false) = state { state = .marker }
    }

    /// The identifier that keeps an APP0, APP2 or APP14 segment.
    private static func identifier(for marker: UInt8) -> [UInt8] {
        switch marker {
        case 0xE0: return Array("JFIF\0".utf8)
        case 0xE2: return Array("ICC_PROFILE\0".utf8)
        default: return Array("Adobe".utf8)
        }
    }

    /// Keeps (emits the held header and identifier, copies the rest) or drops an identified APPn segment.
    private func decide(_ marker: UInt8, remaining: Int, emit: (UnsafeRawBufferPointer) -> Void) {
        let id = JPEGDisarmer.identifier(for: marker)
        if head.count - 4 == id.count && head[4...].elementsEqual(id) {
            head.withUnsafeBytes { emit($0) }
            state = remaining == 0 ? .marker : .copy(remaining: remaining, thenScan: false)
        } else {
            log.note("app\(marker - 0xE0)")
            state = remaining == 0 ? .marker : .skip(remaining: remaining, exif: false)
        }
    }

    private func hex(_ b: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(b >> 4)], digits[Int(b & 15)]])
    }
}

/// Watches the payload of an APP1 segment go by (it is dropped either way) to name it for the audit record:
/// "exif" (plus "gps" when IFD0 holds the GPS IFD pointer, tag 0x8825), "xmp", or "app1". Reads the TIFF header
/// and IFD0 only when they lie ahead in the stream; an IFD0 offset pointing backwards is not followed.
struct EXIFScan {
    /// Payload offset of the next byte.
    private var position = 0
    /// The first 14 payload bytes: "Exif\0\0", byte order, 42, IFD0 offset.
    private var start: [UInt8] = []
    /// Payload offset of IFD0, once known.
    private var ifd: Int?
    private var entryCount = 0
    private var tag = 0
    private var gps = false

    mutating func take(_ bytes: UnsafeRawBufferPointer) {
        for b in bytes {
            step(b)
            position += 1
        }
    }

    private mutating func step(_ b: UInt8) {
        if position < 14 {
            start.append(b)
            if position == 13 { ifd = ifdOffset() }
            return
        }
        guard let ifd, !gps, position >= ifd else { return }
        let little = start[6] == 0x49
        let rel = position - ifd
        if rel < 2 {
            entryCount = little ? entryCount | Int(b) << (8 * rel) : entryCount << 8 | Int(b)
            return
        }
        let entry = (rel - 2) / 12
        let within = (rel - 2) % 12
        guard entry < entryCount, within < 2 else { return }
        tag = within == 0 ? Int(b) : (little ? tag | Int(b) << 8 : tag << 8 | Int(b))
        if within == 1 && tag == 0x8825 { gps = true }
    }

    /// Payload offset of IFD0 from a valid "Exif\0\0" + TIFF header, else nil.
    private func ifdOffset() -> Int? {
        guard start.count == 14, start[0..<6].elementsEqual(Array("Exif\0\0".utf8)) else { return nil }
        let little: Bool
        switch (start[6], start[7]) {
        case (0x49, 0x49): little = true
        case (0x4D, 0x4D): little = false
        default: return nil
        }
        let field = start[8..<14].map { Int($0) }
        let magic = little ? field[0] | field[1] << 8 : field[0] << 8 | field[1]
        guard magic == 42 else { return nil }
        let offset = little
            ? field[2] | field[3] << 8 | field[4] << 16 | field[5] << 24
            : field[2] << 24 | field[3] << 16 | field[4] << 8 | field[5]
        guard offset >= 8, offset <= 65_535 else { return nil }
        return 6 + offset
    }

    /// The audit names for the segment seen.
    func names() -> [String] {
        if start.count >= 6 && start[0..<6].elementsEqual(Array("Exif\0\0".utf8)) {
            return gps ? ["exif", "gps"] : ["exif"]
        }
        if start.count >= 5 && start[0..<5].elementsEqual(Array("http:".utf8)) { return ["xmp"] }
        return ["app1"]
    }
}
