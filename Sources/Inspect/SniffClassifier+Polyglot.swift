// One pass over the whole prefix for tags that matter wherever they are.
//
// PHP executes from its first open tag and passes everything before it through, so
// `GIF89a<?php system($_GET[c]); ?>` is a valid GIF *and* a working PHP script. The classifier
// reports such a prefix as PHP (category script) and keeps the image kind in `disguisedAs`.
//
// Open tags recognised, ignoring ASCII case:
//   <?php            anywhere (5 bytes: a chance match in random binary is ~1e-7 per 4 KiB)
//   <?=  <?␠ <?\t …  the short echo tag and the short open tag (on by default in PHP builds), only
//                    when the next 8 bytes (or all remaining bytes of a complete part, at least 2)
//                    are printable ASCII or whitespace, which keeps chance matches in compressed or
//                    image data to the same order as `<?php`.
// `<?xml` and other processing instructions do not count.

#if canImport(Glibc)
import Glibc
#endif

extension SniffClassifier {
    /// HTML tags whose presence in a non-markup prefix sets `SniffFlags.embeddedHTML` (and that `MarkupScanner`
    /// looks for in the whole part).
    static let activeTags: [StaticString] = [
        "script", "html", "body", "iframe", "svg", "object", "embed", "img",
    ]

    /// Whether a lowercase byte starts one of `activeTags`, indexed by byte.
    static let activeTagInitials: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        for tag in activeTags { table[Int(tag.utf8Start.pointee)] = true }
        return table
    }()

    /// Whether the prefix contains a PHP open tag and whether it contains an active HTML tag.
    func scanTags() -> (php: Bool, html: Bool) {
        var php = false, html = false
        var i = 0
        let n = bytes.count
        guard let base = bytes.raw.baseAddress else { return (false, false) }
        while i < n && !(php && html) {
            guard let hit = memchr(base + i, 0x3C, n - i) else { break }
            let at = UnsafeRawPointer(hit) - base
            if !php && bytes.byte(at + 1) == 0x3F {  // "<?"
                php = isPHPOpenTag(at: at)
            } else if !html, let next = bytes.byte(at + 1), Self.activeTagInitials[Int(SniffBytes.lowercased(next))] {
                // One table load rules out nearly every `<` in binary data before the eight tag compares.
                for tag in Self.activeTags where isTag(tag, at: at + 1) {
                    html = true
                    break
                }
            }
            i = at + 1
        }
        return (php, html)
    }

    private func isPHPOpenTag(at i: Int) -> Bool {
        if bytes.hasCaseless("<?php", at: i) { return true }
        guard let mark = bytes.byte(i + 2), mark == 0x3D || SniffBytes.isSpace(mark) else { return false }
        let start = i + 3
        let available = bytes.count - start
        let needed = 8
        if available < needed && (!complete || available < 2) { return false }
        for k in start..<(start + min(needed, available)) {
            let b = bytes[k]
            if !(b >= 0x20 && b < 0x7F) && !SniffBytes.isSpace(b) { return false }
        }
        return true
    }
}
