// A growable-but-capped byte buffer for connection I/O, backed by one manually allocated region.
import Glibc

/// A byte buffer with separate reader and writer indices over one contiguous allocation.
///
///     +-------------------+------------------+------------------+
///     | discardable bytes |  readable bytes  |  writable bytes  |
///     |                   |     (CONTENT)    |                  |
///     +-------------------+------------------+------------------+
///     |                   |                  |                  |
///     0      <=      readerIndex   <=   writerIndex    <=    capacity   <=   maxCapacity
///
/// `read*` methods consume readable bytes (advance `readerIndex`); `write*` methods append at `writerIndex`
/// (advance it, growing `capacity` by doubling up to `maxCapacity`). `get*` and `set*` address absolute indices and
/// never move either index. `discardReadBytes()` slides the readable bytes to index 0 to reclaim the front.
///
/// It is a reference type owned by one connection on one loop thread: no copy-on-write, not Sendable. Growth
/// reallocates; steady-state I/O through `withUnsafeMutableWritableBytes` allocates nothing.
public final class ByteBuffer {
    /// Thrown when a write would take the buffer past `maxCapacity`.
    public struct CapacityExceeded: Error, Sendable, CustomStringConvertible {
        /// Bytes the failed operation needed in total (`writerIndex + count`).
        public let required: Int
        /// The buffer's cap.
        public let maxCapacity: Int
        /// E.g. `"byte buffer would need 70000 bytes, cap is 65536"`.
        public var description: String { "byte buffer would need \(required) bytes, cap is \(maxCapacity)" }
    }

    private var base: UnsafeMutableRawPointer
    /// Bytes currently allocated.
    public private(set) var capacity: Int
    /// The most the buffer may ever allocate.
    public let maxCapacity: Int
    /// Index of the first readable byte.
    public private(set) var readerIndex = 0
    /// Index one past the last readable byte; the next write lands here.
    public private(set) var writerIndex = 0
    /// Where storage comes from and goes back to, when not the allocator.
    private let pool: StoragePool?

    /// Allocates `initialCapacity` bytes (clamped to `maxCapacity`); the buffer never grows past `maxCapacity`.
    /// With a `pool`, storage is taken from it and given back to it when it has a block of the size needed.
    /// A capacity of 0 allocates nothing: the first write does.
    public init(initialCapacity: Int = 4096, maxCapacity: Int = 1 << 20, pool: StoragePool? = nil) {
        precondition(initialCapacity >= 0 && maxCapacity >= 1, "ByteBuffer: invalid capacities")
        self.maxCapacity = maxCapacity
        self.pool = pool
        let capacity = min(initialCapacity, maxCapacity)
        self.capacity = capacity
        self.base = capacity == 0
            ? Self.noStorage : pool?.take(capacity) ?? .allocate(byteCount: capacity, alignment: 16)
    }

    /// The base of every buffer that holds no storage (capacity 0): never written, read or freed.
    nonisolated(unsafe) private static let noStorage = UnsafeMutableRawPointer.allocate(byteCount: 16, alignment: 16)

    deinit {
        release(base, capacity)
    }

    private func obtain(_ byteCount: Int) -> UnsafeMutableRawPointer {
        pool?.take(byteCount) ?? .allocate(byteCount: byteCount, alignment: 16)
    }

    private func release(_ block: UnsafeMutableRawPointer, _ byteCount: Int) {
        guard byteCount > 0 else { return }
        if pool?.give(block, byteCount: byteCount) != true { block.deallocate() }
    }

    /// `writerIndex - readerIndex`.
    public var readableBytes: Int { writerIndex - readerIndex }
    /// `capacity - writerIndex`: bytes writable without growing.
    public var writableBytes: Int { capacity - writerIndex }
    /// Bytes before `readerIndex` that `discardReadBytes()` would reclaim.
    public var discardableBytes: Int { readerIndex }

    // MARK: Capacity

    /// Makes at least `count` bytes writable: first by compacting consumed bytes away (so a buffer that is
    /// read as fast as it is written never grows), then by growing (doubling, capped) if still needed.
    public func reserveWritable(_ count: Int) throws(CapacityExceeded) {
        precondition(count >= 0, "reserveWritable: negative count")
        if writerIndex + count > capacity && readerIndex > 0 { discardReadBytes() }
        let required = writerIndex + count
        guard required > capacity else { return }
        guard required <= maxCapacity else {
            throw CapacityExceeded(required: required, maxCapacity: maxCapacity)
        }
        // With a pool, never below its smallest block: a small head or response (a few hundred bytes) then takes
        // a kept block instead of a fresh allocation on every request.
        var newCapacity = max(capacity, pool == nil ? 1 : min(StoragePool.smallestBlock, maxCapacity), 1)
        while newCapacity < required {
            newCapacity = newCapacity > maxCapacity / 2 ? maxCapacity : newCapacity * 2
        }
        let newBase = obtain(newCapacity)
        newBase.copyMemory(from: base, byteCount: writerIndex)
        release(base, capacity)
        base = newBase
        capacity = newCapacity
    }

    /// How many bytes the next read should ask for: what the buffer holds (at least `floor`, so a head and a
    /// small body arrive in one read), twice the buffer after a read that filled what it asked for, and never
    /// more than `limit` or the room under the cap. A small message never grows the buffer past `floor`; a
    /// stream that keeps coming doubles it to the cap in a few reads.
    public func adaptiveReadSize(afterFilledRead filled: Bool, floor: Int = 16 * 1024, limit: Int = .max) -> Int {
        var wanted = max(capacity - readableBytes, floor)
        if filled { wanted = max(wanted, capacity * 2) }
        return min(wanted, limit, maxCapacity - readableBytes)
    }

    /// Moves the readable bytes to index 0, so `readerIndex` becomes 0 and the space they occupied is writable.
    public func discardReadBytes() {
        guard readerIndex > 0 else { return }
        let count = readableBytes
        if count > 0 {
            memmove(base, base + readerIndex, count)
        }
        readerIndex = 0
        writerIndex = count
    }

    /// Sets both indices to 0 without touching memory.
    public func clear() {
        readerIndex = 0
        writerIndex = 0
    }

    /// Gives the storage back (to the pool, or else to the allocator) when nothing is readable (an idle
    /// connection's buffers), keeping none; the next write allocates again. No-op while bytes are readable.
    public func releaseStorage() {
        guard readableBytes == 0, capacity > 0 else { return }
        release(base, capacity)
        capacity = 0
        base = Self.noStorage
        readerIndex = 0
        writerIndex = 0
    }

    /// Moves the readable bytes into storage of exactly their size, giving the larger storage back (to the pool
    /// or the allocator; none at all when nothing is readable): for a buffer that grew for a stream and now holds
    /// a little for a long time. Only when that frees at least `slack` bytes. The readable bytes move to index 0.
    public func shrinkToFit(slack: Int = 64 * 1024) {
        let count = readableBytes
        guard capacity - count >= slack else { return }
        guard count > 0 else {
            releaseStorage()
            return
        }
        let newBase = obtain(count)
        newBase.copyMemory(from: base + readerIndex, byteCount: count)
        release(base, capacity)
        base = newBase
        capacity = count
        readerIndex = 0
        writerIndex = count
    }

    // MARK: Index movement

    /// Consumes `count` readable bytes.
    public func moveReaderIndex(forwardBy count: Int) {
        precondition(count >= 0 && count <= readableBytes, "moveReaderIndex: \(count) > \(readableBytes) readable")
        readerIndex += count
    }

    /// Commits `count` bytes written directly into the writable region.
    public func moveWriterIndex(forwardBy count: Int) {
        precondition(count >= 0 && count <= writableBytes, "moveWriterIndex: \(count) > \(writableBytes) writable")
        writerIndex += count
    }

    /// Keeps only the first `count` readable bytes (drops the rest from the end); `count` is clamped to
    /// `0...readableBytes`, so no value stops the process.
    public func truncateReadable(to count: Int) {
        writerIndex = readerIndex + min(max(count, 0), readableBytes)
    }

    // MARK: Raw access

    /// Calls `body` with the readable bytes; the pointer is valid only inside `body`.
    public func withUnsafeReadableBytes<R, E: Error>(
        _ body: (UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base + readerIndex, count: readableBytes))
    }

    /// Calls `body` with the writable region (`writerIndex..<capacity`). Commit what you filled with
    /// `moveWriterIndex(forwardBy:)`; the pointer is valid only inside `body`.
    public func withUnsafeMutableWritableBytes<R, E: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try body(UnsafeMutableRawBufferPointer(start: base + writerIndex, count: writableBytes))
    }

    // MARK: Bytes

    /// Appends `bytes` at `writerIndex`; returns the number written.
    @discardableResult
    public func writeBytes(_ bytes: UnsafeRawBufferPointer) throws(CapacityExceeded) -> Int {
        try reserveWritable(bytes.count)
        if let source = bytes.baseAddress, bytes.count > 0 {
            (base + writerIndex).copyMemory(from: source, byteCount: bytes.count)
        }
        writerIndex += bytes.count
        return bytes.count
    }

    /// Appends a byte collection at `writerIndex`; returns the number written.
    @discardableResult
    public func writeBytes<Bytes: Sequence<UInt8>>(_ bytes: Bytes) throws(CapacityExceeded) -> Int {
        let array = Array(bytes)
        try reserveWritable(array.count)
        array.withUnsafeBytes { raw in
            if let source = raw.baseAddress, raw.count > 0 {
                (base + writerIndex).copyMemory(from: source, byteCount: raw.count)
            }
        }
        writerIndex += array.count
        return array.count
    }

    /// Appends the UTF-8 bytes of `string`; returns the number written.
    @discardableResult
    public func writeString(_ string: String) throws(CapacityExceeded) -> Int {
        try writeBytes(string.utf8)
    }

    /// Copies `length` bytes at absolute `index` without moving indices; nil unless they lie in `0..<writerIndex`.
    public func getBytes(at index: Int, length: Int) -> [UInt8]? {
        guard index >= 0, length >= 0, index + length <= writerIndex else { return nil }
        return Array(UnsafeRawBufferPointer(start: base + index, count: length))
    }

    /// Overwrites bytes at absolute `index` without moving indices; the range must lie in `0..<writerIndex`.
    public func setBytes<Bytes: Collection<UInt8>>(_ bytes: Bytes, at index: Int) {
        precondition(index >= 0 && index + bytes.count <= writerIndex, "setBytes: range beyond writerIndex")
        var offset = index
        for byte in bytes {
            base.storeBytes(of: byte, toByteOffset: offset, as: UInt8.self)
            offset += 1
        }
    }

    /// Consumes and returns `length` bytes, or nil (consuming nothing) if fewer are readable.
    public func readBytes(length: Int) -> [UInt8]? {
        guard let bytes = getBytes(at: readerIndex, length: length), length <= readableBytes else { return nil }
        moveReaderIndex(forwardBy: length)
        return bytes
    }

    /// Returns `length` bytes at `index` decoded as UTF-8 without moving indices, or nil if out of range.
    public func getString(at index: Int, length: Int) -> String? {
        getBytes(at: index, length: length).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Consumes `length` bytes decoded as UTF-8, or returns nil (consuming nothing) if fewer are readable.
    public func readString(length: Int) -> String? {
        readBytes(length: length).map { String(decoding: $0, as: UTF8.self) }
    }

    // MARK: Integers

    /// Reads an integer at absolute `index` in big-endian (network) order without moving indices.
    public func getInteger<T: FixedWidthInteger>(at index: Int, as: T.Type = T.self) -> T? {
        let size = MemoryLayout<T>.size
        guard index >= 0, index + size <= writerIndex else { return nil }
        return T(bigEndian: (base + index).loadUnaligned(as: T.self))
    }

    /// Writes an integer at absolute `index` in big-endian order without moving indices.
    public func setInteger<T: FixedWidthInteger>(_ value: T, at index: Int) {
        precondition(index >= 0 && index + MemoryLayout<T>.size <= writerIndex, "setInteger: beyond writerIndex")
        (base + index).storeBytes(of: value.bigEndian, as: T.self)
    }

    /// Consumes a big-endian integer, or returns nil (consuming nothing) if too few bytes are readable.
    public func readInteger<T: FixedWidthInteger>(as: T.Type = T.self) -> T? {
        guard MemoryLayout<T>.size <= readableBytes, let value = getInteger(at: readerIndex, as: T.self) else {
            return nil
        }
        moveReaderIndex(forwardBy: MemoryLayout<T>.size)
        return value
    }

    /// Appends a big-endian integer; returns the number of bytes written.
    @discardableResult
    public func writeInteger<T: FixedWidthInteger>(_ value: T) throws(CapacityExceeded) -> Int {
        let size = MemoryLayout<T>.size
        try reserveWritable(size)
        (base + writerIndex).storeBytes(of: value.bigEndian, as: T.self)
        writerIndex += size
        return size
    }
}
