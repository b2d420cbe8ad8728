/// Writes bytes through a pointer into room set aside once: for the serializers of HTTP heads (HTTP1) and of
/// multipart part heads, which write many short pieces.
///
/// An array append checks the array's uniqueness and capacity on every call, and a request head is some fifty
/// of them; here each write is a bounds check and a copy. A write that does not fit writes nothing, and every later
/// one neither: the writer is then `overflowed`, and `withBytes` starts again with twice the room. So a short
/// estimate costs time, never bytes.
///
///     0 <= count <= capacity
///     |-- written --|------ free ------|
package struct ByteWriter {
    /// The room's start: never nil for the room `withBytes` makes (at least 64 bytes); a nil one would take no
    /// bytes, every write overflowing.
    private let base: UnsafeMutablePointer<UInt8>?
    /// The room's size, set to `count` when a write does not fit: every later write is then refused by the
    /// room check alone (one test a write, not two).
    private var capacity: Int
    /// The bytes written so far.
    package private(set) var count = 0
    /// Whether a write did not fit (and was dropped, with every write after it).
    package private(set) var overflowed = false

    private init(_ space: UnsafeMutableBufferPointer<UInt8>) {
        self.base = space.baseAddress
        self.capacity = space.baseAddress == nil ? 0 : space.count
    }

    /// Runs `fill` on a writer over `room` bytes of temporary memory (on the stack when it is safe), again with
    /// twice the room while it overflows, and hands what it wrote to `body`; the bytes live only during `body`.
    package static func withBytes<R>(room: Int, _ fill: (inout ByteWriter) -> Void,
                             _ body: (UnsafeRawBufferPointer) -> R) -> R {
        var room = max(room, 64)
        while true {
            let result: R? = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: room) { space in
                var writer = ByteWriter(space)
                fill(&writer)
                guard !writer.overflowed else { return nil }
                return body(UnsafeRawBufferPointer(start: space.baseAddress, count: writer.count))
            }
            if let result { return result }
            // The writes are finite, so the room catches up with them long before it could overflow.
            room *= 2
        }
    }

    /// Appends `bytes`.
    @inline(__always)
    package mutating func write(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count <= capacity &- count, let base else {
            overflow()
            return
        }
        if let source = bytes.baseAddress {
            UnsafeMutableRawPointer(base + count).copyMemory(from: source, byteCount: bytes.count)
        }
        count &+= bytes.count
    }

    /// Appends one byte.
    @inline(__always)
    package mutating func write(_ byte: UInt8) {
        guard count < capacity, let base else {
            overflow()
            return
        }
        base[count] = byte
        count &+= 1
    }

    /// Appends a literal's UTF-8 bytes.
    @inline(__always)
    package mutating func write(_ literal: StaticString) {
        write(UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends a string's UTF-8 bytes: in place for native strings (small ones too), through a copy otherwise.
    package mutating func write(_ text: String) {
        let copied: Void? = text.utf8.withContiguousStorageIfAvailable { write(UnsafeRawBufferPointer($0)) }
        if copied == nil {
            Array(text.utf8).withUnsafeBytes { write($0) }
        }
    }

    /// Appends CR LF (one room check for the two bytes).
    @inline(__always)
    package mutating func writeCRLF() {
        guard 2 <= capacity &- count, let base else {
            overflow()
            return
        }
        base[count] = ASCII.cr
        base[count &+ 1] = ASCII.lf
        count &+= 2
    }

    /// A write did not fit: it and every later one write nothing (the room is closed at what was written).
    private mutating func overflow() {
        overflowed = true
        capacity = count
    }

    /// Appends the decimal form of a non-negative integer (a negative one, which no head holds, as `String`).
    package mutating func writeDecimal(_ value: some BinaryInteger) {
        guard value >= 0, let magnitude = UInt64(exactly: value) else {
            write(String(value))
            return
        }
        writeDecimal(magnitude)
    }

    /// `writeDecimal` for an `Int` (a status code): the generic one goes through the protocol's witnesses when the
    /// compiler does not specialize it (some 600 instructions for `200`).
    @inline(__always)
    package mutating func writeDecimal(_ value: Int) {
        guard value >= 0 else {
            write(String(value))
            return
        }
        writeDecimal(UInt64(value))
    }

    /// `writeDecimal` for a `UInt64`.
    package mutating func writeDecimal(_ magnitude: UInt64) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for the 20 digits of UInt64.max
        withUnsafeMutableBytes(of: &digits) { scratch in
            var rest = magnitude
            var position = scratch.count
            repeat {
                position -= 1
                scratch[position] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest != 0
            write(UnsafeRawBufferPointer(rebasing: scratch[position...]))
        }
    }
}
