// gzip (RFC 1952) as it streams: zlib (windowBits 15 + 16) over whatever arrives, concatenated members as one
// stream; the first 262 inflated bytes decide whether the content is a tar (inspected entry by entry) or a single
// member (sniffed, and inspected as a nested archive when it is one). Input is cut at every `ratioStep`
// compressed bytes so the ratio is judged at the same points whatever the split.

/// gzip (RFC 1952) inflated as it streams, members one after another. The content goes to a `TarParser` when it
/// is a tar (`ustar` at 257), else to a `MemberScanner` as the gzip's single entry.
final class GzipParser: ArchiveParser {
    private enum Mode {
        case sniffing
        case tar(TarParser)
        case member(MemberScanner)
    }

    static let memberName = "(gzip content)"
    private let context: ArchiveContext
    private let requireTar: Bool
    private let inflater = ArchiveInflater(windowBits: 31)
    private var started = false
    private var ended = false
    private var mode = Mode.sniffing
    private var head: [UInt8] = []
    /// Compressed bytes of earlier members, and bytes inflated in all.
    private var inBefore: UInt64 = 0
    private var out: UInt64 = 0

    init(_ context: ArchiveContext, requireTar: Bool) {
        self.context = context
        self.requireTar = requireTar
    }

    func feed(_ bytes: UnsafeRawBufferPointer) -> ArchiveFinding? {
        var i = 0
        while i < bytes.count {
            if !started || ended {
                // Another member follows (concatenated gzip is one stream, RFC 1952 §2.2).
                inBefore &+= inflater.totalIn
                guard inflater.reset() else { return context.finding(.malformed, nil, "cannot start inflating") }
                started = true
                ended = false
            }
            // Cut at every `ratioStep` compressed bytes, where the ratio is judged (see ZipParser.inflate).
            let toCheckpoint = ArchiveInspector.ratioStep - (inBefore &+ inflater.totalIn) % ArchiveInspector.ratioStep
            let limit = Int(min(UInt64(bytes.count - i), toCheckpoint))
            var used = 0
            let outcome = inflater.run(UnsafeRawBufferPointer(rebasing: bytes[i..<(i + limit)]), consumed: &used) {
                self.output($0)
            }
            i += used
            switch outcome {
            case .stopped(let finding):
                return finding
            case .failed(let message):
                return context.finding(.malformed, nil, "invalid gzip data: \(message)")
            case .more:
                if used == 0 { return context.finding(.malformed, nil, "inflate made no progress") }
                let compressed = inBefore &+ inflater.totalIn
                if compressed % ArchiveInspector.ratioStep == 0,
                    let finding = context.judgeRunningRatio(nil, out: out, in: compressed)
                {
                    return finding
                }
            case .end:
                ended = true
            }
        }
        return nil
    }

    func finish() -> ArchiveFinding? {
        guard started else { return context.finding(.malformed, nil, "empty gzip stream") }
        guard ended else { return context.finding(.malformed, nil, "gzip stream truncated") }
        if case .sniffing = mode, let finding = decide() { return finding }
        let compressed = inBefore &+ inflater.totalIn
        switch mode {
        case .sniffing:
            return nil
        case .tar(let tar):
            if let finding = tar.finish() { return finding }
        case .member(let scanner):
            if let finding = scanner.end() { return finding }
        }
        return context.judgeRatio(nil, out: out, in: compressed, whole: false)
    }

    private func output(_ piece: UnsafeRawBufferPointer) -> ArchiveFinding? {
        let limits = context.limits
        let room = limits.totalMax > out ? limits.totalMax - out : 0
        let over = UInt64(piece.count) > room
        let allowed = over ? UnsafeRawBufferPointer(rebasing: piece[0..<Int(room)]) : piece
        out &+= UInt64(allowed.count)
        if let finding = route(allowed) { return finding }
        if over { return context.finding(.tooLarge, nil, "gzip content larger than \(limits.totalMax) bytes") }
        return nil
    }

    private func route(_ piece: UnsafeRawBufferPointer) -> ArchiveFinding? {
        var rest = piece
        if case .sniffing = mode {
            let n = min(ArchiveInspector.sniffLength - head.count, rest.count)
            head.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[0..<n]))
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
            if head.count < ArchiveInspector.sniffLength { return nil }
            if let finding = decide() { return finding }
        }
        guard !rest.isEmpty else { return nil }
        switch mode {
        case .sniffing: return nil
        case .tar(let tar): return tar.feed(rest)
        case .member(let scanner): return scanner.write(rest)
        }
    }

    /// Decides what the content is from its first bytes (all of them when shorter than `sniffLength`).
    private func decide() -> ArchiveFinding? {
        let bytes = head
        head = []
        if bytes.count >= ArchiveInspector.sniffLength && bytes[257..<262].elementsEqual("ustar".utf8) {
            let tar = TarParser(context)
            mode = .tar(tar)
            return bytes.withUnsafeBytes { tar.feed($0) }
        }
        if requireTar { return context.finding(.malformed, nil, "the gzip stream does not hold a tar") }
        let scanner = MemberScanner(context, name: Self.memberName)
        mode = .member(scanner)
        if let finding = context.countEntry(Self.memberName) { return finding }
        return bytes.withUnsafeBytes { scanner.write($0) }
    }
}
