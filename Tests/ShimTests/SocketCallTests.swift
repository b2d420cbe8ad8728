import CLinux
import Glibc
import Testing

/// The event loops' socket calls go through `syscall(2)` (`cl_recv`, `cl_send`, `cl_sendmsg_iov`,
/// `cl_epoll_wait`): each must keep the contract of the glibc call it replaces, errno included.
@Suite struct SocketCallTests {
    /// A connected, non-blocking stream pair.
    private func pair() throws -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        let rc = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | cl_sock_nonblock() | cl_sock_cloexec(), 0, &fds)
        try #require(rc == 0)
        return (fds[0], fds[1])
    }

    @Test func recvOnAnEmptySocketIsEAGAIN() throws {
        let (a, b) = try pair()
        defer { close(a); close(b) }
        var buffer = [UInt8](repeating: 0, count: 16)
        errno = 0
        let n = buffer.withUnsafeMutableBytes { cl_recv(a, $0.baseAddress, $0.count) }
        #expect(n == -1)
        #expect(errno == EAGAIN)
    }

    @Test func sendAndGatheredSendArriveInOrderThroughRecv() throws {
        let (a, b) = try pair()
        defer { close(a); close(b) }
        let first = Array("head:".utf8), second = Array("span".utf8), third = Array("\r\n".utf8)
        let sent = first.withUnsafeBytes { cl_send(a, $0.baseAddress, $0.count) }
        #expect(sent == first.count)
        let gathered = second.withUnsafeBytes { s in
            third.withUnsafeBytes { t in
                let iov = [iovec(iov_base: UnsafeMutableRawPointer(mutating: s.baseAddress), iov_len: s.count),
                           iovec(iov_base: UnsafeMutableRawPointer(mutating: t.baseAddress), iov_len: t.count)]
                return iov.withUnsafeBufferPointer { cl_sendmsg_iov(a, $0.baseAddress, 2) }
            }
        }
        #expect(gathered == second.count + third.count)
        var buffer = [UInt8](repeating: 0, count: 64)
        // A short buffer takes a prefix; the rest stays queued for the next call.
        let part = buffer.withUnsafeMutableBytes { cl_recv(b, $0.baseAddress, 3) }
        #expect(part == 3)
        let rest = buffer.withUnsafeMutableBytes { cl_recv(b, $0.baseAddress! + 3, $0.count - 3) }
        #expect(rest == first.count + second.count + third.count - 3)
        #expect(Array(buffer[0..<(3 + max(rest, 0))]) == first + second + third)
    }

    @Test func recvAfterThePeerClosedIsEndOfFile() throws {
        let (a, b) = try pair()
        defer { close(a) }
        close(b)
        var buffer = [UInt8](repeating: 0, count: 8)
        #expect(buffer.withUnsafeMutableBytes { cl_recv(a, $0.baseAddress, $0.count) } == 0)
    }

    /// MSG_NOSIGNAL must reach the kernel: without it the send raises SIGPIPE and this test process dies.
    @Test func sendToAClosedPeerIsEPIPEWithoutSIGPIPE() throws {
        let (a, b) = try pair()
        defer { close(a) }
        close(b)
        let bytes = Array("late".utf8)
        errno = 0
        #expect(bytes.withUnsafeBytes { cl_send(a, $0.baseAddress, $0.count) } == -1)
        #expect(errno == EPIPE)
        errno = 0
        let gathered = bytes.withUnsafeBytes { raw in
            var iov = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress), iov_len: raw.count)
            return cl_sendmsg_iov(a, &iov, 1)
        }
        #expect(gathered == -1)
        #expect(errno == EPIPE)
    }

    @Test func epollWaitReportsTheReadableSocketAndTimesOut() throws {
        let (a, b) = try pair()
        defer { close(a); close(b) }
        let ep = cl_epoll_create()
        try #require(ep >= 0)
        defer { close(ep) }
        #expect(cl_epoll_ctl(ep, cl_epoll_ctl_add(), b, cl_epollin(), cl_epoll_pack(3, b)) == 0)
        var datas = [UInt64](repeating: 0, count: 4)
        var masks = [UInt32](repeating: 0, count: 4)
        #expect(cl_epoll_wait(ep, &datas, &masks, 4, 0) == 0)
        let one: [UInt8] = [1]
        #expect(one.withUnsafeBytes { cl_send(a, $0.baseAddress, 1) } == 1)
        #expect(cl_epoll_wait(ep, &datas, &masks, 4, 1000) == 1)
        #expect(datas[0] == cl_epoll_pack(3, b))
        #expect(masks[0] & cl_epollin() != 0)
        errno = 0
        #expect(cl_epoll_wait(-1, &datas, &masks, 4, 0) == -1)
        #expect(errno == EBADF)
    }
}
