import Testing
@testable import Reactor

@Suite struct ByteBufferTests {
    @Test func indicesStartAtZeroAndWritesMoveOnlyTheWriter() throws {
        let buffer = ByteBuffer(initialCapacity: 8, maxCapacity: 64)
        #expect(buffer.readerIndex == 0 && buffer.writerIndex == 0 && buffer.capacity == 8)
        try buffer.writeString("hello")
        #expect(buffer.readerIndex == 0)
        #expect(buffer.writerIndex == 5)
        #expect(buffer.readableBytes == 5)
        #expect(buffer.writableBytes == 3)
    }

    @Test func getAndSetDoNotMoveIndices() throws {
        let buffer = ByteBuffer(initialCapacity: 16, maxCapacity: 16)
        try buffer.writeString("abcdef")
        #expect(buffer.getString(at: 2, length: 3) == "cde")
        buffer.setBytes(Array("XY".utf8), at: 0)
        #expect(buffer.readerIndex == 0 && buffer.writerIndex == 6)
        #expect(buffer.getString(at: 0, length: 6) == "XYcdef")
        #expect(buffer.getBytes(at: 4, length: 3) == nil, "get beyond writerIndex must fail")
    }

    @Test func readsMoveTheReaderAndNeverPassTheWriter() throws {
        let buffer = ByteBuffer(initialCapacity: 16, maxCapacity: 16)
        try buffer.writeString("abcdef")
        #expect(buffer.readString(length: 2) == "ab")
        #expect(buffer.readerIndex == 2 && buffer.writerIndex == 6)
        #expect(buffer.readBytes(length: 5) == nil)
        #expect(buffer.readerIndex == 2, "a failed read consumes nothing")
        #expect(buffer.readString(length: 4) == "cdef")
        #expect(buffer.readerIndex == buffer.writerIndex)
    }

    @Test func integersRoundTripBigEndian() throws {
        let buffer = ByteBuffer(initialCapacity: 4, maxCapacity: 64)
        try buffer.writeInteger(UInt16(0x0102))
        try buffer.writeInteger(UInt32(0xA0B0_C0D0))
        #expect(buffer.getBytes(at: 0, length: 2) == [1, 2])
        #expect(buffer.getInteger(at: 2, as: UInt32.self) == 0xA0B0_C0D0)
        #expect(buffer.readInteger(as: UInt16.self) == 0x0102)
        buffer.setInteger(UInt32(7), at: 2)
        #expect(buffer.readInteger(as: UInt32.self) == 7)
        #expect(buffer.readInteger(as: UInt8.self) == nil)
    }

    @Test func growsByDoublingUpToTheCapAndThenRefuses() throws {
        let buffer = ByteBuffer(initialCapacity: 4, maxCapacity: 20)
        try buffer.writeBytes(Array(repeating: UInt8(1), count: 9))
        #expect(buffer.capacity == 16)
        try buffer.writeBytes(Array(repeating: UInt8(2), count: 11))
        #expect(buffer.capacity == 20)
        #expect(throws: ByteBuffer.CapacityExceeded.self) { try buffer.writeBytes([3]) }
        #expect(buffer.writerIndex == 20, "a refused write changes nothing")
        #expect(buffer.getBytes(at: 8, length: 2) == [1, 2])
    }

    /// A buffer without storage (made with capacity 0, or after `releaseStorage`) holds nothing, and the next
    /// write allocates; a buffer with readable bytes keeps its storage.
    @Test func aBufferWithoutStorageAllocatesOnItsNextWrite() throws {
        let buffer = ByteBuffer(initialCapacity: 0, maxCapacity: 64)
        #expect(buffer.capacity == 0 && buffer.writableBytes == 0)
        #expect(buffer.withUnsafeMutableWritableBytes { $0.count } == 0)
        try buffer.writeString("abc")
        #expect(buffer.capacity == 4)
        buffer.releaseStorage()
        #expect(buffer.capacity == 4, "bytes are readable: the storage stays")
        #expect(buffer.readString(length: 3) == "abc")
        buffer.releaseStorage()
        #expect(buffer.capacity == 0 && buffer.readerIndex == 0 && buffer.writerIndex == 0)
        buffer.releaseStorage()
        try buffer.writeBytes(Array(repeating: UInt8(5), count: 40))
        #expect(buffer.capacity == 64)
        #expect(buffer.readBytes(length: 40) == Array(repeating: UInt8(5), count: 40))
    }

    /// `shrinkToFit` keeps the readable bytes, and only them, in storage of their size, when that frees at least
    /// the slack; an empty buffer gives its storage back; a later write grows it again.
    @Test func shrinkToFitKeepsTheReadableBytesInStorageOfTheirSize() throws {
        let buffer = ByteBuffer(initialCapacity: 0, maxCapacity: 1 << 20)
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
        try buffer.writeBytes(bytes)
        #expect(buffer.capacity == 1 << 19)
        buffer.moveReaderIndex(forwardBy: 100_000)
        buffer.shrinkToFit()
        #expect(buffer.capacity == 200_000 && buffer.readerIndex == 0 && buffer.readableBytes == 200_000)
        #expect(buffer.getBytes(at: 0, length: 200_000) == Array(bytes[100_000...]))
        buffer.moveReaderIndex(forwardBy: 10)
        buffer.shrinkToFit()
        #expect(buffer.capacity == 200_000, "10 bytes are under the default 64 KiB slack: nothing moves")
        buffer.shrinkToFit(slack: 1)
        #expect(buffer.capacity == 199_990 && buffer.readBytes(length: 5) == Array(bytes[100_010..<100_015]))
        let more: [UInt8] = Array(1...10)
        try buffer.writeBytes(more)   // 5 bytes of room after compacting: it grows
        #expect(buffer.capacity > 199_990)
        #expect(buffer.readBytes(length: 199_985)?.suffix(2) == Array(bytes[299_998...]))
        #expect(buffer.readBytes(length: 10) == more)
        buffer.shrinkToFit()
        #expect(buffer.capacity == 0 && buffer.readableBytes == 0)
    }

    /// Reads ask for at least 16 KiB, double the buffer only after a read that filled what it asked for, and
    /// stay under the limit and the cap.
    @Test func adaptiveReadSizes() throws {
        let buffer = ByteBuffer(initialCapacity: 0, maxCapacity: 100_000)
        #expect(buffer.adaptiveReadSize(afterFilledRead: false) == 16_384)
        #expect(buffer.adaptiveReadSize(afterFilledRead: true) == 16_384)
        try buffer.reserveWritable(16_384)
        #expect(buffer.adaptiveReadSize(afterFilledRead: false) == 16_384)
        #expect(buffer.adaptiveReadSize(afterFilledRead: true) == 32_768)
        #expect(buffer.adaptiveReadSize(afterFilledRead: true, limit: 20_000) == 20_000)
        try buffer.writeBytes(Array(repeating: UInt8(1), count: 90_000))
        #expect(buffer.adaptiveReadSize(afterFilledRead: true) == 10_000, "the room under the cap")
    }

    @Test func discardReadBytesCompactsToTheFront() throws {
        let buffer = ByteBuffer(initialCapacity: 8, maxCapacity: 8)
        try buffer.writeString("abcdefgh")
        _ = buffer.readBytes(length: 5)
        #expect(buffer.discardableBytes == 5 && buffer.writableBytes == 0)
        buffer.discardReadBytes()
        #expect(buffer.readerIndex == 0 && buffer.writerIndex == 3)
        #expect(buffer.getString(at: 0, length: 3) == "fgh")
        try buffer.writeString("12345")
        #expect(buffer.readString(length: 8) == "fgh12345")
    }

    @Test func unsafeRegionsMatchTheIndices() throws {
        let buffer = ByteBuffer(initialCapacity: 8, maxCapacity: 8)
        let filled = buffer.withUnsafeMutableWritableBytes { region -> Int in
            #expect(region.count == 8)
            region[0] = 0x41
            region[1] = 0x42
            return 2
        }
        buffer.moveWriterIndex(forwardBy: filled)
        buffer.moveReaderIndex(forwardBy: 1)
        let seen = buffer.withUnsafeReadableBytes { Array($0) }
        #expect(seen == [0x42])
    }
}
