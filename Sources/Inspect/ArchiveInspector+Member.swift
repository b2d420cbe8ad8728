import CZlib

// What every archive format shares: member name checks, one member's content (counted, sniffed, maybe a nested
// archive), and a zlib inflater that reuses its stream from entry to entry.

/// Member name rules, on the raw name bytes.
enum ArchiveNames {
    /// Checks a member name: `malformed` (empty, NUL, too long), `traversal`, forbidden extension, and the caller's
    /// check of its base name (`ArchiveMemberChecks.name`, the filename checks of uploads).
    static func check(_ name: [UInt8], isDirectory: Bool, context: ArchiveContext) -> (ArchiveProblem, String)? {
        let limits = context.limits
        if name.isEmpty { return (.malformed, "empty member name") }
        if name.count > ArchiveInspector.nameMax {
            return (.malformed, "member name longer than \(ArchiveInspector.nameMax) bytes")
        }
        if name.contains(0) { return (.malformed, "NUL byte in member name") }
        if let why = escapes(name) { return (.traversal, why) }
        if !isDirectory, let ext = forbiddenExtension(name, limits.forbiddenExtensions) {
            return (.forbiddenMember, "forbidden extension .\(ext)")
        }
        if !isDirectory, let judge = context.members.name,
           let base = segments(name).last(where: { !$0.isEmpty }), let why = judge(display(Array(base))) {
            return (.forbiddenMember, why)
        }
        // Office macros: an OOXML document's VBA project is code that runs when the document is opened.
        if !isDirectory, !limits.allowExecutables, isVBAProject(name) {
            return (.executableMember, "VBA macro project (an Office document with macros)")
        }
        return nil
    }

    /// `…/vbaProject.bin` (any case, `/` or `\` separators): the macro part of a .docm, .xlsm, .pptm.
    static func isVBAProject(_ name: [UInt8]) -> Bool {
        let last = name.split(whereSeparator: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "\\") }).last ?? []
        return String(decoding: last, as: UTF8.self).lowercased() == "vbaproject.bin"
    }

    /// Why a path escapes the extraction directory, or nil: an absolute path (`/x`, `\x`, `\\server`), a drive
    /// (`C:`), or a `..` segment (`\` is a separator too; Windows trims trailing dots and spaces, so `.. ` and
    /// `...` count as `..`).
    static func escapes(_ path: [UInt8]) -> String? {
        guard let first = path.first else { return nil }
        if first == UInt8(ascii: "/") || first == UInt8(ascii: "\\") { return "absolute path" }
        if path.count >= 2, path[1] == UInt8(ascii: ":"), isLetter(first) { return "drive path" }
        for segment in segments(path) {
            var s = segment
            while let last = s.last, last == 0x20 { s = s.dropLast() }
            if s.count >= 2 && s.allSatisfy({ $0 == UInt8(ascii: ".") }) { return "parent directory segment" }
        }
        return nil
    }

    /// The key two names collide on: separators unified to `/`, empty and `.` segments dropped, trailing dots and
    /// spaces trimmed, ASCII lowercased (case-insensitive file systems would overwrite one with the other).
    static func duplicateKey(_ name: [UInt8]) -> Int {
        var hasher = Hasher()
        for segment in segments(name) {
            let trimmed = trimTrailing(segment)
            if trimmed.isEmpty { continue }
            for b in trimmed { hasher.combine(SniffBytes.lowercased(b)) }
            hasher.combine(UInt8(ascii: "/"))
        }
        return hasher.finalize()
    }

    /// A hash of the exact name bytes (central directory comparison).
    static func exactKey(_ name: [UInt8]) -> Int {
        var hasher = Hasher()
        hasher.combine(name.count)
        for b in name { hasher.combine(b) }
        return hasher.finalize()
    }

    /// The first forbidden extension of the last path component: every dot-separated part after the first
    /// (`a.php.jpg` has `php` and `jpg`), trimmed of spaces and trailing dots, lowercased.
    static func forbiddenExtension(_ name: [UInt8], _ forbidden: Set<String>) -> String? {
        guard !forbidden.isEmpty else { return nil }
        guard let last = segments(name).last(where: { !trimTrailing($0).isEmpty }) else { return nil }
        let parts = trimTrailing(last).split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        for part in parts.dropFirst() {
            var bytes = Array(part)
            while let b = bytes.first, b == 0x20 { bytes.removeFirst() }
            bytes = trimTrailing(bytes[...])
            let ext = String(decoding: bytes.map { SniffBytes.lowercased($0) }, as: UTF8.self)
            if forbidden.contains(ext) { return ext }
        }
        return nil
    }

    static func display(_ name: [UInt8]) -> String { String(decoding: name, as: UTF8.self) }

    private static func segments(_ path: [UInt8]) -> [ArraySlice<UInt8>] {
        path.split(omittingEmptySubsequences: false) { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "\\") }
    }

    private static func trimTrailing(_ s: ArraySlice<UInt8>) -> [UInt8] {
        var end = s.endIndex
        while end > s.startIndex, s[end - 1] == UInt8(ascii: ".") || s[end - 1] == 0x20 { end -= 1 }
        return Array(s[s.startIndex..<end])
    }

    private static func isLetter(_ b: UInt8) -> Bool {
        (b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "z")
    }
}

/// The content of one member as it is produced: counted against `totalMax`, its first bytes sniffed for an
/// executable or an archive (an archive goes on into a nested inspector), and all of it scanned for embedded markup
/// when the caller asks (`ArchiveMemberChecks.markupShortTags`).
final class MemberScanner {
    private let context: ArchiveContext
    /// The member's name inside its archive (without the context prefix).
    let name: String
    private var head: [UInt8] = []
    private var decided = false
    private var nested: ArchiveInspector?
    private var markup: MarkupScanner?
    /// Bytes of content produced so far.
    private(set) var size: UInt64 = 0

    init(_ context: ArchiveContext, name: String) {
        self.context = context
        self.name = name
        head.reserveCapacity(ArchiveInspector.sniffLength)
        if let shortTags = context.members.markupShortTags { markup = MarkupScanner(phpShortTags: shortTags) }
    }

    /// Takes the next content bytes.
    func write(_ bytes: UnsafeRawBufferPointer) -> ArchiveFinding? {
        guard !bytes.isEmpty else { return nil }
        let limits = context.limits
        let total = context.budget.summary.totalUncompressed
        let room = limits.totalMax > total ? limits.totalMax - total : 0
        let over = UInt64(bytes.count) > room
        // Bytes up to the limit are inspected first, so the finding does not depend on where a chunk ends.
        let allowed = over ? UnsafeRawBufferPointer(rebasing: bytes[0..<Int(room)]) : bytes
        context.budget.summary.totalUncompressed &+= UInt64(allowed.count)
        size &+= UInt64(allowed.count)
        if let finding = take(allowed) { return finding }
        if markup != nil, let finding = markupStep(allowed) { return finding }
        if over { return context.finding(.tooLarge, name, "more than \(limits.totalMax) uncompressed bytes") }
        return nil
    }

    /// The member ended.
    func end() -> ArchiveFinding? {
        if !decided, let finding = decide() { return finding }
        if markup != nil, let finding = markupStep(nil) { return finding }
        return nested?.finish()
    }

    /// Feeds member content (nil: the member ended) to the markup scan; a finding refuses the member.
    private func markupStep(_ bytes: UnsafeRawBufferPointer?) -> ArchiveFinding? {
        if let bytes { markup?.feed(bytes) } else { markup?.finish() }
        guard let found = markup?.finding else { return nil }
        markup = nil
        return context.finding(.forbiddenMember, name, "member carries \(found)")
    }

    private func take(_ bytes: UnsafeRawBufferPointer) -> ArchiveFinding? {
        var rest = bytes
        if !decided {
            let n = min(ArchiveInspector.sniffLength - head.count, rest.count)
            head.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[0..<n]))
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
            if head.count < ArchiveInspector.sniffLength { return nil }
            if let finding = decide() { return finding }
        }
        if let nested, !rest.isEmpty { return nested.feed(rest) }
        return nil
    }

    private func decide() -> ArchiveFinding? {
        decided = true
        // HTML counts in a member that is not itself markup (an OOXML part is XML: its tags are its content).
        if markup != nil { markup?.judgeHTML(Sniffer.sniff(head).kind.category != .markup) }
        let (kind, format) = head.withUnsafeBytes {
            ($0.isEmpty ? nil : Self.executable($0), ArchiveInspector.format(sniffing: $0))
        }
        if let kind, !context.limits.allowExecutables {
            return context.finding(.executableMember, name, "member is an executable (\(kind))")
        }
        if let format {
            let depthMax = min(context.limits.depthMax, ArchiveInspector.depthCeiling)
            guard context.depth < depthMax else {
                return context.finding(.tooDeep, name, "archive nested deeper than \(depthMax)")
            }
            let child = ArchiveContext(limits: context.limits, members: context.members, depth: context.depth + 1,
                                       budget: context.budget,
                                       prefix: context.prefix + name + "!/")
            let inspector = ArchiveInspector(format: format, context: child)
            nested = inspector
            if let finding = inspector.feed(head) { return finding }
        }
        head = []
        return nil
    }

    /// The executable kind of a member's first bytes: ELF, PE/MZ, Mach-O (thin or fat; `CA FE BA BE` followed
    /// by an architecture count below 45, as Java class files carry a version there), `#!` script.
    static func executable(_ p: UnsafeRawBufferPointer) -> String? {
        let b = SniffBytes(p)
        if b.has([0x7F, 0x45, 0x4C, 0x46]) { return "ELF" }
        if b.has("MZ") { return "PE/MZ" }
        if b.has("#!") { return "#! script" }
        guard let magic = b.u32be(0) else { return nil }
        switch magic {
        case 0xFEED_FACE, 0xFEED_FACF, 0xCEFA_EDFE, 0xCFFA_EDFE, 0xCAFE_BABF, 0xBEBA_FECA, 0xBFBA_FECA:
            return "Mach-O"
        case 0xCAFE_BABE:
            if let count = b.u32be(4), count >= 1, count < 45 { return "Mach-O" }
            return nil
        default:
            return nil
        }
    }
}

/// One zlib inflate stream, reset from entry to entry, with a 16 KiB output piece.
final class ArchiveInflater {
    enum Outcome {
        /// All input taken (or the output sink was fed everything possible); more input is needed.
        case more
        /// The deflate stream ended; input after it was not taken.
        case end
        /// The sink returned a finding.
        case stopped(ArchiveFinding)
        /// zlib refused the data.
        case failed(String)
    }

    static let pieceSize = 16 * 1024
    private var stream = z_stream()
    private var open = false
    private let piece: UnsafeMutableRawBufferPointer
    private let windowBits: Int32

    /// raw deflate: -15; gzip: 31.
    init(windowBits: Int32) {
        self.windowBits = windowBits
        piece = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.pieceSize, alignment: 16)
    }

    deinit {
        if open { inflateEnd(&stream) }
        piece.deallocate()
    }

    /// Compressed bytes taken and bytes produced since the last `reset()`.
    var totalIn: UInt64 { open ? UInt64(stream.total_in) : 0 }
    var totalOut: UInt64 { open ? UInt64(stream.total_out) : 0 }

    /// Starts a new stream. False when zlib cannot allocate.
    func reset() -> Bool {
        if open { return inflateReset(&stream) == Z_OK }
        guard czlib_inflate_init2(&stream, windowBits) == Z_OK else { return false }
        open = true
        return true
    }

    /// Inflates from `input`, handing output pieces to `sink`; `consumed` says how many input bytes were taken.
    func run(_ input: UnsafeRawBufferPointer, consumed: inout Int,
             sink: (UnsafeRawBufferPointer) -> ArchiveFinding?) -> Outcome {
        guard open, let out = piece.baseAddress else { return .failed("inflate stream not open") }
        consumed = 0
        while true {
            let (rc, taken, produced) = inflateStep(&stream, input, from: consumed, into: out, capacity: piece.count)
            consumed += taken
            if produced > 0, let finding = sink(UnsafeRawBufferPointer(rebasing: piece[0..<produced])) {
                return .stopped(finding)
            }
            switch rc {
            case Z_STREAM_END:
                return .end
            case Z_OK, Z_BUF_ERROR:
                let full = stream.avail_out == 0
                if (consumed >= input.count && !full) || (taken == 0 && produced == 0) { return .more }
            default:
                let message = stream.msg.map { String(cString: $0) } ?? "zlib error \(rc)"
                return .failed(message)
            }
        }
    }
}
