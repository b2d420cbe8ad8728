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
        let lengths = self.values(named: "content-length")
        let codings = self.values(named: "transfer-encoding")
        if !lengths.isEmpty && !codings.isEmpty {
            throw .contentLengthWithTransferEncoding
        }
        if !codings.isEmpty {
            if version == .http1_0 {
                throw .transferEncodingInHTTP10
            }
            try Self.validateTransferEncoding(codings)
            return .chunked
        }
        switch lengths.count {
        case 0:
            return .none
        case 1:
            return .contentLength(try Self.parseContentLength(lengths[0]))
        default:
            throw .duplicateContentLength
        }
    }

    /// Accepts exactly one field whose value is one `chunked` element (any case).
    private static func validateTransferEncoding(_ values: [String]) throws(HTTPParseError) {
        guard values.count == 1 else {
            throw .invalidTransferEncoding
        }
        let elements = HTTPSyntax.listElements(values[0])
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
        let tokens = self.connectionTokens
        if tokens.contains("close") {
            return false
        }
        return version == .http1_1 || tokens.contains("keep-alive")
    }
}
