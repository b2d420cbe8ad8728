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

    /// How many blocks of each size are kept at most.
    public let blocksPerSize: Int
    /// How many bytes are kept at most, all sizes together.
    public let byteBudget: Int
    /// Kept blocks, by size: index `k` holds blocks of `smallestBlock << k` bytes.
    private var blocks: [[UnsafeMutableRawPointer]]
    /// Bytes held in kept blocks.
    public private(set) var keptBytes = 0

    /// An empty pool keeping at most `blocksPerSize` blocks of each size and `byteBudget` bytes in all.
    public init(blocksPerSize: Int = 64, byteBudget: Int = 2 << 20) {
        self.blocksPerSize = max(0, blocksPerSize)
        self.byteBudget = max(0, byteBudget)
        blocks = Array(repeating: [], count: Self.largestShift - Self.smallestShift + 1)
    }

    deinit {
        for size in blocks {
            for block in size { block.deallocate() }
        }
    }

    /// A kept block of exactly `byteCount` bytes (16-byte aligned), or nil when none is kept.
    public func take(_ byteCount: Int) -> UnsafeMutableRawPointer? {
        guard let k = Self.sizeIndex(byteCount), let block = blocks[k].popLast() else { return nil }
        keptBytes -= byteCount
        return block
    }

    /// Keeps `block` (allocated with 16-byte alignment, `byteCount` bytes) for a later `take`; false when the
    /// pool does not keep it, and the caller must deallocate it.
    public func give(_ block: UnsafeMutableRawPointer, byteCount: Int) -> Bool {
        guard let k = Self.sizeIndex(byteCount), blocks[k].count < blocksPerSize else { return false }
        if keptBytes + byteCount > byteBudget {
            // Over the budget: a kept block of the largest larger size goes back to the allocator. One is enough
            // (it is at least twice this block, and the pool was within its budget); with none, this block is
            // not kept and nothing is dropped.
            guard let larger = blocks.indices.last(where: { $0 > k && !blocks[$0].isEmpty }),
                  let dropped = blocks[larger].popLast() else { return false }
            dropped.deallocate()
            keptBytes -= Self.smallestBlock << larger
        }
        blocks[k].append(block)
        keptBytes += byteCount
        return true
    }

    /// The size index of a block size the pool keeps.
    private static func sizeIndex(_ byteCount: Int) -> Int? {
        guard byteCount >= smallestBlock, byteCount <= largestBlock, byteCount & (byteCount - 1) == 0 else {
            return nil
        }
        return byteCount.trailingZeroBitCount - smallestShift
    }
}
