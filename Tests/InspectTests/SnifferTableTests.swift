import Testing
@testable import Inspect

/// Feeds `bytes` in the given chunk lengths (the rest in one last chunk) and finishes.
func sniffChunked(_ bytes: [UInt8], splits: [Int], prefixLimit: Int = Sniffer.defaultPrefixLimit) -> SniffResult {
    var s = Sniffer(prefixLimit: prefixLimit)
    var at = 0
    bytes.withUnsafeBytes { all in
        for n in splits {
            let end = min(at + n, all.count)
            s.feed(UnsafeRawBufferPointer(rebasing: all[at..<end]))
            at = end
        }
        s.feed(UnsafeRawBufferPointer(rebasing: all[at..<all.count]))
    }
    return s.finish()
}

@Suite struct SnifferTableTests {
    @Test(arguments: Samples.all)
    func sniffsWhole(_ sample: Sample) {
        let r = Sniffer.sniff(sample.bytes)
        #expect(r.kind == sample.kind, "\(sample.name): got \(r)")
        #expect(r.interpreter == sample.interpreter, "\(sample.name)")
        if let inner = sample.inner { #expect(r.inner == inner, "\(sample.name): got \(r)") }
        #expect(r.mimeType == sample.kind.mimeType)
        #expect(r.category == sample.kind.category)
    }

    @Test(arguments: Samples.all)
    func chunkingNeverChangesTheResult(_ sample: Sample) {
        let whole = Sniffer.sniff(sample.bytes)
        // Byte by byte.
        var s = Sniffer()
        for b in sample.bytes { s.feed([b]) }
        #expect(s.finish() == whole, "\(sample.name) byte by byte")
        // Split once at every offset within the first 600 bytes.
        for split in 0...min(600, sample.bytes.count) {
            let r = sniffChunked(sample.bytes, splits: [split])
            #expect(r == whole, "\(sample.name) split at \(split): \(r) vs \(whole)")
            if r != whole { break }
        }
        // Odd chunk sizes.
        #expect(sniffChunked(sample.bytes, splits: [1, 2, 3, 5, 7, 11, 13, 17, 19, 23]) == whole)
    }

    @Test func everyKindIsCoveredBySomeSample() {
        let covered = Set(Samples.all.map(\.kind))
        let missing = SniffKind.allCases.filter { !covered.contains($0) }
        #expect(missing.isEmpty, "no sample for \(missing)")
    }

    @Test func labelsAndMimeTypesAreWellFormed() {
        var labels = Set<String>()
        for kind in SniffKind.allCases {
            #expect(labels.insert(kind.label).inserted, "duplicate label \(kind.label)")
            let parts = kind.mimeType.split(separator: "/")
            #expect(parts.count == 2 && kind.mimeType == kind.mimeType.lowercased(), "\(kind.mimeType)")
        }
        #expect(SniffKind.rar4.mimeType == SniffKind.rar5.mimeType)
        #expect(SniffCategory.allCases.map(\.name) == [
            "image", "document", "archive", "media", "markup", "executable", "script", "text", "unknown",
        ])
    }
}

@Suite struct SnifferStreamingTests {
    @Test func decidesExactlyWhenThePrefixFills() {
        var s = Sniffer()
        let png = Build.png()
        s.feed(png)
        #expect(!s.isDecided && s.result == nil)
        s.feed([UInt8](repeating: 0x41, count: Sniffer.defaultPrefixLimit - png.count - 1))
        #expect(!s.isDecided)
        s.feed([0x41, 0x42, 0x43])
        #expect(s.isDecided)
        #expect(s.retainedCount == Sniffer.defaultPrefixLimit)
        let decided = s.result
        #expect(decided?.kind == .png)
        // Further feeds are ignored: nothing retained, nothing changes, even a PHP tag.
        s.feed(bytes("<?php system($_GET['c']); ?>"))
        #expect(s.retainedCount == Sniffer.defaultPrefixLimit)
        #expect(s.result == decided)
        #expect(s.finish() == decided)
        #expect(s.finish() == decided)
    }

    @Test func phpBeyondThePrefixIsNotSeen() {
        let padding = [UInt8](repeating: 0x61, count: Sniffer.defaultPrefixLimit)
        let r = Sniffer.sniff(Build.gif() + padding + bytes("<?php x(); ?>"))
        #expect(r.kind == .gif)
        // With a larger prefix it is.
        let big = Sniffer.sniff(Build.gif() + padding + bytes("<?php x(); ?>"), prefixLimit: 8192)
        #expect(big.kind == .php && big.disguisedAs == .gif)
    }

    @Test func utf8CutByThePrefixBoundaryIsStillText() {
        // 4095 ASCII bytes then a 3-byte character: the prefix ends inside it.
        let text = [UInt8](repeating: 0x61, count: Sniffer.defaultPrefixLimit - 1) + bytes("\u{2713}\u{2713}")
        #expect(Sniffer.sniff(text).kind == .text)
        // A part of exactly prefixLimit bytes is decided when the prefix fills, before its end is known.
        #expect(Sniffer.sniff(Array(text[0..<Sniffer.defaultPrefixLimit])).kind == .text)
        // A cut at the real end of a shorter part is invalid UTF-8.
        #expect(Sniffer.sniff(Array(text[0..<Sniffer.defaultPrefixLimit - 2]) + [0xE2]).kind == .binary)
    }

    @Test func prefixLimitIsClamped() {
        #expect(Sniffer(prefixLimit: 1).prefixLimit == Sniffer.minimumPrefixLimit)
        #expect(Sniffer(prefixLimit: 1 << 30).prefixLimit == Sniffer.maximumPrefixLimit)
        #expect(Sniffer(prefixLimit: 1000).prefixLimit == 1000)
        // tar's magic at 257 is inside even the smallest prefix.
        #expect(Sniffer.sniff(Build.tar(), prefixLimit: 1).kind == .tar)
    }

    @Test func resetReusesTheSniffer() {
        var s = Sniffer()
        s.feed(Build.png())
        #expect(s.finish().kind == .png)
        s.reset()
        #expect(!s.isDecided && s.retainedCount == 0)
        s.feed(Build.pdf())
        #expect(s.finish().kind == .pdf)
        s.reset()
        #expect(s.finish().kind == .empty)
        #expect(s.finish().mimeType == "application/x-empty")
    }

    @Test func emptyFeedsAreNoOps() {
        var s = Sniffer()
        s.feed([])
        s.feed(UnsafeRawBufferPointer(start: nil, count: 0))
        #expect(!s.isDecided)
        #expect(s.finish().kind == .empty)
    }
}
