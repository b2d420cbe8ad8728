import CLinux
import Glibc
import Testing
@testable import Reactor

@Suite struct SyscallTests {
    @Test func emptyNonBlockingPipeReadIsWouldBlock() throws {
        let pipe = try Pipe()
        var byte: UInt8 = 0
        let result = try Syscall.call("read(pipe)") { Glibc.read(pipe.readFD, &byte, 1) }
        #expect(result == .wouldBlock)

        pipe.write("x")
        let second = try Syscall.call("read(pipe)") { Glibc.read(pipe.readFD, &byte, 1) }
        #expect(second == .processed(1))
        #expect(byte == UInt8(ascii: "x"))
    }

    @Test func eintrIsRetriedUntilTheCallSucceeds() throws {
        var attempts = 0
        let result = try Syscall.call("scripted") { () -> Int32 in
            attempts += 1
            if attempts < 3 {
                errno = EINTR
                return -1
            }
            return 42
        }
        #expect(result == .processed(42))
        #expect(attempts == 3)
    }

    @Test func closeIsNotRetriedOnEINTR() {
        var attempts = 0
        let outcome = Syscall.raw("close", retryOnEINTR: false) { () -> Int32 in
            attempts += 1
            errno = EINTR
            return -1
        }
        guard case .failed(let code) = outcome else {
            Issue.record("expected failure")
            return
        }
        #expect(code == EINTR)
        #expect(attempts == 1)
    }

    @Test func otherErrnosThrowIOErrorWithReadableDescription() {
        #expect(throws: IOError(errno: ECONNRESET, reason: "read(fd 9)")) {
            _ = try Syscall.call("read(fd 9)") { () -> Int in
                errno = ECONNRESET
                return -1
            }
        }
        let error = IOError(errno: ECONNREFUSED, reason: "connect(127.0.0.1:1)")
        #expect(error.description == "connect(127.0.0.1:1): Connection refused (errno \(ECONNREFUSED))")
    }

    @Test func runTreatsEAGAINAsAnError() {
        #expect(throws: IOError(errno: EAGAIN, reason: "scripted")) {
            _ = try Syscall.run("scripted") { () -> Int32 in
                errno = EAGAIN
                return -1
            }
        }
    }

    @Test func ebadfTraps() async {
        await #expect(processExitsWith: .failure) {
            _ = try? Syscall.call("read(bad fd)") { Glibc.read(-1, nil, 0) }
        }
    }
}
