// Fixed-offset binary signatures. Magic numbers are format facts; each rule below checks the magic
// plus, where the magic is short (BM, MZ, 00 00 01 00, FF Fx), a field or two that must be sane,
// so that text or random bytes do not match by accident.

extension SniffClassifier {
    private static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    private static let sevenZip: [UInt8] = [0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C]
    private static let xz: [UInt8] = [0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00]
    private static let zstd: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD]
    private static let rar4: [UInt8] = [0x52, 0x61, 0x72, 0x21, 0x1A, 0x07, 0x00]
    private static let rar5: [UInt8] = [0x52, 0x61, 0x72, 0x21, 0x1A, 0x07, 0x01, 0x00]
    private static let ebml: [UInt8] = [0x1A, 0x45, 0xDF, 0xA3]
    private static let elf: [UInt8] = [0x7F, 0x45, 0x4C, 0x46]
    private static let wasm: [UInt8] = [0x00, 0x61, 0x73, 0x6D]
    private static let peSignature: [UInt8] = [0x50, 0x45, 0x00, 0x00]
    private static let machOMagics: [UInt32] = [
        0xFEED_FACE, 0xFEED_FACF, 0xCEFA_EDFE, 0xCFFA_EDFE,  // thin 32/64, big and little endian
        0xBEBA_FECA, 0xBFBA_FECA, 0xCAFE_BABF,  // fat 32 (LE on disk), fat 64 (both)
    ]

    /// The binary-signature kind, or nil when no signature matches at its offset.
    func magicKind() -> SniffKind? {
        guard bytes.count >= 2 else { return nil }
        switch bytes[0] {
        case 0x89 where bytes.has(Self.png): return .png
        case 0xFF: return jpegOrMP3()
        case 0x47 where bytes.has("GIF87a") || bytes.has("GIF89a"): return .gif
        case 0x52 where bytes.has("RIFF"): return riffKind()
        case 0x52 where bytes.has(Self.rar5): return .rar5
        case 0x52 where bytes.has(Self.rar4): return .rar4
        case 0x42 where bytes.has("BM"): return bmpKind()
        case 0x42 where bytes.has("BZh"): return bzip2Kind()
        case 0x49 where bytes.has("II*\u{0}") || bytes.has("II+\u{0}"): return .tiff
        case 0x49 where bytes.has("ID3"): return id3Kind()
        case 0x4D where bytes.has("MM\u{0}*") || bytes.has("MM\u{0}+"): return .tiff
        case 0x4D where bytes.has("MZ"): return peKind()
        case 0x00 where bytes.has(Self.wasm): return .wasm
        case 0x00 where bytes.has("\u{0}\u{0}\u{1}\u{0}"): return icoKind()
        case 0x25 where bytes.has("%PDF-"): return .pdf
        case 0x50 where bytes.has("PK\u{3}\u{4}"): return zipKind()
        case 0x50 where bytes.has("PK\u{5}\u{6}") || bytes.has("PK\u{7}\u{8}"): return .zip
        case 0x1F where bytes.count >= 3 && bytes[1] == 0x8B && bytes[2] == 0x08: return .gzip
        case 0x37 where bytes.has(Self.sevenZip): return .sevenZip
        case 0xFD where bytes.has(Self.xz): return .xz
        case 0x28 where bytes.has(Self.zstd): return .zstd
        case 0x1A where bytes.has(Self.ebml): return ebmlKind()
        case 0x4F where bytes.has("OggS"): return .ogg
        case 0x66 where bytes.has("fLaC"): return .flac
        case 0x7F where bytes.has(Self.elf): return .elf
        default: break
        }
        if let magic = bytes.u32be(0), Self.machOMagics.contains(magic) { return .machO }
        if bytes.u32be(0) == 0xCAFE_BABE { return cafeBabeKind() }
        if let iso = isoBMFFKind() { return iso }
        if bytes.has("ustar", at: 257) { return .tar }
        return nil
    }

    /// `FF D8 FF` is JPEG; `FF Fx`/`FF Ex` with a valid MPEG-1/2/2.5 layer III header is MP3.
    private func jpegOrMP3() -> SniffKind? {
        guard bytes.count >= 3 else { return nil }
        if bytes[1] == 0xD8 && bytes[2] == 0xFF { return .jpeg }
        switch bytes[1] {
        case 0xFB, 0xFA, 0xF3, 0xF2, 0xE3, 0xE2:
            let bitrate = bytes[2] >> 4, sampleRate = (bytes[2] >> 2) & 0x3
            return bitrate != 0 && bitrate != 0xF && sampleRate != 0x3 ? .mp3 : nil
        default:
            return nil
        }
    }

    /// `RIFF` size then the form type at offset 8.
    private func riffKind() -> SniffKind? {
        if bytes.has("WEBP", at: 8) { return .webp }
        if bytes.has("WAVE", at: 8) { return .wav }
        if bytes.has("AVI ", at: 8) { return .avi }
        return nil
    }

    /// `BM` then a BITMAPINFOHEADER-family size at offset 14.
    private func bmpKind() -> SniffKind? {
        guard let dib = bytes.u32le(14) else { return nil }
        switch dib {
        case 12, 16, 40, 52, 56, 64, 108, 124: return .bmp
        default: return nil
        }
    }

    /// `BZh1`…`BZh9`.
    private func bzip2Kind() -> SniffKind? {
        guard let level = bytes.byte(3), level >= 0x31 && level <= 0x39 else { return nil }
        return .bzip2
    }

    /// An ID3v2 tag (version 2–4, syncsafe size). FLAC files may carry one too: look past it.
    private func id3Kind() -> SniffKind? {
        guard bytes.count >= 10, (2...4).contains(bytes[3]) else { return nil }
        var size = 0
        for k in 6..<10 {
            guard bytes[k] < 0x80 else { return nil }
            size = size << 7 | Int(bytes[k])
        }
        let footer = bytes[5] & 0x10 != 0 ? 10 : 0
        return bytes.has("fLaC", at: 10 + size + footer) ? .flac : .mp3
    }

    /// `MZ`: PE when `e_lfanew` (offset 0x3C) points at `PE\0\0` within the prefix, else DOS executable.
    private func peKind() -> SniffKind? {
        if let lfanew = bytes.u32le(0x3C), lfanew >= 0x40, lfanew < UInt32(bytes.count),
            bytes.has(Self.peSignature, at: Int(lfanew))
        {
            return .pe
        }
        // A bare "MZ" in text is not an executable: a DOS header has binary fields.
        guard bytes.count >= 0x40 else { return nil }
        for k in 2..<0x40 where bytes[k] < 0x09 || bytes[k] >= 0x80 { return .dosExecutable }
        return nil
    }

    /// `00 00 01 00`, image count ≥ 1, first directory entry with reserved byte 0 and planes 0 or 1.
    private func icoKind() -> SniffKind? {
        guard let count = bytes.u16le(4), count >= 1, let reserved = bytes.byte(9), reserved == 0,
            let planes = bytes.u16le(10), planes <= 1, bytes.count >= 22
        else { return nil }
        return .ico
    }

    /// `CA FE BA BE` is both a Java class and a big-endian fat Mach-O. The next four bytes are the
    /// class-file version (minor, major ≥ 45) or the number of architectures (small): below 45 is Mach-O.
    private func cafeBabeKind() -> SniffKind? {
        guard let next = bytes.u32be(4) else { return nil }
        if next >= 1 && next < 45 { return .machO }
        return next >= 45 ? .javaClass : nil
    }

    /// EBML header: DocType element (ID `42 82`) decides WebM vs Matroska.
    private func ebmlKind() -> SniffKind {
        var i = 4
        let end = min(bytes.count - 1, 4 + 256)
        while i < end {
            if bytes[i] == 0x42 && bytes[i + 1] == 0x82, let size = bytes.byte(i + 2) {
                // Element data size is an EBML variable-length integer; DocType values are short,
                // so the 1-byte form (0x80 | n) is the only one that occurs in practice.
                let start = i + 3
                let length = Int(size & 0x7F)
                if size & 0x80 != 0 {
                    if length == 4 && bytes.has("webm", at: start) { return .webm }
                    if bytes.has("matroska", at: start) { return .matroska }
                }
            }
            i += 1
        }
        return .matroska
    }

    /// ISO base media file format: `ftyp` box at offset 4; brands decide the kind. Old QuickTime files
    /// start with a `moov`, `mdat` or `wide` atom instead.
    private func isoBMFFKind() -> SniffKind? {
        guard let boxSize = bytes.u32be(0), boxSize >= 8 else { return nil }
        if !bytes.has("ftyp", at: 4) {
            // A bare first atom is only believed with a size below 16 MiB (first byte 0), so text such as
            // "Somemoov…" does not qualify.
            guard bytes[0] == 0 else { return nil }
            return bytes.has("moov", at: 4) || bytes.has("mdat", at: 4) || bytes.has("wide", at: 4)
                ? .quicktime : nil
        }
        guard bytes.count >= 12 else { return nil }
        if let major = brandKind(at: 8) { return major }
        // Major brand is generic (mif1, msf1, miaf) or unknown: look at the compatible brands.
        let end = min(Int(boxSize), bytes.count)
        var i = 16
        var heif = false
        while i + 4 <= end {
            if let kind = brandKind(at: i), kind == .avif || kind == .heic { return kind }
            if bytes.has("mif1", at: i) || bytes.has("msf1", at: i) || bytes.has("miaf", at: i) { heif = true }
            i += 4
        }
        if heif || bytes.has("mif1", at: 8) || bytes.has("msf1", at: 8) || bytes.has("miaf", at: 8) { return .heif }
        return .mp4
    }

    /// The kind a single four-character brand implies, or nil for generic brands.
    private func brandKind(at i: Int) -> SniffKind? {
        if bytes.has("avif", at: i) || bytes.has("avis", at: i) { return .avif }
        for brand: StaticString in ["heic", "heix", "heim", "heis", "hevc", "hevx", "hevm", "hevs"]
        where bytes.has(brand, at: i) {
            return .heic
        }
        if bytes.has("qt  ", at: i) { return .quicktime }
        if bytes.has("M4A ", at: i) || bytes.has("M4B ", at: i) || bytes.has("M4P ", at: i) { return .m4a }
        if bytes.has("3gp", at: i) || bytes.has("3g2", at: i) { return .threeGPP }
        let mp4Brands: [StaticString] = [
            "isom", "iso2", "iso4", "iso5", "iso6", "mp41", "mp42", "avc1", "M4V ", "dash", "mmp4",
        ]
        for brand in mp4Brands
        where bytes.has(brand, at: i) {
            return .mp4
        }
        return nil
    }
}
