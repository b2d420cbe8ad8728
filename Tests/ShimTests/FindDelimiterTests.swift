import CLinux
import Testing

/// `cl_find_delimiter` must answer exactly as glibc's memmem: the same first occurrence or none, for every
/// haystack length (below, at and past the bounds of the 64- and 32-position vector loops), needle length and position, including
/// near-misses that match the first and last bytes only.
@Suite struct FindDelimiterTests {
    private func both(_ hay: [UInt8], _ needle: [UInt8]) -> (Int?, Int?) {
        hay.withUnsafeBytes { h in
            needle.withUnsafeBytes { n in
                let base = h.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
                let ours = cl_find_delimiter(base, h.count, n.baseAddress!, n.count).map { UnsafeRawPointer($0) - base }
                let glibc = cl_memmem(base, h.count, n.baseAddress!, n.count).map { UnsafeRawPointer($0) - base }
                return (ours, glibc)
            }
        }
    }

    @Test func agreesWithMemmemAtEveryPositionAndLength() {
        var state: UInt64 = 0x9E37_79B9
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        for needleLength in [1, 2, 3, 5, 16, 17, 31, 32, 33, 44, 74] {
            let needle = [UInt8(ascii: "\n"), UInt8(ascii: "-"), UInt8(ascii: "-")].prefix(needleLength)
                + (0..<max(0, needleLength - 3)).map { _ in UInt8(ascii: "a") + UInt8(next() % 26) }
            for length in [0, 1, needleLength - 1, needleLength, needleLength + 30, needleLength + 31, needleLength + 62,
                           needleLength + 63, needleLength + 64, needleLength + 95, needleLength + 96, 64, 65, 200]
                where length >= 0 {
                // Random bytes from a small alphabet that includes the needle's first and last bytes, so that
                // the filter often passes and the memcmp decides.
                let alphabet = [needle.first!, needle.last!, UInt8(ascii: "-"), 0x0D, 0x00]
                var hay = (0..<length).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] }
                let (ours, glibc) = both(hay, Array(needle))
                #expect(ours == glibc, "needle \(needleLength), length \(length), no plant")
                guard length >= needleLength else { continue }
                for at in 0...(length - needleLength) {
                    var planted = hay
                    planted.replaceSubrange(at..<(at + needleLength), with: needle)
                    let (o, g) = both(planted, Array(needle))
                    if o != g {
                        Issue.record("needle \(needleLength), length \(length), planted at \(at): \(String(describing: o)) vs \(String(describing: g))")
                        return
                    }
                }
                hay.removeAll()
            }
        }
    }

    @Test func findsTheDelimiterInALargeRandomBuffer() {
        var hay = [UInt8](repeating: 0, count: 1 << 20)
        var x: UInt32 = 1
        for i in hay.indices { x = x &* 1_664_525 &+ 1_013_904_223; hay[i] = UInt8(truncatingIfNeeded: x >> 24) }
        let needle = Array("\n--formwallBoundary0123456789abcdefghijklmn".utf8)
        let (none, noneGlibc) = both(hay, needle)
        #expect(none == noneGlibc)
        for at in [0, 1, 31, 32, 33, 63, 64, 65, 95, 96, 127, 128, 4095, 65_536 - 7, hay.count - needle.count - 40, hay.count - needle.count] {
            var planted = hay
            planted.replaceSubrange(at..<(at + needle.count), with: needle)
            let (ours, glibc) = both(planted, needle)
            #expect(ours == at)
            #expect(ours == glibc)
        }
    }
}
