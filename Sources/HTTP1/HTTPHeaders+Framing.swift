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
        var firstLength = ""
        var codingCount = 0
        var firstCoding = ""
        for index in self.fields.indices {
            switch self.fields[index].known {
            case .contentLength:
                if lengthCount == 0 {
                    firstLength = self.fields[index].value
                }
                lengthCount += 1
            case .transferEncoding:
                if codingCount == 0 {
                    firstCoding = self.fields[index].value
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
            try Self.validateTransferEncoding(firstCoding)
            return .chunked
        }
        switch lengthCount {
        case 0:
            return .none
        case 1:
            return .contentLength(try Self.parseContentLength(firstLength))
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

    private static func parseContentLength(_ value: String) throws(HTTPParseError) -> UInt64 {
        if value.utf8.contains(UInt8(ascii: ",")) {
            throw .contentLengthList
        }
        guard !value.utf8.isEmpty else {
            throw .invalidContentLength
        }
        var result: UInt64 = 0
        for byte in value.utf8 {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else {
                throw .invalidContentLength
            }
            let (times10, overflow1) = result.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else {
                throw .invalidContentLength
            }
            result = sum
        }
        return result
    }

    /// Whether the connection persists after this message (RFC 9112 §9.3).
    func persists(version: HTTPVersion) -> Bool {
        var keepAlive = false
        for index in self.fields.indices where self.fields[index].known == .connection {
            let close = HTTPSyntax.firstListElement(self.fields[index].value) { element in
                guard !element.isEmpty else {
                    return false
                }
                if HTTPSyntax.equalsLowercased(element, "close") {
                    return true
                }
                if HTTPSyntax.equalsLowercased(element, "keep-alive") {
                    keepAlive = true
                }
                return false
            }
            if close {
                return false
            }
        }
        return version == .http1_1 || keepAlive
    }
}
