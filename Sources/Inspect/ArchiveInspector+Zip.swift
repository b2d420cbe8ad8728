import CZlib

// ZIP read front to back as it streams (APPNOTE 6.3.10):
//
//   [local header 30 + name + extra][data (stored | raw deflate)][descriptor, if flag bit 3] … repeated
//   [central header 46 + name + extra + comment] … one per entry
//   [zip64 end 56+ ][zip64 locator 20]   (optional)
//   [end record 22 + comment]
//
// Each entry is inflated to learn its real size and CRC; the local header (or its data descriptor) must agree with
// the data (else `malformed`), and the central directory must agree with what the local headers said, in the
// same order and at the same offsets (else `centralDirectoryMismatch`). Only the per-entry facts the comparison
// needs are kept (48 bytes an entry, bounded by `entriesMax`).

final class ZipParser: ArchiveParser {
    private enum Phase { case entries, central, done }

    private enum State {
        /// Collecting a record signature (4 bytes in `buf`).
        case signature
        case localHeader
        case localVariable(need: Int)
        case stored(remaining: UInt64)
        /// nil: flag bit 3, the data runs to the end of the deflate stream.
        case deflated(remaining: UInt64?)
        /// An encrypted member (allowed): skipped, not inspected.
        case skipData(remaining: UInt64)
        case descriptor
        case descriptorRest(need: Int, signed: Bool)
        case centralHeader
        case centralVariable(need: Int)
        case endRecord
        case zip64End
        case locator
        case digitalSignature
        case skip(remaining: UInt64, thenDone: Bool)
        case done
    }

    /// What the comparison with the central directory needs of one local entry, and what is wrong with its content
    /// as a symbolic link's target (judged if the central directory says the entry is a link).
    private struct Local {
        let nameKey: Int
        let crc: UInt32
        let compressed: UInt64
        let uncompressed: UInt64
        let offset: UInt64
        let end: UInt64
        let linkProblem: (ArchiveProblem, String)?
    }

    /// Longest symbolic link target read (bytes): Linux's PATH_MAX.
    static let linkMax = 4096

    /// The entry being read.
    private struct Entry {
        var name = ""
        var nameKey = 0
        var method: UInt16 = 0
        var crc: UInt32 = 0
        var compressed: UInt64 = 0
        var uncompressed: UInt64 = 0
        var zip64 = false
        var offset: UInt64 = 0
        var inspected = true
        var realCrc: UInt32 = 0
        var realIn: UInt64 = 0
        var realOut: UInt64 = 0
        /// The first `linkMax` bytes of content: a link's target, if the central directory says it is a link.
        var start: [UInt8] = []
    }

    private let context: ArchiveContext
    private var state = State.signature
    private var phase = Phase.entries
    private var buf: [UInt8] = []
    /// Bytes of the archive taken so far.
    private var offset: UInt64 = 0
    private var recordStart: UInt64 = 0
    private var entry = Entry()
    private var scanner: MemberScanner?
    private var inflater: ArchiveInflater?
    private var locals: [Local] = []
    private var names = Set<Int>()
    private var centralIndex = 0
    private var centralStart: UInt64?
    private var archiveOut: UInt64 = 0

    init(_ context: ArchiveContext) {
        self.context = context
        buf.reserveCapacity(64)
    }

    func feed(_ bytes: UnsafeRawBufferPointer) -> ArchiveFinding? {
        var i = 0
        while true {
            let start = i
            let tag = stateTag
            if let finding = step(bytes, &i) { return finding }
            if i == start && stateTag == tag { return nil }
        }
    }

    func finish() -> ArchiveFinding? {
        // Transitions that need no more bytes (an empty last entry, a comment of length 0) happen in feed.
        switch state {
        case .done: return nil
        case .signature where offset == 0: return context.finding(.malformed, nil, "empty archive")
        case .stored, .deflated, .skipData, .descriptor, .descriptorRest:
            return context.finding(.malformed, entry.name, "archive truncated inside an entry")
        default:
            return context.finding(.malformed, nil, "archive truncated (no end of central directory record)")
        }
    }

    private var stateTag: Int {
        switch state {
        case .signature: return 0
        case .localHeader: return 1
        case .localVariable: return 2
        case .stored: return 3
        case .deflated: return 4
        case .skipData: return 5
        case .descriptor: return 6
        case .descriptorRest: return 7
        case .centralHeader: return 8
        case .centralVariable: return 9
        case .endRecord: return 10
        case .zip64End: return 11
        case .locator: return 12
        case .digitalSignature: return 13
        case .skip: return 14
        case .done: return 15
        }
    }

    // MARK: steps

    private func step(_ bytes: UnsafeRawBufferPointer, _ i: inout Int) -> ArchiveFinding? {
        switch state {
        case .signature:
            guard fill(4, bytes, &i) else { return nil }
            return dispatch()
        case .localHeader:
            guard fill(30, bytes, &i) else { return nil }
            let nameLength = Int(u16(26))
            if nameLength > ArchiveInspector.nameMax {
                return context.finding(.malformed, nil, "member name longer than \(ArchiveInspector.nameMax) bytes")
            }
            state = .localVariable(need: 30 + nameLength + Int(u16(28)))
            return nil
        case .localVariable(let need):
            guard fill(need, bytes, &i) else { return nil }
            return beginEntry()
        case .stored(let remaining):
            if remaining == 0 { return endEntry() }
            let n = Int(min(UInt64(bytes.count - i), remaining))
            guard n > 0 else { return nil }
            let piece = UnsafeRawBufferPointer(rebasing: bytes[i..<(i + n)])
            advance(n, &i)
            state = .stored(remaining: remaining - UInt64(n))
            entry.realIn &+= UInt64(n)
            return output(piece)
        case .deflated(let remaining):
            return inflate(bytes, &i, remaining: remaining)
        case .skipData(let remaining):
            if remaining == 0 { return endEntry() }
            let n = Int(min(UInt64(bytes.count - i), remaining))
            advance(n, &i)
            state = .skipData(remaining: remaining - UInt64(n))
            return nil
        case .descriptor:
            guard fill(4, bytes, &i) else { return nil }
            // The signature is optional; a CRC equal to it is told apart by the CRC we computed.
            let signed = u32(0) == 0x0807_4B50 && entry.realCrc != 0x0807_4B50
            state = .descriptorRest(need: (signed ? 4 : 0) + 4 + (entry.zip64 ? 16 : 8), signed: signed)
            return nil
        case .descriptorRest(let need, let signed):
            guard fill(need, bytes, &i) else { return nil }
            let base = signed ? 4 : 0
            entry.crc = u32(base)
            if entry.zip64 {
                entry.compressed = u64(base + 4)
                entry.uncompressed = u64(base + 12)
            } else {
                entry.compressed = UInt64(u32(base + 4))
                entry.uncompressed = UInt64(u32(base + 8))
            }
            return endEntry()
        case .centralHeader:
            guard fill(46, bytes, &i) else { return nil }
            let nameLength = Int(u16(28))
            if nameLength > ArchiveInspector.nameMax {
                return context.finding(.malformed, nil, "member name longer than \(ArchiveInspector.nameMax) bytes")
            }
            state = .centralVariable(need: 46 + nameLength + Int(u16(30)))
            return nil
        case .centralVariable(let need):
            guard fill(need, bytes, &i) else { return nil }
            return centralEntry()
        case .endRecord:
            guard fill(22, bytes, &i) else { return nil }
            return endRecord()
        case .zip64End:
            guard fill(12, bytes, &i) else { return nil }
            let size = u64(4)
            guard size >= 44, size <= UInt64(ArchiveInspector.extraMax) else {
                return context.finding(.malformed, nil, "zip64 end record of \(size) bytes")
            }
            buf = []
            state = .skip(remaining: size, thenDone: false)
            return nil
        case .locator:
            guard fill(20, bytes, &i) else { return nil }
            buf = []
            state = .signature
            return nil
        case .digitalSignature:
            guard fill(6, bytes, &i) else { return nil }
            let size = UInt64(u16(4))
            buf = []
            state = .skip(remaining: size, thenDone: false)
            return nil
        case .skip(let remaining, let thenDone):
            if remaining == 0 {
                buf = []
                if thenDone {
                    state = .done
                    phase = .done
                } else {
                    state = .signature
                }
                return nil
            }
            let n = Int(min(UInt64(bytes.count - i), remaining))
            advance(n, &i)
            state = .skip(remaining: remaining - UInt64(n), thenDone: thenDone)
            return nil
        case .done:
            guard i < bytes.count else { return nil }
            return context.finding(.malformed, nil, "data after the end of central directory record")
        }
    }

    /// A record signature was read: go on with the record it starts.
    private func dispatch() -> ArchiveFinding? {
        recordStart = offset - 4
        let signature = u32(0)
        switch signature {
        case 0x0403_4B50:
            guard phase == .entries else {
                return context.finding(.malformed, nil, "local header after the central directory")
            }
            state = .localHeader
        case 0x0201_4B50:
            if centralStart == nil { centralStart = recordStart }
            phase = .central
            state = .centralHeader
        case 0x0605_4B50:
            if centralStart == nil { centralStart = recordStart }
            state = .endRecord
        case 0x0606_4B50:
            if centralStart == nil { centralStart = recordStart }
            phase = .central
            state = .zip64End
        case 0x0706_4B50:
            state = .locator
        case 0x0505_4B50 where phase == .central:
            state = .digitalSignature
        case 0x0806_4B50:
            if !context.limits.allowEncrypted {
                return context.finding(.encrypted, nil, "encrypted central directory")
            }
            return context.finding(.malformed, nil, "encrypted central directory cannot be compared")
        default:
            let hex = String(signature, radix: 16)
            return context.finding(.malformed, nil, "unexpected record signature 0x\(hex) at offset \(recordStart)")
        }
        return nil
    }

    // MARK: entries

    private func beginEntry() -> ArchiveFinding? {
        let nameLength = Int(u16(26))
        let nameBytes = Array(buf[30..<(30 + nameLength)])
        let extra = buf[(30 + nameLength)...]
        let flags = u16(6)
        entry = Entry()
        entry.name = ArchiveNames.display(nameBytes)
        entry.nameKey = ArchiveNames.exactKey(nameBytes)
        entry.method = u16(8)
        entry.crc = u32(14)
        var compressed = UInt64(u32(18))
        var uncompressed = UInt64(u32(22))
        entry.zip64 = Self.zip64(extra, uncompressed: &uncompressed, compressed: &compressed, offset: nil)
        entry.compressed = compressed
        entry.uncompressed = uncompressed
        entry.offset = recordStart
        buf = []
        let name = entry.name

        if let finding = context.countEntry(name) { return finding }
        let isDirectory = nameBytes.last == UInt8(ascii: "/") || nameBytes.last == UInt8(ascii: "\\")
        if let (problem, detail) = ArchiveNames.check(nameBytes, isDirectory: isDirectory, context: context) {
            return context.finding(problem, name, detail)
        }
        if !names.insert(ArchiveNames.duplicateKey(nameBytes)).inserted {
            return context.finding(.duplicate, name, "a member with the same name came earlier")
        }
        let descriptor = flags & 0x0008 != 0
        if flags & 0x0001 != 0 || flags & 0x0040 != 0 || flags & 0x2000 != 0 || entry.method == 99 {
            guard context.limits.allowEncrypted else { return context.finding(.encrypted, name, "encrypted member") }
            guard !descriptor else {
                return context.finding(.malformed, name, "encrypted member with a data descriptor cannot be skipped")
            }
            entry.inspected = false
            state = .skipData(remaining: entry.compressed)
            return nil
        }
        scanner = MemberScanner(context, name: name)
        switch entry.method {
        case 0:
            guard !descriptor else {
                return context.finding(.malformed, name, "stored member with a data descriptor (its end is unknown)")
            }
            state = .stored(remaining: entry.compressed)
        case 8:
            if inflater == nil { inflater = ArchiveInflater(windowBits: -15) }
            guard let inflater, inflater.reset() else {
                return context.finding(.malformed, name, "cannot start inflating")
            }
            state = .deflated(remaining: descriptor ? nil : entry.compressed)
        default:
            return context.finding(.malformed, name, "compression method \(entry.method)")
        }
        return nil
    }

    private func inflate(_ bytes: UnsafeRawBufferPointer, _ i: inout Int, remaining: UInt64?) -> ArchiveFinding? {
        guard let inflater else { return context.finding(.malformed, entry.name, "no inflate stream") }
        if remaining == 0 {
            return context.finding(.malformed, entry.name, "deflate data longer than its compressed size")
        }
        let available = bytes.count - i
        // Input is cut at every `ratioStep` compressed bytes, where the ratio is judged: the output of the first
        // n compressed bytes does not depend on how they arrived, so neither does the finding.
        let toCheckpoint = ArchiveInspector.ratioStep - inflater.totalIn % ArchiveInspector.ratioStep
        let limit = Int(min(UInt64(available), remaining ?? UInt64.max, toCheckpoint))
        var used = 0
        let outcome = inflater.run(UnsafeRawBufferPointer(rebasing: bytes[i..<(i + limit)]), consumed: &used) {
            self.output($0)
        }
        advance(used, &i)
        let left = remaining.map { $0 - UInt64(used) }
        state = .deflated(remaining: left)
        entry.realIn = inflater.totalIn
        switch outcome {
        case .stopped(let finding):
            return finding
        case .failed(let message):
            return context.finding(.malformed, entry.name, "invalid deflate data: \(message)")
        case .more:
            if used == 0 && limit > 0 {
                return context.finding(.malformed, entry.name, "inflate made no progress")
            }
            if inflater.totalIn % ArchiveInspector.ratioStep == 0 {
                return context.judgeRunningRatio(entry.name, out: inflater.totalOut, in: inflater.totalIn)
            }
            return nil
        case .end:
            if let left {
                guard left == 0 else {
                    return context.finding(.malformed, entry.name, "deflate data shorter than its compressed size")
                }
                return endEntry()
            }
            buf = []
            state = .descriptor
            return nil
        }
    }

    /// Uncompressed bytes of the current entry.
    private func output(_ piece: UnsafeRawBufferPointer) -> ArchiveFinding? {
        if let base = piece.baseAddress {
            entry.realCrc = UInt32(truncatingIfNeeded: crc32(uLong(entry.realCrc),
                                                             base.assumingMemoryBound(to: Bytef.self),
                                                             uInt(piece.count)))
        }
        entry.realOut &+= UInt64(piece.count)
        if entry.start.count < Self.linkMax {
            entry.start.append(contentsOf: piece.prefix(Self.linkMax - entry.start.count))
        }
        return scanner?.write(piece)
    }

    private func endEntry() -> ArchiveFinding? {
        buf = []
        let name = entry.name
        if entry.inspected {
            if entry.realCrc != entry.crc {
                return context.finding(.malformed, name, "CRC-32 \(hex(entry.realCrc)), declared \(hex(entry.crc))")
            }
            if entry.realIn != entry.compressed {
                return context.finding(.malformed, name,
                                       "compressed size \(entry.realIn), declared \(entry.compressed)")
            }
            if entry.realOut != entry.uncompressed {
                return context.finding(.malformed, name, "size \(entry.realOut), declared \(entry.uncompressed)")
            }
        }
        if let finding = scanner?.end() { return finding }
        scanner = nil
        if entry.method == 8 && entry.inspected {
            if let finding = context.judgeRatio(name, out: entry.realOut, in: entry.realIn, whole: false) {
                return finding
            }
        }
        archiveOut &+= entry.inspected ? entry.realOut : entry.compressed
        if let finding = context.judgeRatio(nil, out: archiveOut, in: offset, whole: true) { return finding }
        locals.append(Local(nameKey: entry.nameKey, crc: entry.crc, compressed: entry.compressed,
                            uncompressed: entry.uncompressed, offset: entry.offset, end: offset,
                            linkProblem: Self.linkProblem(entry)))
        state = .signature
        return nil
    }

    // MARK: central directory

    private func centralEntry() -> ArchiveFinding? {
        let nameLength = Int(u16(28))
        let extraLength = Int(u16(30))
        let nameBytes = Array(buf[46..<(46 + nameLength)])
        let extra = buf[(46 + nameLength)..<(46 + nameLength + extraLength)]
        let name = ArchiveNames.display(nameBytes)
        var uncompressed = UInt64(u32(24))
        var compressed = UInt64(u32(20))
        var localOffset = UInt64(u32(42))
        let crc = u32(16)
        let comment = UInt64(u16(32))
        let madeBy = u16(4)
        let external = u32(38)
        _ = Self.zip64(extra, uncompressed: &uncompressed, compressed: &compressed, offset: &localOffset)
        buf = []
        let index = centralIndex
        centralIndex += 1
        func mismatch(_ detail: String) -> ArchiveFinding {
            context.finding(.centralDirectoryMismatch, name, detail)
        }
        guard index < locals.count else {
            if let inside = overlapped(localOffset) {
                return mismatch("overlapping entries: local header offset \(localOffset) lies inside entry #\(inside)")
            }
            return mismatch("central directory lists more entries than the \(locals.count) local headers")
        }
        let local = locals[index]
        if localOffset != local.offset {
            if let inside = overlapped(localOffset) {
                return mismatch("overlapping entries: local header offset \(localOffset) lies inside entry #\(inside)")
            }
            return mismatch("entry #\(index): local header at \(local.offset), central directory says \(localOffset)")
        }
        if ArchiveNames.exactKey(nameBytes) != local.nameKey {
            return mismatch("entry #\(index): central directory name differs from the local header")
        }
        if crc != local.crc { return mismatch("entry #\(index): CRC-32 \(hex(crc)), local \(hex(local.crc))") }
        if compressed != local.compressed {
            return mismatch("entry #\(index): compressed size \(compressed), local \(local.compressed)")
        }
        if uncompressed != local.uncompressed {
            return mismatch("entry #\(index): size \(uncompressed), local \(local.uncompressed)")
        }
        if let (problem, detail) = Self.unixTypeProblem(madeBy: madeBy, external: external, extra: extra,
                                                        local: local) {
            return context.finding(problem, name, detail)
        }
        state = .skip(remaining: comment, thenDone: false)
        return nil
    }

    /// S_IFMT and the file types of a Unix mode.
    private static let typeMask: UInt32 = 0o170000
    private static let symbolicLink: UInt32 = 0o120000

    /// What is wrong with an entry whose Unix mode makes it a symbolic link (its target escapes, as the tar path
    /// judges links), a device or a FIFO. The mode is the high 16 bits of the external attributes when the
    /// "version made by" host is Unix (3) or macOS (19) (APPNOTE 4.4.2, 4.4.15), or the mode of an ASi Unix extra
    /// field (0x756e), whose link name, if any, is the target; otherwise the target is the entry's content.
    private static func unixTypeProblem(madeBy: UInt16, external: UInt32, extra: ArraySlice<UInt8>, local: Local)
        -> (ArchiveProblem, String)? {
        var mode: UInt32?
        var target: [UInt8]?
        let host = madeBy >> 8
        if host == 3 || host == 19 { mode = external >> 16 }
        // ASi Unix: tag 0x756e, size, CRC-32 (4), mode (2), size or device (4), uid (2), gid (2), link name.
        var at = extra.startIndex
        while at + 4 <= extra.endIndex {
            let tag = UInt16(extra[at]) | UInt16(extra[at + 1]) << 8
            let size = Int(UInt16(extra[at + 2]) | UInt16(extra[at + 3]) << 8)
            let body = at + 4
            guard body + size <= extra.endIndex else { break }
            if tag == 0x756E, size >= 14 {
                mode = UInt32(extra[body + 4]) | UInt32(extra[body + 5]) << 8
                if size > 14 { target = Array(extra[(body + 14)..<(body + size)]) }
            }
            at = body + size
        }
        guard let mode, mode & typeMask != 0 else { return nil }
        switch mode & typeMask {
        case symbolicLink:
            if let target { return linkProblem(target, complete: true) }
            return local.linkProblem
        case 0o020000, 0o060000, 0o010000, 0o140000:
            return (.forbiddenMember, "device, FIFO or socket member")
        default:
            return nil
        }
    }

    /// What is wrong with an entry's content as a link target (nil: a target inside the extraction directory).
    private static func linkProblem(_ entry: Entry) -> (ArchiveProblem, String)? {
        guard entry.inspected else { return (.malformed, "link whose target cannot be read (encrypted)") }
        return linkProblem(entry.start, complete: entry.realOut <= UInt64(linkMax))
    }

    private static func linkProblem(_ target: [UInt8], complete: Bool) -> (ArchiveProblem, String)? {
        guard complete, target.count <= linkMax else {
            return (.malformed, "link target longer than \(linkMax) bytes")
        }
        if target.isEmpty { return (.malformed, "link without a target") }
        if target.contains(0) { return (.malformed, "NUL byte in link target") }
        if let why = ArchiveNames.escapes(target) { return (.traversal, "link target escapes: \(why)") }
        return nil
    }

    /// The index of the entry whose header or data contains `position` (not at its start), if any.
    private func overlapped(_ position: UInt64) -> Int? {
        locals.firstIndex { position > $0.offset && position < $0.end }
    }

    private func endRecord() -> ArchiveFinding? {
        let disk = u16(4)
        let centralDisk = u16(6)
        let count = u16(10)
        let centralOffset = u32(16)
        let comment = UInt64(u16(20))
        buf = []
        if (disk != 0 && disk != 0xFFFF) || (centralDisk != 0 && centralDisk != 0xFFFF) {
            return context.finding(.malformed, nil, "multi-disk archive")
        }
        if centralIndex != locals.count {
            return context.finding(.centralDirectoryMismatch, nil,
                                   "central directory lists \(centralIndex) entries, local headers \(locals.count)")
        }
        if count != 0xFFFF && Int(count) != centralIndex {
            return context.finding(.centralDirectoryMismatch, nil,
                                   "end record counts \(count) entries, central directory \(centralIndex)")
        }
        if centralOffset != 0xFFFF_FFFF, let centralStart, UInt64(centralOffset) != centralStart {
            let detail = "end record puts the central directory at \(centralOffset), it is at \(centralStart)"
            return context.finding(.centralDirectoryMismatch, nil, detail)
        }
        state = .skip(remaining: comment, thenDone: true)
        return nil
    }

    // MARK: bytes

    /// Appends input to `buf` until it holds `need` bytes; true when it does.
    private func fill(_ need: Int, _ bytes: UnsafeRawBufferPointer, _ i: inout Int) -> Bool {
        let n = min(need - buf.count, bytes.count - i)
        if n > 0 {
            buf.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<(i + n)]))
            advance(n, &i)
        }
        return buf.count >= need
    }

    private func advance(_ n: Int, _ i: inout Int) {
        i += n
        offset &+= UInt64(n)
    }

    private func u16(_ at: Int) -> UInt16 {
        guard at >= 0, at + 2 <= buf.count else { return 0 }
        return UInt16(buf[at]) | UInt16(buf[at + 1]) << 8
    }

    private func u32(_ at: Int) -> UInt32 {
        guard at >= 0, at + 4 <= buf.count else { return 0 }
        return UInt32(u16(at)) | UInt32(u16(at + 2)) << 16
    }

    private func u64(_ at: Int) -> UInt64 {
        guard at >= 0, at + 8 <= buf.count else { return 0 }
        return UInt64(u32(at)) | UInt64(u32(at + 4)) << 32
    }

    private func hex(_ v: UInt32) -> String { "0x" + String(v, radix: 16) }

    /// Reads a ZIP64 extended information field (0x0001) from `extra`: each 64-bit value is present only when the
    /// 32-bit field it replaces is 0xFFFFFFFF, in the order size, compressed size, offset. True when the field
    /// is there.
    private static func zip64(_ extra: ArraySlice<UInt8>, uncompressed: inout UInt64, compressed: inout UInt64,
                              offset: UnsafeMutablePointer<UInt64>?) -> Bool {
        let bytes = Array(extra)
        func le(_ at: Int, _ n: Int) -> UInt64? {
            guard at >= 0, at + n <= bytes.count else { return nil }
            var v: UInt64 = 0
            for k in 0..<n { v |= UInt64(bytes[at + k]) << (8 * UInt64(k)) }
            return v
        }
        var at = 0
        while let id = le(at, 2), let size = le(at + 2, 2) {
            let body = at + 4
            let end = body + Int(size)
            guard end <= bytes.count else { return false }
            if id == 1 {
                var p = body
                if uncompressed == 0xFFFF_FFFF, p + 8 <= end, let v = le(p, 8) {
                    uncompressed = v
                    p += 8
                }
                if compressed == 0xFFFF_FFFF, p + 8 <= end, let v = le(p, 8) {
                    compressed = v
                    p += 8
                }
                if let offset, offset.pointee == 0xFFFF_FFFF, p + 8 <= end, let v = le(p, 8) { offset.pointee = v }
                return true
            }
            at = end
        }
        return false
    }
}
