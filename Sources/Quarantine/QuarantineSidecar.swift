// The `<id>.json` sidecar: written once per item with a small hand-rolled encoder (no shared JSON
// module exists below Quarantine), read back with Foundation on the operator path.
//
//   {"format":1,"id":"…","request_id":"…","route":"…"|null,"client":"…","time":"2026-11-29T12:01:02.345Z",
//    "part_name":"…","filename":"…"|null,"filename_hex":"…"|null,"filename_sanitized":"…"|null,
//    "declared_type":"…"|null,"sniffed_type":"…"|null,"size":N,"sha256":"…",
//    "violations":[{"kind":"…","detail":"…","rule":"file:line"|null}]}

import Foundation
import Glibc
import Inspect

enum Sidecar {
    static func encode(id: String, meta: QuarantineMeta, size: Int64, sha256: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(768)
        func raw(_ s: String) { out.append(contentsOf: s.utf8) }
        func str(_ s: String?) {
            guard let s else { return raw("null") }
            out.append(UInt8(ascii: "\""))
            for b in s.utf8 {
                switch b {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                    out.append(UInt8(ascii: "\\"))
                    out.append(b)
                case 0..<0x20, 0x7F:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: Array("\\u00".utf8))
                    out.append(hex[Int(b >> 4)])
                    out.append(hex[Int(b & 0xF)])
                default:
                    out.append(b)
                }
            }
            out.append(UInt8(ascii: "\""))
        }
        func member(_ name: String, _ value: String?, first: Bool = false) {
            raw(first ? "\"\(name)\":" : ",\"\(name)\":")
            str(value)
        }
        // `String(decoding:)` repairs invalid UTF-8 with U+FFFD; `filename_hex` keeps the exact bytes.
        let filename = meta.filename.map { String(decoding: $0, as: UTF8.self) }
        let sanitized = meta.filename.map { meta.sanitizedFilename ?? QuarantineMeta.sanitize($0) }
        raw("{\"format\":1")
        member("id", id)
        member("request_id", meta.requestID)
        member("route", meta.route)
        member("client", meta.client)
        member("time", rfc3339(meta.time))
        member("part_name", String(decoding: meta.partName, as: UTF8.self))
        member("filename", filename)
        member("filename_hex", meta.filename.map { Hex.encode($0) })
        member("filename_sanitized", sanitized)
        member("declared_type", meta.declaredType)
        member("sniffed_type", meta.sniffedType)
        raw(",\"size\":\(size)")
        member("sha256", sha256)
        raw(",\"violations\":[")
        for (i, v) in meta.violations.enumerated() {
            if i > 0 { raw(",") }
            raw("{")
            member("kind", v.kind, first: true)
            member("detail", v.detail)
            member("rule", v.rule)
            raw("}")
        }
        raw("]}\n")
        return out
    }

    static func decode(_ bytes: [UInt8], dataPath: String, sidecarPath: String) throws -> QuarantineItem {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any],
              let id = object["id"] as? String, let timeText = object["time"] as? String,
              let time = parseRFC3339(timeText), let size = (object["size"] as? NSNumber)?.int64Value,
              let sha256 = object["sha256"] as? String
        else { throw QuarantineError(.corrupt, operation: "parse sidecar", path: sidecarPath) }
        let violations = (object["violations"] as? [[String: Any]] ?? []).map {
            QuarantineViolation(kind: $0["kind"] as? String ?? "", detail: $0["detail"] as? String ?? "",
                                rule: $0["rule"] as? String)
        }
        return QuarantineItem(
            id: id, time: time, requestID: object["request_id"] as? String ?? "", route: object["route"] as? String,
            client: object["client"] as? String ?? "", partName: object["part_name"] as? String ?? "",
            filename: object["filename"] as? String, sanitizedFilename: object["filename_sanitized"] as? String,
            declaredType: object["declared_type"] as? String, sniffedType: object["sniffed_type"] as? String,
            size: size, sha256: sha256, violations: violations, dataPath: dataPath, sidecarPath: sidecarPath
        )
    }

    /// `2026-11-29T12:01:02.345Z`.
    static func rfc3339(_ date: Date) -> String {
        let ms = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        let millis = Int(ms - Int64(seconds) * 1000)
        var t = tm()
        gmtime_r(&seconds, &t)
        func pad(_ v: Int, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(Int(t.tm_year) + 1900, 4))-\(pad(Int(t.tm_mon) + 1, 2))-\(pad(Int(t.tm_mday), 2))T"
            + "\(pad(Int(t.tm_hour), 2)):\(pad(Int(t.tm_min), 2)):\(pad(Int(t.tm_sec), 2)).\(pad(millis, 3))Z"
    }

    /// Parses exactly the form `rfc3339(_:)` writes.
    static func parseRFC3339(_ text: String) -> Date? {
        let b = Array(text.utf8)
        guard b.count == 24, b[23] == UInt8(ascii: "Z") else { return nil }
        func num(_ at: Int, _ len: Int) -> Int32? {
            var v: Int32 = 0
            for i in at..<at + len {
                guard (0x30...0x39).contains(b[i]) else { return nil }
                v = v * 10 + Int32(b[i] - 0x30)
            }
            return v
        }
        guard let y = num(0, 4), let mo = num(5, 2), let d = num(8, 2), let h = num(11, 2), let mi = num(14, 2),
              let s = num(17, 2), let ms = num(20, 3)
        else { return nil }
        var t = tm()
        t.tm_year = y - 1900
        t.tm_mon = mo - 1
        t.tm_mday = d
        t.tm_hour = h
        t.tm_min = mi
        t.tm_sec = s
        return Date(timeIntervalSince1970: Double(timegm(&t)) + Double(ms) / 1000)
    }

    /// `("2026", "11", "29")` for the UTC day of `date`.
    static func dayComponents(_ date: Date) -> (String, String, String) {
        let text = rfc3339(date)
        let b = Array(text.utf8)
        return (String(decoding: b[0..<4], as: UTF8.self), String(decoding: b[5..<7], as: UTF8.self),
                String(decoding: b[8..<10], as: UTF8.self))
    }
}
