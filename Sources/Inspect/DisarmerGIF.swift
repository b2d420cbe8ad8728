// GIF disarm: a walk over the blocks (GIF89a specification) that keeps only what rendering needs.
//
//   "GIF87a"|"GIF89a" screen(7) [global colour table] {
//       2C descriptor(9) [local colour table] LZW-minimum(1) sub-blocks
//     | 21 label sub-blocks                  (sub-blocks: { size(1) data(size) } 00)
//   } 3B
//
//   kept:    the header, logical screen descriptor and global colour table; every image (descriptor, local
//            colour table, LZW data sub-blocks), byte for byte; graphic control extensions (F9: transparency,
//            frame delay) in their standard form only (one 4-byte sub-block); the application extension
//            "NETSCAPE2.0" or "ANIMEXTS1.0" (looping) only as its standard 3-byte loop sub-block; the trailer
//   dropped: comment extensions "comment", plain text extensions "plain-text", every other application
//            extension (XMP, ICC, private) and a non-standard looping one "application", a non-standard graphic
//            control extension "graphic-control", extensions with any other label "extension", bytes after the
//            trailer "trailing-data"
//   errors:  a bad signature, a byte other than 2C, 21 or 3B where a block must start, the part ending before
//            the trailer
//
// Memory: at most the 13-byte header or a block's first 16 bytes; image data streams through.

/// Rewrites a GIF as it streams, keeping only the blocks rendering needs. See the file header for the rules.
final class GIFDisarmer: DisarmFormat {
    /// The step an extension being identified has reached; `head` holds its bytes after the label.
    private enum Step {
        /// Graphic control: its first sub-block's size, its 4 bytes, the terminator.
        case controlSize, controlData, controlEnd
        /// Application: identifier block size, identifier (11), loop sub-block size, loop data (3), terminator.
        case applicationSize, applicationID, loopSize, loopData, loopEnd
    }

    private enum State {
        /// Collecting the 13-byte header and logical screen descriptor into `head`.
        case header
        /// Copying `remaining` colour table bytes; `thenImage`: the LZW minimum code size follows.
        case table(remaining: Int, thenImage: Bool)
        /// Expecting a block: 2C image, 21 extension, 3B trailer.
        case block
        /// Collecting an image descriptor's 9 bytes into `head`.
        case descriptor
        /// Expecting the LZW minimum code size (copied).
        case lzwMinimum
        /// Expecting an extension label.
        case label
        /// Collecting `want` more bytes of an extension into `head`, then deciding at `step`.
        case collect(want: Int, step: Step)
        /// Expecting a sub-block size (00 ends the block); `keep`: copied.
        case subSize(keep: Bool)
        /// `remaining` bytes of a sub-block.
        case subData(remaining: Int, keep: Bool)
        /// After the trailer: everything is dropped.
        case trailing
    }

    /// Application identifiers whose only sub-block sets the loop count.
    private static let loopIdentifiers = ["NETSCAPE2.0", "ANIMEXTS1.0"].map { Array($0.utf8) }

    private var state: State = .header
    private var head: [UInt8] = []
    private var log = DisarmLog()

    var removed: [String] { log.names }

    init() { head.reserveCapacity(20) }

    func end(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        guard case .trailing = state else { throw .malformed("gif: truncated (ended before the trailer)") }
    }

    func run(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        var i = 0
        let n = bytes.count
        while i < n {
            switch state {
            case .header:
                let take = min(13 - head.count, n - i)
                head.append(contentsOf: bytes.slice(i..<i + take))
                i += take
                if head.count == 13 { try header(emit: emit) }
            case .table(let remaining, let thenImage):
                let take = min(remaining, n - i)
                emit(bytes.slice(i..<i + take))
                i += take
                if take == remaining {
                    state = thenImage ? .lzwMinimum : .block
                } else {
                    state = .table(remaining: remaining - take, thenImage: thenImage)
                }
            case .block:
                let b = bytes[i]
                i += 1
                head.removeAll(keepingCapacity: true)
                switch b {
                case 0x2C: state = .descriptor
                case 0x21: state = .label
                case 0x3B:
                    emit(bytes.slice(i - 1..<i))
                    state = .trailing
                default: throw .malformed("gif: unexpected block \(b)")
                }
            case .descriptor:
                let take = min(9 - head.count, n - i)
                head.append(contentsOf: bytes.slice(i..<i + take))
                i += take
                if head.count == 9 {
                    emitPair(0x2C, head[0], emit)
                    head.withUnsafeBytes { emit($0.slice(1..<9)) }
                    state = colourTable(packed: head[8], thenImage: true)
                }
            case .lzwMinimum:
                emit(bytes.slice(i..<i + 1))
                i += 1
                state = .subSize(keep: true)
            case .label:
                let b = bytes[i]
                i += 1
                extensionLabel(b)
            case .collect(let want, let step):
                let take = min(want, n - i)
                head.append(contentsOf: bytes.slice(i..<i + take))
                i += take
                if take == want {
                    advance(step, emit: emit)
                } else {
                    state = .collect(want: want - take, step: step)
                }
            case .subSize(let keep):
                let size = Int(bytes[i])
                if keep { emit(bytes.slice(i..<i + 1)) }
                i += 1
                state = size == 0 ? .block : .subData(remaining: size, keep: keep)
            case .subData(let remaining, let keep):
                let take = min(remaining, n - i)
                if keep { emit(bytes.slice(i..<i + take)) }
                i += take
                state = take == remaining ? .subSize(keep: keep) : .subData(remaining: remaining - take, keep: keep)
            case .trailing:
                log.note("trailing-data")
                i = n
            }
        }
    }

    /// Checks and copies the header and logical screen descriptor held in `head`.
    private func header(emit: (UnsafeRawBufferPointer) -> Void) throws(DisarmError) {
        guard head[0..<4].elementsEqual(Array("GIF8".utf8)), head[4] == 0x37 || head[4] == 0x39, head[5] == 0x61
        else { throw .malformed("gif: bad signature") }
        head.withUnsafeBytes { emit($0) }
        state = colourTable(packed: head[10], thenImage: false)
    }

    /// The state after a descriptor whose packed field is `packed`: its colour table, if it has one.
    private func colourTable(packed: UInt8, thenImage: Bool) -> State {
        guard packed & 0x80 != 0 else { return thenImage ? .lzwMinimum : .block }
        return .table(remaining: 3 << (Int(packed & 7) + 1), thenImage: thenImage)
    }

    /// Starts an extension with label `label` (the 21 before it is not emitted yet).
    private func extensionLabel(_ label: UInt8) {
        switch label {
        case 0xF9:
            state = .collect(want: 1, step: .controlSize)
        case 0xFF:
            state = .collect(want: 1, step: .applicationSize)
        case 0xFE:
            log.note("comment")
            state = .subSize(keep: false)
        case 0x01:
            log.note("plain-text")
            state = .subSize(keep: false)
        default:
            log.note("extension")
            state = .subSize(keep: false)
        }
    }

    /// Decides at `step`, with the extension's bytes so far in `head` (its last byte just collected).
    private func advance(_ step: Step, emit: (UnsafeRawBufferPointer) -> Void) {
        let last = head[head.count - 1]
        switch step {
        case .controlSize:
            if last == 4 { state = .collect(want: 4, step: .controlData) } else { drop("graphic-control", size: last) }
        case .controlData:
            state = .collect(want: 1, step: .controlEnd)
        case .controlEnd:
            if last == 0 { keep(label: 0xF9, emit: emit) } else { drop("graphic-control", size: last) }
        case .applicationSize:
            if last == 11 { state = .collect(want: 11, step: .applicationID) } else { drop("application", size: last) }
        case .applicationID:
            let id = Array(head[1..<12])
            if GIFDisarmer.loopIdentifiers.contains(id) {
                state = .collect(want: 1, step: .loopSize)
            } else {
                log.note("application")
                state = .subSize(keep: false)
            }
        case .loopSize:
            if last == 3 { state = .collect(want: 3, step: .loopData) } else { drop("application", size: last) }
        case .loopData:
            if head[13] == 1 {
                state = .collect(want: 1, step: .loopEnd)
            } else {
                log.note("application")
                state = .subSize(keep: false)
            }
        case .loopEnd:
            if last == 0 { keep(label: 0xFF, emit: emit) } else { drop("application", size: last) }
        }
    }

    /// Emits the standard extension collected in `head`.
    private func keep(label: UInt8, emit: (UnsafeRawBufferPointer) -> Void) {
        emitPair(0x21, label, emit)
        head.withUnsafeBytes { emit($0) }
        state = .block
    }

    /// Drops the extension being identified, whose sub-block of `size` bytes (00: the terminator) comes next.
    private func drop(_ name: String, size: UInt8) {
        log.note(name)
        state = size == 0 ? .block : .subData(remaining: Int(size), keep: false)
    }
}
