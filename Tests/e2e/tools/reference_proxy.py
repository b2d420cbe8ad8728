#!/usr/bin/env python3
"""A deliberately simple, threaded Python stand-in for `formwall serve`, used ONLY to check that
the end-to-end suite itself is sound (that its tests can pass) while the real proxy is being
written. It implements the contract the suite tests, not Formwall's design (no epoll, no rules).

    FORMWALL_BIN=Tests/e2e/tools/reference-formwall .venv/bin/python -m pytest -q Tests/e2e
"""

from __future__ import annotations

import argparse
import json
import re
import select
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
from werkzeug.http import parse_options_header  # noqa: E402
from werkzeug.sansio.multipart import NEED_DATA, Data, Epilogue, Field, File, MultipartDecoder  # noqa: E402

TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
REQUEST_LINE = re.compile(rb"^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([^ \x00-\x1f\x7f]+) HTTP/(\d)\.(\d)$")
RID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
       "content-length", "expect"}
REASONS = {400: "Bad Request", 408: "Request Timeout", 417: "Expectation Failed",
           431: "Request Header Fields Too Large", 501: "Not Implemented", 502: "Bad Gateway",
           504: "Gateway Timeout", 505: "HTTP Version Not Supported"}


def origin_form(target: str, method: str, host: str | None) -> str:
    """RFC 9112 section 3.2: `*` for OPTIONS, any target for CONNECT, absolute-form (http/https, no userinfo)
    whose authority is the Host value, returned as origin-form; anything else is refused."""
    if method == "CONNECT":
        return target
    if target == "*":
        if method != "OPTIONS":
            raise HTTPError(400, "invalid_request_target")
        return target
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/?]*)(.*)$", target)
    if not m or m.group(1).lower() not in ("http", "https") or not m.group(2) or "@" in m.group(2):
        raise HTTPError(400, "invalid_request_target")
    if host is None or host.lower() != m.group(2).lower():
        raise HTTPError(400, "host_mismatch")
    rest = m.group(3)
    return rest if rest.startswith("/") else "/" + rest


class HTTPError(Exception):
    def __init__(self, status, kind):
        super().__init__(kind)
        self.status, self.kind = status, kind


class ClientGone(Exception):
    pass


class UpstreamFailed(Exception):
    def __init__(self, status, kind):
        super().__init__(kind)
        self.status, self.kind = status, kind


class Config:
    pass


STATE = {"draining": False, "active": 0}
LOCK = threading.Lock()


def error_bytes(status, kind, request_id):
    body = json.dumps({"error": kind, "status": status, "request_id": request_id}, separators=(",", ":")).encode()
    head = (f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\nX-Request-Id: {request_id}\r\n\r\n")
    return head.encode() + body


class Client:
    def __init__(self, sock, addr, cfg):
        self.sock, self.addr, self.cfg = sock, addr, cfg
        self.buf = bytearray()
        self.up = None
        self.upbuf = bytearray()

    # -- client reading
    def recv_client(self, deadline=None, idle=None):
        while True:
            now = time.monotonic()
            t = idle if idle is not None else 0.2
            if deadline is not None:
                t = min(t, deadline - now)
                if t <= 0:
                    raise TimeoutError
            r, _, _ = select.select([self.sock], [], [], t)
            if r:
                try:
                    data = self.sock.recv(1 << 20)
                except OSError:
                    data = b""
                if not data:
                    raise ClientGone
                self.buf += data
                return
            if idle is not None and deadline is None:
                raise TimeoutError

    def read_head(self, first):
        deadline = time.monotonic() + self.cfg.header_timeout
        while True:
            i = self.buf.find(b"\r\n\r\n")
            if i > 16384:
                raise HTTPError(431, "head_too_large")
            if i >= 0:
                head = bytes(self.buf[:i + 2])
                del self.buf[:i + 4]
                return head
            # checks on what we have
            if len(self.buf) > 16384:
                self.check_bare(bytes(self.buf[:16384]))
                raise HTTPError(431, "head_too_large")
            self.check_bare(bytes(self.buf))
            if not self.buf and STATE["draining"]:
                raise ClientGone
            try:
                self.recv_client(deadline=deadline)
            except TimeoutError:
                if not self.buf and not first:
                    raise ClientGone
                raise HTTPError(408, "client_header_timeout")

    @staticmethod
    def check_bare(data):
        for i, c in enumerate(data):
            if c == 10 and (i == 0 or data[i - 1] != 13):
                raise HTTPError(400, "bare_lf")
            if c == 13 and i + 1 < len(data) and data[i + 1] != 10:
                raise HTTPError(400, "bare_cr")

    def parse_head(self, head):
        self.check_bare(head)
        lines = head[:-2].split(b"\r\n")
        m = REQUEST_LINE.match(lines[0])
        if not m:
            raise HTTPError(400, "invalid_request_line")
        method, target, major, minor = m.group(1).decode(), m.group(2).decode(), m.group(3), m.group(4)
        if (major, minor) not in ((b"1", b"1"), (b"1", b"0")):
            raise HTTPError(505, "unsupported_version")
        version = "HTTP/1.%s" % minor.decode()
        headers = []
        if len(lines) - 1 > 100:
            raise HTTPError(431, "too_many_headers")
        for line in lines[1:]:
            if line[:1] in (b" ", b"\t"):
                raise HTTPError(400, "obs_fold")
            name, sep, value = line.partition(b":")
            if not sep:
                raise HTTPError(400, "invalid_header_name")
            if name != name.rstrip(b" \t"):
                raise HTTPError(400, "whitespace_before_colon")
            if not TOKEN.match(name):
                raise HTTPError(400, "invalid_header_name")
            value = value.strip(b" \t")
            if any((c < 32 and c != 9) or c == 127 for c in value):
                raise HTTPError(400, "invalid_header_value")
            try:
                text = value.decode("utf-8")
            except UnicodeDecodeError:
                raise HTTPError(400, "invalid_header_value") from None
            headers.append((name.decode(), text))
        get = lambda n: [v for k, v in headers if k.lower() == n]  # noqa: E731
        hosts = get("host")
        if version == "HTTP/1.1" and not hosts:
            raise HTTPError(400, "missing_host")
        if len(hosts) > 1:
            raise HTTPError(400, "duplicate_host")
        if "#" in target:  # no target form carries a fragment
            raise HTTPError(400, "invalid_request_target")
        if not target.startswith("/"):
            target = origin_form(target, method, hosts[0] if hosts else None)
        cls, tes = get("content-length"), get("transfer-encoding")
        if cls and tes:
            raise HTTPError(400, "content_length_with_transfer_encoding")
        framing, length = "none", 0
        if cls:
            if len(cls) > 1:
                raise HTTPError(400, "duplicate_content_length")
            if "," in cls[0]:
                raise HTTPError(400, "content_length_list")
            if not cls[0].isdigit() or not cls[0].isascii() or int(cls[0]) > 2**63 - 1:
                raise HTTPError(400, "invalid_content_length")
            framing, length = "length", int(cls[0])
        if tes:
            if version == "HTTP/1.0":
                raise HTTPError(400, "transfer_encoding_in_http10")
            if len(tes) > 1:
                raise HTTPError(400, "invalid_transfer_encoding")
            elems = [e.strip(" \t") for e in tes[0].split(",")]
            if any(not e or not TOKEN.match(e.encode()) for e in elems):
                raise HTTPError(400, "invalid_transfer_encoding")
            ch = [i for i, e in enumerate(elems) if e.lower() == "chunked"]
            if len(ch) > 1:
                raise HTTPError(400, "invalid_transfer_encoding")
            if ch and ch[0] != len(elems) - 1:
                raise HTTPError(400, "chunked_not_final")
            for e in elems:
                if e.lower() == "identity":
                    raise HTTPError(400, "invalid_transfer_encoding")
                if e.lower() != "chunked":
                    raise HTTPError(501, "unsupported_transfer_encoding")
            framing = "chunked"
        expect = get("expect")
        if expect and expect[0].lower() != "100-continue":
            raise HTTPError(417, "unsupported_expectation")
        return method, target, version, headers, framing, length

    # -- client body as a generator of bytes; raises ClientGone/TimeoutError/HTTPError
    def body_pieces(self, framing, length):
        idle = self.cfg.body_timeout
        if framing == "length":
            left = length
            while left:
                if not self.buf:
                    self.recv_client(idle=idle)
                piece = bytes(self.buf[:left])
                del self.buf[:len(piece)]
                left -= len(piece)
                yield piece
        elif framing == "chunked":
            while True:
                line = self.client_line(idle)
                size_text = line.split(b";", 1)[0]
                if not size_text or not re.match(rb"^[0-9A-Fa-f]{1,16}$", size_text):
                    raise HTTPError(400, "invalid_chunk_size")
                size = int(size_text, 16)
                if size == 0:
                    while self.client_line(idle) != b"":
                        pass
                    return
                left = size
                while left:
                    if not self.buf:
                        self.recv_client(idle=idle)
                    piece = bytes(self.buf[:left])
                    del self.buf[:len(piece)]
                    left -= len(piece)
                    yield piece
                while len(self.buf) < 2:
                    self.recv_client(idle=idle)
                if self.buf[:2] != b"\r\n":
                    raise HTTPError(400, "missing_chunk_crlf")
                del self.buf[:2]

    def client_line(self, idle):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return line
            if len(self.buf) > 4096:
                raise HTTPError(400, "invalid_chunk_size")
            self.recv_client(idle=idle)

    # -- upstream
    def up_connect(self):
        if self.up is not None:
            return
        try:
            self.up = socket.create_connection(self.cfg.upstream, timeout=self.cfg.connect_timeout)
        except OSError:
            self.up = None
            raise UpstreamFailed(502, "upstream_unreachable") from None
        self.upbuf = bytearray()

    def up_drop(self):
        if self.up is not None:
            try:
                self.up.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                self.up.close()
            except OSError:
                pass
        self.up = None

    def up_recv(self, deadline):
        t = deadline - time.monotonic()
        if t <= 0:
            raise UpstreamFailed(504, "upstream_timeout")
        self.up.settimeout(t)
        try:
            data = self.up.recv(1 << 20)
        except socket.timeout:
            raise UpstreamFailed(504, "upstream_timeout") from None
        except OSError:
            data = b""
        if not data:
            raise UpstreamFailed(502, "upstream_closed")
        self.upbuf += data

    def up_line(self, deadline):
        while True:
            i = self.upbuf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.upbuf[:i])
                del self.upbuf[:i + 2]
                return line
            self.up_recv(deadline)

    # -- main loop
    def run(self):
        first = True
        try:
            while True:
                request_id = uuid.uuid4().hex
                self.request_id = None
                try:
                    head = self.read_head(first)
                    first = False
                    method, target, version, headers, framing, length = self.parse_head(head)
                    if not self.handle(method, target, version, headers, framing, length, request_id):
                        break
                    if STATE["draining"]:
                        break
                except (HTTPError, UpstreamFailed) as e:
                    self.fail(e.status, e.kind, getattr(self, "request_id", None) or request_id)
                    break
        except (ClientGone, OSError):
            pass
        finally:
            self.up_drop()
            try:
                self.sock.close()
            except OSError:
                pass

    def fail(self, status, kind, request_id, linger=True):
        self.up_drop()
        try:
            self.sock.sendall(error_bytes(status, kind, request_id))
            self.sock.shutdown(socket.SHUT_WR)
            end = time.monotonic() + 1
            while time.monotonic() < end:  # lingering close: drain what the client still sends
                r, _, _ = select.select([self.sock], [], [], end - time.monotonic())
                if not r or not self.sock.recv(65536):
                    break
        except OSError:
            pass

    def handle(self, method, target, version, headers, framing, length, request_id):
        get = lambda n: [v for k, v in headers if k.lower() == n]  # noqa: E731
        rid = get("x-request-id")
        if rid and RID.match(rid[0]):
            request_id = rid[0]
        self.request_id = request_id
        conn_tokens = {t.strip().lower() for v in get("connection") for t in v.split(",")}
        client_close = "close" in conn_tokens or (version == "HTTP/1.0" and "keep-alive" not in conn_tokens)
        drop = HOP | conn_tokens | {"x-request-id", "x-forwarded-proto", "x-forwarded-host"}
        out = [(k, v) for k, v in headers if k.lower() not in drop and k.lower() not in ("x-forwarded-for", "via")]
        xff = get("x-forwarded-for")
        out.append(("X-Forwarded-For", ", ".join(xff + [self.addr[0]])))
        out.append(("X-Forwarded-Proto", "http"))
        out.append(("X-Forwarded-Host", get("host")[0] if get("host") else ""))
        out.append(("Via", ", ".join(get("via") + ["1.1 formwall"])))
        out.append(("X-Request-Id", request_id))
        ctype = get("content-type")
        mime, opts = parse_options_header(ctype[0] if ctype else "")
        multipart = mime == "multipart/form-data" and opts.get("boundary") and framing != "none"
        if get("expect"):
            self.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        body_iter = self.body_pieces(framing, length)
        if multipart:
            nb = "fw" + uuid.uuid4().hex
            out = [(k, v) for k, v in out if k.lower() != "content-type"]
            out.append(("Content-Type", f"multipart/form-data; boundary={nb}"))
            pieces = self.reencode(body_iter, opts["boundary"].encode(), nb.encode())
            up_framing = "spool" if self.cfg.upstream_body == "spool" else "chunked"
        elif framing == "none":
            pieces, up_framing = iter(()), "none"
        elif framing == "length":
            pieces, up_framing = body_iter, "length"
        else:
            pieces, up_framing = body_iter, "chunked"
        try:
            if up_framing == "spool":
                spool = tempfile.TemporaryFile()
                for p in pieces:
                    spool.write(p)
                size = spool.tell()
                spool.seek(0)
                out.append(("Content-Length", str(size)))
                self.send_head(method, target, out)
                while True:
                    p = spool.read(1 << 20)
                    if not p:
                        break
                    self.up.sendall(p)
            else:
                if up_framing == "length":
                    out.append(("Content-Length", str(length)))
                elif up_framing == "chunked":
                    out.append(("Transfer-Encoding", "chunked"))
                self.send_head(method, target, out)
                for p in pieces:
                    if not p:
                        continue
                    if up_framing == "chunked":
                        self.up.sendall(b"%x\r\n%s\r\n" % (len(p), p))
                    else:
                        self.up.sendall(p)
                if up_framing == "chunked":
                    self.up.sendall(b"0\r\n\r\n")
        except (ClientGone, TimeoutError):
            self.up_drop()
            if isinstance(sys.exc_info()[1], TimeoutError):
                raise HTTPError(408, "client_body_timeout")
            raise ClientGone
        except HTTPError:
            self.up_drop()
            raise
        except (BrokenPipeError, ConnectionResetError):
            self.up_drop()
            raise UpstreamFailed(502, "upstream_closed")
        return self.relay(method, client_close)

    def send_head(self, method, target, out):
        self.up_connect()
        head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in out) + "\r\n"
        try:
            self.up.sendall(head.encode("utf-8"))
        except OSError:
            self.up_drop()
            raise UpstreamFailed(502, "upstream_closed") from None

    def reencode(self, body_iter, boundary, nb):
        from upstream_app import AlignedFeed

        dec = MultipartDecoder(boundary)
        feed = AlignedFeed(dec)
        ended = False
        started = False
        while True:
            try:
                ev = dec.next_event()
            except ValueError:
                raise HTTPError(400, "invalid_multipart") from None
            if ev is NEED_DATA:
                if ended:
                    raise HTTPError(400, "invalid_multipart")
                try:
                    feed.feed(next(body_iter))
                except StopIteration:
                    ended = True
                    feed.feed(None)
                continue
            if isinstance(ev, (Field, File)):
                name = ev.name.replace('"', "%22")
                disp = f'form-data; name="{name}"'
                if isinstance(ev, File):
                    disp += '; filename="%s"' % ev.filename.replace('"', "%22")
                    ct = ev.headers.get("Content-Type", "application/octet-stream")
                    yield (f"--{nb.decode()}\r\nContent-Disposition: {disp}\r\nContent-Type: {ct}\r\n\r\n").encode()
                else:
                    yield (f"--{nb.decode()}\r\nContent-Disposition: {disp}\r\n\r\n").encode()
                started = True
            elif isinstance(ev, Data):
                if ev.data:
                    yield ev.data
                if not ev.more_data:
                    yield b"\r\n"
            elif isinstance(ev, Epilogue):
                yield b"--" + nb + b"--\r\n"
                return

    def relay(self, method, client_close):
        deadline = time.monotonic() + self.cfg.response_timeout
        while True:
            try:
                status_line = self.up_line(deadline)
            except UpstreamFailed:
                self.up_drop()
                raise
            headers = []
            while True:
                line = self.up_line(deadline)
                if line == b"":
                    break
                k, _, v = line.decode("latin-1").partition(":")
                headers.append((k, v.strip()))
            status = int(status_line.split(b" ")[1])
            if 100 <= status < 200:
                continue
            break
        get = lambda n: [v for k, v in headers if k.lower() == n]  # noqa: E731
        conn_tokens = {t.strip().lower() for v in get("connection") for t in v.split(",")}
        out = [(k, v) for k, v in headers if k.lower() not in (HOP | conn_tokens) or k.lower() == "content-length"]
        te, cl = get("transfer-encoding"), get("content-length")
        no_body = method == "HEAD" or status in (204, 304)
        up_close = "close" in conn_tokens
        if no_body:
            mode = "none"
        elif te:
            mode = "chunked"
            out.append(("Transfer-Encoding", "chunked"))
        elif cl:
            mode = "length"
        else:
            mode = "close"
            up_close = True
        close_after = client_close or mode == "close" or STATE["draining"]
        if close_after:
            out.append(("Connection", "close"))
        self.sock.sendall((status_line.decode("latin-1") + "\r\n"
                           + "".join(f"{k}: {v}\r\n" for k, v in out) + "\r\n").encode("latin-1"))
        far = time.monotonic() + 3600
        try:
            if mode == "length":
                left = int(cl[0])
                while left:
                    if not self.upbuf:
                        self.up_recv(far)
                    p = bytes(self.upbuf[:left])
                    del self.upbuf[:len(p)]
                    left -= len(p)
                    self.sock.sendall(p)
            elif mode == "chunked":
                while True:
                    line = self.up_line(far)
                    size = int(line.split(b";")[0], 16)
                    if size == 0:
                        while self.up_line(far) != b"":
                            pass
                        self.sock.sendall(b"0\r\n\r\n")
                        break
                    while len(self.upbuf) < size + 2:
                        self.up_recv(far)
                    self.sock.sendall(line + b"\r\n" + bytes(self.upbuf[:size + 2]))
                    del self.upbuf[:size + 2]
            elif mode == "close":
                while True:
                    if self.upbuf:
                        self.sock.sendall(bytes(self.upbuf))
                        self.upbuf.clear()
                    try:
                        self.up_recv(far)
                    except UpstreamFailed:
                        break
        except UpstreamFailed:
            # died mid-response: close the client without completing the body
            self.up_drop()
            raise ClientGone from None
        if up_close:
            self.up_drop()
        return not close_after


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["serve"])
    p.add_argument("--listen", required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--upstream-body", choices=["chunked", "spool"], default="chunked")
    p.add_argument("--client-header-timeout", type=float, default=30)
    p.add_argument("--client-body-timeout", type=float, default=30)
    p.add_argument("--upstream-connect-timeout", type=float, default=5)
    p.add_argument("--upstream-response-timeout", type=float, default=60)
    p.add_argument("--drain-timeout", type=float, default=30)
    a = p.parse_args()
    cfg = Config()
    host, _, port = a.listen.rpartition(":")
    uhost, _, uport = a.upstream.removeprefix("http://").rstrip("/").rpartition(":")
    cfg.upstream = (uhost, int(uport))
    cfg.upstream_body = a.upstream_body
    cfg.header_timeout = a.client_header_timeout
    cfg.body_timeout = a.client_body_timeout
    cfg.connect_timeout = a.upstream_connect_timeout
    cfg.response_timeout = a.upstream_response_timeout
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((host, int(port)))
    lsock.listen(128)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    threads = []
    while not stop.is_set():
        r, _, _ = select.select([lsock], [], [], 0.1)
        if not r:
            continue
        s, addr = lsock.accept()
        t = threading.Thread(target=Client(s, addr, cfg).run, daemon=True)
        t.start()
        threads.append(t)
    lsock.close()
    STATE["draining"] = True
    end = time.monotonic() + a.drain_timeout
    for t in threads:
        t.join(max(0, end - time.monotonic()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
