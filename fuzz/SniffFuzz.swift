// libFuzzer target for the content sniffer: any input, fed whole and in chunks of byte 0's size, must
// terminate, never trap, and give the same verdict. Built by fuzz/run.sh with Sources/Inspect.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let chunk = max(Int(data[0]), 1)
    let payload = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    let whole = Sniffer.sniff(payload)
    var s = Sniffer()
    var at = 0
    while at < payload.count {
        let n = min(chunk, payload.count - at)
        s.feed(UnsafeRawBufferPointer(rebasing: payload[at..<(at + n)]))
        at += n
    }
    precondition(s.finish() == whole, "chunking changed the sniffed type")
    _ = whole.isCompatible(withDeclared: "image/png")
    _ = GzipSniff.innerKind(of: payload)
    return 0
}
