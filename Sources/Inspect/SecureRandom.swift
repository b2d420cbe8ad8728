import COpenSSL

/// Random values from OpenSSL's CSPRNG (`RAND_bytes`).
public enum SecureRandom {
    /// Fills and returns `count` random bytes. Traps if the CSPRNG fails, which is never recoverable.
    public static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        guard count > 0 else { return out }
        // Cannot fail: `count > 0` was checked.
        let rc = out.withUnsafeMutableBytes { RAND_bytes($0.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(count)) }
        precondition(rc == 1, "RAND_bytes failed")
        return out
    }

    /// A fresh multipart boundary: `formwall-` followed by 32 random characters from `[0-9A-Za-z]`
    /// (about 190 bits), well inside RFC 2046's 70-character limit.
    public static func boundary() -> [UInt8] {
        boundary { count, body in bytes(count).withUnsafeBytes(body) }
    }

    /// The same, drawing random bytes from `source` (which lends `count` bytes to the closure it is given).
    /// Each three random bytes give four 6-bit values; a value below 62 picks a symbol and 62 or 63 is skipped
    /// (rejection sampling keeps the distribution uniform over the 62 symbols). 30 bytes give 40 values, of which
    /// 32 or more are kept but for about one boundary in 10^6, which draws again. Inlined into its callers, so
    /// that the pool's `withBytes` and the symbol loop run without closure contexts (1,700 instructions a
    /// boundary before).
    @inline(__always)
    static func boundary(from source: (Int, (UnsafeRawBufferPointer) -> Void) -> Void) -> [UInt8] {
        let alphabet: StaticString = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
        let prefix: StaticString = "formwall-"
        let total = prefix.utf8CodeUnitCount + 32
        // Written on the stack (the prefix, then one symbol per accepted 6-bit value) and copied into the array:
        // an array made empty and filled in place (`unsafeUninitializedCapacity`, `repeating:count:`) took an
        // unspecialised path of the standard library that looked its type up each time, 330 instructions.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: total) { out in
            let symbols = alphabet.utf8Start
            var count = prefix.utf8CodeUnitCount
            for index in 0..<count { out[index] = prefix.utf8Start[index] }
            while count < total {
                source(30) { random in
                    var i = 0
                    while i + 3 <= random.count && count < total {
                        let bits = UInt32(random[i]) << 16 | UInt32(random[i + 1]) << 8 | UInt32(random[i + 2])
                        i += 3
                        place(bits >> 18, into: out, at: &count, total: total, symbols: symbols)
                        place(bits >> 12 & 63, into: out, at: &count, total: total, symbols: symbols)
                        place(bits >> 6 & 63, into: out, at: &count, total: total, symbols: symbols)
                        place(bits & 63, into: out, at: &count, total: total, symbols: symbols)
                    }
                }
            }
            return Array(UnsafeBufferPointer(rebasing: out[..<count]))
        }
    }

    /// One step of `boundary(from:)`: a 6-bit value below 62 becomes the next symbol, while there is room.
    @inline(__always)
    private static func place(_ value: UInt32, into out: UnsafeMutableBufferPointer<UInt8>, at count: inout Int,
                              total: Int, symbols: UnsafePointer<UInt8>) {
        guard value < 62, count < total else { return }
        out[count] = symbols[Int(value)]
        count += 1
    }

    /// A random identifier of `count` bytes as lowercase hex (request ids, quarantine ids).
    public static func hexID(bytes count: Int = 16) -> String { Hex.encode(bytes(count)) }
}

/// Random bytes from OpenSSL's CSPRNG, drawn 4 KiB at a time: one `RAND_bytes` call serves about a hundred
/// requests' ids and boundaries instead of two calls each. Not thread-safe: one pool per event-loop thread.
public final class SecureRandomPool {
    /// The drawn bytes; those before `next` were lent and wiped.
    private let storage: UnsafeMutableRawBufferPointer
    private var next: Int

    /// Creates an empty pool refilled `refill` bytes (at least 64) at a time.
    public init(refill: Int = 4096) {
        storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(refill, 64), alignment: 16)
        storage.initializeMemory(as: UInt8.self, repeating: 0)
        next = storage.count
    }

    deinit {
        storage.initializeMemory(as: UInt8.self, repeating: 0)
        storage.deallocate()
    }

    /// Takes `count` random bytes.
    public func bytes(_ count: Int) -> [UInt8] {
        withBytes(count) { Array($0) }
    }

    /// Lends the next `count` bytes of the pool to `body`, then wipes them, so a later memory disclosure cannot
    /// reveal past ids or boundaries. More than the pool holds are drawn for this call alone.
    @inline(__always)
    public func withBytes<R>(_ count: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        guard count <= storage.count else {
            var once = SecureRandom.bytes(count)
            defer { once.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
            return once.withUnsafeBytes(body)
        }
        if count > storage.count - next { refill() }
        let slice = UnsafeMutableRawBufferPointer(rebasing: storage[next..<(next + count)])
        next += count
        defer { slice.initializeMemory(as: UInt8.self, repeating: 0) }
        return body(UnsafeRawBufferPointer(slice))
    }

    private func refill() {
        // The storage holds at least 64 bytes, so it has an address. Traps if the CSPRNG fails (SecureRandom.bytes).
        let rc = storage.baseAddress.map { RAND_bytes($0.assumingMemoryBound(to: UInt8.self), Int32(storage.count)) }
        precondition(rc == 1, "RAND_bytes failed")
        next = 0
    }

    /// A fresh multipart boundary (see `SecureRandom.boundary()`), from the pool.
    public func boundary() -> [UInt8] { SecureRandom.boundary { count, body in withBytes(count, body) } }

    /// A random identifier of `count` bytes as lowercase hex.
    public func hexID(bytes count: Int = 16) -> String { withBytes(count) { Hex.encode(raw: $0) } }
}
