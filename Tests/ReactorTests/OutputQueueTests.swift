import Testing
@testable import Reactor
import TestRandom

/// OutputQueue against a model: the pending bytes are a flat array; every operation must keep the queue's pieces,
/// in order, equal to it, whatever mix of owned writes, lent spans, short sends and settles happens.
@Suite struct OutputQueueTests {
    /// The queue's pending bytes, read through `withPieces` (what a gathering send would take).
    private func pending(_ queue: OutputQueue, limit: Int = .max) -> [UInt8] {
        queue.withPieces(limit: limit) { pieces in pieces.flatMap { Array($0) } }
    }

    @Test func ownedAndLentBytesGoOutInOrderWithoutCopyingTheSpans() throws {
        let queue = OutputQueue(maxCapacity: 1 << 16, minimumLend: 4)
        let input: [UInt8] = Array("0123456789abcdefghij".utf8)
        try input.withUnsafeBytes { slice in
            queue.lendable = slice
            try queue.write(Array("H".utf8))
            try queue.append(UnsafeRawBufferPointer(rebasing: slice[0..<10]))   // lent
            try queue.write(Array("|".utf8))
            try queue.append(UnsafeRawBufferPointer(rebasing: slice[10..<12]))  // too small: copied
            try queue.append(UnsafeRawBufferPointer(rebasing: slice[12..<20]))  // lent
            queue.lendable = nil
            #expect(queue.lentBytes == 18)
            #expect(queue.lentTotal == 18)
            #expect(pending(queue) == Array("H0123456789|abcdefghij".utf8))
            // The pieces alternate: owned "H", lent, owned "|ab", lent.
            #expect(queue.withPieces(limit: 10) { $0.count } == 4)
            #expect(pending(queue, limit: 2) == Array("H0123456789".utf8))
        }
    }

    @Test func spansOutsideTheLendableSliceAreCopied() throws {
        let queue = OutputQueue(maxCapacity: 1 << 16, minimumLend: 1)
        let slice: [UInt8] = Array(repeating: 1, count: 64)
        var other: [UInt8] = Array(repeating: 2, count: 64)
        try slice.withUnsafeBytes { lendable in
            queue.lendable = lendable
            try other.withUnsafeBytes { try queue.append($0) }
            #expect(queue.lentBytes == 0)
            // Straddling the slice's end is outside it too.
            try queue.append(UnsafeRawBufferPointer(rebasing: lendable[32..<64]))
            #expect(queue.lentBytes == 32)
        }
        other[0] = 9
        #expect(pending(queue).prefix(1) == [2])
    }

    @Test func shrinkToFitSettlesLentSpansAndKeepsThePendingBytesInOrder() throws {
        let queue = OutputQueue(maxCapacity: 1 << 20, minimumLend: 1)
        var source: [UInt8] = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
        var expected: [UInt8] = []
        source.withUnsafeMutableBytes { raw in
            let slice = UnsafeRawBufferPointer(raw)
            queue.lendable = slice
            try? queue.write(Array(repeating: 1, count: 150_000))
            try? queue.append(UnsafeRawBufferPointer(rebasing: slice[0..<120_000]))   // lent
            try? queue.write([2, 3])
            queue.lendable = nil
            queue.consume(100_000)
            expected = pending(queue)
            #expect(queue.lentBytes == 120_000)
            queue.shrinkToFit()
            #expect(queue.lentBytes == 0, "nothing may point into the input once it shrank")
            raw[0] = 99   // the source may now change
        }
        #expect(queue.capacity == queue.pendingBytes && queue.pendingBytes == 170_002)
        #expect(pending(queue) == expected)
    }

    @Test func settleCopiesWhatIsStillLentSoTheSourceMayChange() throws {
        let queue = OutputQueue(maxCapacity: 1 << 16, minimumLend: 1)
        var source: [UInt8] = Array(0..<100)
        source.withUnsafeMutableBytes { raw in
            let slice = UnsafeRawBufferPointer(raw)
            queue.lendable = slice
            try? queue.write([200])
            try? queue.append(UnsafeRawBufferPointer(rebasing: slice[0..<60]))
            try? queue.write([201, 202])
            try? queue.append(UnsafeRawBufferPointer(rebasing: slice[60..<100]))
            queue.lendable = nil
            queue.consume(31)   // "200" and 30 lent bytes went out
            queue.settle()
            #expect(!queue.hasLent)
            #expect(queue.settledBytes == 70)
            // The driver's next read overwrites the source.
            for i in raw.indices { raw[i] = 0xEE }
        }
        #expect(pending(queue) == Array(30..<60) + [201, 202] + Array(60..<100))
    }

    @Test func capacityCountsLentBytes() throws {
        let queue = OutputQueue(maxCapacity: 100, minimumLend: 1)
        let input = [UInt8](repeating: 7, count: 90)
        try input.withUnsafeBytes { slice in
            queue.lendable = slice
            #expect(queue.lend(slice))
            #expect(!queue.lend(UnsafeRawBufferPointer(rebasing: slice[0..<20])))
            #expect(throws: ByteBuffer.CapacityExceeded.self) { try queue.write([UInt8](repeating: 0, count: 11)) }
            try queue.write([UInt8](repeating: 0, count: 10))
            #expect(queue.pendingBytes == 100)
        }
    }

    /// Random operations against the model, with the lent source overwritten after every settle (as a read into
    /// the client buffer would), and short sends of random sizes.
    @Test(arguments: 0..<40) func randomOperationsMatchTheModel(seed: Int) throws {
        var random = SplitMix64(seed: UInt64(seed) &+ 0x0_4eed)
        let queue = OutputQueue(maxCapacity: 1 << 20, minimumLend: Int(random.next() % 64) + 1,
                                maximumSpans: Int(random.next() % 8) + 1)
        var model: [UInt8] = []
        var sent: [UInt8] = []
        var expectedSent: [UInt8] = []
        let source = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 16)
        defer { source.deallocate() }
        var fill: UInt8 = 0
        // A replay log kept as the machine keeps it: lent bytes only recorded (`recordPrefix`), merged in before
        // the source is overwritten.
        var log: [UInt8] = []
        var borrowed: [OutputQueue.Borrowed] = []
        func settleLog() {
            log = OutputQueue.merge(log, borrowed)
            borrowed.removeAll()
        }
        for _ in 0..<400 {
            switch random.next() % 6 {
            case 0, 1:
                // A slice of "client input": fresh bytes, lent or copied piece by piece.
                settleLog()
                for i in source.indices { fill &+= 1; source[i] = fill }
                queue.lendable = UnsafeRawBufferPointer(source)
                var at = 0
                while at < source.count, random.next() % 4 != 0 {
                    let n = min(Int(random.next() % 300), source.count - at)
                    let piece = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(source)[at..<(at + n)])
                    if random.next() % 3 == 0 {
                        let header = (0..<Int(random.next() % 5)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                        try queue.write(header)
                        model += header
                    }
                    try queue.append(piece)
                    model += Array(piece)
                    at += n
                }
                queue.lendable = nil
            case 2:
                let n = Int(random.next() % 50)
                let owned = (0..<n).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                try queue.write(owned)
                model += owned
            case 3, 4:
                // A short send, then the driver's settle, then the source is overwritten.
                let n = Int(random.next() % UInt64(max(1, queue.pendingBytes + 1)))
                queue.copyPrefix(n, into: &sent)
                let before = borrowed.reduce(0) { $0 + $1.count }
                let recorded = queue.recordPrefix(n, copying: &log, borrowing: &borrowed)
                #expect(recorded == borrowed.reduce(0) { $0 + $1.count } - before)
                expectedSent += model.prefix(n)
                queue.consume(n)
                model.removeFirst(n)
                queue.settle()
                if random.next() % 2 == 0 {
                    settleLog()
                    for i in source.indices { source[i] = 0xEE }
                }
            default:
                queue.settle()
                settleLog()
                for i in source.indices { source[i] = 0xEE }
            }
            #expect(queue.pendingBytes == model.count)
            if pending(queue) != model { Issue.record("seed \(seed): pieces differ from the model"); return }
        }
        #expect(sent == expectedSent)
        settleLog()
        #expect(log == expectedSent)
        // Everything left goes out as one more send.
        queue.consume(queue.pendingBytes)
        #expect(queue.isEmpty && !queue.hasLent)
    }
}

