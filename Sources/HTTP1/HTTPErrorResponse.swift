/// Renders the small, complete responses the proxy answers with when it refuses a request.
///
/// ```
/// HTTP/1.1 431 Request Header Fields Too Large
/// Content-Type: application/json
/// Content-Length: 58
/// Connection: close
/// X-Request-Id: r-1
///
/// {"error":"head_too_large","status":431,"request_id":"r-1"}
/// ```
public enum HTTPErrorResponse {
    /// Appends a complete response with the JSON body `{"error":kind,"status":N,"request_id":id}`.
    ///
    /// `X-Request-Id` is added only when `requestID` is valid per `RequestID.isValid`.
    public static func write(status: Int, kind: String, requestID: String, into buffer: inout [UInt8]) {
        // Unreachable from input: statuses are Formwall's own constants and ViolationKind statuses.
        precondition((100...999).contains(status), "status must have three digits")
        var body: [UInt8] = []
        body.append(contentsOf: #"{"error":"#.utf8)
        appendJSONString(kind, to: &body)
        body.append(contentsOf: #","status":"#.utf8)
        HTTPSyntax.appendDecimal(status, to: &body)
        body.append(contentsOf: #","request_id":"#.utf8)
        appendJSONString(requestID, to: &body)
        body.append(UInt8(ascii: "}"))
        write(status: status, jsonBody: body, requestID: requestID, into: &buffer)
    }

    /// Appends a complete response around an already rendered JSON `jsonBody` (for callers whose error
    /// bodies carry more members than `error`, `status` and `request_id`).
    public static func write(status: Int, jsonBody body: [UInt8], requestID: String, into buffer: inout [UInt8]) {
        write(status: status, body: body, contentType: "application/json", requestID: requestID, into: &buffer)
    }

    /// Appends a complete response around `body` of `contentType` (`application/json`, or
    /// `HTTPErrorPage.contentType` for the HTML page). `varyAccept` adds `Vary: Accept`, for a body chosen by
    /// content negotiation. `allow` adds `Allow: A, B`, which a 405 must carry (RFC 9110 §15.5.6).
    public static func write(status: Int, body: [UInt8], contentType: String, requestID: String,
                             varyAccept: Bool = false, allow: [String]? = nil, into buffer: inout [UInt8]) {
        // Unreachable from input: statuses are Formwall's own constants and ViolationKind statuses.
        precondition((100...999).contains(status), "status must have three digits")
        buffer.append(contentsOf: "HTTP/1.1 ".utf8)
        HTTPSyntax.appendDecimal(status, to: &buffer)
        buffer.append(HTTPSyntax.sp)
        buffer.append(contentsOf: reasonPhrase(for: status).utf8)
        buffer.append(contentsOf: "\r\nContent-Type: ".utf8)
        buffer.append(contentsOf: contentType.utf8)
        buffer.append(contentsOf: "\r\nContent-Length: ".utf8)
        HTTPSyntax.appendDecimal(body.count, to: &buffer)
        buffer.append(contentsOf: "\r\nConnection: close\r\n".utf8)
        if varyAccept {
            buffer.append(contentsOf: "Vary: Accept\r\n".utf8)
        }
        if let allow {
            buffer.append(contentsOf: "Allow: \(allow.joined(separator: ", "))\r\n".utf8)
        }
        if RequestID.isValid(requestID) {
            buffer.append(contentsOf: "X-Request-Id: \(requestID)\r\n".utf8)
        }
        buffer.append(contentsOf: "\r\n".utf8)
        buffer.append(contentsOf: body)
    }

    /// The response for a parse error: its `status` and `kind`.
    public static func render(_ error: HTTPParseError, requestID: String) -> [UInt8] {
        var buffer: [UInt8] = []
        write(status: error.status, kind: error.kind, requestID: requestID, into: &buffer)
        return buffer
    }

    /// The response for any status and kind.
    public static func render(status: Int, kind: String, requestID: String) -> [UInt8] {
        var buffer: [UInt8] = []
        write(status: status, kind: kind, requestID: requestID, into: &buffer)
        return buffer
    }

    /// The standard reason phrase for the statuses the proxy produces; `Error` for others.
    public static func reasonPhrase(for status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 400: return "Bad Request"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 415: return "Unsupported Media Type"
        case 417: return "Expectation Failed"
        case 422: return "Unprocessable Content"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        default: return "Error"
        }
    }

    /// Appends `"text"` with JSON escapes: `\"`, `\\`, the short forms, and `\u00XX` for other controls.
    static func appendJSONString(_ text: String, to buffer: inout [UInt8]) {
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        buffer.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): buffer.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): buffer.append(contentsOf: #"\\"#.utf8)
            case 0x0A: buffer.append(contentsOf: #"\n"#.utf8)
            case 0x0D: buffer.append(contentsOf: #"\r"#.utf8)
            case 0x09: buffer.append(contentsOf: #"\t"#.utf8)
            case 0x08: buffer.append(contentsOf: #"\b"#.utf8)
            case 0x0C: buffer.append(contentsOf: #"\f"#.utf8)
            case 0x00..<0x20, 0x7F:
                buffer.append(contentsOf: #"\u00"#.utf8)
                buffer.append(hex[Int(byte >> 4)])
                buffer.append(hex[Int(byte & 0xF)])
            default:
                buffer.append(byte)
            }
        }
        buffer.append(UInt8(ascii: "\""))
    }
}
