// The whole-part scan behind `deny-embedded-markup`: server-side markup and HTML script anywhere in a part, not
// only in the sniffed prefix.
//
//   part bytes ──feed──▶ cl_find_markup_open ('<' + a byte that may start a form, AVX2) ──▶ match ──▶ finding
//                              │
//                              └── a '<' too close to the end of a slice: its bytes (fewer than `lookahead`)
//                                  are carried into the next slice, so how the part was cut changes nothing
//
// What counts, ASCII case ignored except where said; "printable" is 0x20–0x7E or whitespace (tab, LF, FF, CR):
//
//   <?php + whitespace (or the part's end)             PHP's own open tag grammar
//   <?=   + 10 printable bytes                          PHP short echo tag (always on in PHP)
//   <?    + whitespace + 10 printable bytes             PHP short open tag: only with `phpShortTags`
//   <%    + 16 printable bytes                          ASP, ASP.NET, JSP scriptlets and directives
//   <jsp: + a letter                                    JSP actions (<jsp:scriptlet>, <jsp:include …)
//   <cf   + 3 to 16 letters + whitespace or '>'         ColdFusion tags (<cfexecute …>, <cfscript>)
//         + 4 printable bytes
//   <!--#exec  <!--#include                             server-side includes
//   <script <html <body <iframe <svg <object <embed <img, followed by whitespace, '>' or '/' and 7 printable
//                                                       bytes: HTML a browser acts on, only when `judgeHTML(true)`
//
// At the part's end a printable run may be shorter (at least 2 bytes, all printable). The runs keep chance matches
// in compressed or image data rare: all forms together about once in 70 GiB of random bytes (docs/rules.md, "What
// deny-embedded-markup reads"). A match reads at most `lookahead` bytes from its `<`, so memory is that carry and
// nothing grows with the part.

import CLinux

/// Server-side or browser markup found in a part's content by `MarkupScanner`.
public struct MarkupFinding: Sendable, Hashable, CustomStringConvertible {
    /// Which markup.
    public enum Kind: Sendable, Hashable {
        /// `<?php`, `<?=` or (with short tags) `<?` followed by whitespace.
        case php
        /// `<%`: ASP, ASP.NET or JSP.
        case asp
        /// `<jsp:`: a JSP action.
        case jsp
        /// `<cf…`: a ColdFusion tag.
        case coldFusion
        /// `<!--#exec` or `<!--#include`: a server-side include.
        case ssi
        /// An HTML tag a browser acts on (`<script`, `<iframe` …).
        case html
    }

    public let kind: Kind
    /// The token as found, lowercased (`<?php`, `<%`, `<cfexecute`, `<script`).
    public let token: String
    /// The offset of its `<` from the start of the part.
    public let offset: UInt64

    /// What the violation names: `PHP code (<?php) at byte 5120`.
    public var description: String {
        let what: String
        switch kind {
        case .php: what = "PHP code"
        case .asp: what = "ASP/JSP code"
        case .jsp: what = "a JSP action"
        case .coldFusion: what = "a ColdFusion tag"
        case .ssi: what = "a server-side include"
        case .html: what = "an HTML tag"
        }
        return "\(what) (\(token)) at byte \(offset)"
    }
}

/// A streaming scan of a whole part for embedded markup, fed slices as they arrive. Memory is bounded by
/// `lookahead` bytes whatever the part's size; the verdict does not depend on how the part was cut.
public struct MarkupScanner: Sendable {
    /// The most bytes a match reads from its `<` on: `<cf` + 16 letters + the byte ending the name + 4.
    public static let lookahead = 24

    /// Whether `<?` followed by whitespace counts as PHP (PHP's `short_open_tag`).
    public let phpShortTags: Bool
    /// Bytes from the first `<` whose match needs bytes not yet seen, and their offset in the part.
    private var carry: [UInt8] = []
    private var carryOffset: UInt64 = 0
    /// Bytes fed so far.
    private var fed: UInt64 = 0
    /// The first server-side markup found (PHP, ASP, JSP, ColdFusion, SSI).
    private var server: MarkupFinding?
    /// The first HTML tag found while HTML is judged or not yet known to be.
    private var html: MarkupFinding?
    /// Whether HTML tags count: nil until the part's type is known (`judgeHTML`).
    private var htmlWanted: Bool?

    /// A scanner for one part.
    public init(phpShortTags: Bool = false) {
        self.phpShortTags = phpShortTags
        carry.reserveCapacity(2 * Self.lookahead)
    }

    /// Bytes carried to the next slice (at most `lookahead`): for the tests of the bound.
    var carriedCount: Int { carry.count }

    /// The first finding that counts: server-side markup, or an HTML tag once `judgeHTML(true)`; nil so far.
    public var finding: MarkupFinding? {
        if let server { return server }
        return htmlWanted == true ? html : nil
    }

    /// Whether HTML tags count: nil until `judgeHTML`.
    public var judgesHTML: Bool? { htmlWanted }

    /// Whether HTML tags count (a part whose type is not markup): an HTML tag seen before is kept or forgotten.
    public mutating func judgeHTML(_ wanted: Bool) {
        htmlWanted = wanted
        if !wanted { html = nil }
    }

    /// Takes the next slice of the part.
    public mutating func feed(_ chunk: UnsafeRawBufferPointer) {
        let start = fed
        fed &+= UInt64(chunk.count)
        guard server == nil, !chunk.isEmpty else { return }
        if !carry.isEmpty {
            // The carried `<`s get up to `lookahead` bytes of this slice to decide; a slice that short is carried
            // whole (the carry then still holds fewer than `lookahead` bytes from its first undecided `<`).
            let carried = carry.count
            let take = min(chunk.count, Self.lookahead)
            carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[0..<take]))
            let offset = carryOffset
            let undecided = carry.withUnsafeBytes { scan($0, limit: carried, complete: false, offset: offset) }
            if let undecided {
                carry.removeFirst(undecided)
                carryOffset &+= UInt64(undecided)
                return
            }
            carry.removeAll(keepingCapacity: true)
            guard server == nil else { return }
        }
        if let undecided = scan(chunk, limit: chunk.count, complete: false, offset: start) {
            carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[undecided...]))
            carryOffset = start &+ UInt64(undecided)
        }
    }

    /// The part ended: the carried bytes are judged on what there is.
    public mutating func finish() {
        guard !carry.isEmpty else { return }
        if server == nil {
            let offset = carryOffset
            _ = carry.withUnsafeBytes { scan($0, limit: $0.count, complete: true, offset: offset) }
        }
        carry.removeAll(keepingCapacity: true)
    }

    /// Scans every `<` of `bytes` before `limit`; records findings. Returns the index of the first `<` that needs
    /// bytes past the end of `bytes` (never when `complete`), nil when every one was decided.
    private mutating func scan(_ bytes: UnsafeRawBufferPointer, limit: Int, complete: Bool, offset: UInt64) -> Int? {
        guard let base = bytes.baseAddress else { return nil }
        var i = 0
        while i < limit && server == nil {
            // Only a `<` followed by a byte that may start a form (or the last one) comes back: about one in 3,000
            // bytes of binary data instead of one in 256.
            guard let hit = cl_find_markup_open(base + i, limit - i) else { return nil }
            let at = UnsafeRawPointer(hit) - base
            i = at + 1
            switch match(SniffBytes(bytes), at, complete: complete) {
            case .none:
                break
            case .needMore:
                return at
            case .found(let kind, let length):
                let token = String(decoding: bytes[at..<(at + length)].map(SniffBytes.lowercased), as: UTF8.self)
                let found = MarkupFinding(kind: kind, token: token, offset: offset &+ UInt64(at))
                if kind == .html { html = html ?? found } else { server = found }
            }
        }
        return nil
    }

    private enum Match {
        case none
        case needMore
        /// The kind and the token's length from `<` (what the finding names).
        case found(MarkupFinding.Kind, Int)
    }

    /// Three-way answers of the small matchers: yes, no, or not enough bytes to say.
    private enum Test { case yes, no, short }

    /// What the bytes at `i` (a `<`) are.
    private func match(_ b: SniffBytes, _ i: Int, complete: Bool) -> Match {
        guard let next = b.byte(i + 1) else { return complete ? .none : .needMore }
        let verdict: (Test, MarkupFinding.Kind, Int)
        switch SniffBytes.lowercased(next) {
        case UInt8(ascii: "?"):
            verdict = phpTag(b, i, complete: complete)
        case UInt8(ascii: "%"):
            verdict = (printable(b, from: i + 2, count: 16, complete: complete), .asp, 2)
        case UInt8(ascii: "j"):
            let jsp = caseless(b, "<jsp:", at: i)
            verdict = (jsp == .yes ? letter(b, at: i + 5) : jsp, .jsp, 5)
        case UInt8(ascii: "c"):
            verdict = coldFusionTag(b, i, complete: complete)
        case UInt8(ascii: "!"):
            let exec = caseless(b, "<!--#exec", at: i)
            verdict = exec == .no ? (caseless(b, "<!--#include", at: i), .ssi, 12) : (exec, .ssi, 9)
        default:
            guard htmlWanted != false, html == nil else { return .none }
            verdict = htmlTag(b, i, complete: complete)
        }
        switch verdict.0 {
        case .yes: return .found(verdict.1, verdict.2)
        case .no: return .none
        case .short: return complete ? .none : .needMore
        }
    }

    private func phpTag(_ b: SniffBytes, _ i: Int, complete: Bool) -> (Test, MarkupFinding.Kind, Int) {
        let long = caseless(b, "<?php", at: i)
        if long == .yes {
            // PHP's lexer wants whitespace after `<?php` (or the end of the file).
            guard let after = b.byte(i + 5) else { return (complete ? .yes : .short, .php, 5) }
            return (SniffBytes.isSpace(after) ? .yes : .no, .php, 5)
        }
        if long == .short { return (.short, .php, 5) }
        guard let mark = b.byte(i + 2) else { return (.short, .php, 2) }
        if mark == UInt8(ascii: "=") { return (printable(b, from: i + 3, count: 10, complete: complete), .php, 3) }
        guard phpShortTags, SniffBytes.isSpace(mark) else { return (.no, .php, 2) }
        return (printable(b, from: i + 3, count: 10, complete: complete), .php, 2)
    }

    private func coldFusionTag(_ b: SniffBytes, _ i: Int, complete: Bool) -> (Test, MarkupFinding.Kind, Int) {
        let start = caseless(b, "<cf", at: i)
        guard start == .yes else { return (start, .coldFusion, 3) }
        var k = i + 3
        while true {
            guard let c = b.byte(k) else { return (.short, .coldFusion, 3) }
            let letters = k - i - 3
            if isLetter(c) {
                if letters == 16 { return (.no, .coldFusion, 3) }
                k += 1
                continue
            }
            let ends = SniffBytes.isSpace(c) || c == UInt8(ascii: ">")
            guard letters >= 3 && ends else { return (.no, .coldFusion, k - i) }
            return (printable(b, from: k + 1, count: 4, complete: complete), .coldFusion, k - i)
        }
    }

    private func htmlTag(_ b: SniffBytes, _ i: Int, complete: Bool) -> (Test, MarkupFinding.Kind, Int) {
        guard let first = b.byte(i + 1), SniffClassifier.activeTagInitials[Int(SniffBytes.lowercased(first))] else {
            return (.no, .html, 0)
        }
        var sawShort = false
        for tag in SniffClassifier.activeTags {
            let n = tag.utf8CodeUnitCount
            let test = caseless(b, tag, at: i + 1)
            if test == .yes {
                guard let end = b.byte(i + 1 + n) else {
                    sawShort = true
                    continue
                }
                guard SniffBytes.isSpace(end) || end == UInt8(ascii: ">") || end == UInt8(ascii: "/") else { continue }
                let rest = printable(b, from: i + 2 + n, count: 7, complete: complete)
                if rest == .short { sawShort = true }
                if rest == .yes { return (.yes, .html, 1 + n) }
            } else if test == .short {
                sawShort = true
            }
        }
        return (sawShort ? .short : .no, .html, 0)
    }

    /// `lower` (a lowercase literal) at `i`, ignoring case.
    private func caseless(_ b: SniffBytes, _ lower: StaticString, at i: Int) -> Test {
        let p = lower.utf8Start
        for k in 0..<lower.utf8CodeUnitCount {
            guard let c = b.byte(i + k) else { return .short }
            if SniffBytes.lowercased(c) != p[k] { return .no }
        }
        return .yes
    }

    private func letter(_ b: SniffBytes, at i: Int) -> Test {
        guard let c = b.byte(i) else { return .short }
        return isLetter(c) ? .yes : .no
    }

    /// Whether `count` bytes from `from` are printable; at the end of a complete part, at least 2 and all of them.
    private func printable(_ b: SniffBytes, from: Int, count: Int, complete: Bool) -> Test {
        for k in from..<(from + count) {
            guard let c = b.byte(k) else {
                guard complete else { return .short }
                return k - from >= 2 ? .yes : .no
            }
            if !Self.isPrintable(c) { return .no }
        }
        return .yes
    }

    /// Printable ASCII or whitespace.
    static func isPrintable(_ c: UInt8) -> Bool { (c >= 0x20 && c < 0x7F) || SniffBytes.isSpace(c) }

    private func isLetter(_ c: UInt8) -> Bool {
        let l = c | 0x20
        return l >= UInt8(ascii: "a") && l <= UInt8(ascii: "z")
    }
}
