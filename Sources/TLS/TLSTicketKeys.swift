// Session ticket keys that rotate: OpenSSL's own ticket keys are random per SSL_CTX and never change, so the
// server context installs this ring through SSL_CTX_set_tlsext_ticket_key_evp_cb.
//
//   time --> [ key n-1 | key n ]            encrypt: always key n (rotated first if it is older than the interval)
//                 |        |                decrypt: key n -> 1 (use), key n-1 -> 2 (use and issue a fresh ticket),
//                 +--------+--> dropped     anything else -> 0 (full handshake)
//                   on the next rotation
import COpenSSL
import Glibc
import Synchronization

/// A ring of two session ticket keys (current and previous) that rotates every `rotationInterval` seconds.
///
/// Shared by every connection of a server context, possibly from several loop threads, hence the mutex. Pass the
/// same ring to a reloaded context to keep resumption working across reloads.
public final class TLSTicketKeys: Sendable {
    struct Key: Sendable {
        static let nameLength = 16
        static let secretLength = 32
        /// Identifies the key inside a ticket.
        var name: [UInt8]
        /// AES-256-CBC key of the ticket body.
        var cipherKey: [UInt8]
        /// HMAC-SHA256 key of the ticket.
        var macKey: [UInt8]
        /// When it became the current key (monotonic seconds).
        var created: Int

        /// A fresh random key, or nil if the CSPRNG failed.
        static func random(at now: Int) -> Key? {
            var bytes = [UInt8](repeating: 0, count: nameLength + 2 * secretLength)
            guard RAND_bytes(&bytes, Int32(bytes.count)) == 1 else { return nil }
            return Key(
                name: Array(bytes[0..<nameLength]),
                cipherKey: Array(bytes[nameLength..<nameLength + secretLength]),
                macKey: Array(bytes[(nameLength + secretLength)...]),
                created: now)
        }
    }

    struct Ring: Sendable {
        var current: Key
        var previous: Key?
    }

    /// Seconds between rotations.
    public let rotationInterval: Int
    private let ring: Mutex<Ring>

    /// A ring with one fresh key. Throws if the random generator fails.
    public init(rotationInterval: Int = 3600) throws {
        guard rotationInterval > 0 else {
            throw TLSError(.configuration, "ticket key rotation interval must be positive, got \(rotationInterval)")
        }
        guard let first = Key.random(at: TLSTicketKeys.monotonicSeconds()) else {
            throw OpenSSLErrorQueue.error(.configuration, "RAND_bytes for a session ticket key")
        }
        self.rotationInterval = rotationInterval
        self.ring = Mutex(Ring(current: first, previous: nil))
    }

    /// Replaces the current key now; the replaced key still decrypts until the next rotation.
    public func rotate() {
        rotate(at: TLSTicketKeys.monotonicSeconds())
    }

    /// The key to encrypt a new ticket with, after rotating if the current key is older than the interval.
    func encryptionKey(at now: Int = TLSTicketKeys.monotonicSeconds()) -> Key {
        ring.withLock { ring in
            if now - ring.current.created >= rotationInterval, let fresh = Key.random(at: now) {
                ring.previous = ring.current
                ring.current = fresh
            }
            return ring.current
        }
    }

    /// The key named `name` and whether it is the current one; nil when it is unknown (expired or foreign).
    func decryptionKey(named name: UnsafePointer<UInt8>) -> (key: Key, isCurrent: Bool)? {
        let wanted = Array(UnsafeBufferPointer(start: name, count: Key.nameLength))
        return ring.withLock { ring in
            if ring.current.name == wanted { return (ring.current, true) }
            if let previous = ring.previous, previous.name == wanted { return (previous, false) }
            return nil
        }
    }

    func rotate(at now: Int) {
        guard let fresh = Key.random(at: now) else { return }
        ring.withLock { ring in
            ring.previous = ring.current
            ring.current = fresh
        }
    }

    static func monotonicSeconds() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return now.tv_sec
    }
}

/// `SSL_CTX_set_tlsext_ticket_key_evp_cb`: finds the ring through the SSL_CTX's app data (the server context's
/// callback state) and keys the ticket cipher and MAC. Any failure returns -1, which aborts only this handshake.
let ticketKeyCallback: cossl_ticket_key_cb = { ssl, keyName, iv, cipher, mac, enc in
    guard let ssl, let keyName, let iv, let cipher, let mac,
          let context = SSL_get_SSL_CTX(ssl), let raw = cossl_ctx_get_app_data(context)
    else { return -1 }
    let keys = Unmanaged<ServerCallbackState>.fromOpaque(raw).takeUnretainedValue().ticketKeys
    if enc == 1 {
        let key = keys.encryptionKey()
        guard RAND_bytes(iv, cossl_ticket_iv_length()) == 1 else { return -1 }
        for index in 0..<TLSTicketKeys.Key.nameLength { keyName[index] = key.name[index] }
        guard cossl_ticket_cipher_init(cipher, key.cipherKey, iv, 1) == 1,
              cossl_ticket_mac_init(mac, key.macKey, key.macKey.count) == 1
        else { return -1 }
        return 1
    }
    guard let (key, isCurrent) = keys.decryptionKey(named: keyName) else { return 0 }
    guard cossl_ticket_cipher_init(cipher, key.cipherKey, iv, 0) == 1,
          cossl_ticket_mac_init(mac, key.macKey, key.macKey.count) == 1
    else { return -1 }
    return isCurrent ? 1 : 2
}
