import Testing

@testable import HTTP1
import TestRandom

@Suite struct ChunkedEncoderTests {
    @Test(arguments: [(1, "1"), (15, "f"), (16, "10"), (255, "ff"), (4096, "1000"), (Int.max, "7fffffffffffffff")])
    func chunkHeader(size: Int, hex: String) {
        var buffer: [UInt8] = []
        ChunkedEncoder.writeChunkHeader(size: size, into: &buffer)
        #expect(buffer == Array("\(hex)\r\n".utf8))
    }

    /// Every digit count, at and around each power of 16 and two, and random sizes: the digits are `String(radix: 16)`'s.
    @Test func chunkHeaderDigitsMatchTheStandardLibrary() {
        var sizes: [Int] = []
        for bit in 0..<63 {
            let power = 1 << bit
            sizes += [power - 1, power, power + 1]
        }
        var random = SplitMix64(seed: 16)
        sizes += (0..<2_000).map { _ in Int.random(in: 1...Int.max, using: &random) >> Int.random(in: 0...62, using: &random) }
        for size in sizes where size > 0 {
            var buffer: [UInt8] = []
            #expect(ChunkedEncoder.writeChunkHeader(size: size, into: &buffer))
            #expect(buffer == Array((String(size, radix: 16) + "\r\n").utf8), "size \(size)")
        }
    }

    /// No size or room that a caller gets wrong can stop the process: the writer refuses and writes nothing.
    @Test func anEmptyChunkOrAShortBufferIsRefusedNotTrapped() {
        var buffer: [UInt8] = []
        #expect(!ChunkedEncoder.writeChunkHeader(size: 0, into: &buffer))
        #expect(!ChunkedEncoder.writeChunkHeader(size: -5, into: &buffer))
        #expect(buffer.isEmpty)
        withUnsafeTemporaryAllocation(byteCount: ChunkedEncoder.maxChunkHeaderLength, alignment: 1) { room in
            let short = UnsafeMutableRawBufferPointer(rebasing: room[..<(ChunkedEncoder.maxChunkHeaderLength - 1)])
            #expect(ChunkedEncoder.writeChunkHeader(size: 1, to: short) == nil)
            #expect(ChunkedEncoder.writeChunkHeader(size: Int.max, to: room) == ChunkedEncoder.maxChunkHeaderLength)
        }
    }

    @Test func trailerAndLastChunk() {
        var buffer: [UInt8] = []
        ChunkedEncoder.writeChunkTrailer(into: &buffer)
        ChunkedEncoder.writeLastChunk(into: &buffer)
        #expect(buffer == Array("\r\n0\r\n\r\n".utf8))
    }

    /// Random data in random chunk sizes, decoded under random splits: the bytes must come back.
    @Test(arguments: 0..<20)
    func roundTripWithRandomChunksAndSplits(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let body = (0..<Int.random(in: 0...5000, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
        var encoded: [UInt8] = []
        var position = 0
        while position < body.count {
            let size = min(body.count - position, Int.random(in: 1...700, using: &random))
            ChunkedEncoder.writeChunkHeader(size: size, into: &encoded)
            encoded.append(contentsOf: body[position..<(position + size)])
            ChunkedEncoder.writeChunkTrailer(into: &encoded)
            position += size
        }
        ChunkedEncoder.writeLastChunk(into: &encoded)

        for _ in 0..<10 {
            var pieces: [[UInt8]] = []
            var start = 0
            while start < encoded.count {
                let length = min(encoded.count - start, Int.random(in: 0...300, using: &random))
                pieces.append(Array(encoded[start..<(start + length)]))
                start += length
            }
            let outcome = decodeChunked(pieces)
            #expect(outcome.error == nil)
            #expect(outcome.body == body)
            #expect(outcome.endOffset == encoded.count)
        }
    }
}
