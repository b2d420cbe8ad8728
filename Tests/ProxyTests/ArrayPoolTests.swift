import Testing
@testable import Proxy

@Suite struct ArrayPoolTests {
    /// Arrays are kept within all three bounds, come back empty with their capacity, and the byte count follows.
    @Test func keepsArraysWithinCountCapacityAndBytes() {
        var pool = ArrayPool<UInt64>(maxArrays: 8, maxCapacity: 300, maxBytes: 5_000)
        func array(_ capacity: Int) -> [UInt64] {
            var a: [UInt64] = [1, 2, 3]
            a.reserveCapacity(capacity)
            return a
        }
        var kept = 0
        var keptBytes = 0
        for _ in 0..<8 {
            let a = array(200)
            let bytes = a.capacity * MemoryLayout<UInt64>.stride
            let fits = a.capacity <= 300 && keptBytes + bytes <= 5_000
            pool.recycle(consume a)   // the only reference: emptied in place, its capacity kept
            if fits { kept += 1; keptBytes += bytes }
            #expect(pool.count == kept && pool.keptBytes == keptBytes)
        }
        #expect(kept == 5_000 / (array(200).capacity * 8), "the byte budget, not the count, stopped it")
        pool.recycle(array(1_000))
        #expect(pool.count == kept, "over maxCapacity: not kept")
        while pool.count > 0 {
            let a = pool.take()
            #expect(a.isEmpty && a.capacity >= 200)
            keptBytes -= a.capacity * MemoryLayout<UInt64>.stride
            #expect(pool.keptBytes == keptBytes)
        }
        #expect(pool.keptBytes == 0 && pool.take().capacity == 0)
    }

    /// A shared array is emptied into a new buffer: the pool counts what it keeps, so taking everything back
    /// brings the count to zero whatever the new capacity.
    @Test func aSharedArrayIsCountedAsKept() {
        var pool = ArrayPool<UInt64>(maxArrays: 4, maxCapacity: 1_000, maxBytes: 100_000)
        var shared: [UInt64] = [1, 2, 3]
        shared.reserveCapacity(100)
        let other = shared
        pool.recycle(shared)
        #expect(other == [1, 2, 3], "the other owner keeps its elements")
        let taken = pool.take()
        #expect(taken.isEmpty && pool.keptBytes == 0)
    }

    private final class Counter { var alive = 0 }
    private final class Tracked {
        let counter: Counter
        init(_ counter: Counter) { self.counter = counter; counter.alive += 1 }
        deinit { counter.alive -= 1 }
    }

    /// Elements that hold references (the part records' lists): each is destroyed when its array is recycled, and
    /// the array comes back empty with its capacity; a shared one leaves its other owner whole.
    @Test func recyclingDestroysElementsThatHoldReferences() {
        let counter = Counter()
        // Room for twice the largest array: malloc may round 16 reserved elements up to 17 or more (the
        // capacity follows the block it returns, which depends on the heap's state), and a pool whose bound were
        // 16 would then rightly drop the array; the test flaked so (1 run in 30).
        var pool = ArrayPool<(Tracked, String)>(maxArrays: 4, maxCapacity: 32)
        for n in [1, 2, 3, 16] {
            var a: [(Tracked, String)] = []
            a.reserveCapacity(n)
            for i in 0..<n { a.append((Tracked(counter), "part \(i), a name too long to be kept inline")) }
            let capacity = a.capacity
            pool.recycle(consume a)
            #expect(counter.alive == 0, "every element destroyed when recycled (\(n))")
            let b = pool.take()
            #expect(b.isEmpty && b.capacity == capacity)
            pool.recycle(b)
            _ = pool.take()
        }
        var shared: [(Tracked, String)] = [(Tracked(counter), "a"), (Tracked(counter), "b")]
        shared.reserveCapacity(8)
        let other = shared
        pool.recycle(shared)
        #expect(counter.alive == 2 && other.map(\.1) == ["a", "b"], "the other owner keeps its elements")
        #expect(pool.take().isEmpty)
    }

    @Test func theCountBoundsAPoolWithoutAByteBudget() {
        var pool = ArrayPool<UInt8>(maxArrays: 3, maxCapacity: 64)
        for _ in 0..<5 {
            var a: [UInt8] = [7]
            a.reserveCapacity(32)
            pool.recycle(a)
        }
        #expect(pool.count == 3)
    }
}
