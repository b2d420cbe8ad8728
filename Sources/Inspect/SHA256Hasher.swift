import COpenSSL

/// OpenSSL 3's SHA-256 implementation, fetched once for the process. With `EVP_sha256()`, every
/// `EVP_DigestInit_ex` looks the implementation up again in the provider store (about 7,000 instructions per
/// hasher, one hasher per part); a fetched `EVP_MD` is immutable and may be shared by threads. Nil only if the
/// default provider has no SHA-256, and then `EVP_sha256()` is used as before.
private nonisolated(unsafe) let fetchedSHA256: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

/// A streaming SHA-256 digest computed with OpenSSL's EVP interface.
///
/// Feed it byte slices as they stream past with `update(_:)`; it never holds the data.
/// `finalize()` may be called once; afterwards the hasher must not be used again.
public final class SHA256Hasher {
    private let ctx: OpaquePointer
    private var finished = false

    /// Creates a hasher ready for input.
    public init() {
        // Neither trap is input-reachable: no byte a client or an upstream sends reaches these calls (the hasher is
        // made before any of a part's data), and both fail only when OpenSSL cannot allocate its few hundred bytes
        // of context, a state in which any allocation by the Swift runtime would stop the process as well.
        guard let ctx = EVP_MD_CTX_new() else { preconditionFailure("EVP_MD_CTX_new failed: out of memory") }
        self.ctx = ctx
        guard EVP_DigestInit_ex(ctx, fetchedSHA256 ?? EVP_sha256(), nil) == 1 else {
            preconditionFailure("EVP_DigestInit_ex failed: out of memory")
        }
    }

    deinit { EVP_MD_CTX_free(ctx) }

    /// Adds `bytes` to the digest.
    @inline(__always)
    public func update(_ bytes: UnsafeRawBufferPointer) {
        // Unreachable from input: FormStage feeds a part's hasher only inside the part and finalizes it once.
        precondition(!finished, "SHA256Hasher used after finalize()")
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        _ = EVP_DigestUpdate(ctx, base, bytes.count)
    }

    /// Adds `bytes` to the digest.
    public func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Finishes the digest and returns its 32 bytes.
    public func finalize() -> [UInt8] {
        // Unreachable from input: finalized once, at the part's end, and then dropped with the part.
        precondition(!finished, "SHA256Hasher finalized twice")
        finished = true
        var out = [UInt8](repeating: 0, count: 32)
        var len: UInt32 = 0
        _ = EVP_DigestFinal_ex(ctx, &out, &len)
        return out
    }

    /// Finishes the digest and returns it as 64 lowercase hex characters.
    public func finalizeHex() -> String { Hex.encode(finalize()) }

    /// The SHA-256 of `bytes` as lowercase hex.
    public static func hex(_ bytes: [UInt8]) -> String {
        let h = SHA256Hasher()
        h.update(bytes)
        return h.finalizeHex()
    }
}

/// Lowercase hexadecimal encoding.
public enum Hex {
    /// Encodes `bytes` as lowercase hex.
    public static func encode(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { encode(raw: $0) }
    }

    /// Encodes `bytes` as lowercase hex, allocating only the string.
    public static func encode(raw bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (i, b) in bytes.enumerated() {
                out[2 * i] = digit(b >> 4)
                out[2 * i + 1] = digit(b & 0x0F)
            }
            return bytes.count * 2
        }
    }

    /// The lowercase hex digit of a value below 16.
    @inline(__always) static func digit(_ v: UInt8) -> UInt8 { v < 10 ? 0x30 + v : 0x57 + v }
}
