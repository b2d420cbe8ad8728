// tar read block by block as it streams (POSIX ustar and pax, GNU):
//
//   [header 512][data, padded to 512] … [zero block][zero block][zero padding]
//
//   header:   0 name[100]  124 size[12] (octal, or base-256 when the high bit is set)  148 chksum[8]  156 typeflag
//           157 linkname[100]  257 magic "ustar\0" (POSIX) or "ustar  " (GNU)  345 prefix[155] (POSIX only)
//
// GNU 'L' / 'K' entries carry the next entry's long name / link name; pax 'x' headers carry `path`, `linkpath`
// and `size` for the next entry ('g' global headers are skipped). Those are bounded (`nameMax`, `extraMax`).

final class TarParser: ArchiveParser {
    private enum Sink { case member, longName, longLink, pax, skip }

    private enum State {
        case header
        case data(remaining: UInt64, padding: Int, sink: Sink)
        case padding(remaining: Int)
        /// After the first zero block: only zero bytes may follow.
        case trailer
    }

    private let context: ArchiveContext
    private var state = State.header
    private var buf: [UInt8] = []
    private var offset: UInt64 = 0
    private var meta: [UInt8] = []
    private var longName: [UInt8]?
    private var longLink: [UInt8]?
    private var paxPath: [UInt8]?
    private var paxLink: [UInt8]?
    private var paxSize: UInt64?
    private var names = Set<Int>()
    private var scanner: MemberScanner?
    private var entryName = ""

    init(_ context: ArchiveContext) {
        self.context = context
        buf.reserveCapacity(512)
    }

    func feed(_ bytes: UnsafeRawBufferPointer) -> ArchiveFinding? {
        var i = 0
        while i < bytes.count {
            if let finding = step(bytes, &i) { return finding }
        }
        // An entry whose data (and padding) is empty ends with its header.
        return settle()
    }

    func finish() -> ArchiveFinding? {
        if let finding = settle() { return finding }
        switch state {
        case .trailer:
            return nil
        case .header where buf.isEmpty && offset == 0:
            return context.finding(.malformed, nil, "empty archive")
        case .header where buf.isEmpty:
            return context.finding(.malformed, nil, "archive truncated (no end-of-archive block)")
        case .header, .padding:
            return context.finding(.malformed, nil, "archive truncated inside a block")
        case .data:
            return context.finding(.malformed, entryName, "archive truncated inside an entry")
        }
    }

    /// Takes the transitions that need no input.
    private func settle() -> ArchiveFinding? {
        while true {
            switch state {
            case .data(0, let padding, let sink):
                if let finding = endData(sink) { return finding }
                state = .padding(remaining: padding)
            case .padding(0):
                state = .header
            default:
                return nil
            }
        }
    }

    private func step(_ bytes: UnsafeRawBufferPointer, _ i: inout Int) -> ArchiveFinding? {
        if let finding = settle() { return finding }
        switch state {
        case .header:
            let n = min(512 - buf.count, bytes.count - i)
            buf.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<(i + n)]))
            advance(n, &i)
            guard buf.count == 512 else { return nil }
            let finding = header()
            buf.removeAll(keepingCapacity: true)
            return finding
        case .data(let remaining, let padding, let sink):
            let n = Int(min(UInt64(bytes.count - i), remaining))
            let piece = UnsafeRawBufferPointer(rebasing: bytes[i..<(i + n)])
            advance(n, &i)
            state = .data(remaining: remaining - UInt64(n), padding: padding, sink: sink)
            switch sink {
            case .member:
                return scanner?.write(piece)
            case .longName, .longLink, .pax:
                meta.append(contentsOf: piece)
                return nil
            case .skip:
                return nil
            }
        case .padding(let remaining):
            let n = min(bytes.count - i, remaining)
            advance(n, &i)
            state = .padding(remaining: remaining - n)
            return nil
        case .trailer:
            let n = bytes.count - i
            let piece = UnsafeRawBufferPointer(rebasing: bytes[i...])
            advance(n, &i)
            if piece.contains(where: { $0 != 0 }) {
                return context.finding(.malformed, nil, "data after the end-of-archive block")
            }
            return nil
        }
    }

    private func advance(_ n: Int, _ i: inout Int) {
        i += n
        offset &+= UInt64(n)
    }

    // MARK: headers

    private func header() -> ArchiveFinding? {
        if buf.allSatisfy({ $0 == 0 }) {
            state = .trailer
            return nil
        }
        guard let stored = Self.number(buf[148..<156]) else {
            return context.finding(.malformed, nil, "bad header checksum field at offset \(offset - 512)")
        }
        var unsigned: UInt64 = 0
        var signed: Int64 = 0
        for (k, b) in buf.enumerated() {
            let v = (148..<156).contains(k) ? UInt8(ascii: " ") : b
            unsigned += UInt64(v)
            signed += Int64(Int8(bitPattern: v))
        }
        guard stored == unsigned || Int64(truncatingIfNeeded: stored) == signed else {
            return context.finding(.malformed, nil, "header checksum mismatch at offset \(offset - 512)")
        }
        let type = buf[156]
        guard var size = Self.number(buf[124..<136]) else {
            return context.finding(.malformed, nil, "bad size field at offset \(offset - 512)")
        }
        let posix = buf[257..<263].elementsEqual("ustar\0".utf8)
        var name = Self.cString(buf[0..<100])
        if posix {
            let prefix = Self.cString(buf[345..<500])
            if !prefix.isEmpty { name = prefix + [UInt8(ascii: "/")] + name }
        }
        var link = Self.cString(buf[157..<257])
        let padding = Int((512 - size % 512) % 512)

        switch type {
        case UInt8(ascii: "L"), UInt8(ascii: "K"), UInt8(ascii: "x"), UInt8(ascii: "X"):
            let pax = type == UInt8(ascii: "x") || type == UInt8(ascii: "X")
            let cap = UInt64(pax ? ArchiveInspector.extraMax : ArchiveInspector.nameMax + 1)
            guard size <= cap else {
                return context.finding(.malformed, nil, "extended header of \(size) bytes (more than \(cap))")
            }
            meta = []
            let sink: Sink = pax ? .pax : (type == UInt8(ascii: "L") ? .longName : .longLink)
            state = .data(remaining: size, padding: padding, sink: sink)
            return nil
        case UInt8(ascii: "g"), UInt8(ascii: "V"):
            state = .data(remaining: size, padding: padding, sink: .skip)
            return nil
        default:
            break
        }

        if let long = paxPath ?? longName { name = long }
        if let long = paxLink ?? longLink { link = long }
        if let paxSize { size = paxSize }
        longName = nil
        longLink = nil
        paxPath = nil
        paxLink = nil
        paxSize = nil
        let realPadding = Int((512 - size % 512) % 512)
        entryName = ArchiveNames.display(name)
        let display = entryName

        if let finding = context.countEntry(display) { return finding }
        let isDirectory = type == UInt8(ascii: "5") || name.last == UInt8(ascii: "/")
        if let (problem, detail) = ArchiveNames.check(name, isDirectory: isDirectory, context: context) {
            return context.finding(problem, display, detail)
        }
        if !names.insert(ArchiveNames.duplicateKey(name)).inserted {
            return context.finding(.duplicate, display, "a member with the same name came earlier")
        }
        switch type {
        case UInt8(ascii: "1"), UInt8(ascii: "2"):
            if link.isEmpty { return context.finding(.malformed, display, "link without a target") }
            if let why = ArchiveNames.escapes(link) {
                return context.finding(.traversal, display, "link target escapes: \(why)")
            }
            state = .data(remaining: size, padding: realPadding, sink: .skip)
        case UInt8(ascii: "3"), UInt8(ascii: "4"), UInt8(ascii: "6"):
            return context.finding(.forbiddenMember, display, "device or FIFO member")
        case UInt8(ascii: "5"):
            state = .data(remaining: size, padding: realPadding, sink: .skip)
        default:
            scanner = MemberScanner(context, name: display)
            state = .data(remaining: size, padding: realPadding, sink: .member)
        }
        return nil
    }

    private func endData(_ sink: Sink) -> ArchiveFinding? {
        switch sink {
        case .member:
            let finding = scanner?.end()
            scanner = nil
            return finding
        case .longName:
            longName = Self.cString(meta[...])
            meta = []
            if longName?.isEmpty ?? true { return context.finding(.malformed, nil, "empty GNU long name") }
        case .longLink:
            longLink = Self.cString(meta[...])
            meta = []
        case .pax:
            let finding = pax()
            meta = []
            return finding
        case .skip:
            break
        }
        return nil
    }

    /// Parses pax records `"<length> <key>=<value>\n"`, keeping `path`, `linkpath` and `size`.
    private func pax() -> ArchiveFinding? {
        var at = 0
        while at < meta.count {
            var length = 0
            var k = at
            while k < meta.count, meta[k] >= UInt8(ascii: "0"), meta[k] <= UInt8(ascii: "9"), length < 1 << 20 {
                length = length * 10 + Int(meta[k] - UInt8(ascii: "0"))
                k += 1
            }
            let end = at + length
            guard k > at, k < meta.count, meta[k] == UInt8(ascii: " "), end <= meta.count, end > k + 1,
                meta[end - 1] == UInt8(ascii: "\n")
            else {
                return context.finding(.malformed, nil, "bad pax extended header record")
            }
            let record = meta[(k + 1)..<(end - 1)]
            guard let eq = record.firstIndex(of: UInt8(ascii: "=")) else {
                return context.finding(.malformed, nil, "pax record without '='")
            }
            let key = record[record.startIndex..<eq]
            let value = Array(record[(eq + 1)...])
            if key.elementsEqual("path".utf8) {
                paxPath = value
            } else if key.elementsEqual("linkpath".utf8) {
                paxLink = value
            } else if key.elementsEqual("size".utf8) {
                guard let size = Self.decimal(value) else {
                    return context.finding(.malformed, nil, "bad pax size")
                }
                paxSize = size
            }
            at = end
        }
        return nil
    }

    // MARK: fields

    /// The bytes up to the first NUL.
    static func cString(_ field: ArraySlice<UInt8>) -> [UInt8] {
        Array(field.prefix { $0 != 0 })
    }

    /// A numeric field: octal digits between optional spaces, ended by a space or NUL (empty: 0); or base-256 when
    /// the first byte has its high bit set (negative values refused). nil when malformed or over 64 bits.
    static func number(_ field: ArraySlice<UInt8>) -> UInt64? {
        guard let first = field.first else { return nil }
        if first & 0x80 != 0 {
            guard first & 0x40 == 0 else { return nil }
            var value = UInt64(first & 0x3F)
            for b in field.dropFirst() {
                guard value >> 56 == 0 else { return nil }
                value = value << 8 | UInt64(b)
            }
            return value
        }
        var value: UInt64 = 0
        var digits = false
        var ended = false
        for b in field {
            if b == 0 || b == UInt8(ascii: " ") {
                if digits { ended = true }
                continue
            }
            guard !ended, b >= UInt8(ascii: "0"), b <= UInt8(ascii: "7"), value >> 61 == 0 else { return nil }
            value = value << 3 | UInt64(b - UInt8(ascii: "0"))
            digits = true
        }
        return value
    }

    static func decimal(_ bytes: [UInt8]) -> UInt64? {
        guard !bytes.isEmpty else { return nil }
        var value: UInt64 = 0
        for b in bytes {
            guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(UInt64(b - UInt8(ascii: "0")))
            guard !o1, !o2 else { return nil }
            value = s
        }
        return value
    }
}
