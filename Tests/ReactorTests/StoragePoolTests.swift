import Testing
import TestRandom
@testable import Reactor

@Suite struct StoragePoolTests {
    @Test func keepsOnlyPowerOfTwoBlocksInItsRangeAndAtMostItsCountOfEach() {
        let pool = StoragePool(blocksPerSize: 2)
        var kept: [UnsafeMutableRawPointer] = []
        for size in [StoragePool.smallestBlock, 4096, StoragePool.largestBlock] {
            let a = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
            let b = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
            let c = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
            #expect(pool.give(a, byteCount: size) && pool.give(b, byteCount: size))
            #expect(!pool.give(c, byteCount: size), "a third block of \(size) bytes is over the count")
            c.deallocate()
            kept += [a, b]
        }
        #expect(pool.keptBytes == 2 * (StoragePool.smallestBlock + 4096 + StoragePool.largestBlock))
        for size in [StoragePool.smallestBlock / 2, 3000, StoragePool.largestBlock * 2, 0] {
            let block = UnsafeMutableRawPointer.allocate(byteCount: max(size, 1), alignment: 16)
            #expect(!pool.give(block, byteCount: size), "\(size) bytes is not a size the pool keeps")
            block.deallocate()
        }
        // Blocks come back for their own size only, last in first out.
        let taken = pool.take(4096)
        #expect(taken == kept[3])
        #expect(pool.take(2048) == nil)
        #expect(pool.take(3000) == nil)
        #expect(pool.keptBytes == 2 * (StoragePool.smallestBlock + StoragePool.largestBlock) + 4096)
        taken?.deallocate()
    }

    @Test func aBlockOverTheBudgetPushesOutLargerBlocksOnly() {
        let large = StoragePool.largestBlock
        let small = 16_384
        let pool = StoragePool(blocksPerSize: 8, byteBudget: large + small)
        func block(_ size: Int) -> UnsafeMutableRawPointer { .allocate(byteCount: size, alignment: 16) }
        let kept = block(large)
        #expect(pool.give(kept, byteCount: large))
        #expect(pool.give(block(small), byteCount: small), "within the budget")
        #expect(pool.keptBytes == large + small)
        #expect(pool.give(block(small), byteCount: small), "room made by dropping the larger block")
        #expect(pool.keptBytes == 2 * small)
        #expect(pool.take(large) == nil, "the large block went back to the allocator")
        let refused = block(large)
        #expect(!pool.give(refused, byteCount: large), "no larger block to drop: over the budget, not kept")
        refused.deallocate()
        #expect(pool.keptBytes == 2 * small)
        #expect(pool.give(block(1024), byteCount: 1024), "a smaller block still fits")
        #expect(pool.keptBytes == 2 * small + 1024)
        for size in [small, small, 1024] { pool.take(size)?.deallocate() }
        #expect(pool.keptBytes == 0)
    }

    @Test func buffersTakeTheirStorageBackFromThePool() throws {
        let pool = StoragePool()
        let first = ByteBuffer(initialCapacity: 0, maxCapacity: 1 << 20, pool: pool)
        try first.writeBytes(Array(repeating: 7, count: 10_000))   // grows to 16 KiB
        #expect(first.capacity == 16_384)
        _ = first.readBytes(length: first.readableBytes)
        first.releaseStorage()
        #expect(pool.keptBytes == 16_384)
        let second = ByteBuffer(initialCapacity: 0, maxCapacity: 1 << 20, pool: pool)
        try second.reserveWritable(16_384)
        #expect(pool.keptBytes == 0, "the second buffer took the block the first gave back")
        try second.writeBytes(Array(repeating: 9, count: 16_384))
        #expect(second.readBytes(length: 16_384) == Array(repeating: 9, count: 16_384))
    }

    /// A model run: random buffers of one pool grow, are read and written, give their storage back and are
    /// dropped, and every buffer must read back exactly what was written to it, with the pool within its bound.
    @Test(arguments: 0..<20) func randomBuffersSharingAPoolKeepTheirBytes(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let pool = StoragePool(blocksPerSize: 3, byteBudget: seed % 2 == 0 ? 2 << 20 : 100_000)
        var buffers: [(ByteBuffer, [UInt8])] = []
        let bound = min(3 * (2 * StoragePool.largestBlock - StoragePool.smallestBlock), pool.byteBudget)
        for step in 0..<300 {
            switch random.next() % 5 {
            case 0 where buffers.count < 8:
                buffers.append((ByteBuffer(initialCapacity: 0, maxCapacity: 256 * 1024, pool: pool), []))
            case 1 where !buffers.isEmpty:
                let i = Int(random.next() % UInt64(buffers.count))
                let count = Int(random.next() % 40_000)
                let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &+ step) }
                if buffers[i].0.readableBytes + count <= 256 * 1024 {
                    try buffers[i].0.writeBytes(bytes)
                    buffers[i].1 += bytes
                }
            case 2 where !buffers.isEmpty:
                let i = Int(random.next() % UInt64(buffers.count))
                let count = Int(random.next() % UInt64(buffers[i].1.count + 1))
                #expect(buffers[i].0.readBytes(length: count) == Array(buffers[i].1.prefix(count)))
                buffers[i].1.removeFirst(count)
                buffers[i].0.releaseStorage()   // no-op unless it was emptied
            case 3 where !buffers.isEmpty:
                let i = Int(random.next() % UInt64(buffers.count))
                let (buffer, expected) = buffers.remove(at: i)
                #expect(buffer.readBytes(length: expected.count) == expected)
            default:
                break
            }
            #expect(pool.keptBytes <= bound)
        }
        for (buffer, expected) in buffers {
            #expect(buffer.readBytes(length: expected.count) == expected)
        }
    }
}
