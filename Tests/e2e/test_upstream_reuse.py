"""A pooled upstream connection that the upstream closes just as Formwall reuses it.

The upstream answers the first request on a connection with keep-alive, then, on the next request that arrives
on the same connection, reads it and closes without answering: the race every keep-alive proxy meets when the
upstream's idle timeout fires as a request is sent. A request whose bytes Formwall still has (at most 64 KiB
written) is replayed once on a fresh connection; a bigger one is answered 502 at once, never after a timeout.
"""

from __future__ import annotations

import socket
import threading
import time

import requests

from test_faults import RawUpstream, raw_upstream  # noqa: F401  (fixture)


def read_request(conn: socket.socket, buf: bytearray) -> bytes | None:
    """One request with a Content-Length or chunked body (Formwall re-chunks forms); None at EOF."""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buf += chunk
    head_end = buf.index(b"\r\n\r\n") + 4
    head = bytes(buf[:head_end]).lower()
    del buf[:head_end]
    if b"transfer-encoding: chunked" in head:
        while b"\r\n0\r\n\r\n" not in buf and not buf.startswith(b"0\r\n\r\n"):
            chunk = conn.recv(65536)
            if not chunk:
                return None
            buf += chunk
        end = buf.index(b"0\r\n\r\n") + 5
        del buf[:end]
    else:
        length = 0
        for line in head.split(b"\r\n"):
            if line.startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(buf) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            buf += chunk
        del buf[:length]
    return head


def closes_second_request(conn: socket.socket, up: RawUpstream):
    """First request on each connection: 200 keep-alive. Second: read it whole, then close unanswered."""
    conn.settimeout(10)
    buf = bytearray()
    with up.lock:
        up.connections += 1
        number = up.connections
    served = 0
    while True:
        head = read_request(conn, buf)
        if head is None:
            return
        with up.lock:
            up.seen.append((number, head.split(b" ")[1].decode()))
        if served == 1:
            conn.close()
            return
        body = f"conn {number}".encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        served += 1


def start(raw_upstream):
    up = raw_upstream(closes_second_request)
    up.lock = threading.Lock()
    up.connections = 0
    up.seen = []
    return up


def test_small_request_is_replayed_on_a_fresh_connection(raw_upstream, formwall_factory):
    up = start(raw_upstream)
    fw = formwall_factory(up.url, "--workers", "1")
    with requests.Session() as s:
        first = s.post(fw.url + "/one", files={"f": ("a.txt", b"a" * 100)}, timeout=5)
        assert first.status_code == 200 and first.text == "conn 1"
        started = time.monotonic()
        second = s.post(fw.url + "/two", files={"f": ("b.txt", b"b" * 1000)}, timeout=5)
        elapsed = time.monotonic() - started
    assert second.status_code == 200, second.text
    assert second.text == "conn 2", "the retry must go to a fresh connection"
    assert elapsed < 1.0
    # The upstream saw /two twice: on the reused connection (closed unanswered) and on the fresh one.
    assert up.seen == [(1, "/one"), (1, "/two"), (2, "/two")]


def test_large_request_is_not_replayed_and_fails_fast(raw_upstream, formwall_factory):
    up = start(raw_upstream)
    fw = formwall_factory(up.url, "--workers", "1")
    with requests.Session() as s:
        assert s.post(fw.url + "/one", data=b"x" * 10, timeout=5).status_code == 200
        started = time.monotonic()
        second = s.post(fw.url + "/big", data=b"y" * (1 << 20), timeout=10)
        elapsed = time.monotonic() - started
    assert second.status_code == 502, second.text
    assert second.json()["error"] == "upstream_closed"
    assert elapsed < 1.0, f"502 after {elapsed:.2f} s: waited on a closed socket"
    assert up.seen == [(1, "/one"), (1, "/big")]
