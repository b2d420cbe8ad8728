// libFuzzer target for the archive inspector (ZIP, gzip, tar, tar.gz, and archives nested in them): an uploaded
// file's bytes are the attacker's, and the inspector follows their lengths, offsets and compressed streams.
// Byte 0 picks the format and the limits, byte 1 the chunk size; the rest, fed whole and in chunks, must never
// trap, and must give the same finding (`ArchiveInspector`'s contract: the finding does not depend on how the
// bytes were split) and, for an archive that passes, the same summary. A refused archive's summary counts what
// was inflated before the refusal, and zlib inflates further past a bad byte when it is given more input at once
// (the fuzzer's first inputs: 304 bytes whole, 268 byte by byte, the same finding), so it is not compared.
// Built by fuzz/run.sh with Sources/Inspect.

/// The limits byte 0 selects (bits 2-7): the defaults, or small ones that the fuzzer can reach with short inputs.
private func limits(_ selector: UInt8) -> ArchiveLimits {
    var limits = ArchiveLimits()
    guard selector & 0x04 != 0 else { return limits }
    limits.entriesMax = Int(selector >> 3 & 0x07) + 1
    limits.totalMax = 1 << (10 + UInt64(selector >> 5 & 0x03) * 4)   // 1 KiB, 16 KiB, 256 KiB, 4 MiB
    limits.ratioFloor = 256
    limits.ratioMax = selector & 0x80 == 0 ? 4 : 0
    limits.depthMax = Int(selector >> 6 & 0x01) + 1 + Int(selector >> 3 & 0x01) * 2
    limits.allowEncrypted = selector & 0x10 != 0
    limits.allowExecutables = selector & 0x20 != 0
    return limits
}

/// What one run reports: the finding, then the summary. Compared as a whole between two chunkings.
private struct Outcome: Equatable {
    var finding: ArchiveFinding?
    var summary: ArchiveSummary
}

private func run(_ format: ArchiveInspector.Format, _ limits: ArchiveLimits, _ input: UnsafeRawBufferPointer,
                 chunk: Int) -> Outcome {
    let inspector = ArchiveInspector(format: format, limits: limits)
    var at = 0
    var found: ArchiveFinding?
    while at < input.count {
        let n = min(chunk, input.count - at)
        found = inspector.feed(UnsafeRawBufferPointer(rebasing: input[at..<(at + n)]))
        at += n
        if found != nil { break }
    }
    let finished = inspector.finish()
    precondition(found == nil || finished == found, "finish() changed a finding already returned")
    precondition(inspector.finish() == finished, "finish() is not idempotent")
    let summary = inspector.summary
    precondition(summary.names.count <= ArchiveInspector.summaryNamesMax, "the summary kept too many names")
    precondition(summary.depthReached >= 1 && summary.depthReached <= ArchiveInspector.depthCeiling + 1,
                 "depth outside its bounds")
    return Outcome(finding: finished, summary: summary)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 2 else { return 0 }
    let formats: [ArchiveInspector.Format] = [.zip, .gzip, .tar, .tarGzip]
    let format = formats[Int(data[0] & 0x03)]
    let chosen = limits(data[0])
    let chunk = max(Int(data[1]), 1)
    let payload = UnsafeRawBufferPointer(start: data + 2, count: size - 2)
    let whole = run(format, chosen, payload, chunk: max(payload.count, 1))
    let split = run(format, chosen, payload, chunk: chunk)
    precondition(split.finding == whole.finding, "chunking changed the finding: \(split) against \(whole)")
    precondition(whole.finding != nil || split == whole, "chunking changed the summary: \(split) against \(whole)")
    // The sniffed format, where there is one, must be inspectable too (what the proxy does with a part's head).
    if let sniffed = ArchiveInspector.format(sniffing: payload), sniffed != format {
        _ = run(sniffed, chosen, payload, chunk: chunk)
    }
    return 0
}
