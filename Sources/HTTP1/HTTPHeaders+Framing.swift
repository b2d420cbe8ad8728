/// The framing a head declares through Content-Length and Transfer-Encoding, before status rules.
enum DeclaredFraming: Hashable {
    case none
    case contentLength(UInt64)
    case chunked
}

extension HTTPHeaders {
    /// Validates Content-Length and Transfer-Encoding strictly (RFC 9112 §6) and returns what they declare.
    ///
    /// Rejected, in this order: both present; Transfer-Encoding in HTTP/1.0; Transfer-Encoding that is
    /// not exactly one `chunked`; several Content-Length fields; a Content-Length list; a Content-Length
    /// that is not 1 or more digits fitting in UInt64.
    func declaredFraming(version: HTTPVersion) throws(HTTPParseError) -> DeclaredFraming {
        var lengthCount = 0
        var firstLength = 0
        var codingCount = 0
        var firstCoding = 0
        for index in self.indices {
            switch self.known(at: index) {
            case .contentLength:
                if lengthCount == 0 {
                    firstLength = index
                }
                lengthCount += 1
            case .transferEncoding:
                if codingCount == 0 {
                    firstCoding = index
                }
                codingCount += 1
            default:
                break
            }
        }
        if lengthCount != 0 && codingCount != 0 {
            throw .contentLengthWithTransferEncoding
        }
        if codingCount != 0 {
            if version == .http1_0 {
                throw .transferEncodingInHTTP10
            }
            guard codingCount == 1 else {
                throw .invalidTransferEncoding
            }
            try Self.validateTransferEncoding(self.value(at: firstCoding))
            return .chunked
        }
        switch lengthCount {
        case 0:
            return .none
        case 1:
            return .contentLength(try self.withValue(at: firstLength) { Self.parseContentLength($0) }.get())
        default:
            throw .duplicateContentLength
        }
    }

    /// Accepts a value that is exactly one `chunked` element (any case); the caller checked it is the only field.
    private static func validateTransferEncoding(_ value: String) throws(HTTPParseError) {
        if HTTPSyntax.equalsIgnoringCase(value, lowercase: "chunked") {
            return  // The usual case: one element, no whitespace, nothing to split.
        }
        let elements = HTTPSyntax.listElements(value)
        for element in elements {
            guard !element.isEmpty, element.utf8.allSatisfy(HTTPSyntax.isTokenChar) else {
                throw .invalidTransferEncoding
            }
        }
        let chunkedPositions = elements.indices.filter { HTTPSyntax.equalsIgnoringCase(elements[$0], "chunked") }
        if chunkedPositions.count > 1 {
            throw .invalidTransferEncoding
        }
        if let position = chunkedPositions.first, position != elements.count - 1 {
            throw .chunkedNotFinal
        }
        for element in elements where !HTTPSyntax.equalsIgnoringCase(element, "chunked") {
            if HTTPSyntax.equalsIgnoringCase(element, "identity") {
                throw .invalidTransferEncoding
            }
            throw .unsupportedTransferEncoding
        }
    }

    /// The largest Content-Length accepted: 2^63 − 1, what a signed 64-bit length holds. nginx (`ngx_atoof`) and
    /// Go's net/http refuse larger values with 400; curl, among others, ignores a value it cannot hold and reads the
    /// body to the connection's end. Passed on, a larger length would be read differently by the next parser.
    public static let maxContentLength = UInt64(Int64.max)

    /// A Content-Length value's number: one or more digits, at most `maxContentLength`, no list.
    private static func parseContentLength(_ value: UnsafeBufferPointer<UInt8>) -> Result<UInt64, HTTPParseError> {
        for index in value.indices where value[index] == UInt8(ascii: ",") {
            return .failure(.contentLengthList)
        }
        guard !value.isEmpty else {
            return .failure(.invalidContentLength)
        }
        var result: UInt64 = 0
        for index in value.indices {
            let byte = value[index]
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else {
                return .failure(.invalidContentLength)
            }
            let (times10, overflow1) = result.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else {
                return .failure(.invalidContentLength)
            }
            result = sum
        }
        guard result <= Self.maxContentLength else {
            return .failure(.invalidContentLength)
        }
        return .success(result)
    }

    /// Whether the connection persists after this message (RFC 9112 §9.3).
    func persists(version: HTTPVersion) -> Bool {
        var keepAlive = false
        for index in self.indices where self.known(at: index) == .connection {
            let close = self.withValue(at: index) { value in
                // An ASCII value (nearly every one) is split in place; any other goes through Strings, whose
                // Unicode lowercasing `equalsLowercased` follows.
                guard HTTPSyntax.isASCII(UnsafeRawBufferPointer(value)) else {
                    return HTTPSyntax.firstListElement(String(decoding: value, as: UTF8.self)) { element in
                        guard !element.isEmpty else { return false }
                        if HTTPSyntax.equalsLowercased(element, "close") { return true }
                        if HTTPSyntax.equalsLowercased(element, "keep-alive") { keepAlive = true }
                        return false
                    }
                }
                return HTTPSyntax.anyListElement(UnsafeRawBufferPointer(value)) { element in
                    if HTTPSyntax.equalsIgnoringCase(element, lowercase: "close") { return true }
                    if HTTPSyntax.equalsIgnoringCase(element, lowercase: "keep-alive") { keepAlive = true }
                    return false
                }
            }
            if close {
                return false
            }
        }
        return version == .http1_1 || keepAlive
    }
}
