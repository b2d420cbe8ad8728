import Testing
@testable import Multipart
import TestRandom

/// `ByteWriter` against plain array appends: whatever room it starts with (most of these runs start with far
/// too little, so the writer overflows and starts again, more than once), the bytes handed out are exactly the
/// ones written, in order.
@Suite struct ByteWriterTests {
    @Test func writesWhatAnArrayAppendWouldWhateverTheRoom() {
        var rng = SplitMix64(seed: 0xB17E_5)
        for _ in 0..<2_000 {
            var steps: [(inout ByteWriter) -> Void] = []
            var expected: [UInt8] = []
            // Where each step's bytes end in `expected`.
            var ends: [Int] = []
            for _ in 0..<rng.below(40) {
                defer { ends.append(expected.count) }
                switch rng.below(6) {
                case 0:
                    let bytes = (0..<rng.below(300)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                    expected += bytes
                    steps.append { writer in bytes.withUnsafeBytes { writer.write($0) } }
                case 1:
                    let byte = UInt8(truncatingIfNeeded: rng.next())
                    expected.append(byte)
                    steps.append { $0.write(byte) }
                case 2:
                    expected += Array("\r\nContent-Type: ".utf8)
                    steps.append { $0.write("\r\nContent-Type: " as StaticString) }
                case 4:
                    expected += [0x0D, 0x0A]
                    steps.append { $0.writeCRLF() }
                case 3:
                    // Small (inline) and large (heap) strings, non-ASCII too.
                    let text = String(repeating: rng.below(2) == 0 ? "é" : "x", count: rng.below(40))
                    expected += Array(text.utf8)
                    steps.append { $0.write(text) }
                default:
                    let value = rng.below(2) == 0 ? Int(rng.below(1_000)) : Int(truncatingIfNeeded: rng.next())
                    expected += Array(String(value).utf8)
                    steps.append { $0.writeDecimal(value) }
                }
            }
            let room = rng.below(2) == 0 ? rng.below(16) : expected.count + rng.below(64)
            var fills = 0
            let written: [UInt8] = ByteWriter.withBytes(room: room, { writer in
                fills += 1
                for step in steps { step(&writer) }
                // Overflowed, the writer holds exactly the steps before the first that did not fit: none after
                // it wrote a byte, even one that would have fitted in the room left.
                if writer.overflowed {
                    let roomNow = max(room, 64) << (fills - 1)
                    let fitted = ends.prefix { $0 <= roomNow }.last ?? 0
                    #expect(writer.count == fitted, "room \(room)")
                }
            }) { Array($0) }
            #expect(written == expected, "room \(room), \(expected.count) bytes")
            // Room enough at once: one fill; less: one more per doubling.
            if room >= expected.count { #expect(fills == 1) }
        }
    }
}
