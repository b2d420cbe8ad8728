// A structure-aware custom mutator for fuzz/ExchangeFuzz.swift (libFuzzer's LLVMFuzzerCustomMutator).
//
// libFuzzer's byte-level mutations seldom turn a well-formed multipart request into a well-formed but tricky one,
// which is where parsers disagree. Half of the time (by the seed) this mutator applies one structural mutation to
// the client bytes (input bytes 3 and on; bytes 0-2, the policy, script and read size, are kept), drawn from the
// parser-differential classes of the WAFFLED study of WAF bypasses (ACSAC 2025) and of ModSecurity's multipart
// flags; the other half, and whenever a mutation does not apply or would not fit, it calls LLVMFuzzerMutate.
//
//   boundary      quoted, whitespace around `=`, a second `boundary=`, one hidden in another parameter's quoted
//                 value, `boundary*=` (RFC 2231), extra hyphens, over 70 characters or invalid characters, a
//                 second Content-Type header, case tricks
//   framing       preamble, epilogue, no close delimiter, a delimiter look-alike inside data, a part without a
//                 body, bare LF / bare CR / mixed line endings, transport padding, a nested multipart/mixed part
//   part headers  folding, duplicate Content-Disposition / name / filename, `filename*` disagreeing with
//                 `filename`, parameter-name case, single- and half-quoted values, backslash escapes, NUL and
//                 control bytes, `/` `\` `..` in file names, no name, unknown parameters,
//                 Content-Transfer-Encoding, a `_charset_` field and per-part charsets
//   transport     Content-Length <-> chunked (random chunk sizes, extensions, upper-case hex), both at once,
//                 `Expect: 100-continue`, a pipelined second request, HTTP/1.0
//   type          the multipart body sent as urlencoded or under another Content-Type
//   encoding      the body gzipped or deflated (`Content-Encoding: gzip`, `x-gzip`, `deflate`, case tricks), a long
//                 run of one byte inserted (a small bomb), the stream cut short, given a wrong byte or followed by
//                 bytes; a body that decodes is mutated decoded and encoded again, like a chunked one is re-chunked
//
// The body is taken by its framing (Content-Length, or de-chunked), mutated, and framed again: Content-Length is
// fixed afterwards except, deliberately, one time in eight; chunked bodies are re-chunked with random sizes.
// Every operation is total on arbitrary bytes and never writes past maxSize. FORMWALL_FUZZ_NO_MUTATOR=1 makes the
// custom mutator call LLVMFuzzerMutate only (the baseline for comparisons).

#if canImport(Glibc)
import Glibc
#endif
import Inspect

@_silgen_name("LLVMFuzzerMutate")
func LLVMFuzzerMutate(_ data: UnsafeMutablePointer<UInt8>, _ size: Int, _ maxSize: Int) -> Int

let mutatorDisabled: Bool = getenv("FORMWALL_FUZZ_NO_MUTATOR").map { String(cString: $0) != "" && String(cString: $0) != "0" } ?? false

@_cdecl("LLVMFuzzerCustomMutator")
public func customMutate(_ data: UnsafeMutablePointer<UInt8>, _ size: Int, _ maxSize: Int, _ seed: UInt32) -> Int {
    if mutatorDisabled || maxSize < 3 { return LLVMFuzzerMutate(data, size, maxSize) }
    var rng = MutatorRandom(seed: seed)
    if rng.below(2) == 0 { return LLVMFuzzerMutate(data, size, maxSize) }
    var prefix: [UInt8] = size >= 3 ? Array(UnsafeBufferPointer(start: data, count: 3)) : [rng.byte(), 0, rng.byte()]
    if size < 3 { prefix[1] = UInt8(truncatingIfNeeded: rng.below(4) << 4) }
    let client = size > 3 ? Array(UnsafeBufferPointer(start: data + 3, count: size - 3)) : []
    let mutated = mutateClient(client, &rng)
    guard let out = mutated, out != client, out.count + 3 <= maxSize else { return LLVMFuzzerMutate(data, size, maxSize) }
    (prefix + out).withUnsafeBufferPointer { data.update(from: $0.baseAddress!, count: out.count + 3) }
    return out.count + 3
}

// MARK: - Randomness

struct MutatorRandom {
    var state: UInt64
    init(seed: UInt32) { state = UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 0x1234_5678 }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// 0..<n; 0 when n <= 0.
    mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }
    mutating func byte() -> UInt8 { UInt8(truncatingIfNeeded: next()) }
    mutating func chance(_ oneIn: Int) -> Bool { below(oneIn) == 0 }
    mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
    mutating func pickString(_ items: [String]) -> [UInt8] { Array(pick(items).utf8) }
}

// MARK: - Byte helpers (all total)

let CRLF: [UInt8] = [13, 10]

@inline(__always) func lower(_ b: UInt8) -> UInt8 { b >= 65 && b <= 90 ? b + 32 : b }

/// First index of needle in hay at or after from (ASCII case-insensitive when asked).
func findBytes(_ needle: [UInt8], in hay: [UInt8], from: Int = 0, caseless: Bool = false) -> Int? {
    guard !needle.isEmpty, from >= 0, hay.count >= needle.count, from <= hay.count - needle.count else { return nil }
    outer: for i in from...(hay.count - needle.count) {
        for j in 0..<needle.count {
            let a = hay[i + j], b = needle[j]
            if caseless ? lower(a) != lower(b) : a != b { continue outer }
        }
        return i
    }
    return nil
}

func allIndices(_ needle: [UInt8], in hay: [UInt8], caseless: Bool = false) -> [Int] {
    var out: [Int] = []
    var from = 0
    while out.count < 256, let i = findBytes(needle, in: hay, from: from, caseless: caseless) {
        out.append(i)
        from = i + max(1, needle.count)
    }
    return out
}

func replaceAll(_ needle: [UInt8], with new: [UInt8], in hay: [UInt8]) -> [UInt8] {
    guard !needle.isEmpty else { return hay }
    var out: [UInt8] = []
    var i = 0
    while let j = findBytes(needle, in: hay, from: i) {
        out += hay[i..<j]
        out += new
        i = j + needle.count
    }
    out += hay[min(i, hay.count)...]
    return out
}

func splitLines(_ bytes: [UInt8]) -> [[UInt8]] {
    var lines: [[UInt8]] = []
    var i = 0
    while let j = findBytes(CRLF, in: bytes, from: i) {
        lines.append(Array(bytes[i..<j]))
        i = j + 2
    }
    lines.append(Array(bytes[min(i, bytes.count)...]))
    return lines
}

func joinLines(_ lines: [[UInt8]]) -> [UInt8] {
    var out: [UInt8] = []
    for (n, line) in lines.enumerated() {
        if n > 0 { out += CRLF }
        out += line
    }
    return out
}

func hex(_ n: Int, upper: Bool) -> [UInt8] {
    let s = String(n, radix: 16, uppercase: upper)
    return Array(s.utf8)
}

// MARK: - The request as head, framed body and what follows

enum Framing { case length, chunked, none }

struct ClientRequest {
    var lines: [[UInt8]]      // request line and header lines, without the empty line
    var body: [UInt8]         // the de-framed body
    var framing: Framing
    var rest: [UInt8]         // bytes after the body (pipelined requests, garbage)
    var keepStaleLength = false
    /// The content coding `body` is sent in (it is kept decoded; nil: sent as it is), and what to do to the
    /// encoded stream once (0: nothing, 1: cut short, 2: a wrong byte, 3: bytes after its end).
    var coding: StreamInflater.Coding?
    var damage = 0

    init?(_ bytes: [UInt8]) {
        guard let headEnd = findBytes([13, 10, 13, 10], in: bytes) else { return nil }
        lines = splitLines(Array(bytes[..<headEnd]))
        let after = Array(bytes[(headEnd + 4)...])
        framing = .none
        body = after
        rest = []
        if let te = headerIndex("transfer-encoding"), findBytes(Array("chunked".utf8), in: lines[te], caseless: true) != nil,
           let (decoded, remainder) = dechunk(after) {
            framing = .chunked
            body = decoded
            rest = remainder
        } else if let cl = headerIndex("content-length") {
            let value = headerValue(cl)
            if value.count <= 6, let n = Int(String(decoding: value, as: UTF8.self)), n >= 0 {
                framing = .length
                body = Array(after.prefix(n))
                rest = Array(after.dropFirst(n))
            }
        }
        // A body in one content coding that decodes whole is mutated decoded (and encoded again by `encoded`).
        if let ce = headerIndex("content-encoding"), let coding = singleCoding(headerValue(ce)),
           let decoded = inflated(body, coding) {
            self.coding = coding
            body = decoded
        }
    }

    init(template rng: inout MutatorRandom) {
        // Origin-form paths, and the other target forms (the Host is "a"): absolute-form for that host (routed and
        // forwarded as origin-form), for another host (host_mismatch), `*` and authority-form (refused); paths that
        // backends read as another route's (ambiguous_path) and a fragment (refused).
        let path = rng.pickString(["/", "/up", "/upload", "/api/avatar", "/api/documents", "http://a/upload",
                                   "HTTP://A/api/avatar?x=1", "http://b/upload", "*", "a:80", "/api%2Favatar",
                                   "/x/..;/upload", "//h/api/documents", "/API/Avatar", "/api\\avatar",
                                   "/up#/../upload"])
        let boundary = rng.pickString(["B", "fuzzB", "----WebKitFormBoundary7MA4YWxkTrZu0gW", "x y", "a=b"])
        let quoted = boundary.contains(32) || boundary.contains(61) || rng.chance(4)
        lines = [Array("POST ".utf8) + path + Array(" HTTP/1.1".utf8), Array("Host: a".utf8),
                 Array("Content-Type: multipart/form-data; boundary=".utf8) + (quoted ? [34] + boundary + [34] : boundary)]
        var b: [UInt8] = []
        for _ in 0...rng.below(3) {
            b += [45, 45] + boundary + CRLF
            b += templatePart(&rng)
            b += CRLF
        }
        b += [45, 45] + boundary + [45, 45] + CRLF
        body = b
        rest = []
        framing = rng.chance(4) ? .chunked : .length
        lines.append(Array((framing == .chunked ? "Transfer-Encoding: chunked" : "Content-Length: 0").utf8))
    }

    func headerIndex(_ name: String) -> Int? {
        let key = Array(name.utf8) + [58]
        return lines.indices.dropFirst().first { findBytes(key, in: lines[$0], caseless: true) == 0 }
    }

    func headerValue(_ index: Int) -> [UInt8] {
        let line = lines[index]
        guard let colon = line.firstIndex(of: 58) else { return [] }
        return Array(line[(colon + 1)...].drop { $0 == 32 || $0 == 9 }.reversed().drop { $0 == 32 || $0 == 9 }.reversed())
    }

    mutating func setHeader(_ name: String, _ value: [UInt8]) {
        let line = Array(name.utf8) + [58, 32] + value
        if let i = headerIndex(name) { lines[i] = line } else { lines.append(line) }
    }

    mutating func removeHeader(_ name: String) {
        while let i = headerIndex(name) { lines.remove(at: i) }
    }

    /// The boundary named by the (first) Content-Type header, unquoted; nil if there is none.
    var boundary: [UInt8]? {
        guard let ct = headerIndex("content-type") else { return nil }
        return boundaryParameter(lines[ct])
    }

    func encoded(_ rng: inout MutatorRandom) -> [UInt8] {
        var head = lines
        var content = body
        if let coding {
            content = deflateBytes(body, windowBits: coding == .gzip ? 31 : 15)
            switch damage {
            case 1 where !content.isEmpty: content.removeLast(1 + rng.below(content.count))
            case 2 where !content.isEmpty: content[rng.below(content.count)] ^= 1 + UInt8(rng.below(255))
            case 3: content += rng.pickString(["\u{1F}\u{8B}", "\0", "x", "\r\n"])
            default: break
            }
        }
        var framedBody = content
        switch framing {
        case .length:
            if !keepStaleLength, let i = head.indices.dropFirst().first(where: {
                findBytes(Array("content-length:".utf8), in: head[$0], caseless: true) == 0 }) {
                head[i] = Array("Content-Length: \(content.count)".utf8)
            }
        case .chunked:
            framedBody = chunk(content, &rng)
        case .none:
            break
        }
        return joinLines(head) + [13, 10, 13, 10] + framedBody + rest
    }
}

func templatePart(_ rng: inout MutatorRandom) -> [UInt8] {
    let name = rng.pickString(["title", "note", "doc", "photo", "avatar", "document", "image", "caption", "tags",
                               "user_id", "crop", "x"])
    var p = Array("Content-Disposition: form-data; name=\"".utf8) + name + [34]
    if rng.chance(2) {
        p += Array("; filename=\"".utf8) + rng.pickString(["a.txt", "a.png", "x.pdf", "s.php", ""]) + [34] + CRLF
        p += Array("Content-Type: ".utf8) + rng.pickString(["text/plain", "image/png", "application/pdf",
                                                            "application/octet-stream"])
        p += CRLF + CRLF
        p += rng.pickString(["plain text body", "\u{89}PNG\r\n\u{1A}\n\0\0\0\rIHDR", "%PDF-1.4\n%", "<?php x(); ?>",
                             "GIF89a<?php ?>", ""])
    } else {
        p += CRLF + CRLF + rng.pickString(["hello", "12", "", "a\r\nb", "0123456789012345678901234567890123456789"])
    }
    return p
}

func boundaryParameter(_ line: [UInt8]) -> [UInt8]? {
    guard var i = findBytes(Array("boundary".utf8), in: line, caseless: true) else { return nil }
    i += 8
    if i < line.count, line[i] == 42 { i += 1 }  // boundary*=
    while i < line.count, line[i] == 32 || line[i] == 9 { i += 1 }
    guard i < line.count, line[i] == 61 else { return nil }
    i += 1
    while i < line.count, line[i] == 32 || line[i] == 9 { i += 1 }
    var value: [UInt8] = []
    if i < line.count, line[i] == 34 {
        i += 1
        while i < line.count, line[i] != 34 { value.append(line[i]); i += 1 }
    } else {
        while i < line.count, line[i] != 59, line[i] != 32, line[i] != 9 { value.append(line[i]); i += 1 }
    }
    if let q = findBytes([39, 39], in: value) { value = Array(value[(q + 2)...]) }
    return value.isEmpty ? nil : value
}

/// Decodes a chunked body: the data and the bytes after the last chunk's trailer; nil if it is not well framed.
func dechunk(_ b: [UInt8]) -> ([UInt8], [UInt8])? {
    var out: [UInt8] = []
    var i = 0
    while let le = findBytes(CRLF, in: b, from: i) {
        let digits = b[i..<le].prefix { (48...57).contains($0) || (65...70).contains($0) || (97...102).contains($0) }
        guard !digits.isEmpty, digits.count <= 6, let size = Int(String(decoding: digits, as: UTF8.self), radix: 16)
        else { return nil }
        if size == 0 {
            if let end = findBytes([13, 10, 13, 10], in: b, from: le) { return (out, Array(b[(end + 4)...])) }
            return (out, [])
        }
        guard le + 2 + size + 2 <= b.count else { return nil }
        out += b[(le + 2)..<(le + 2 + size)]
        i = le + 2 + size + 2
    }
    return nil
}

func chunk(_ body: [UInt8], _ rng: inout MutatorRandom) -> [UInt8] {
    var out: [UInt8] = []
    var i = 0
    let style = rng.below(4)  // 0: one chunk, 1: small random, 2: larger random, 3: tiny
    let upper = rng.chance(3)
    let extensions = rng.chance(5)
    while i < body.count {
        let n: Int
        switch style {
        case 0: n = body.count
        case 1: n = 1 + rng.below(16)
        case 2: n = 1 + rng.below(max(1, body.count))
        default: n = 1 + rng.below(3)
        }
        let take = min(n, body.count - i)
        out += hex(take, upper: upper)
        if extensions { out += rng.pickString([";a=b", ";x", "; ext=\"q\"", ";"]) }
        out += CRLF + body[i..<(i + take)] + CRLF
        i += take
    }
    out += [48] + (extensions && rng.chance(2) ? Array(";e".utf8) : []) + CRLF
    if rng.chance(8) { out += Array("X-Trailer: 1\r\n".utf8) }
    out += CRLF
    return out
}

/// The one coding a Content-Encoding value names (`identity` aside); nil for none, several or an unknown one.
func singleCoding(_ value: [UInt8]) -> StreamInflater.Coding? {
    let names = ConnectionMachine.contentCodingNames([String(decoding: value, as: UTF8.self)])
    guard names.count == 1 else { return nil }
    return StreamInflater.Coding(name: Substring(names[0]))
}

/// `body` decoded whole from `coding`, or nil if it does not decode (or would decode past 1 MiB: the mutator
/// then leaves it as bytes).
func inflated(_ body: [UInt8], _ coding: StreamInflater.Coding) -> [UInt8]? {
    guard let inflater = try? StreamInflater(coding) else { return nil }
    var out: [UInt8] = []
    let fits = (try? body.withUnsafeBytes { raw in
        try inflater.feed(raw) { piece in
            out.append(contentsOf: piece)
            return out.count <= 1 << 20
        }
    }) ?? false
    guard fits, !inflater.hasPending, (try? inflater.finish()) != nil else { return nil }
    return out
}

// MARK: - The mutations

typealias Mutation = @Sendable (inout ClientRequest, inout MutatorRandom) -> Bool

func mutateClient(_ client: [UInt8], _ rng: inout MutatorRandom) -> [UInt8]? {
    var request: ClientRequest
    if let parsed = ClientRequest(client), !rng.chance(32) {
        request = parsed
    } else {
        // No head to work on (or now and then anyway): start again from a well-formed multipart request.
        var fresh = ClientRequest(template: &rng)
        _ = mutations[rng.below(mutations.count)](&fresh, &rng)
        return fresh.encoded(&rng)
    }
    for _ in 0..<4 {
        let mutation = mutations[rng.below(mutations.count)]
        if mutation(&request, &rng) {
            if request.framing == .length, rng.chance(8) { request.keepStaleLength = true }
            return request.encoded(&rng)
        }
    }
    return nil
}

let mutations: [Mutation] = boundaryMutations + framingMutations + partHeaderMutations + transportMutations
    + typeMutations + encodingMutations

// MARK: Boundary

/// Edits the Content-Type line's boundary parameter through f(line, start of `boundary`, value range).
func editBoundaryParameter(_ r: inout ClientRequest, _ f: ([UInt8], Int, Range<Int>) -> [UInt8]?) -> Bool {
    guard let ct = r.headerIndex("content-type") else { return false }
    let line = r.lines[ct]
    guard let start = findBytes(Array("boundary".utf8), in: line, caseless: true),
          let eq = line[start...].firstIndex(of: 61) else { return false }
    var vs = eq + 1
    while vs < line.count, line[vs] == 32 || line[vs] == 9 { vs += 1 }
    var ve = vs
    if ve < line.count, line[ve] == 34 {
        ve += 1
        while ve < line.count, line[ve] != 34 { ve += 1 }
        ve = min(line.count, ve + 1)
    } else {
        while ve < line.count, line[ve] != 59, line[ve] != 32 { ve += 1 }
    }
    guard let new = f(line, start, vs..<ve) else { return false }
    r.lines[ct] = new
    return true
}

/// Replaces the boundary in the header and in every delimiter of the body (and optionally only one of them).
func renameBoundary(_ r: inout ClientRequest, to new: [UInt8], header: Bool = true, body: Bool = true) -> Bool {
    guard let old = r.boundary else { return false }
    if header {
        let quoted = new.contains { $0 <= 32 || $0 == 59 || $0 == 44 || $0 == 61 || $0 == 34 || $0 >= 127 }
        let value = quoted ? [34] + new.filter { $0 != 34 } + [34] : new
        guard editBoundaryParameter(&r, { line, _, range in Array(line[..<range.lowerBound]) + value + line[range.upperBound...] })
        else { return false }
    }
    if body { r.body = replaceAll([45, 45] + old, with: [45, 45] + new, in: r.body) }
    return true
}

let boundaryMutations: [Mutation] = [
    // quote it (or unquote it)
    { r, _ in editBoundaryParameter(&r) { line, _, range in
        let v = Array(line[range])
        let nv: [UInt8] = v.first == 34 ? v.filter { $0 != 34 } : [34] + v + [34]
        return Array(line[..<range.lowerBound]) + nv + line[range.upperBound...]
    } },
    // whitespace around `=`
    { r, rng in
        let ws = rng.pickString([" ", "\t", "  ", " \t"])
        let side = rng.below(3)
        return editBoundaryParameter(&r) { line, start, range in
            guard let eq = line[start..<range.lowerBound].lastIndex(of: 61) else { return nil }
            return Array(line[..<eq]) + (side != 1 ? ws : []) + [61] + (side != 0 ? ws : []) + line[range.lowerBound...]
        }
    },
    // a second boundary= parameter, before or after, with another value (sometimes the one the body uses)
    { r, rng in
        guard let ct = r.headerIndex("content-type"), let b = r.boundary else { return false }
        let other = rng.pickString(["C", "x", "fuzzB", "\"C\"", "\"\"", ""])
        let extra = Array("; boundary=".utf8) + other
        if rng.chance(2) {
            r.lines[ct] += extra
        } else if let p = findBytes(Array("boundary".utf8), in: r.lines[ct], caseless: true) {
            r.lines[ct].insert(contentsOf: Array("boundary=".utf8) + other + Array("; ".utf8), at: p)
        }
        if rng.chance(2), !other.isEmpty, other.first != 34 { r.body = replaceAll([45, 45] + b, with: [45, 45] + other, in: r.body) }
        return true
    },
    // a boundary hidden in another parameter's quoted value
    { r, rng in
        guard let ct = r.headerIndex("content-type"), let b = r.boundary else { return false }
        let hidden = rng.pickString(["C", "fuzzB", "B"])
        let param = rng.pickString(["charset", "x", "name", "boundary-x"])
        let ins = Array("; ".utf8) + param + Array("=\"a; boundary=".utf8) + hidden + Array("\"".utf8)
        if rng.chance(2), let p = findBytes(Array("boundary".utf8), in: r.lines[ct], caseless: true) {
            r.lines[ct].insert(contentsOf: ins.dropFirst(2) + Array("; ".utf8), at: p)
        } else {
            r.lines[ct] += ins
        }
        if rng.chance(2) { r.body = replaceAll([45, 45] + b, with: [45, 45] + hidden, in: r.body) }
        return true
    },
    // boundary*= (RFC 2231), replacing or next to the plain one
    { r, rng in
        guard let ct = r.headerIndex("content-type"), let b = r.boundary else { return false }
        let enc = Array(rng.pick(["utf-8''", "UTF-8'en'", "''", "iso-8859-1''"]).utf8)
        let value = rng.chance(3) ? Array("C".utf8) : b
        let star = Array("boundary*=".utf8) + enc + value
        if rng.chance(2) {
            return editBoundaryParameter(&r) { line, start, range in Array(line[..<start]) + star + line[range.upperBound...] }
        }
        r.lines[ct] += Array("; ".utf8) + star
        return true
    },
    // extra hyphens: in the header only, in the body only, or both
    { r, rng in
        guard let b = r.boundary else { return false }
        let which = rng.below(3)
        return renameBoundary(&r, to: [45, 45] + b, header: which != 1, body: which != 0)
    },
    // over 70 characters, or invalid characters
    { r, rng in
        guard let b = r.boundary else { return false }
        var new = b
        switch rng.below(4) {
        case 0: new = b + [UInt8](repeating: 97, count: 71 - min(70, b.count) + rng.below(30))
        case 1: new = b + rng.pickString(["@", ":", "\"", "ä", " ", "\u{1}", "\\", "/", "?", "=", ","])
        case 2: new = b + [32]  // trailing space (not allowed as the last character)
        default: new = rng.pickString(["", " ", "-", "--", "\u{7F}"]) + b
        }
        return renameBoundary(&r, to: new, header: true, body: !rng.chance(4))
    },
    // a second Content-Type header
    { r, rng in
        guard r.headerIndex("content-type") != nil else { return false }
        let ct = Array("Content-Type: ".utf8) + rng.pickString([
            "multipart/form-data; boundary=C", "text/plain", "application/x-www-form-urlencoded",
            "multipart/form-data", "multipart/form-data; boundary=" + String(decoding: r.boundary ?? [], as: UTF8.self)])
        if rng.chance(2) { r.lines.append(ct) } else { r.lines.insert(ct, at: min(1, r.lines.count)) }
        return true
    },
    // case tricks on the media type and the parameter name
    { r, rng in
        guard let ct = r.headerIndex("content-type") else { return false }
        var line = r.lines[ct]
        let which = rng.below(3)
        if which != 1, let p = findBytes(Array("boundary".utf8), in: line, caseless: true) {
            let styles = ["BOUNDARY", "Boundary", "bOuNdArY"]
            line.replaceSubrange(p..<(p + 8), with: rng.pickString(styles))
        }
        if which != 0, let p = findBytes(Array("multipart/form-data".utf8), in: line, caseless: true) {
            line.replaceSubrange(p..<(p + 19), with: rng.pickString(["Multipart/Form-Data", "MULTIPART/FORM-DATA",
                                                                      "multipart/form-data ", " multipart/form-data"]))
        }
        guard line != r.lines[ct] else { return false }
        r.lines[ct] = line
        return true
    },
]

// MARK: Framing

/// Ranges of the delimiters `--boundary` in the body (at the start or after a line end).
func delimiterPositions(_ r: ClientRequest) -> (boundary: [UInt8], positions: [Int])? {
    guard let b = r.boundary else { return nil }
    let positions = allIndices([45, 45] + b, in: r.body)
    return positions.isEmpty ? nil : (b, positions)
}

let framingMutations: [Mutation] = [
    // a preamble (sometimes with a look-alike of the delimiter in it)
    { r, rng in
        let b = r.boundary ?? []
        let text = rng.pickString(["preamble\r\n", "\r\n", "x", "This is a MIME message.\r\n\r\n", "\n"])
            + (rng.chance(3) ? [45, 45] + b + rng.pickString(["x\r\n", " \r\n", "-\r\n"]) : [])
        r.body.insert(contentsOf: text, at: 0)
        return true
    },
    // an epilogue (sometimes a whole smuggled part)
    { r, rng in
        let b = r.boundary ?? Array("B".utf8)
        let epilogues: [[UInt8]] = [Array("epilogue".utf8), CRLF, Array("\r\n\r\n".utf8),
                                    [45, 45] + b + CRLF + Array("Content-Disposition: form-data; name=\"title\"\r\n\r\nsmuggled\r\n".utf8)
                                        + [45, 45] + b + [45, 45] + CRLF,
                                    [45, 45] + b + [45, 45], [0, 1, 2]]
        r.body += rng.pick(epilogues)
        return true
    },
    // drop the close delimiter (and what follows, or only its trailing hyphens)
    { r, rng in
        guard let (b, _) = delimiterPositions(r), let p = allIndices([45, 45] + b + [45, 45], in: r.body).last else { return false }
        switch rng.below(3) {
        case 0: r.body.removeSubrange(p...)
        case 1: r.body.removeSubrange((p + b.count + 2)..<(p + b.count + 4))
        default: r.body.removeSubrange(max(0, p - 2)...)  // the CRLF before it too
        }
        return true
    },
    // a delimiter look-alike line inside a part's data
    { r, rng in
        guard let (b, positions) = delimiterPositions(r) else { return false }
        guard let start = findBytes([13, 10, 13, 10], in: r.body, from: rng.pick(positions)) else { return false }
        let lookalike = rng.pickString(["\r\n", "\n", "\r", ""]) + [45, 45] + b
            + rng.pickString(["x", " ", "-", "--x", "\t", "0", "\n", "\r\n\r\n", "\u{0}", "--", " --"]) + rng.pickString(["\r\n", "", "data"])
        let at = min(r.body.count, start + 4 + rng.below(4))
        r.body.insert(contentsOf: lookalike, at: at)
        return true
    },
    // a part without a body (no blank line after its headers), or with empty headers and body
    { r, rng in
        guard let (b, positions) = delimiterPositions(r) else { return false }
        let p = rng.pick(positions)
        let part: [UInt8] = rng.pick([
            [45, 45] + b + CRLF + Array("Content-Disposition: form-data; name=\"title\"".utf8) + CRLF,
            [45, 45] + b + CRLF + CRLF + CRLF,
            [45, 45] + b + CRLF + Array("Content-Disposition: form-data; name=\"doc\"; filename=\"e.txt\"\r\n\r\n\r\n".utf8),
            [45, 45] + b + CRLF,
        ])
        r.body.insert(contentsOf: part, at: p)
        return true
    },
    // bare LF / bare CR / mixed line endings, in all of the body, one line, or the part headers only
    { r, rng in
        let positions = allIndices(CRLF, in: r.body)
        guard !positions.isEmpty else { return false }
        let replacement: [UInt8] = rng.pick([[10], [13], [10, 13], [13, 13, 10]])
        switch rng.below(3) {
        case 0:
            r.body = replaceAll(CRLF, with: replacement, in: r.body)
        case 1:
            let p = rng.pick(positions)
            r.body.replaceSubrange(p..<(p + 2), with: replacement)
        default:
            for p in positions.reversed() where rng.chance(2) { r.body.replaceSubrange(p..<(p + 2), with: replacement) }
        }
        return true
    },
    // transport padding (whitespace) after a delimiter
    { r, rng in
        guard let (b, positions) = delimiterPositions(r) else { return false }
        var p = rng.pick(positions) + 2 + b.count
        if p + 2 <= r.body.count, r.body[p] == 45, r.body[p + 1] == 45 { p += 2 }
        r.body.insert(contentsOf: rng.pickString([" ", "\t", " \t ", "   ", "\u{B}", "\u{C}", " x"]), at: min(p, r.body.count))
        return true
    },
    // a nested multipart/mixed part (the RFC 7578-obsolete way of sending several files)
    { r, rng in
        guard let (b, positions) = delimiterPositions(r) else { return false }
        let inner = Array(rng.pick(["inner", "C", String(decoding: b, as: UTF8.self)]).utf8)
        var part = [45, 45] + b + CRLF + Array("Content-Disposition: form-data; name=\"doc\"\r\nContent-Type: multipart/mixed; boundary=".utf8)
            + inner + CRLF + CRLF
        part += [45, 45] + inner + CRLF + Array("Content-Disposition: file; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nfile one".utf8)
        part += CRLF + [45, 45] + inner + CRLF + Array("Content-Disposition: file; filename=\"s.php\"\r\n\r\n<?php x(); ?>".utf8)
        part += CRLF + [45, 45] + inner + [45, 45] + CRLF
        r.body.insert(contentsOf: part, at: rng.pick(positions))
        return true
    },
]

// MARK: Part headers

/// The range of one part's Content-Disposition line (up to, not including, its line end).
func dispositionLine(_ r: ClientRequest, _ rng: inout MutatorRandom) -> Range<Int>? {
    let starts = allIndices(Array("content-disposition".utf8), in: r.body, caseless: true)
    guard !starts.isEmpty else { return nil }
    let s = rng.pick(starts)
    var e = s
    while e < r.body.count, r.body[e] != 13, r.body[e] != 10 { e += 1 }
    return s..<e
}

/// Edits one Content-Disposition line with f; false if there is none or f declines.
func editDisposition(_ r: inout ClientRequest, _ rng: inout MutatorRandom, _ f: ([UInt8], inout MutatorRandom) -> [UInt8]?) -> Bool {
    guard let range = dispositionLine(r, &rng), let new = f(Array(r.body[range]), &rng) else { return false }
    r.body.replaceSubrange(range, with: new)
    return true
}

/// The range of a parameter's value (quotes included) after `param=` in a header line.
func parameterValue(_ line: [UInt8], _ param: String) -> Range<Int>? {
    let key = Array(param.utf8)
    var from = 0
    while let p = findBytes(key, in: line, from: from, caseless: true) {
        from = p + 1
        let before = p == 0 ? 59 : line[p - 1]
        guard before == 59 || before == 32 || before == 9 else { continue }
        var i = p + key.count
        while i < line.count, line[i] == 32 { i += 1 }
        guard i < line.count, line[i] == 61 else { continue }
        i += 1
        let vs = i
        if i < line.count, line[i] == 34 {
            i += 1
            while i < line.count, line[i] != 34 { i += line[i] == 92 ? 2 : 1 }
            i = min(line.count, i + 1)
        } else {
            while i < line.count, line[i] != 59 { i += 1 }
        }
        return vs..<min(i, line.count)
    }
    return nil
}

func setParameter(_ line: [UInt8], _ param: String, _ value: [UInt8]) -> [UInt8] {
    if let range = parameterValue(line, param) { return Array(line[..<range.lowerBound]) + value + line[range.upperBound...] }
    return line + Array("; \(param)=".utf8) + value
}

let nastyFilenames = ["../../etc/passwd", "..\\..\\boot.ini", "/etc/passwd", "a/b.txt", "C:\\x\\s.php", "s.php\u{0}.png",
                      "s.php.", "s.php ", ".htaccess", "s.pHp", "a.png;.php", "%2e%2e%2fs.php", "..", ".", "",
                      "s.php\r\n", "a\"b.php", "é.txt", "s.php/", "con.txt"]

let partHeaderMutations: [Mutation] = [
    // header folding (obs-fold) inside Content-Disposition
    { r, rng in editDisposition(&r, &rng) { line, rng in
        let semis = line.indices.filter { line[$0] == 59 }
        guard !semis.isEmpty else { return nil }
        var l = line
        let p = rng.pick(semis) + 1
        l.insert(contentsOf: rng.pickString(["\r\n ", "\r\n\t", "\n ", "\r\n"]), at: p)
        return l
    } },
    // a duplicate Content-Disposition header in the part
    { r, rng in editDisposition(&r, &rng) { line, rng in
        let other = Array("Content-Disposition: form-data; name=\"".utf8)
            + rng.pickString(["doc", "title", "x", "photo"]) + [34]
            + (rng.chance(2) ? Array("; filename=\"s.php\"".utf8) : [])
        return rng.chance(2) ? line + CRLF + other : other + CRLF + line
    } },
    // a duplicate name or filename parameter
    { r, rng in editDisposition(&r, &rng) { line, rng in
        let param = rng.chance(2) ? "name" : "filename"
        let value = rng.pickString(["\"doc\"", "\"title\"", "\"s.php\"", "\"\"", "x"])
        let dup = Array("; \(param)=".utf8) + value
        if rng.chance(2), let first = line.firstIndex(of: 59) { var l = line; l.insert(contentsOf: dup, at: first); return l }
        return line + dup
    } },
    // filename* disagreeing with filename (or alone, or malformed)
    { r, rng in editDisposition(&r, &rng) { line, rng in
        let star = rng.pickString(["UTF-8''s.php", "utf-8''%E2%82%AC.php", "''x.txt", "UTF-8'en'..%2F..%2Fs.php", "UTF-8''",
                                   "\"UTF-8''q.php\"", "bogus", "UTF-8''%ZZ"])
        var l = line
        if rng.chance(3) { l = setParameter(l, "filename", rng.pickString(["\"a.png\"", "a.png"])) }
        return l + Array("; filename*=".utf8) + star
    } },
    // parameter-name case tricks
    { r, rng in editDisposition(&r, &rng) { line, rng in
        var l = line
        for (key, styles) in [("name", ["NAME", "Name", "nAmE"]), ("filename", ["FILENAME", "FileName"]),
                              ("form-data", ["Form-Data", "FORM-DATA"]), ("content-disposition", ["content-disposition", "CONTENT-DISPOSITION"])]
            where rng.chance(2) {
            if let p = findBytes(Array(key.utf8), in: l, caseless: true) { l.replaceSubrange(p..<(p + key.utf8.count), with: rng.pickString(styles)) }
        }
        return l == line ? nil : l
    } },
    // single-quoted and half-quoted values
    { r, rng in editDisposition(&r, &rng) { line, rng in
        let param = rng.chance(2) ? "name" : "filename"
        guard let range = parameterValue(line, param) else { return nil }
        let inner = Array(line[range]).filter { $0 != 34 && $0 != 39 }
        let forms: [[UInt8]] = [[39] + inner + [39], [34] + inner, inner + [34], [39] + inner, [34, 34] + inner + [34, 34],
                                [34] + inner + [34] + Array("x".utf8)]
        return Array(line[..<range.lowerBound]) + rng.pick(forms) + line[range.upperBound...]
    } },
    // backslash escapes in quoted values
    { r, rng in editDisposition(&r, &rng) { line, rng in
        let param = rng.chance(2) ? "name" : "filename"
        let value = rng.pickString(["\"a\\\"b\"", "\"do\\c\"", "\"s.php\\\"", "\"a\\\\b.txt\"", "\"\\\"; filename=\\\"s.php\"",
                                    "\"x\\\"; name=\\\"doc\"", "\"\\d\\o\\c\""])
        return setParameter(line, param, value)
    } },
    // NUL and control bytes in the line
    { r, rng in editDisposition(&r, &rng) { line, rng in
        var l = line
        let ctl: [UInt8] = rng.pick([[0], [1], [8], [11], [12], [27], [127], [0xFF], [0xC0, 0xAF]])
        l.insert(contentsOf: ctl, at: rng.below(l.count + 1))
        return l
    } },
    // /, \ and .. in file names (or a file name on a plain field)
    { r, rng in editDisposition(&r, &rng) { line, rng in
        let name = rng.pick(nastyFilenames)
        return setParameter(line, "filename", [34] + Array(name.utf8) + [34])
    } },
    // no name parameter, or an empty one
    { r, rng in editDisposition(&r, &rng) { line, rng in
        guard let range = parameterValue(line, "name") else { return nil }
        if rng.chance(2) { return Array(line[..<range.lowerBound]) + [34, 34] + line[range.upperBound...] }
        var start = range.lowerBound - 5
        while start > 0, line[start] != 59 { start -= 1 }
        return Array(line[..<max(0, start)]) + line[range.upperBound...]
    } },
    // unknown disposition parameters or disposition types
    { r, rng in editDisposition(&r, &rng) { line, rng in
        if rng.chance(3), let p = findBytes(Array("form-data".utf8), in: line, caseless: true) {
            var l = line
            l.replaceSubrange(p..<(p + 9), with: rng.pickString(["attachment", "inline", "file", "form-data2", ""]))
            return l
        }
        return line + rng.pickString(["; foo=bar", "; size=12", "; name*0=\"do\"; name*1=\"c\"", "; creation-date=\"x\"",
                                      ";", "; =x", "; filename", "; x=\"; name=doc\""])
    } },
    // Content-Transfer-Encoding (with or without encoding the data)
    { r, rng in editDisposition(&r, &rng) { line, rng in
        let cte = rng.pickString(["base64", "quoted-printable", "7bit", "8bit", "binary", "x-uuencode", "BASE64"])
        return line + CRLF + Array("Content-Transfer-Encoding: ".utf8) + cte
    } },
    // a _charset_ field, or a per-part charset
    { r, rng in
        guard let (b, positions) = delimiterPositions(r) else { return false }
        if rng.chance(2) {
            let cs = rng.pickString(["ISO-8859-1", "UTF-16", "utf-7", "shift_jis", "bogus", ""])
            let part = [45, 45] + b + CRLF + Array("Content-Disposition: form-data; name=\"_charset_\"\r\n\r\n".utf8) + cs + CRLF
            r.body.insert(contentsOf: part, at: rng.pick(positions))
            return true
        }
        return editDisposition(&r, &rng) { line, rng in
            line + CRLF + Array("Content-Type: ".utf8) + rng.pickString(["text/plain; charset=utf-16", "text/plain; charset=UTF-7",
                                                                        "text/plain;charset=\"iso-8859-1\"", "image/png; charset=x"])
        }
    },
]

// MARK: Transport

let transportMutations: [Mutation] = [
    // Content-Length <-> chunked, and now and then both
    { r, rng in
        switch r.framing {
        case .chunked:
            r.removeHeader("transfer-encoding")
            r.setHeader("Content-Length", Array("0".utf8))
            r.framing = .length
        case .length, .none:
            if !rng.chance(6) { r.removeHeader("content-length") }
            r.setHeader("Transfer-Encoding", rng.chance(6) ? rng.pickString(["Chunked", "chunked ", "gzip, chunked"]) : Array("chunked".utf8))
            r.framing = .chunked
        }
        return true
    },
    // re-chunk with other sizes (the chunker picks sizes, extensions and hex case at random)
    { r, _ in r.framing == .chunked },
    // Expect: 100-continue
    { r, rng in
        guard r.headerIndex("expect") == nil else { return false }
        r.lines.append(Array("Expect: ".utf8) + rng.pickString(["100-continue", "100-Continue", "200-ok"]))
        return true
    },
    // a pipelined second request (a copy, a GET, or a fresh multipart request)
    { r, rng in
        switch rng.below(3) {
        case 0: let copy = r.encoded(&rng); r.rest += copy
        case 1: r.rest += Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
        default: let t = ClientRequest(template: &rng); r.rest += t.encoded(&rng)
        }
        return true
    },
    // HTTP/1.0 (with or without keep-alive)
    { r, rng in
        guard !r.lines.isEmpty, let p = findBytes(Array("HTTP/1.1".utf8), in: r.lines[0]) else { return false }
        r.lines[0].replaceSubrange(p..<(p + 8), with: Array("HTTP/1.0".utf8))
        if rng.chance(2) { r.lines.append(Array("Connection: keep-alive".utf8)) }
        return true
    },
]

// MARK: Type confusion

let typeMutations: [Mutation] = [
    { r, rng in
        guard let ct = r.headerIndex("content-type") else { return false }
        let b = String(decoding: r.boundary ?? Array("B".utf8), as: UTF8.self)
        r.lines[ct] = Array("Content-Type: ".utf8) + rng.pickString([
            "application/x-www-form-urlencoded", "text/plain", "application/json", "multipart/mixed; boundary=\(b)",
            "multipart/related; boundary=\(b)", "multipart/form-data", "application/octet-stream",
            "multipart/form-data, boundary=\(b)", "multipart/form-datax; boundary=\(b)",
            "application/x-www-form-urlencoded; boundary=\(b)", "multipart/; boundary=\(b)"])
        return true
    },
    // no Content-Type at all
    { r, _ in
        guard r.headerIndex("content-type") != nil else { return false }
        r.removeHeader("content-type")
        return true
    },
]

// MARK: Content coding

let encodingMutations: [Mutation] = [
    // send the body gzipped or deflated (or stop encoding it)
    { r, rng in
        if r.coding != nil, rng.chance(4) {
            r.coding = nil
            r.removeHeader("content-encoding")
            return true
        }
        let name = rng.pickString(["gzip", "gzip", "deflate", "x-gzip", "GZip", "gzip, identity", " deflate"])
        r.coding = singleCoding(name) ?? .gzip
        r.setHeader("Content-Encoding", name)
        return true
    },
    // a long run of one byte in the (decoded) body: a small bomb, for `compression-ratio-max`
    { r, rng in
        guard r.coding != nil else { return false }
        let run = [UInt8](repeating: rng.pick([0, 65, 45, 13]), count: 1000 << rng.below(10))
        r.body.insert(contentsOf: run, at: rng.below(r.body.count + 1))
        return true
    },
    // the encoded stream cut short, given a wrong byte, or followed by bytes
    { r, rng in
        guard r.coding != nil else { return false }
        r.damage = 1 + rng.below(3)
        return true
    },
]
