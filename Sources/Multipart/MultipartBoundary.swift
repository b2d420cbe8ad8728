import CLinux
import Glibc

/// Extracts and validates the boundary of a `multipart/form-data` Content-Type (RFC 2046 §5.1.1, RFC 7578).
public enum MultipartBoundary {
    /// The result of parsing a request Content-Type.
    public struct Parsed: Sendable, Equatable {
        /// The boundary, without the leading `--`.
        public var boundary: [UInt8]
        /// `boundary-quoted` and `boundary-whitespace` as seen.
        public var anomalies: MultipartAnomalies
    }

    /// Parses `multipart/form-data; boundary=…`, quoted or not.
    ///
    /// Rejects: a media type other than multipart/form-data, a missing, duplicated, empty or over-70-character
    /// boundary, characters outside RFC 2046's `bchars`, a boundary ending in a space, and a Content-Type longer
    /// than `limits.maxContentTypeBytes`.
    public static func parse(contentType: some Collection<UInt8>, limits: MultipartLimits = MultipartLimits())
        throws(MultipartError) -> Parsed
    {
        guard contentType.count <= limits.maxContentTypeBytes else { throw MultipartError(.contentTypeTooLong) }
        if let plain = contentType.withContiguousStorageIfAvailable({ plainBoundary(UnsafeRawBufferPointer($0)) }),
           let boundary = plain {
            return Parsed(boundary: boundary, anomalies: MultipartAnomalies())
        }
        // One pass over the parameters, keeping only the first boundary and how many there were.
        var count = 0
        var first: HeaderParameters.Parameter?
        let header = HeaderParameters.scan(contentType) { parameter in
            guard ASCII.equals(parameter.name, "boundary") else { return }
            count += 1
            if first == nil { first = parameter }
        }
        guard ASCII.equals(header.value, "multipart/form-data") else { throw MultipartError(.notMultipart) }
        guard let param = first else { throw MultipartError(.missingBoundary) }
        guard count == 1 else { throw MultipartError(.duplicateBoundary) }
        var anomalies = MultipartAnomalies()
        if param.quoted { anomalies.insert(.boundaryQuoted) }
        if param.spaceAroundEquals { anomalies.insert(.boundaryWhitespace) }
        let b = param.value
        guard isValid(b) else { throw MultipartError(.invalidBoundary) }
        if b.contains(ASCII.space) { anomalies.insert(.boundaryWhitespace) }
        return Parsed(boundary: b, anomalies: anomalies)
    }

    /// The boundary of the form nearly every client sends, `multipart/form-data; boundary=BOUNDARY` (any case in
    /// the media type and the parameter name, the space after `;` optional), the boundary unquoted, 1-70 bchars
    /// without a space, and nothing after it; nil for anything else, which the parameter parser then reads. For
    /// these the parser returns the same boundary and no anomaly (`MultipartBoundaryTests` compares the two on
    /// generated Content-Types); this reads them without it (its arrays and closure).
    static func plainBoundary(_ b: UnsafeRawBufferPointer) -> [UInt8]? {
        let type: StaticString = "multipart/form-data"
        let name: StaticString = "boundary="
        let typeCount = type.utf8CodeUnitCount
        guard b.count > typeCount + 1 + name.utf8CodeUnitCount, let base = b.baseAddress,
              cl_equals_lower(base, type.utf8Start, typeCount) != 0, b[typeCount] == ASCII.semicolon else { return nil }
        var start = typeCount + 1
        if b[start] == ASCII.space { start += 1 }
        guard b.count - start > name.utf8CodeUnitCount,
              cl_equals_lower(base + start, name.utf8Start, name.utf8CodeUnitCount) != 0 else { return nil }
        start += name.utf8CodeUnitCount
        let count = b.count - start
        // bchars hold no `;`, `"` or tab; a space (a bchar too) is left to the parser.
        guard count <= 70, cl_all_bchars(base + start, count) != 0, memchr(base + start, Int32(ASCII.space), count) == nil
        else { return nil }
        return Array(UnsafeRawBufferPointer(rebasing: b[start...]))
    }

    /// Whether `b` is 1–70 `bchars` not ending in a space.
    public static func isValid(_ b: [UInt8]) -> Bool {
        guard !b.isEmpty, b.count <= 70, b.last != ASCII.space else { return false }
        // The shim's table: a bit test per byte in Swift was vectorised into about 15 instructions a byte.
        return b.withUnsafeBytes { cl_all_bchars($0.baseAddress, $0.count) != 0 }
    }
}
