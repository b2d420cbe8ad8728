// JPEG disarm: a walk over the marker segments (ITU T.81 Annex B) that keeps only what rendering needs.
//
//   FFD8 ─▶ { [FF…]FFxx len(2, BE, counts itself) payload  |  FFD0–D7 / FF01 (standalone)
//           | FFDA len header ─▶ entropy-coded data (FF00 and FFD0–D7 inside) until another marker } ─▶ FFD9
//
//   kept:    SOI, EOI, SOFn, DHT, DAC, DQT, DRI, DNL, DHP, EXP, SOS + scan data, RSTn, TEM (byte for byte);
//            APP0 "JFIF\0" rewritten to its 14-byte header without thumbnail; APP14 "Adobe" (colour transform
//            of CMYK/YCCK) rewritten to its 12 bytes; APP2 "ICC_PROFILE\0" segments before the first SOS, held
//            until the profile's last one (in sequence: 1…count), kept only if the reassembled profile passes
//            `ICCProfile.isAcceptable`, then written again in segments of at most 65,519 profile bytes
//   dropped: APP1 (EXIF "exif" [+ "gps" when IFD0 has tag 0x8825], XMP "xmp", other "app1"), APP13 "iptc",
//            COM "comment", an ICC profile that fails the test, is out of sequence, incomplete at the first SOS
//            or over `ICCProfile.maximumSize` "icc", a JFIF thumbnail "jfif-thumbnail", every other APPn
//            "appN" (APP0 JFXX thumbnails, APP2 MPF/FlashPix, …), JPGn extensions (FFC8, FFF0–FFFD)
//            "jpg-extension", bytes after EOI "trailing-data"; fill bytes (extra FF before a marker) are not
//            copied
//   errors:  no SOI, a second SOI, FF00 or a reserved marker (02–BF) between segments, a length below 2, a
//            SOFn, SOS or DRI segment longer or shorter than its content (8 + 3 × components, 6 + 2 × components,
//            4), anything but FF where a marker must start, the part ending before EOI
//
// Memory: a segment header and at most 14 identifying (or length-giving) payload bytes, and an ICC profile while
// it is judged; every other payload streams through (copied or skipped).

/// Rewrites a JPEG as it streams, keeping only the segments rendering needs. See the file header for the rules.
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
        /// what happens to an APP0/APP2/APP14 segment; `remaining` payload bytes follow those.
        case identify(marker: UInt8, want: Int, remaining: Int)
        /// Copying `remaining` payload bytes; `thenScan`: entropy-coded data follows (SOS).
        case copy(remaining: Int, thenScan: Bool)
        /// Dropping `remaining` payload bytes; `exif`: they go through the APP1 scanner.
        case skip(remaining: Int, exif: Bool)
        /// Appending `remaining` bytes of an ICC_PROFILE segment to `profile`.
        case icc(remaining: Int)
        /// Entropy-coded data: copied until FF.
        case scan
        /// Entropy-coded data, saw FF (held): 00 or RSTn continue the scan, FF is fill, anything else a marker.
        case scanFF
        /// After EOI: everything is dropped.
        case trailing
    }

    /// Where the ICC profile's segments are.
    private enum ProfileState {
        /// None seen yet.
        case none
        /// Segments 1 ..< `next` of `count` are in `profile`.
        case collecting(next: Int, count: Int)
        /// Kept or dropped; later ICC segments are dropped.
        case over
    }

    /// Profile bytes carried by one rewritten APP2 segment: 65,535 less the length field, identifier, sequence
    /// number and count.
    static let profileBytesPerSegment = 65_535 - 2 - 12 - 2

    private var state: State = .soi(index: 0)
    private var head: [UInt8] = []
    private var exif = EXIFScan()
    private var profile: [UInt8] = []
    private var profileState = ProfileState.none
    private var sawScan = false
    private var log = DisarmLog()

    var removed: [String] { log.names }

    init() { head.reserveCapacity(18) }

    func end(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        switch state {
        case .trailing: return
        case .soi, .marker, .markerCode, .length, .identify, .copy, .skip, .icc, .scan, .scanFF:
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
                if head.count - 4 == want { try decide(marker, remaining: remaining, emit: emit) }
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
            case .icc(let remaining):
                let take = min(remaining, n - i)
                profile.append(contentsOf: bytes.slice(i..<i + take))
                i += take
                if take == remaining {
                    profileSegmentEnded(emit: emit)
                } else {
                    state = .icc(remaining: remaining - take)
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
            if case .collecting = profileState { abandonProfile() }
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
        case 0xE0, 0xE2, 0xEE, 0xC0...0xC3, 0xC5...0xC7, 0xC9...0xCB, 0xCD...0xCF, 0xDA:
            let want = min(payload, JPEGDisarmer.identified(marker))
            state = .identify(marker: marker, want: want, remaining: payload - want)
            if want == 0 { try decide(marker, remaining: payload, emit: emit) }
        case 0xDD:
            guard payload == 2 else { throw .malformed("jpeg: DRI of \(payload) bytes, not 2") }
            head.withUnsafeBytes { emit($0) }
            state = .copy(remaining: payload, thenScan: false)
        case 0xE3...0xEC, 0xEF:
            log.note("app\(marker - 0xE0)")
            state = .skip(remaining: payload, exif: false)
        case 0xC8, 0xF0...0xFD:
            log.note("jpg-extension")
            state = .skip(remaining: payload, exif: false)
        default:
            head.withUnsafeBytes { emit($0) }
            state = .copy(remaining: payload, thenScan: false)
        }
        if case .copy(0, let thenScan) = state { state = thenScan ? .scan : .marker }
        if case .skip(0, false) = state { state = .marker }
    }

    /// How many payload bytes identify an APP0 (JFIF header), APP2 (ICC identifier, sequence number and count)
    /// or APP14 (Adobe) segment, or give the component count that sets a SOFn (6) or SOS (1) segment's length.
    private static func identified(_ marker: UInt8) -> Int {
        switch marker {
        case 0xE0, 0xE2: return 14
        case 0xEE: return 12
        case 0xDA: return 1
        default: return 6
        }
    }

    /// Whether the identifying bytes in `head` start with `id`.
    private func headStarts(with id: StaticString) -> Bool {
        let n = id.utf8CodeUnitCount
        guard head.count - 4 >= n else { return false }
        let p = id.utf8Start
        for k in 0..<n where head[4 + k] != p[k] { return false }
        return true
    }

    /// Keeps (rewritten), collects (ICC) or drops an identified APPn segment, or checks a SOFn or SOS segment's
    /// length against its component count and copies it, with `remaining` bytes after `head`.
    private func decide(
        _ marker: UInt8, remaining: Int, emit: (UnsafeRawBufferPointer) -> Void
    ) throws(DisarmError) {
        let complete = head.count - 4 == JPEGDisarmer.identified(marker)
        switch marker {
        case 0xDA:
            guard complete, 1 + remaining == 4 + 2 * Int(head[4]) else {
                throw .malformed("jpeg: SOS length does not match its component count")
            }
            if case .collecting = profileState { abandonProfile() }
            sawScan = true
            head.withUnsafeBytes { emit($0) }
            state = .copy(remaining: remaining, thenScan: true)
        case 0xC0...0xCF:
            guard complete, 6 + remaining == 6 + 3 * Int(head[9]) else {
                throw .malformed("jpeg: SOF\(marker - 0xC0) length does not match its component count")
            }
            head.withUnsafeBytes { emit($0) }
            state = remaining == 0 ? .marker : .copy(remaining: remaining, thenScan: false)
        case 0xE0 where complete && headStarts(with: "JFIF\0"):
            // The header as it is, with a 0×0 thumbnail and the length that says so.
            if remaining > 0 || head[16] != 0 || head[17] != 0 { log.note("jfif-thumbnail") }
            head[2] = 0
            head[3] = 16
            head[16] = 0
            head[17] = 0
            head.withUnsafeBytes { emit($0) }
            skip(remaining)
        case 0xEE where complete && headStarts(with: "Adobe"):
            head[2] = 0
            head[3] = 14
            head.withUnsafeBytes { emit($0) }
            skip(remaining)
        case 0xE2 where complete && headStarts(with: "ICC_PROFILE\0"):
            profileSegment(sequence: Int(head[16]), count: Int(head[17]), remaining: remaining, emit: emit)
        default:
            log.note("app\(marker - 0xE0)")
            skip(remaining)
        }
    }

    /// Drops `remaining` payload bytes.
    private func skip(_ remaining: Int) {
        state = remaining == 0 ? .marker : .skip(remaining: remaining, exif: false)
    }

    /// An ICC_PROFILE segment numbered `sequence` of `count`, `remaining` profile bytes to come.
    private func profileSegment(
        sequence: Int, count: Int, remaining: Int, emit: (UnsafeRawBufferPointer) -> Void
    ) {
        let next: Int
        switch profileState {
        case .none where !sawScan && sequence == 1 && count >= 1:
            next = 1
        case .collecting(let expected, let total) where sequence == expected && count == total:
            next = expected
        case .none, .collecting, .over:
            abandonProfile()
            skip(remaining)
            return
        }
        guard remaining <= ICCProfile.maximumSize - profile.count else {
            abandonProfile()
            skip(remaining)
            return
        }
        profileState = .collecting(next: next, count: count)
        state = .icc(remaining: remaining)
        if remaining == 0 { profileSegmentEnded(emit: emit) }
    }

    /// The current ICC segment's bytes are in `profile`: after the last one, the profile is judged and written
    /// again or dropped.
    private func profileSegmentEnded(emit: (UnsafeRawBufferPointer) -> Void) {
        state = .marker
        guard case .collecting(let next, let count) = profileState else { return }
        guard next == count else {
            profileState = .collecting(next: next + 1, count: count)
            return
        }
        profileState = .over
        if profile.withUnsafeBytes({ ICCProfile.isAcceptable($0) }) {
            let per = JPEGDisarmer.profileBytesPerSegment
            let segments = (profile.count + per - 1) / per
            var start = 0
            for k in 1...segments {
                let end = min(start + per, profile.count)
                let length = 2 + 12 + 2 + end - start
                var header: [UInt8] = [0xFF, 0xE2, UInt8(length >> 8), UInt8(length & 0xFF)]
                header += Array("ICC_PROFILE\0".utf8)
                header += [UInt8(k), UInt8(segments)]
                header.withUnsafeBytes { emit($0) }
                profile.withUnsafeBytes { emit($0.slice(start..<end)) }
                start = end
            }
        } else {
            log.note("icc")
        }
        profile = []
    }

    /// Drops the profile (and every later ICC segment): its segments are out of sequence, over the size limit,
    /// after the first scan, or incomplete at the first SOS or EOI.
    private func abandonProfile() {
        log.note("icc")
        profile = []
        profileState = .over
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
