// The byte transport a connection talks through, so a TLS transform can slot in under the same handler.
//
//   handler --> Transport.read/write --> PlainTransport --> TCPSocket --> kernel
//                                   +--> TLSTransport --> BIO pair --> TCPSocket
import Glibc

/// Moves bytes between a connection and its buffers; `PlainTransport` is the identity over a TCP socket.
public protocol Transport: AnyObject {
    /// The descriptor to register with the loop.
    var fd: Int32 { get }
    /// Reads into `buffer`: `.processed(0)` is end of file.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> IOResult<Int>
    /// Writes from `bytes`, possibly short.
    func write(_ bytes: UnsafeRawBufferPointer) throws -> IOResult<Int>
    /// Half-closes the sending side.
    func shutdownWrite() throws
    /// Releases the transport and its descriptor.
    func close() throws
    /// Bytes of its own (a TLS flight, close_notify) wait to go out: the driver must ask for EPOLLOUT and call
    /// `flush`. Always false for a plain socket.
    var wantsWritable: Bool { get }
    /// Pushes those bytes to the socket.
    func flush() throws -> IOResult<Int>
    /// Input was decoded beyond what the last read returned (TLS records hold up to 16 KiB of plaintext): the
    /// socket may not become readable again, so the driver reads again whenever it wants input. False for a
    /// plain socket.
    var hasBufferedInput: Bool { get }
}

extension Transport {
    public var wantsWritable: Bool { false }
    public func flush() throws -> IOResult<Int> { .processed(0) }
    public var hasBufferedInput: Bool { false }
}

extension Transport {
    /// Reads up to `maxBytes` (default: whatever fits without growing, at least 4 KiB) into `buffer`'s writable
    /// region and commits them. Throws `ByteBuffer.CapacityExceeded` if the buffer is at its cap and full.
    public func read(into buffer: ByteBuffer, maxBytes: Int? = nil) throws -> IOResult<Int> {
        if buffer.readableBytes == 0 { buffer.clear() }
        let wanted = maxBytes ?? max(buffer.writableBytes, 4096)
        if buffer.writableBytes < wanted {
            buffer.discardReadBytes()
            let room = min(wanted, buffer.maxCapacity - buffer.writerIndex)
            try buffer.reserveWritable(max(room, 1))
        }
        let result = try buffer.withUnsafeMutableWritableBytes { region in
            try read(into: UnsafeMutableRawBufferPointer(rebasing: region.prefix(wanted)))
        }
        if case .processed(let count) = result {
            buffer.moveWriterIndex(forwardBy: count)
        }
        return result
    }

    /// Writes `buffer`'s readable bytes and consumes what was accepted.
    public func write(from buffer: ByteBuffer) throws -> IOResult<Int> {
        guard buffer.readableBytes > 0 else { return .processed(0) }
        let result = try buffer.withUnsafeReadableBytes { try write($0) }
        if case .processed(let count) = result {
            buffer.moveReaderIndex(forwardBy: count)
            if buffer.readableBytes == 0 { buffer.clear() }
        }
        return result
    }
}

/// A transport that passes bytes straight through to a `TCPSocket`.
public final class PlainTransport: Transport {
    /// The wrapped socket.
    public let socket: TCPSocket

    /// Wraps `socket`; the transport now owns it.
    public init(_ socket: TCPSocket) { self.socket = socket }

    /// The socket's descriptor.
    public var fd: Int32 { socket.fd }
    /// See `TCPSocket.read(into:)`.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> IOResult<Int> {
        try socket.read(into: buffer)
    }
    /// See `TCPSocket.write(_:)`.
    public func write(_ bytes: UnsafeRawBufferPointer) throws -> IOResult<Int> { try socket.write(bytes) }
    /// See `TCPSocket.shutdownWrite()`.
    public func shutdownWrite() throws { try socket.shutdownWrite() }
    /// See `TCPSocket.close()`.
    public func close() throws { try socket.close() }
}
