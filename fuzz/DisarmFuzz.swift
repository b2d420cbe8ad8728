// libFuzzer target for the disarmers: byte 0 picks the format (low 7 bits modulo 5: JPEG, PNG, SVG, GIF, WebP)
// and the SVG mode (high bit), byte 1 the chunk size; the rest, fed whole and in chunks, must never trap and must
// give the same output (patches applied), `removed` list and success or failure. Built by fuzz/run.sh with
// Sources/Inspect.

private func run(_ kind: DisarmKind, _ mode: SVGMode, _ input: UnsafeRawBufferPointer, chunk: Int) -> [UInt8]? {
    let disarmer = makeDisarmer(for: kind, svgMode: mode)
    var out: [UInt8] = []
    var at = 0
    do {
        while at < input.count {
            let n = min(chunk, input.count - at)
            try disarmer.feed(UnsafeRawBufferPointer(rebasing: input[at..<(at + n)])) { out.append(contentsOf: $0) }
            at += n
        }
        try disarmer.finish { out.append(contentsOf: $0) }
    } catch {
        return nil
    }
    for patch in disarmer.patches {
        precondition(patch.offset >= 0 && patch.offset + patch.bytes.count <= out.count, "patch outside the output")
        out.replaceSubrange(patch.offset..<(patch.offset + patch.bytes.count), with: patch.bytes)
    }
    out.append(0)
    for name in disarmer.removed { out.append(contentsOf: name.utf8) }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 1 else { return 0 }
    let kinds: [DisarmKind] = [.jpeg, .png, .svg, .gif, .webp]
    let kind = kinds[Int(data[0] & 0x7F) % kinds.count]
    let mode: SVGMode = data[0] & 0x80 == 0 ? .strip : .reject
    let chunk = max(Int(data[1]), 1)
    let payload = UnsafeRawBufferPointer(start: data + 2, count: size - 2)
    let whole = run(kind, mode, payload, chunk: max(payload.count, 1))
    precondition(run(kind, mode, payload, chunk: chunk) == whole, "chunking changed the disarmed output")
    return 0
}
