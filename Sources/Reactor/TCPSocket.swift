// Non-blocking TCP connections: connect, read, write, writev, shutdown, close.
//
//   TCPSocket.connect(to:) --> .connected -------------------------------> ready
//                         +--> .inProgress --> register(.writable) --> writable(loop:) --> finishConnect()
//                                                                                          (SO_ERROR == 0 ?)
import CLinux
import Glibc

/// A non-blocking, close-on-exec TCP socket. Deregister it from its loop before calling `close()`.
public final class TCPSocket {
    /// Whether a non-blocking connect finished immediately or must be awaited.
    public enum ConnectProgress: Sendable, Equatable {
        /// Connected already (common on loopback).
        case connected
        /// EINPROGRESS: wait for `.writable`, then call `finishConnect()`.
        case inProgress
    }

    /// The descriptor, or -1 once closed.
    public private(set) var fd: Int32

    /// Adopts a connected, non-blocking descriptor (for example one returned by `accept4`).
    public init(adopting fd: Int32) {
        precondition(fd >= 0, "TCPSocket: negative fd")
        self.fd = fd
    }

    deinit {
        if fd >= 0 {
            try? Syscall.close(fd)
        }
    }

    /// Whether `close()` has not been called yet.
    public var isOpen: Bool { fd >= 0 }

    /// Starts a non-blocking connect to `address`.
    public static func connect(to address: SocketAddress) throws -> (socket: TCPSocket, progress: ConnectProgress) {
        let fd = try Syscall.run("socket") { cl_tcp_socket(address.addressFamily) }
        let socket = TCPSocket(adopting: fd)
        let outcome = address.withSockAddr { sa, length in
            Syscall.raw("connect(\(address))") { Glibc.connect(fd, sa, length) }
        }
        switch outcome {
        case .value:
            return (socket, .connected)
        case .failed(let code) where code == EINPROGRESS || code == EINTR:
            // EINTR on a non-blocking connect also leaves the connection proceeding asynchronously.
            return (socket, .inProgress)
        case .failed(let code):
            throw IOError(errno: code, reason: "connect(\(address))")
        }
    }

    /// Completes a connect that reported `.inProgress`, throwing the socket's pending error (SO_ERROR) if any.
    public func finishConnect() throws {
        var code: Int32 = 0
        _ = try Syscall.run("getsockopt(SO_ERROR)") { cl_getsockopt_int(fd, cl_sol_socket(), cl_so_error(), &code) }
        if code != 0 {
            throw IOError(errno: code, reason: "connect(\(peerAddress ?? "fd \(fd)"))")
        }
    }

    /// Reads into `buffer`: `.processed(0)` is end of file, `.wouldBlock` means nothing is available yet.
    ///
    /// With `recv`, as HAProxy and nginx read sockets: `read` takes the file layer's path (`vfs_read`, the position
    /// lock, `sock_read_iter`), which a sampled profile of the proxy under wrk put at about 0.25 µs more per
    /// request (two reads) than `recv`'s.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> IOResult<Int> {
        try Syscall.call("recv(fd \(fd))") { cl_recv(fd, buffer.baseAddress, buffer.count) }
    }

    /// Writes as much of `bytes` as the kernel accepts; a short count means "register for `.writable`".
    public func write(_ bytes: UnsafeRawBufferPointer) throws -> IOResult<Int> {
        try Syscall.call("send(fd \(fd))") { cl_send(fd, bytes.baseAddress, bytes.count) }
    }

    /// Gathers several buffers into one send; returns the total bytes accepted (possibly short).
    public func writev(_ buffers: [UnsafeRawBufferPointer]) throws -> IOResult<Int> {
        try buffers.withUnsafeBufferPointer { try writev($0) }
    }

    /// Gathers several buffers into one send (at most `UIO_MAXIOV`); returns the total bytes accepted.
    public func writev(_ buffers: UnsafeBufferPointer<UnsafeRawBufferPointer>) throws -> IOResult<Int> {
        let count = min(buffers.count, Int(UIO_MAXIOV))
        return try withUnsafeTemporaryAllocation(of: iovec.self, capacity: max(count, 1)) { iovecs in
            for index in 0..<count {
                iovecs[index] = iovec(
                    iov_base: UnsafeMutableRawPointer(mutating: buffers[index].baseAddress),
                    iov_len: buffers[index].count)
            }
            return try Syscall.call("sendmsg(fd \(fd))") { cl_sendmsg_iov(fd, iovecs.baseAddress, Int32(count)) }
        }
    }

    /// Sends FIN: the peer reads end of file, while this side can still read.
    public func shutdownWrite() throws {
        _ = try Syscall.run("shutdown(fd \(fd), SHUT_WR)") { Glibc.shutdown(fd, cl_shut_wr()) }
    }

    /// Closes the descriptor. Idempotent.
    public func close() throws {
        guard fd >= 0 else { return }
        let closing = fd
        fd = -1
        try Syscall.close(closing)
    }

    /// Enables or disables Nagle's algorithm (TCP_NODELAY).
    public func setNoDelay(_ enabled: Bool = true) throws {
        try setOption(level: cl_ipproto_tcp(), name: cl_tcp_nodelay(), value: enabled ? 1 : 0, "TCP_NODELAY")
    }

    /// Makes the next `close` abortive (SO_LINGER with a zero timeout): the peer gets a reset instead of a FIN,
    /// and bytes not yet sent are dropped. For a response cut in a framing where a FIN would read as its end.
    public func resetOnClose() throws {
        var value = linger(l_onoff: 1, l_linger: 0)
        _ = try Syscall.run("SO_LINGER on fd \(fd)") {
            Glibc.setsockopt(fd, SOL_SOCKET, SO_LINGER, &value, socklen_t(MemoryLayout<linger>.size))
        }
    }

    /// Sets an integer socket option (e.g. SO_SNDBUF).
    public func setOption(level: Int32, name: Int32, value: Int32, _ label: String = "setsockopt") throws {
        _ = try Syscall.run("\(label) on fd \(fd)") { cl_setsockopt_int(fd, level, name, value) }
    }

    /// The remote endpoint as `"ip:port"` (IPv6 bracketed), or nil if the socket is not connected.
    public var peerAddress: String? {
        guard fd >= 0 else { return nil }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                Syscall.raw("getpeername") { getpeername(fd, sa, &length) }
            }
        }
        guard case .value = result else { return nil }
        return SocketAddress(storage: storage)?.description
    }
}
