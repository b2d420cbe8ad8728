// `#!` scripts and plain UTF-8 text.

extension SniffClassifier {
    /// `#!` at offset 0: the kind implied by the interpreter and the interpreter's base name.
    /// `#!/usr/bin/env [-S] [VAR=value…] name` reports `name`.
    func shebangKind() -> (kind: SniffKind, interpreter: String?)? {
        guard bytes.has("#!") else { return nil }
        let lineEnd = min(bytes.find("\n", from: 2) ?? bytes.count, 2 + 255)
        var words: [(start: Int, end: Int)] = []
        var i = 2
        while i < lineEnd && words.count < 8 {
            // Skip every byte the word loop stops at (not only space and tab: a CR, VT or FF once made this
            // loop spin forever on `#!\r…`; found by the differential test).
            while i < lineEnd && SniffBytes.isSpace(bytes[i]) { i += 1 }
            let start = i
            while i < lineEnd && !SniffBytes.isSpace(bytes[i]) { i += 1 }
            if i > start { words.append((start, i)) }
        }
        guard var word = words.first else { return (.script, nil) }
        if baseName(of: word) == "env" {
            // Skip env's options and variable assignments.
            guard let command = words.dropFirst().first(where: { w in
                bytes[w.start] != 0x2D && !(w.start..<w.end).contains { bytes[$0] == 0x3D }
            }) else { return (.script, "env") }
            word = command
        }
        let name = baseName(of: word)
        return (scriptKind(interpreter: name), name)
    }

    /// The base name (after the last `/`) of a word, limited to 64 printable ASCII bytes.
    private func baseName(of word: (start: Int, end: Int)) -> String {
        var start = word.start
        for k in word.start..<word.end where bytes[k] == 0x2F { start = k + 1 }
        let end = min(word.end, start + 64)
        var out = ""
        for k in start..<end {
            let b = bytes[k]
            out.unicodeScalars.append(b > 0x20 && b < 0x7F ? Unicode.Scalar(b) : "?")
        }
        return out
    }

    private func scriptKind(interpreter name: String) -> SniffKind {
        func family(_ prefix: String) -> Bool {
            // python, python3, python3.12 …; perl5.36; ruby3.2
            guard name.hasPrefix(prefix) else { return false }
            return name.dropFirst(prefix.count).allSatisfy { $0.isNumber || $0 == "." }
        }
        switch name {
        case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox": return .shellScript
        case "node", "nodejs", "deno", "bun": return .javascript
        default: break
        }
        if family("python") { return .python }
        if family("perl") { return .perl }
        if family("ruby") { return .ruby }
        if family("php") { return .php }
        return .script
    }

    /// Valid UTF-8 without NUL and without C0 controls other than TAB, LF, FF and CR (ESC and DEL
    /// are not allowed either). When the prefix was cut (not `complete`), a multi-byte sequence
    /// truncated by the cut at the very end is accepted.
    func isText() -> Bool {
        let n = bytes.count
        var i = 0
        while i < n {
            let b = bytes[i]
            if b < 0x80 {
                if b < 0x20 && b != 0x09 && b != 0x0A && b != 0x0C && b != 0x0D { return false }
                if b == 0x7F { return false }
                i += 1
                continue
            }
            let length: Int
            var lower: UInt8 = 0x80, upper: UInt8 = 0xBF
            switch b {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; lower = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: length = 3; upper = 0x9F  // no surrogates
            case 0xF0: length = 4; lower = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4: length = 4; upper = 0x8F  // ≤ U+10FFFF
            default: return false
            }
            for k in 1..<length {
                guard i + k < n else { return !complete }
                let c = bytes[i + k]
                let (lo, hi) = k == 1 ? (lower, upper) : (UInt8(0x80), UInt8(0xBF))
                if c < lo || c > hi { return false }
            }
            i += length
        }
        return true
    }
}
