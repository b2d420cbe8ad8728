import Foundation
import Multipart
import Testing

/// One parsed part: its headers and its concatenated data.
struct ParsedPart: Equatable, CustomStringConvertible {
    var part: MultipartPart
    var data: [UInt8]
    var description: String {
        "\(part.nameString ?? "nil") file=\(part.filenameString ?? "nil") ct=\(part.contentTypeString ?? "nil") "
            + "\(data.count)B \(part.anomalies.names)"
    }
}

/// Everything a parse produced, normalised so different chunkings compare equal.
struct ParseOutcome: Equatable {
    var parts: [ParsedPart] = []
    var anomalies: [String] = []
    var error: MultipartError.Kind?
    var sawEnd = false
}

/// Parses `body` fed as the chunks delimited by `cuts` (sorted offsets inside the body).
func parse(_ body: [UInt8], boundary: [UInt8], cuts: [Int], limits: MultipartLimits = MultipartLimits()) -> ParseOutcome {
    let parser = MultipartParser(boundary: boundary, limits: limits)
    var out = ParseOutcome()
    var current: ParsedPart?
    var maxRetained = 0
    let bounds = [0] + cuts + [body.count]
    let all = UnsafeMutableRawBufferPointer.allocate(byteCount: max(body.count, 1), alignment: 1)
    defer { all.deallocate() }
    all.copyBytes(from: body)
    do throws(MultipartError) {
        for k in 0..<(bounds.count - 1) {
            let chunk = UnsafeRawBufferPointer(rebasing: all[bounds[k]..<bounds[k + 1]])
            var consumed = 0
            while let event = try parser.next(chunk, consumed: &consumed) {
                switch event {
                case .partBegin(let p):
                    #expect(current == nil, "partBegin inside a part")
                    current = ParsedPart(part: p, data: [])
                case .partData(let span):
                    #expect(current != nil, "data outside a part")
                    #expect(span.count > 0, "empty data span")
                    current?.data.append(contentsOf: span)
                case .partEnd:
                    if let c = current { out.parts.append(c) }
                    current = nil
                case .end:
                    #expect(!out.sawEnd, "end twice")
                    out.sawEnd = true
                }
                maxRetained = max(maxRetained, parser.retainedBytes)
            }
            #expect(consumed == chunk.count)
        }
        try parser.finish()
    } catch {
        out.error = error.kind
    }
    out.anomalies = parser.anomalies.names
    #expect(maxRetained <= limits.maxPartHeaderBytes + boundary.count + 4 + limits.maxTransportPadding + 2)
    return out
}

/// Parses `body` whole, byte by byte, and split in two at every offset; expects identical outcomes and
/// returns the whole-body one.
func parseAllWays(_ body: [UInt8], boundary: [UInt8], limits: MultipartLimits = MultipartLimits(),
                  sourceLocation: SourceLocation = #_sourceLocation) -> ParseOutcome {
    let whole = parse(body, boundary: boundary, cuts: [], limits: limits)
    if body.count > 1 {
        let bytewise = parse(body, boundary: boundary, cuts: Array(1..<body.count), limits: limits)
        #expect(bytewise == whole, "byte-by-byte differs", sourceLocation: sourceLocation)
    }
    var firstBad: Int?
    for cut in 1..<max(body.count, 1) where firstBad == nil {
        if parse(body, boundary: boundary, cuts: [cut], limits: limits) != whole { firstBad = cut }
    }
    #expect(firstBad == nil, "split at \(firstBad ?? -1) differs", sourceLocation: sourceLocation)
    return whole
}

/// Bytes of a string.
func b(_ s: String) -> [UInt8] { Array(s.utf8) }


/// The conformance vectors kept in the repository, next to these tests (provenance in its README.md).
let corpusRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .appendingPathComponent("Fixtures/corpus")

/// The regular files under `dir`, as paths relative to it (empty if it is missing).
func filesUnder(_ dir: URL) -> [String] {
    guard let walker = FileManager.default.enumerator(atPath: dir.path) else { return [] }
    var out: [String] = []
    while let path = walker.nextObject() as? String {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: dir.appendingPathComponent(path).path, isDirectory: &isDir),
           !isDir.boolValue {
            out.append(path)
        }
    }
    return out.sorted()
}

func readBytes(_ url: URL) throws -> [UInt8] { Array(try Data(contentsOf: url)) }
