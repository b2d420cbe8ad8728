import CLinux
import COpenSSL
import CZlib
import Glibc
import Testing

/// Each C shim is proven to link with one real call.
@Suite struct ShimLinkTests {
    @Test func epollCreateAndWaitOnEventfd() throws {
        let ep = epoll_create1(Int32(EPOLL_CLOEXEC))
        #expect(ep >= 0)
        defer { close(ep) }
        let efd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        #expect(efd >= 0)
        defer { close(efd) }
        var ev = epoll_event()
        ev.events = cl_epollin()
        ev.data.u64 = cl_epoll_pack(7, efd)
        #expect(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) == 0)
        var one: UInt64 = 1
        #expect(write(efd, &one, 8) == 8)
        var out = epoll_event()
        let n = epoll_wait(ep, &out, 1, 1000)
        #expect(n == 1)
        #expect(out.data.u64 >> 32 == 7)
        #expect(Int32(truncatingIfNeeded: out.data.u64) == efd)
    }

    @Test func sha256ThroughEVP() throws {
        let md = EVP_MD_fetch(nil, "SHA256", nil)
        #expect(md != nil)
        defer { EVP_MD_free(md) }
        let ctx = EVP_MD_CTX_new()
        defer { EVP_MD_CTX_free(ctx) }
        #expect(EVP_DigestInit_ex(ctx, md, nil) == 1)
        let input = Array("abc".utf8)
        #expect(EVP_DigestUpdate(ctx, input, input.count) == 1)
        var digest = [UInt8](repeating: 0, count: 32)
        var len: UInt32 = 0
        #expect(EVP_DigestFinal_ex(ctx, &digest, &len) == 1)
        let hex = digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        // FIPS 180-2 test vector for "abc".
        #expect(hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func crc32AndDeflateRoundTrip() throws {
        let input = Array(String(repeating: "formwall ", count: 1000).utf8)
        // CRC-32 of "123456789" is the classic check value 0xCBF43926.
        let check = Array("123456789".utf8)
        #expect(crc32(0, check, UInt32(check.count)) == 0xCBF4_3926)

        var strm = z_stream()
        #expect(czlib_deflate_init2(&strm, Z_DEFAULT_COMPRESSION, 15 + 16) == Z_OK)
        var compressed = [UInt8](repeating: 0, count: 4096)
        var inCopy = input
        let produced: Int = inCopy.withUnsafeMutableBufferPointer { inp in
            compressed.withUnsafeMutableBufferPointer { outp in
                strm.next_in = inp.baseAddress
                strm.avail_in = UInt32(inp.count)
                strm.next_out = outp.baseAddress
                strm.avail_out = UInt32(outp.count)
                let rc = deflate(&strm, Z_FINISH)
                #expect(rc == Z_STREAM_END)
                return outp.count - Int(strm.avail_out)
            }
        }
        deflateEnd(&strm)
        #expect(produced > 0 && produced < input.count)

        var inf = z_stream()
        #expect(czlib_inflate_init2(&inf, 15 + 16) == Z_OK)
        var restored = [UInt8](repeating: 0, count: input.count + 16)
        let restoredCount: Int = compressed.withUnsafeMutableBufferPointer { inp in
            restored.withUnsafeMutableBufferPointer { outp in
                inf.next_in = inp.baseAddress
                inf.avail_in = UInt32(produced)
                inf.next_out = outp.baseAddress
                inf.avail_out = UInt32(outp.count)
                let rc = inflate(&inf, Z_FINISH)
                #expect(rc == Z_STREAM_END)
                return outp.count - Int(inf.avail_out)
            }
        }
        inflateEnd(&inf)
        #expect(Array(restored[0..<restoredCount]) == input)
    }

    @Test func tlsContextAcceptsMinimumVersion() throws {
        let ctx = SSL_CTX_new(TLS_server_method())
        #expect(ctx != nil)
        defer { SSL_CTX_free(ctx) }
        #expect(cossl_ctx_set_min_proto_version(ctx, cossl_tls1_2_version()) == 1)
    }
}
