// Buffer storage kept for reuse by one event-loop thread.

/// Blocks of buffer storage that one event-loop thread keeps between requests, so that a keep-alive
/// connection can give its buffers back while it is idle (`ByteBuffer.releaseStorage`) and the next request
/// takes them again without going through the allocator.
///
/// Only blocks whose size is a power of two from `smallestBlock` to `largestBlock` are kept, at most
/// `blocksPerSize` of each size and at most `byteBudget` bytes in all (64 of each and 2 MiB by default: a
/// worker with 64 keep-alive connections between requests keeps all their 16 KiB read buffers); anything else
/// goes back to the allocator. A block that would go over the budget first pushes out kept blocks of larger
/// sizes, so a burst of large buffers does not crowd out the small ones most requests take. Not thread-safe:
/// one pool per event-loop thread, used only from that thread.
public final class StoragePool {
    /// The smallest block kept: 1 KiB.
    public static let smallestBlock = 1 << smallestShift
    /// The largest block kept: 64 KiB.
    public static let largestBlock = 1 << largestShift
    private static let smallestShift = 10
    private static let largestShift = 16
    private static let sizes = largestShift - smallestShift + 1

    /// How many blocks of each size are kept at most.
    public let blocksPerSize: Int
    /// How many bytes are kept at most, all sizes together.
    public let byteBudget: Int
    /// Kept blocks, by size (index `k` holds blocks of `smallestBlock << k` bytes), as a stack each: `heads[k]`
    /// is the block given last, and a kept block's first word holds the next one's address (nil at the bottom).
    /// A block is at least 1 KiB and 16-byte aligned, so the word fits and is aligned. Taking and giving are a
    /// few loads and stores; nested arrays of addresses cost about 80 instructions each way (uniqueness checks
    /// of both levels).
    private let heads: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    /// How many blocks of each size are kept.
    private let counts: UnsafeMutablePointer<Int>
    /// Bytes held in kept blocks.
    public private(set) var keptBytes = 0

    /// An empty pool keeping at most `blocksPerSize` blocks of each size and `byteBudget` bytes in all.
    public init(blocksPerSize: Int = 64, byteBudget: Int = 2 << 20) {
        self.blocksPerSize = max(0, blocksPerSize)
        self.byteBudget = max(0, byteBudget)
        heads = .allocate(capacity: Self.sizes)
        heads.initialize(repeating: nil, count: Self.sizes)
        counts = .allocate(capacity: Self.sizes)
        counts.initialize(repeating: 0, count: Self.sizes)
    }

    deinit {
        for k in 0..<Self.sizes {
            while let block = pop(k) { block.deallocate() }
        }
        heads.deallocate()
        counts.deallocate()
    }

    /// A kept block of exactly `byteCount` bytes (16-byte aligned), or nil when none is kept.
    public func take(_ byteCount: Int) -> UnsafeMutableRawPointer? {
        guard let k = Self.sizeIndex(byteCount), let block = pop(k) else { return nil }
        keptBytes -= byteCount
        return block
    }

    /// Keeps `block` (allocated with 16-byte alignment, `byteCount` bytes) for a later `take`; false when the
    /// pool does not keep it, and the caller must deallocate it.
    public func give(_ block: UnsafeMutableRawPointer, byteCount: Int) -> Bool {
        guard let k = Self.sizeIndex(byteCount), counts[k] < blocksPerSize else { return false }
        if keptBytes + byteCount > byteBudget {
            // Over the budget: a kept block of the largest larger size goes back to the allocator. One is enough
            // (it is at least twice this block, and the pool was within its budget); with none, this block is
            // not kept and nothing is dropped.
            guard let larger = ((k + 1)..<Self.sizes).last(where: { counts[$0] > 0 }),
                  let dropped = pop(larger) else { return false }
            dropped.deallocate()
            keptBytes -= Self.smallestBlock << larger
        }
        block.storeBytes(of: heads[k], as: UnsafeMutableRawPointer?.self)
        heads[k] = block
        counts[k] += 1
        keptBytes += byteCount
        return true
    }

    /// The block on top of stack `k`, removed; nil when the stack is empty.
    private func pop(_ k: Int) -> UnsafeMutableRawPointer? {
        guard let block = heads[k] else { return nil }
        heads[k] = block.load(as: UnsafeMutableRawPointer?.self)
        counts[k] -= 1
        return block
    }

    /// The size index of a block size the pool keeps.
    private static func sizeIndex(_ byteCount: Int) -> Int? {
        guard byteCount >= smallestBlock, byteCount <= largestBlock, byteCount & (byteCount - 1) == 0 else {
            return nil
        }
        return byteCount.trailingZeroBitCount - smallestShift
    }
}
