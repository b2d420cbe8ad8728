import COpenSSL

/// Random values from OpenSSL's CSPRNG (`RAND_bytes`).
public enum SecureRandom {
    /// Fills `buffer` from the CSPRNG; false when it fails (the buffer's contents are then not random).
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) -> Bool {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return true }
        guard buffer.count <= Int(Int32.max) else { return false }
        return RAND_bytes(base.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)) == 1
    }

    /// A fresh multipart boundary: `formwall-` followed by 32 random characters from `[0-9A-Za-z]`
    /// (about 190 bits), well inside RFC 2046's 70-character limit; nil when the CSPRNG fails (`formwall inspect`
    /// then reports `random_unavailable`; the proxy's requests draw from a `SecureRandomPool`).
    public static func boundary() -> [UInt8]? {
        boundary { count, body in
            var random = [UInt8](repeating: 0, count: count)
            guard random.withUnsafeMutableBytes(fill) else { return false }
            random.withUnsafeBytes(body)
            return true
        }
    }

    /// The same, drawing random bytes from `source` (which lends `count` bytes to the closure it is given, and
    /// returns false, without calling it, when it has none: the boundary is then nil).
    /// Each three random bytes give four 6-bit values; a value below 62 picks a symbol and 62 or 63 is skipped
    /// (rejection sampling keeps the distribution uniform over the 62 symbols). 30 bytes give 40 values, of which
    /// 32 or more are kept but for about one boundary in 10^6, which draws again. Inlined into its callers, so
    /// that the pool's `withBytes` and the symbol loop run without closure contexts (1,700 instructions a
    /// boundary before).
    @inline(__always)
    static func boundary(from source: (Int, (UnsafeRawBufferPointer) -> Void) -> Bool) -> [UInt8]? {
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
                let drawn = source(30) { random in
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
                guard drawn else { return nil }
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

    /// A random identifier of `count` bytes as lowercase hex (quarantine ids); nil when the CSPRNG fails.
    public static func hexID(bytes count: Int = 16) -> String? {
        var random = [UInt8](repeating: 0, count: count)
        guard random.withUnsafeMutableBytes(fill) else { return nil }
        return Hex.encode(random)
    }
}

/// Random bytes from OpenSSL's CSPRNG, drawn 4 KiB at a time: one `RAND_bytes` call serves about a hundred
/// requests' ids and boundaries instead of two calls each. Not thread-safe: one pool per event-loop thread.
/// A draw the CSPRNG cannot serve returns nil (the request it was for fails, not the process), and the next
/// draw asks it again.
public final class SecureRandomPool {
    /// The drawn bytes; those before `next` were lent and wiped.
    private let storage: UnsafeMutableRawBufferPointer
    private var next: Int
    /// Fills a buffer with random bytes, false on failure: `SecureRandom.fill`, or a test's stand-in.
    private let source: (UnsafeMutableRawBufferPointer) -> Bool

    /// Creates an empty pool refilled `refill` bytes (at least 64) at a time from `source`.
    public init(refill: Int = 4096, source: @escaping (UnsafeMutableRawBufferPointer) -> Bool = SecureRandom.fill) {
        storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(refill, 64), alignment: 16)
        storage.initializeMemory(as: UInt8.self, repeating: 0)
        next = storage.count
        self.source = source
    }

    deinit {
        storage.initializeMemory(as: UInt8.self, repeating: 0)
        storage.deallocate()
    }

    /// Takes `count` random bytes; nil when the CSPRNG fails.
    public func bytes(_ count: Int) -> [UInt8]? {
        withBytes(count) { Array($0) }
    }

    /// Lends the next `count` bytes of the pool to `body`, then wipes them, so a later memory disclosure cannot
    /// reveal past ids or boundaries. More than the pool holds are drawn for this call alone. Nil, without
    /// calling `body`, when the CSPRNG fails.
    @inline(__always)
    public func withBytes<R>(_ count: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R? {
        guard count <= storage.count else {
            var once = [UInt8](repeating: 0, count: count)
            defer { once.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
            guard once.withUnsafeMutableBytes(source) else { return nil }
            return once.withUnsafeBytes(body)
        }
        if count > storage.count - next {
            // Nothing is lent from a failed refill: the pool stays empty and the next draw tries again.
            guard source(storage) else {
                next = storage.count
                return nil
            }
            next = 0
        }
        let slice = UnsafeMutableRawBufferPointer(rebasing: storage[next..<(next + count)])
        next += count
        defer { slice.initializeMemory(as: UInt8.self, repeating: 0) }
        return body(UnsafeRawBufferPointer(slice))
    }

    /// A fresh multipart boundary (see `SecureRandom.boundary()`), from the pool; nil when the CSPRNG fails.
    public func boundary() -> [UInt8]? {
        SecureRandom.boundary { count, body in withBytes(count, body) != nil }
    }

    /// A random identifier of `count` bytes as lowercase hex; nil when the CSPRNG fails.
    public func hexID(bytes count: Int = 16) -> String? { withBytes(count) { Hex.encode(raw: $0) } }
}
