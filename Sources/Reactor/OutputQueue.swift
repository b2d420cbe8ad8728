// Bytes waiting to be sent, in order: owned bytes in a ByteBuffer, with spans of another buffer lent between them.
import Glibc

/// An output queue that can send part data straight from the input buffer it arrived in.
///
///     owned:  [ head │ chunk header ]          [ CRLF │ chunk header ]          [ CRLF │ last chunk ]
///     lent:                          [ span of clientIn ]            [ span of clientIn ]
///     sent as one sendmsg: head+header, span, CRLF+header, span, CRLF+last chunk
///
/// Owned bytes are copied in (`write`); a large span that lies in `lendable` (the input slice being processed)
/// is only recorded (`lend`), so part data goes from the client's buffer to the upstream socket with no userland
/// copy. A lent span is valid only while its buffer is untouched: the driver must call `settle()` after every
/// write attempt and before it reads into that buffer again; `settle` copies whatever is still unsent into the
/// owned buffer, in order ("copy only what must wait").
///
/// Invariant: `pendingBytes <= maxCapacity`, so `settle` always fits. Not thread-safe; one connection owns it.
public final class OutputQueue {
    /// A lent span, placed after the first `at` owned bytes ever written (counted since the last reset).
    private struct Lent {
        var at: UInt64
        var start: UnsafeRawPointer
        var count: Int
    }

    /// The owned bytes. Write through the queue (`write`, `reserveOwned`/`commitOwned`), never consume directly.
    private let owned: ByteBuffer
    private var lent: [Lent] = []
    /// Index of the first unconsumed entry of `lent`.
    private var lentHead = 0
    /// Owned bytes consumed since the last reset: a lent span's `at` counts from the same origin.
    private var ownedConsumed: UInt64 = 0
    /// Bytes in unconsumed lent spans.
    public private(set) var lentBytes = 0
    /// The input slice whose bytes may be lent; nil: nothing may be (every write is copied).
    public var lendable: UnsafeRawBufferPointer?
    /// Spans smaller than this are copied: an iovec costs more than a small copy.
    public let minimumLend: Int
    /// At most this many spans are lent at once (one sendmsg takes them all with the owned bytes between).
    public let maximumSpans: Int
    /// Bytes lent so far (sent with no userland copy unless settled), and bytes `settle` copied because they had to
    /// wait: for tests and benchmarks.
    public private(set) var lentTotal: UInt64 = 0
    public private(set) var settledBytes: UInt64 = 0
    private var scratch: [UInt8] = []

    public init(maxCapacity: Int, minimumLend: Int = 2048, maximumSpans: Int = 32, pool: StoragePool? = nil) {
        owned = ByteBuffer(initialCapacity: 0, maxCapacity: maxCapacity, pool: pool)
        self.minimumLend = max(1, minimumLend)
        self.maximumSpans = max(1, maximumSpans)
    }

    /// Bytes allocated for owned bytes.
    public var capacity: Int { owned.capacity }
    /// The most bytes the queue may hold (owned and lent together).
    public var maxCapacity: Int { owned.maxCapacity }
    /// Bytes not yet sent: owned and lent.
    public var pendingBytes: Int { owned.readableBytes + lentBytes }
    public var isEmpty: Bool { pendingBytes == 0 }
    /// Whether any span is lent (the driver must `settle` before touching the lending buffer).
    public var hasLent: Bool { lentHead < lent.count }

    // MARK: Writing

    /// Copies `bytes` in. Throws if the queue would hold more than `maxCapacity`.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(ByteBuffer.CapacityExceeded) {
        try checkRoom(bytes.count)
        try owned.writeBytes(bytes)
    }

    /// Copies `bytes` in.
    public func write(_ bytes: [UInt8]) throws(ByteBuffer.CapacityExceeded) {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(ByteBuffer.CapacityExceeded) in try write(raw) }
        }
        try result.get()
    }

    /// Lends `bytes` if they lie in `lendable` and are large enough, else copies them in.
    public func append(_ bytes: UnsafeRawBufferPointer) throws(ByteBuffer.CapacityExceeded) {
        if !lend(bytes) { try write(bytes) }
    }

    /// Records `bytes` as a lent span; false (nothing recorded) unless they lie in `lendable`, are at least
    /// `minimumLend` long, a span slot is free and the queue has room.
    public func lend(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let region = lendable, let start = bytes.baseAddress, let base = region.baseAddress,
              bytes.count >= minimumLend, start >= base, start + bytes.count <= base + region.count,
              pendingBytes + bytes.count <= owned.maxCapacity else { return false }
        let at = ownedConsumed + UInt64(owned.readableBytes)
        if hasLent, let last = lent.last, last.at == at, last.start + last.count == start {
            // Contiguous with the previous span and nothing owned between them: one span.
            lent[lent.count - 1].count += bytes.count
        } else {
            guard lent.count - lentHead < maximumSpans else { return false }
            if lentHead == lent.count { lent.removeAll(keepingCapacity: true); lentHead = 0 }
            lent.append(Lent(at: at, start: start, count: bytes.count))
        }
        lentBytes += bytes.count
        lentTotal += UInt64(bytes.count)
        return true
    }

    /// Makes `count` owned bytes writable in place (`withOwnedWritable`, then `commitOwned`).
    public func reserveOwned(_ count: Int) throws(ByteBuffer.CapacityExceeded) {
        try checkRoom(count)
        try owned.reserveWritable(count)
    }

    /// Calls `body` with the owned buffer's writable region.
    public func withOwnedWritable<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try owned.withUnsafeMutableWritableBytes(body)
    }

    /// Commits `count` bytes written through `withOwnedWritable`.
    public func commitOwned(_ count: Int) { owned.moveWriterIndex(forwardBy: count) }

    private func checkRoom(_ count: Int) throws(ByteBuffer.CapacityExceeded) {
        let required = pendingBytes + count
        if required > owned.maxCapacity {
            throw ByteBuffer.CapacityExceeded(required: required, maxCapacity: owned.maxCapacity)
        }
    }

    // MARK: Sending

    /// Calls `body` with the pending bytes as at most `limit` pieces in order (owned runs and lent spans), and
    /// returns its result. The pointers are valid only inside `body`.
    public func withPieces<R>(limit: Int, _ body: (UnsafeBufferPointer<UnsafeRawBufferPointer>) throws -> R) rethrows -> R {
        let most = max(1, min(limit, 2 * (lent.count - lentHead) + 1))
        return try withUnsafeTemporaryAllocation(of: UnsafeRawBufferPointer.self, capacity: most) { pieces in
            var count = 0
            owned.withUnsafeReadableBytes { ownedBytes in
                var ownedOffset = 0   // into ownedBytes
                var index = lentHead
                while count < most {
                    let ownedEnd = index < lent.count
                        ? Int(lent[index].at - ownedConsumed) : ownedBytes.count
                    if ownedEnd > ownedOffset {
                        pieces[count] = UnsafeRawBufferPointer(rebasing: ownedBytes[ownedOffset..<ownedEnd])
                        count += 1
                        ownedOffset = ownedEnd
                        if count == most { break }
                    }
                    guard index < lent.count else { break }
                    pieces[count] = UnsafeRawBufferPointer(start: lent[index].start, count: lent[index].count)
                    count += 1
                    index += 1
                }
            }
            return try body(UnsafeBufferPointer(rebasing: pieces[0..<count]))
        }
    }

    /// Appends the first `count` pending bytes to `bytes` (a replay log), consuming nothing.
    public func copyPrefix(_ count: Int, into bytes: inout [UInt8]) {
        var left = min(count, pendingBytes)
        withPieces(limit: Int.max) { pieces in
            for piece in pieces where left > 0 {
                let n = min(left, piece.count)
                bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: piece[0..<n]))
                left -= n
            }
        }
    }

    /// A run of lent bytes recorded by `recordPrefix` instead of copied: `count` bytes at `start`, which belong
    /// after the first `position` bytes copied into the same log. Valid only while the lending buffer is untouched.
    public struct Borrowed {
        public var position: Int
        public var start: UnsafeRawPointer
        public var count: Int
    }

    /// `copyPrefix`, except that lent bytes are only recorded in `borrowed` (the caller copies them with
    /// `merge` before the lending buffer is read into, compacted or freed, or drops them unread). Returns the
    /// number of bytes recorded in `borrowed`. Consumes nothing.
    public func recordPrefix(_ count: Int, copying bytes: inout [UInt8], borrowing borrowed: inout [Borrowed]) -> Int {
        var left = min(max(count, 0), pendingBytes)
        var recorded = 0
        owned.withUnsafeReadableBytes { ownedBytes in
            var ownedOffset = 0
            var index = lentHead
            while left > 0 {
                let ownedEnd = index < lent.count ? Int(lent[index].at - ownedConsumed) : ownedBytes.count
                if ownedEnd > ownedOffset {
                    let n = min(left, ownedEnd - ownedOffset)
                    bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: ownedBytes[ownedOffset..<(ownedOffset + n)]))
                    ownedOffset += n
                    left -= n
                }
                guard left > 0, index < lent.count else { break }
                let n = min(left, lent[index].count)
                borrowed.append(Borrowed(position: bytes.count, start: lent[index].start, count: n))
                recorded += n
                left -= n
                index += 1
            }
        }
        return recorded
    }

    /// `copied` with each borrowed run put back at its position: the bytes `copyPrefix` would have copied.
    public static func merge(_ copied: [UInt8], _ borrowed: [Borrowed]) -> [UInt8] {
        guard !borrowed.isEmpty else { return copied }
        var merged: [UInt8] = []
        merged.reserveCapacity(copied.count + borrowed.reduce(0) { $0 + $1.count })
        copied.withUnsafeBytes { copiedBytes in
            var from = 0
            for run in borrowed {
                // Positions only grow (recorded in order), and never pass the copied count.
                let to = min(max(run.position, from), copiedBytes.count)
                merged.append(contentsOf: UnsafeRawBufferPointer(rebasing: copiedBytes[from..<to]))
                merged.append(contentsOf: UnsafeRawBufferPointer(start: run.start, count: run.count))
                from = to
            }
            merged.append(contentsOf: UnsafeRawBufferPointer(rebasing: copiedBytes[from...]))
        }
        return merged
    }

    /// Consumes the first `count` pending bytes (what the kernel accepted).
    public func consume(_ count: Int) {
        var left = min(max(count, 0), pendingBytes)
        while left > 0 {
            let ownedBefore = hasLent
                ? Int(lent[lentHead].at - ownedConsumed) : owned.readableBytes
            let fromOwned = min(left, ownedBefore)
            if fromOwned > 0 {
                owned.moveReaderIndex(forwardBy: fromOwned)
                ownedConsumed += UInt64(fromOwned)
                left -= fromOwned
            }
            guard left > 0, hasLent else { break }
            let fromLent = min(left, lent[lentHead].count)
            lent[lentHead].start += fromLent
            lent[lentHead].count -= fromLent
            lentBytes -= fromLent
            left -= fromLent
            if lent[lentHead].count == 0 { lentHead += 1 }
        }
        if isEmpty { reset() }
    }

    /// Copies every unsent lent byte into the owned buffer, in order; afterwards nothing is lent. Call after each
    /// write attempt, before the lending buffer is read into, compacted or freed.
    public func settle() {
        guard hasLent else { return }
        // Owned bytes before the first span stay where they are; those after it wait in `scratch` (usually a
        // CRLF and a chunk header) while the spans are copied in behind the prefix.
        let ownedCount = owned.readableBytes
        let prefix = Int(lent[lentHead].at - ownedConsumed)
        scratch.removeAll(keepingCapacity: true)
        owned.withUnsafeReadableBytes { scratch.append(contentsOf: $0[prefix..<ownedCount]) }
        owned.truncateReadable(to: prefix)
        var ownedOffset = prefix
        // Cannot throw: the owned buffer ends up holding `pendingBytes`, which never exceeds its cap.
        scratch.withUnsafeBytes { kept in
            for index in lentHead..<lent.count {
                let end = Int(lent[index].at - ownedConsumed)
                _ = try? owned.writeBytes(UnsafeRawBufferPointer(rebasing: kept[(ownedOffset - prefix)..<(end - prefix)]))
                ownedOffset = end
                _ = try? owned.writeBytes(UnsafeRawBufferPointer(start: lent[index].start, count: lent[index].count))
                settledBytes += UInt64(lent[index].count)
            }
            _ = try? owned.writeBytes(UnsafeRawBufferPointer(rebasing: kept[(ownedOffset - prefix)...]))
        }
        lent.removeAll(keepingCapacity: true)
        lentHead = 0
        lentBytes = 0
        ownedConsumed = 0
        if scratch.capacity > 64 * 1024 { scratch = [] }
    }

    /// Drops everything pending.
    public func clear() {
        owned.clear()
        reset()
    }

    /// Copies what is lent (`settle`), then keeps the owned bytes in storage of their size
    /// (`ByteBuffer.shrinkToFit`): for output that waits long on a peer that does not read.
    public func shrinkToFit() {
        settle()
        owned.shrinkToFit()
    }

    /// Gives the owned storage back when nothing is pending.
    public func releaseStorage() {
        guard isEmpty else { return }
        owned.releaseStorage()
        // The span list stays when it is small (a request's usual one or two spans): dropping it would cost the
        // next request an allocation for a few dozen bytes.
        if lent.capacity > 4 { lent = [] } else { lent.removeAll(keepingCapacity: true) }
        scratch = []
    }

    private func reset() {
        lent.removeAll(keepingCapacity: true)
        lentHead = 0
        lentBytes = 0
        ownedConsumed = 0
        if owned.readableBytes == 0 { owned.clear() }
    }
}
