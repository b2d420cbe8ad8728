// Listening TCP sockets: bind with options, accept4 without blocking.
import CLinux
import Glibc

/// A non-blocking, close-on-exec listening socket.
public final class TCPListener {
    /// How to bind and listen.
    public struct Options: Sendable {
        /// SO_REUSEADDR, so restarts do not wait out TIME_WAIT. Default true.
        public var reuseAddress = true
        /// SO_REUSEPORT, so several workers can each own a listener on the same port. Default false.
        public var reusePort = false
        /// The listen(2) backlog. Default 511.
        public var backlog: Int32 = 511
        /// For IPv6 addresses, IPV6_V6ONLY (do not also accept IPv4-mapped connections). Default true.
        public var ipv6Only = true
        /// Whether to call listen(2). False leaves the socket only bound, for a child process that adopts it
        /// (`init(adopting:)` listens) once it is ready to serve, so connections are not accepted before. Default true.
        public var listens = true

        /// A bind that only checks the address is free: SO_REUSEADDR, no SO_REUSEPORT, and no listen(2). A bind
        /// fails on a port another socket listens on (with or without SO_REUSEPORT) exactly as bind and listen
        /// do; a probe that listened queued the connections that reached it in that instant, and reset them when
        /// it closed (a first request reset at start-up, seen once under load in CI).
        public static var addressProbe: Options {
            var options = Options(reuseAddress: true, reusePort: false)
            options.listens = false
            return options
        }

        /// Default options: SO_REUSEADDR on, SO_REUSEPORT off, backlog 511.
        public init(reuseAddress: Bool = true, reusePort: Bool = false, backlog: Int32 = 511, ipv6Only: Bool = true) {
            self.reuseAddress = reuseAddress
            self.reusePort = reusePort
            self.backlog = backlog
            self.ipv6Only = ipv6Only
        }
    }

    /// The descriptor, or -1 once closed.
    public private(set) var fd: Int32
    /// The bound address (with the kernel-chosen port for port-0 binds).
    public let localAddress: SocketAddress

    /// Binds and listens on `address`. EADDRINUSE, EADDRNOTAVAIL and EACCES become `SocketError`s naming the address.
    public init(bindingTo address: SocketAddress, options: Options = Options()) throws {
        let fd = try Syscall.run("socket") { cl_tcp_socket(address.addressFamily) }
        do {
            func set(_ level: Int32, _ name: Int32, _ label: String) throws(IOError) {
                _ = try Syscall.run("setsockopt(\(label))") { cl_setsockopt_int(fd, level, name, 1) }
            }
            if options.reuseAddress { try set(cl_sol_socket(), cl_so_reuseaddr(), "SO_REUSEADDR") }
            if options.reusePort { try set(cl_sol_socket(), cl_so_reuseport(), "SO_REUSEPORT") }
            if address.family == .inet6 && options.ipv6Only {
                try set(cl_ipproto_ipv6(), cl_ipv6_v6only(), "IPV6_V6ONLY")
            }
            let outcome = address.withSockAddr { sa, length in
                Syscall.raw("bind(\(address))") { bind(fd, sa, length) }
            }
            if case .failed(let code) = outcome {
                switch code {
                case EADDRINUSE: throw SocketError.addressInUse(address.description)
                case EADDRNOTAVAIL: throw SocketError.addressNotAvailable(address.description)
                case EACCES: throw SocketError.permissionDenied(address.description)
                default: throw IOError(errno: code, reason: "bind(\(address))")
                }
            }
            if options.listens {
                _ = try Syscall.run("listen(\(address))") { listen(fd, options.backlog) }
            }
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            _ = try withUnsafeMutablePointer(to: &storage) { pointer throws(IOError) in
                try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa throws(IOError) in
                    try Syscall.run("getsockname") { getsockname(fd, sa, &length) }
                }
            }
            self.localAddress = SocketAddress(storage: storage) ?? address
            self.fd = fd
        } catch {
            try? Syscall.close(fd)
            throw error
        }
    }

    /// Takes ownership of a bound TCP socket that a supervisor process passed down, makes it close-on-exec and
    /// non-blocking, and listens on it (again, if it already was: that only sets the backlog). Throws when `fd` is
    /// not a stream socket.
    public init(adopting fd: Int32, backlog: Int32 = 511) throws {
        // Checked outside the syscall funnel, which traps on EBADF: a bad number here is an input, not our bug.
        var type: Int32 = 0
        guard fcntl(fd, F_GETFD) >= 0, cl_getsockopt_int(fd, cl_sol_socket(), cl_so_type(), &type) == 0,
              type == cl_sock_stream()
        else {
            throw IOError(errno: ENOTSOCK, reason: "inherited fd \(fd) is not a TCP socket")
        }
        _ = try Syscall.run("fcntl(FD_CLOEXEC)") { cl_set_cloexec(fd, 1) }
        let flags = try Syscall.run("fcntl(F_GETFL)") { fcntl(fd, F_GETFL) }
        if flags & O_NONBLOCK == 0 {
            _ = try Syscall.run("fcntl(O_NONBLOCK)") { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try withUnsafeMutablePointer(to: &storage) { pointer throws(IOError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa throws(IOError) in
                try Syscall.run("getsockname") { getsockname(fd, sa, &length) }
            }
        }
        guard let address = SocketAddress(storage: storage) else {
            throw IOError(errno: EAFNOSUPPORT, reason: "inherited fd \(fd) is not a TCP/IP socket")
        }
        _ = try Syscall.run("listen(\(address))") { listen(fd, backlog) }
        self.localAddress = address
        self.fd = fd
    }

    deinit {
        if fd >= 0 {
            try? Syscall.close(fd)
        }
    }

    /// The bound port; useful after binding port 0.
    public var localPort: UInt16 { localAddress.port }

    /// Accepts one pending connection as a non-blocking, close-on-exec socket, or `.wouldBlock` if none is queued.
    ///
    /// Connections aborted before acceptance (ECONNABORTED) are skipped. Resource exhaustion (EMFILE, ENFILE,
    /// ENOBUFS) throws: the caller should stop accepting for a while rather than spin.
    public func accept() throws -> IOResult<TCPSocket> {
        while true {
            let outcome = Syscall.raw("accept4(fd \(fd))") { cl_accept(fd, nil, nil) }
            switch outcome {
            case .value(let client):
                return .processed(TCPSocket(adopting: client))
            case .failed(let code) where code == EAGAIN || code == EWOULDBLOCK:
                return .wouldBlock
            case .failed(let code) where code == ECONNABORTED:
                continue
            case .failed(let code):
                throw IOError(errno: code, reason: "accept4(\(localAddress))")
            }
        }
    }

    /// Whether a connection is queued to be accepted (a `poll` that does not wait). True when `poll` fails, so a
    /// caller that then tries `accept` finds out for itself.
    public var hasPendingConnection: Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&entry, 1, 0)
        return ready != 0
    }

    /// Stops listening. Deregister from the loop first. Idempotent.
    public func close() throws {
        guard fd >= 0 else { return }
        let closing = fd
        fd = -1
        try Syscall.close(closing)
    }
}
