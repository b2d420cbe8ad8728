import CZlib

/// zlib deflate of `data` (windowBits -15: raw deflate for ZIP, 15: zlib-wrapped deflate, 31: gzip); shared by
/// the archive and inflater tests and the proxy's compressed-body tests.
public func deflateBytes(_ data: [UInt8], windowBits: Int32) -> [UInt8] {
    var stream = z_stream()
    guard czlib_deflate_init2(&stream, 6, windowBits) == Z_OK else { return [] }
    defer { deflateEnd(&stream) }
    var out = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(data.count))) + 64)
    var input = data
    let produced: Int = input.withUnsafeMutableBytes { src in
        out.withUnsafeMutableBytes { dst in
            stream.next_in = src.baseAddress?.assumingMemoryBound(to: Bytef.self)
            stream.avail_in = uInt(src.count)
            stream.next_out = dst.baseAddress?.assumingMemoryBound(to: Bytef.self)
            stream.avail_out = uInt(dst.count)
            _ = deflate(&stream, Z_FINISH)
            return dst.count - Int(stream.avail_out)
        }
    }
    return Array(out[..<produced])
}
