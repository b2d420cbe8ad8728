/// Request identifiers carried in `X-Request-Id`.
public enum RequestID {
    /// Whether a client-supplied id is safe to keep: 1 to 128 characters of `[A-Za-z0-9._:-]`.
    public static func isValid(_ id: String) -> Bool {
        let bytes = id.utf8
        guard !bytes.isEmpty, bytes.count <= 128 else {
            return false
        }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"),
                UInt8(ascii: "-"):
                return true
            default:
                return false
            }
        }
    }
}
