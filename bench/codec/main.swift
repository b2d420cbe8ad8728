// formwall-bench: codec throughput, in release mode, against the physical limit measured in the same run.
//
//   swift build -c release && .build/release/formwall-bench [--size-mib 1024] [--small-parts 100000]
//   (the markup scan rows also in thread CPU time: docs/performance.md, "Whole-part markup scan")
//
// 1. One file part of random bytes (default 1 GiB, fed in 256 KiB chunks from a reused buffer so the input
//    is never materialised): parse only; parse + SHA-256; parse + re-encode (heads written, data passed through);
//    parse + the whole-part markup scan of `deny-embedded-markup` (MarkupScanner, every form on, HTML judged).
// 2. A plain memchr scan (for a byte absent from the data) over the same chunks: the memory-bandwidth floor.
// 3. 100,000 small parts (a 64-byte field each) in one body: parts per second.
// Reports GB/s, the ratio to memchr, parts/s and peak RSS (VmHWM) so RSS independence can be checked by
// running two sizes.
import Glibc
import Inspect
import Multipart

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func peakRSSKiB() -> Int {
    guard let f = fopen("/proc/self/status", "r") else { return -1 }
    defer { fclose(f) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, 256, f) != nil {
        let s = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if s.hasPrefix("VmHWM:") {
            return Int(s.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? -1
        }
    }
    return -1
}

var sizeMiB = 1024
var smallParts = 100_000
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    switch a {
    case "--size-mib": sizeMiB = Int(args.popFirst() ?? "") ?? sizeMiB
    case "--small-parts": smallParts = Int(args.popFirst() ?? "") ?? smallParts
    default: print("usage: formwall-bench [--size-mib N] [--small-parts N]"); exit(2)
    }
}

let chunkSize = 256 * 1024
/// The input cycles through a 64 MiB ring (larger than any cache here), so every pass streams from RAM.
let ringSize = 64 * 1024 * 1024
let boundary = Array("----WebKitFormBoundary7MA4YWxkTrZu0gW".utf8)
let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: ringSize, alignment: 64)
var seed: UInt64 = 0x1234_5678
for i in 0..<ringSize {
    seed = seed &* 6364136223846793005 &+ 1442695040888963407
    var byte = UInt8(truncatingIfNeeded: seed >> 56)
    if byte == 0x0A && i % 3 == 0 { byte = 0x0B }   // keep LFs at a realistic random rate (1/256 otherwise)
    chunk[i] = byte
}
// The memchr floor looks for a byte that never occurs.
for i in 0..<ringSize where chunk[i] == 0xF7 { chunk[i] = 0xF6 }
let chunksPerRing = ringSize / chunkSize
@MainActor func ringChunk(_ r: Int) -> UnsafeRawBufferPointer {
    let at = (r % chunksPerRing) * chunkSize
    return UnsafeRawBufferPointer(rebasing: chunk[at..<(at + chunkSize)])
}
let total = UInt64(sizeMiB) * 1024 * 1024
let rounds = Int(total / UInt64(chunkSize))
let head = Array(("--" + String(decoding: boundary, as: UTF8.self)
    + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").utf8)
let tail = Array(("\r\n--" + String(decoding: boundary, as: UTF8.self) + "--\r\n").utf8)

func feed(_ parser: MultipartParser, _ bytes: UnsafeRawBufferPointer, _ onData: (UnsafeRawBufferPointer) -> Void) {
    var consumed = 0
    do {
        while let e = try parser.next(bytes, consumed: &consumed) {
            if case .partData(let span) = e { onData(span) }
        }
    } catch { fatalError("bench body failed to parse: \(error)") }
}

@MainActor func largePart(_ label: String, _ onData: (UnsafeRawBufferPointer) -> Void) -> Double {
    let parser = MultipartParser(boundary: boundary)
    let t0 = now()
    head.withUnsafeBytes { feed(parser, $0, onData) }
    for r in 0..<rounds { feed(parser, ringChunk(r), onData) }
    tail.withUnsafeBytes { feed(parser, $0, onData) }
    try! parser.finish()
    let dt = now() - t0
    precondition(parser.isComplete)
    return Double(total) / dt / 1e9
}

// The floor: memchr over the same bytes.
var t0 = now()
var found = 0
for r in 0..<rounds where memchr(ringChunk(r).baseAddress!, 0xF7, chunkSize) != nil { found += 1 }
let memchrGBs = Double(total) / (now() - t0) / 1e9
precondition(found == 0)

var sink: UInt64 = 0
let parseGBs = largePart("parse") { sink &+= UInt64($0.count) }
precondition(sink == total, "parser lost bytes: \(sink) != \(total)")
let hasher = SHA256Hasher()
let hashGBs = largePart("parse+sha256") { hasher.update($0) }
_ = hasher.finalize()
guard let reencodeBoundary = SecureRandom.boundary() else { print("RAND_bytes failed: no re-encode boundary"); exit(1) }
var encoder = MultipartEncoder(boundary: reencodeBoundary)
var headOut: [UInt8] = []
encoder.writePartHead(MultipartPart(name: Array("file".utf8), filename: Array("big.bin".utf8)), into: &headOut)
var encoded: UInt64 = UInt64(headOut.count)
let encodeGBs = largePart("parse+encode") { encoded &+= UInt64($0.count) }   // data spans pass through untouched
/// CPU seconds of this thread: less disturbed than the wall clock by other processes on a shared machine.
func cpuNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

// The markup scan alone and memchr alone over the same chunks, in CPU time, three times each (best kept).
var scanAloneGBs = 0.0
var memchrCPUGBs = 0.0
for _ in 0..<3 {
    var alone = MarkupScanner(phpShortTags: true)
    alone.judgeHTML(true)
    var c0 = cpuNow()
    for r in 0..<rounds { alone.feed(ringChunk(r)) }
    alone.finish()
    scanAloneGBs = max(scanAloneGBs, Double(total) / (cpuNow() - c0) / 1e9)
    precondition(alone.finding == nil)
    c0 = cpuNow()
    var hits = 0
    for r in 0..<rounds where memchr(ringChunk(r).baseAddress!, 0xF7, chunkSize) != nil { hits += 1 }
    memchrCPUGBs = max(memchrCPUGBs, Double(total) / (cpuNow() - c0) / 1e9)
    precondition(hits == 0)
}

var scanner = MarkupScanner(phpShortTags: true)
scanner.judgeHTML(true)
let markupGBs = largePart("parse+markup") { scanner.feed($0) }
scanner.finish()
// The ring is random bytes: about one `<` in 256, none followed by a form the scan matches.
precondition(scanner.finding == nil, "random bytes matched \(String(describing: scanner.finding))")

// Many small parts.
var small: [UInt8] = []
let value = [UInt8](repeating: 0x61, count: 64)
for i in 0..<smallParts {
    small += Array(("--" + String(decoding: boundary, as: UTF8.self) + "\r\nContent-Disposition: form-data; name=\"f\(i)\"\r\n\r\n").utf8)
    small += value
    small += [0x0D, 0x0A]
}
small += Array(("--" + String(decoding: boundary, as: UTF8.self) + "--\r\n").utf8)
let smallParser = MultipartParser(boundary: boundary, limits: { var l = MultipartLimits(); l.maxParts = smallParts + 1; return l }())
var parts = 0
t0 = now()
small.withUnsafeBytes { all in
    var at = 0
    while at < all.count {
        let n = min(chunkSize, all.count - at)
        var consumed = 0
        let slice = UnsafeRawBufferPointer(rebasing: all[at..<(at + n)])
        do {
            while let e = try smallParser.next(slice, consumed: &consumed) { if case .partEnd = e { parts += 1 } }
        } catch { fatalError("\(error)") }
        at += n
    }
}
try! smallParser.finish()
let smallDt = now() - t0
precondition(parts == smallParts)

func f(_ x: Double) -> String { String(Int((x * 100).rounded())).paddingLeft(4).insertingDot() }
extension String {
    func paddingLeft(_ n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
    func insertingDot() -> String {
        let i = index(endIndex, offsetBy: -2)
        let whole = String(self[..<i]).drop(while: { $0 == "0" })
        return (whole.isEmpty ? "0" : String(whole)) + "." + self[i...]
    }
}
print("formwall-bench: \(sizeMiB) MiB file part in \(chunkSize / 1024) KiB chunks, \(smallParts) small parts")
print("  memchr floor            \(f(memchrGBs)) GB/s")
print("  parse                   \(f(parseGBs)) GB/s   (\(f(parseGBs / memchrGBs))x memchr)")
print("  parse + SHA-256         \(f(hashGBs)) GB/s   (\(f(hashGBs / memchrGBs))x memchr)")
print("  parse + re-encode       \(f(encodeGBs)) GB/s   (\(f(encodeGBs / memchrGBs))x memchr)")
print("  parse + markup scan      \(f(markupGBs)) GB/s   (\(f(markupGBs / parseGBs))x parse)")
print("  markup scan alone       \(f(scanAloneGBs)) GB/s   CPU time (memchr alone \(f(memchrCPUGBs)) GB/s)")
print("  small parts             \(Int(Double(parts) / smallDt)) parts/s  (\(f(Double(small.count) / smallDt / 1e9)) GB/s)")
print("  peak RSS                \(peakRSSKiB() / 1024) MiB")
