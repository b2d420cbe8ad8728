// ZIP containers told apart by their local file headers within the prefix.
//
//   offset  0  50 4B 03 04  signature
//           8  u16 method (0 = stored)      18 u32 compressed size
//          26  u16 name length              28 u16 extra length
//          30  name, extra, then data
//
// ODF and EPUB put an uncompressed entry named `mimetype` first whose data is the document's MIME
// type. OOXML has `[Content_Types].xml` and part directories `word/`, `xl/`, `ppt/`; a JAR has
// `META-INF/MANIFEST.MF`. Entries may use data descriptors (sizes zero in the local header), so
// rather than hop from header to header we look for every local-header signature in the prefix
// and read the name that follows it.

extension SniffClassifier {
    /// Which kind a ZIP starting at offset 0 is.
    func zipKind() -> SniffKind {
        if let odf = odfKind() { return odf }
        var i = 0
        while let at = nextLocalHeader(from: i) {
            let nameLength = Int(bytes.u16le(at + 26) ?? 0)
            let name = at + 30
            if name + nameLength <= bytes.count {
                if nameStarts("word/", at: name, length: nameLength) { return .docx }
                if nameStarts("xl/", at: name, length: nameLength) { return .xlsx }
                if nameStarts("ppt/", at: name, length: nameLength) { return .pptx }
                if nameStarts("META-INF/MANIFEST.MF", at: name, length: nameLength) { return .jar }
            }
            i = at + 4
        }
        return .zip
    }

    /// The first local header signature at or after `from`.
    private func nextLocalHeader(from: Int) -> Int? {
        var i = from
        while let at = bytes.find("PK\u{3}\u{4}", from: i) {
            if at + 30 <= bytes.count { return at }
            i = at + 1
        }
        return nil
    }

    private func nameStarts(_ prefix: StaticString, at offset: Int, length: Int) -> Bool {
        length >= prefix.utf8CodeUnitCount && bytes.has(prefix, at: offset)
    }

    /// First entry `mimetype`, stored, whose data names an OpenDocument type or EPUB.
    private func odfKind() -> SniffKind? {
        guard bytes.u16le(8) == 0, bytes.u16le(26) == 8, bytes.has("mimetype", at: 30),
            let extra = bytes.u16le(28)
        else { return nil }
        let data = 30 + 8 + Int(extra)
        let size = Int(bytes.u32le(18) ?? 0)
        // With a data descriptor the size is 0 here; the value then runs up to the next header.
        let end = size > 0 ? data + size : (nextLocalHeader(from: data) ?? bytes.count)
        func exactly(_ mime: StaticString) -> Bool {
            end - data == mime.utf8CodeUnitCount && bytes.has(mime, at: data)
        }
        if exactly("application/vnd.oasis.opendocument.text") { return .odt }
        if exactly("application/vnd.oasis.opendocument.spreadsheet") { return .ods }
        if exactly("application/vnd.oasis.opendocument.presentation") { return .odp }
        if exactly("application/vnd.oasis.opendocument.graphics") { return .odg }
        if exactly("application/epub+zip") { return .epub }
        return nil
    }
}
