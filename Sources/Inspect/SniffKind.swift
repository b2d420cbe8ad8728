/// The broad family of a sniffed type, for policies that allow or deny whole groups.
public enum SniffCategory: UInt8, CaseIterable, Sendable, Hashable {
    /// Raster or vector-free bitmap images (PNG, JPEG, GIF, WebP, BMP, TIFF, ICO, HEIC/HEIF, AVIF).
    case image
    /// Office and page documents (PDF, OOXML, OpenDocument, EPUB).
    case document
    /// General-purpose archives and compressed streams (ZIP, gzip, 7z, RAR, tar, bzip2, xz, zstd).
    case archive
    /// Audio and video containers.
    case media
    /// HTML, SVG and XML: markup a browser or parser may interpret, possibly with script.
    case markup
    /// Native or byte-code programs (ELF, PE, Mach-O, Java class and JAR, WebAssembly).
    case executable
    /// Interpreted programs (PHP anywhere in the prefix, `#!` scripts).
    case script
    /// Plain UTF-8 text.
    case text
    /// Empty input or bytes that match nothing in the table.
    case unknown

    /// The stable lowercase name used in rule files and audit records.
    public var name: String {
        switch self {
        case .image: return "image"
        case .document: return "document"
        case .archive: return "archive"
        case .media: return "media"
        case .markup: return "markup"
        case .executable: return "executable"
        case .script: return "script"
        case .text: return "text"
        case .unknown: return "unknown"
        }
    }
}

/// One row of the sniffing table: a content type recognised from its leading bytes.
///
/// Each kind has a fixed MIME type, a short stable `label` (used in rule files and audit records)
/// and a `category`. Several kinds may share a MIME type (RAR v4 and v5, the `#!` interpreters
/// without a registered type); the label tells them apart.
public enum SniffKind: UInt8, CaseIterable, Sendable, Hashable {
    // Images.
    /// PNG (`89 50 4E 47 0D 0A 1A 0A`).
    case png
    /// JPEG (`FF D8 FF`).
    case jpeg
    /// GIF87a or GIF89a.
    case gif
    /// WebP (`RIFF` size `WEBP`).
    case webp
    /// Windows bitmap (`BM` with a known DIB header size).
    case bmp
    /// TIFF, classic or BigTIFF, either byte order.
    case tiff
    /// Windows icon (`00 00 01 00` with a plausible first directory entry).
    case ico
    /// HEIC: ISO BMFF `ftyp` with an HEVC image brand.
    case heic
    /// HEIF without a more specific brand (`mif1`, `msf1`, `miaf`).
    case heif
    /// AVIF: ISO BMFF `ftyp` with brand `avif` or `avis`.
    case avif

    // Documents.
    /// PDF (`%PDF-` at offset 0, or within the first 1024 bytes when nothing else matched).
    case pdf
    /// Word OOXML: a ZIP with a `word/` entry in the prefix.
    case docx
    /// Excel OOXML: a ZIP with an `xl/` entry in the prefix.
    case xlsx
    /// PowerPoint OOXML: a ZIP with a `ppt/` entry in the prefix.
    case pptx
    /// OpenDocument text: first ZIP entry `mimetype`, stored, naming it.
    case odt
    /// OpenDocument spreadsheet.
    case ods
    /// OpenDocument presentation.
    case odp
    /// OpenDocument drawing.
    case odg
    /// EPUB: first ZIP entry `mimetype`, stored, `application/epub+zip`.
    case epub

    // Archives.
    /// ZIP (`PK 03 04`, or the empty-archive and spanning markers) not recognised as anything more specific.
    case zip
    /// gzip (`1F 8B 08`).
    case gzip
    /// bzip2 (`BZh` + block size digit).
    case bzip2
    /// xz (`FD 37 7A 58 5A 00`).
    case xz
    /// Zstandard frame (`28 B5 2F FD`).
    case zstd
    /// 7-Zip (`37 7A BC AF 27 1C`).
    case sevenZip
    /// RAR 1.5 to 4.x (`Rar! 1A 07 00`).
    case rar4
    /// RAR 5 (`Rar! 1A 07 01 00`).
    case rar5
    /// POSIX or GNU tar (`ustar` at offset 257).
    case tar

    // Media.
    /// MP4 video or another ISO BMFF file whose major brand is not listed elsewhere.
    case mp4
    /// MPEG-4 audio (`ftyp` brand `M4A ` / `M4B ` / `M4P `).
    case m4a
    /// QuickTime (`ftyp` brand `qt  `, or a bare `moov` / `mdat` / `wide` first atom).
    case quicktime
    /// 3GPP or 3GPP2 (`ftyp` brand `3gp*` / `3g2*`).
    case threeGPP
    /// WebM: EBML with DocType `webm`.
    case webm
    /// Matroska: EBML with DocType `matroska` (or no DocType, its default).
    case matroska
    /// MP3: an ID3v2 tag or an MPEG audio layer III frame header.
    case mp3
    /// WAV (`RIFF` size `WAVE`).
    case wav
    /// AVI (`RIFF` size `AVI `).
    case avi
    /// Ogg container (`OggS`).
    case ogg
    /// FLAC (`fLaC`, also after an ID3v2 tag).
    case flac

    // Markup.
    /// HTML: a known HTML tag or `<!doctype html` first, after BOM and whitespace.
    case html
    /// SVG: root element `svg`, possibly after an XML declaration, comments and a doctype.
    case svg
    /// XML: an XML declaration whose root element is neither `svg` nor `html`.
    case xml

    // Executables.
    /// ELF (`7F 45 4C 46`).
    case elf
    /// PE: `MZ` whose `e_lfanew` points at `PE 00 00` inside the prefix.
    case pe
    /// `MZ` without a PE header in the prefix (DOS executable, or PE with an unusual offset).
    case dosExecutable
    /// Mach-O thin (32/64-bit, either byte order) or fat (32/64-bit) binary.
    case machO
    /// Java class file (`CA FE BA BE` followed by a class-file version, not a fat-arch count).
    case javaClass
    /// Java archive: a ZIP whose entries in the prefix include `META-INF/MANIFEST.MF`.
    case jar
    /// WebAssembly binary module (`00 61 73 6D`).
    case wasm

    // Scripts.
    /// PHP: `<?php`, `<?=` or `<? ` anywhere in the prefix (overrides any other match), or `#!` naming php.
    case php
    /// `#!` script run by a POSIX shell (`sh`, `bash`, `dash`, `zsh`, `ksh`, `ash`, `busybox`).
    case shellScript
    /// `#!` script run by Python.
    case python
    /// `#!` script run by Perl.
    case perl
    /// `#!` script run by Ruby.
    case ruby
    /// `#!` script run by Node.js, Deno or Bun.
    case javascript
    /// `#!` script run by any other interpreter (see `SniffResult.interpreter`).
    case script

    // Text and the rest.
    /// Valid UTF-8 without NUL and without C0 controls other than TAB, LF, FF and CR.
    case text
    /// No bytes at all.
    case empty
    /// Anything else.
    case binary

    /// The MIME type reported for this kind.
    public var mimeType: String {
        switch self {
        case .png: return "image/png"
        case .jpeg: return "image/jpeg"
        case .gif: return "image/gif"
        case .webp: return "image/webp"
        case .bmp: return "image/bmp"
        case .tiff: return "image/tiff"
        case .ico: return "image/vnd.microsoft.icon"
        case .heic: return "image/heic"
        case .heif: return "image/heif"
        case .avif: return "image/avif"
        case .pdf: return "application/pdf"
        case .docx: return "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
        case .xlsx: return "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
        case .pptx: return "application/vnd.openxmlformats-officedocument.presentationml.presentation"
        case .odt: return "application/vnd.oasis.opendocument.text"
        case .ods: return "application/vnd.oasis.opendocument.spreadsheet"
        case .odp: return "application/vnd.oasis.opendocument.presentation"
        case .odg: return "application/vnd.oasis.opendocument.graphics"
        case .epub: return "application/epub+zip"
        case .zip: return "application/zip"
        case .gzip: return "application/gzip"
        case .bzip2: return "application/x-bzip2"
        case .xz: return "application/x-xz"
        case .zstd: return "application/zstd"
        case .sevenZip: return "application/x-7z-compressed"
        case .rar4, .rar5: return "application/vnd.rar"
        case .tar: return "application/x-tar"
        case .mp4: return "video/mp4"
        case .m4a: return "audio/mp4"
        case .quicktime: return "video/quicktime"
        case .threeGPP: return "video/3gpp"
        case .webm: return "video/webm"
        case .matroska: return "video/x-matroska"
        case .mp3: return "audio/mpeg"
        case .wav: return "audio/wav"
        case .avi: return "video/x-msvideo"
        case .ogg: return "application/ogg"
        case .flac: return "audio/flac"
        case .html: return "text/html"
        case .svg: return "image/svg+xml"
        case .xml: return "application/xml"
        case .elf: return "application/x-elf"
        case .pe: return "application/vnd.microsoft.portable-executable"
        case .dosExecutable: return "application/x-dosexec"
        case .machO: return "application/x-mach-binary"
        case .javaClass: return "application/java-vm"
        case .jar: return "application/java-archive"
        case .wasm: return "application/wasm"
        case .php: return "application/x-php"
        case .shellScript: return "application/x-sh"
        case .python: return "text/x-python"
        case .perl: return "text/x-perl"
        case .ruby: return "text/x-ruby"
        case .javascript: return "text/javascript"
        case .script: return "text/x-script"
        case .text: return "text/plain"
        case .empty: return "application/x-empty"
        case .binary: return "application/octet-stream"
        }
    }

    /// A short stable lowercase name (`png`, `docx`, `rar5`, `shell-script` …).
    public var label: String {
        switch self {
        case .png: return "png"
        case .jpeg: return "jpeg"
        case .gif: return "gif"
        case .webp: return "webp"
        case .bmp: return "bmp"
        case .tiff: return "tiff"
        case .ico: return "ico"
        case .heic: return "heic"
        case .heif: return "heif"
        case .avif: return "avif"
        case .pdf: return "pdf"
        case .docx: return "docx"
        case .xlsx: return "xlsx"
        case .pptx: return "pptx"
        case .odt: return "odt"
        case .ods: return "ods"
        case .odp: return "odp"
        case .odg: return "odg"
        case .epub: return "epub"
        case .zip: return "zip"
        case .gzip: return "gzip"
        case .bzip2: return "bzip2"
        case .xz: return "xz"
        case .zstd: return "zstd"
        case .sevenZip: return "7z"
        case .rar4: return "rar4"
        case .rar5: return "rar5"
        case .tar: return "tar"
        case .mp4: return "mp4"
        case .m4a: return "m4a"
        case .quicktime: return "mov"
        case .threeGPP: return "3gp"
        case .webm: return "webm"
        case .matroska: return "mkv"
        case .mp3: return "mp3"
        case .wav: return "wav"
        case .avi: return "avi"
        case .ogg: return "ogg"
        case .flac: return "flac"
        case .html: return "html"
        case .svg: return "svg"
        case .xml: return "xml"
        case .elf: return "elf"
        case .pe: return "pe"
        case .dosExecutable: return "mz"
        case .machO: return "mach-o"
        case .javaClass: return "java-class"
        case .jar: return "jar"
        case .wasm: return "wasm"
        case .php: return "php"
        case .shellScript: return "shell-script"
        case .python: return "python"
        case .perl: return "perl"
        case .ruby: return "ruby"
        case .javascript: return "javascript"
        case .script: return "script"
        case .text: return "text"
        case .empty: return "empty"
        case .binary: return "binary"
        }
    }

    /// The family this kind belongs to.
    public var category: SniffCategory {
        switch self {
        case .png, .jpeg, .gif, .webp, .bmp, .tiff, .ico, .heic, .heif, .avif:
            return .image
        case .pdf, .docx, .xlsx, .pptx, .odt, .ods, .odp, .odg, .epub:
            return .document
        case .zip, .gzip, .bzip2, .xz, .zstd, .sevenZip, .rar4, .rar5, .tar:
            return .archive
        case .mp4, .m4a, .quicktime, .threeGPP, .webm, .matroska, .mp3, .wav, .avi, .ogg, .flac:
            return .media
        case .html, .svg, .xml:
            return .markup
        case .elf, .pe, .dosExecutable, .machO, .javaClass, .jar, .wasm:
            return .executable
        case .php, .shellScript, .python, .perl, .ruby, .javascript, .script:
            return .script
        case .text:
            return .text
        case .empty, .binary:
            return .unknown
        }
    }
}
