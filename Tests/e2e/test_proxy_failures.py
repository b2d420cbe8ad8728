"""Failures on either side: client aborts, upstream dies or is absent or slow, slow clients."""

from __future__ import annotations

import json
import os
import select
import socket
import time
import uuid

import pytest
from upstream_app import deterministic_bytes

from e2e_helpers import (
    IO_TIMEOUT,
    FilePart,
    curl,
    events_with,
    json_lines,
    wait_until,
    sha256,
    PeerClosed,
    RawConn,
    tcp_sockets,
    assert_json_error,
    build_multipart,
    free_port,
    raw_request,
)

MiB = 1 << 20


def rid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# ---------------------------------------------------------------------------------------------
# Client aborts mid-upload: the upstream must see an incomplete body, never a shortened complete one


def multipart_abort_payload(boundary: str):
    fields = [("a", "1")]
    files = [FilePart("f", "big.bin", os.urandom(4 * MiB)), FilePart("g", "second.bin", os.urandom(1000))]
    return build_multipart(fields, files, boundary)


def chunk(body: bytes, step: int = 65536) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + step]), body[i:i + step]) for i in range(0, len(body), step))


ABORTS = {
    # id: (content-type, body builder, how much to send, framing)
    "multipart-cl-half": ("multipart", lambda b: len(b) // 2, "length"),
    "multipart-cl-all-but-close-delimiter": ("multipart", lambda b: len(b) - len(b"--B0undary--\r\n"), "length"),
    "multipart-chunked-half": ("multipart", lambda b: len(b) // 2, "chunked"),
    "multipart-chunked-no-last-chunk": ("multipart", lambda b: len(b), "chunked"),
    "octet-stream-cl-half": ("octet", lambda b: len(b) // 2, "length"),
}


@pytest.mark.parametrize("case", list(ABORTS), ids=list(ABORTS))
def test_client_abort_mid_upload(proxy, upstream, case):
    kind, how_much, framing = ABORTS[case]
    boundary = "B0undary"
    body = multipart_abort_payload(boundary) if kind == "multipart" else os.urandom(4 * MiB)
    ctype = f"multipart/form-data; boundary={boundary}" if kind == "multipart" else "application/octet-stream"
    request_id = rid("abort")
    framing_header = f"Content-Length: {len(body)}" if framing == "length" else "Transfer-Encoding: chunked"
    head = (f"POST /abort HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: {request_id}\r\n"
            f"Content-Type: {ctype}\r\n{framing_header}\r\n\r\n").encode()
    sent = body[:how_much(body)]
    wire = head + (sent if framing == "length" else chunk(sent))  # chunked: never the 0-size chunk
    conn = RawConn(proxy.port)
    try:
        conn.send(wire)
        # A streaming proxy has forwarded the request head by now: wait for it, then abort.
        upstream.wait_for_request_id(request_id, timeout=10, event="request_start")
    finally:
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        conn.close()  # abort (RST)
    rec = upstream.wait_for_request_id(request_id, timeout=15)
    assert rec["body_complete"] is False, (
        f"the upstream parsed a complete body from an aborted upload: {rec}")
    assert rec["body_error"].startswith("incomplete"), rec["body_error"]


def test_client_graceful_close_mid_upload(proxy, upstream):
    """Same, with a FIN (shutdown) instead of a reset."""
    boundary = "B0undary"
    body = multipart_abort_payload(boundary)
    request_id = rid("fin")
    head = (f"POST /abort HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: {request_id}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    with RawConn(proxy.port) as conn:
        conn.send(head + body[: len(body) // 3])
        upstream.wait_for_request_id(request_id, timeout=10, event="request_start")
        conn.sock.shutdown(socket.SHUT_WR)
        try:
            resp = conn.read_response(timeout=10)
            assert resp.status >= 400, "an incomplete upload must not be answered with success"
        except PeerClosed:
            pass
    rec = upstream.wait_for_request_id(request_id, timeout=15)
    assert rec["body_complete"] is False, rec


# ---------------------------------------------------------------------------------------------
# Upstream dies mid-response


@pytest.mark.parametrize("resp_framing", ["length", "chunked"])
def test_upstream_dies_mid_response(proxy, resp_framing):
    # die=1: the upstream declares Content-Length (size + 100000), sends half of the body, closes.
    with RawConn(proxy.port) as conn:
        conn.send(f"GET /die?die=1&size=1000000&resp={resp_framing} HTTP/1.1\r\nHost: app.test\r\n\r\n".encode())
        try:
            resp = conn.read_response(timeout=10)
        except PeerClosed:
            return  # closed before any response: acceptable, nothing looks complete
        if resp.status == 502:
            assert_json_error(resp, 502)
            return
        assert resp.status == 200
        assert resp.complete is False, (
            f"the client got a {resp.framing}-framed body that looks complete ({len(resp.body)} bytes) "
            "although the upstream died mid-response")
        assert conn.eof, "the client connection must be closed"


def test_upstream_die_mode_via_requests(upstream_factory, formwall_factory):
    import requests

    from e2e_helpers import new_session

    up = upstream_factory("die-mid-response")
    fw = formwall_factory(up.url)
    with new_session() as s:
        with pytest.raises((requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError)):
            r = s.get(f"{fw.url}/x?size=200000", timeout=10)
            # a 502 would also be acceptable, but then no exception: make that explicit
            if r.status_code == 502:
                raise requests.exceptions.ConnectionError("502 from Formwall (acceptable)")


# ---------------------------------------------------------------------------------------------
# Upstream unreachable, closes early, slow


def test_upstream_unreachable_is_502(formwall_factory):
    dead = free_port()  # nothing listens there
    fw = formwall_factory(f"http://127.0.0.1:{dead}", "--upstream-connect-timeout", "2")
    resp = raw_request(fw.port, b"GET /x HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: unreach-1\r\n\r\n")
    doc = assert_json_error(resp, 502)
    assert doc["request_id"] == "unreach-1"
    body = build_multipart([("a", "b")], [FilePart("f", "x.bin", os.urandom(1000))], "Bx")
    resp = raw_request(fw.port, (f"POST /up HTTP/1.1\r\nHost: app.test\r\nContent-Length: {len(body)}\r\n"
                                 "Content-Type: multipart/form-data; boundary=Bx\r\n\r\n").encode() + body)
    assert_json_error(resp, 502)


def test_upstream_closes_on_accept_is_502(upstream_factory, formwall_factory):
    up = upstream_factory("close-early")
    fw = formwall_factory(up.url)
    resp = raw_request(fw.port, b"GET /x HTTP/1.1\r\nHost: app.test\r\n\r\n")
    assert_json_error(resp, 502)


def test_upstream_slow_is_504(upstream_factory, formwall_factory):
    up = upstream_factory("slow", delay=8)
    fw = formwall_factory(up.url, "--upstream-response-timeout", "1")
    start = time.monotonic()
    resp = raw_request(fw.port, b"GET /slow HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: slow-1\r\n\r\n", timeout=10)
    elapsed = time.monotonic() - start
    doc = assert_json_error(resp, 504)
    assert doc["request_id"] == "slow-1"
    assert 0.8 <= elapsed < 5, f"504 after {elapsed:.2f}s with --upstream-response-timeout 1"


def test_upstream_slow_after_multipart_upload_is_504(upstream_factory, formwall_factory):
    up = upstream_factory("slow", delay=8)
    fw = formwall_factory(up.url, "--upstream-response-timeout", "1")
    body = build_multipart([("a", "b")], [FilePart("f", "x.bin", os.urandom(100_000))], "Bslow")
    start = time.monotonic()
    resp = raw_request(fw.port, (f"POST /up HTTP/1.1\r\nHost: app.test\r\nContent-Length: {len(body)}\r\n"
                                 "Content-Type: multipart/form-data; boundary=Bslow\r\n\r\n").encode() + body,
                       timeout=10)
    assert_json_error(resp, 504)
    assert time.monotonic() - start < 5


def test_upstream_within_response_timeout_is_fine(upstream_factory, formwall_factory):
    up = upstream_factory("echo")
    fw = formwall_factory(up.url, "--upstream-response-timeout", "3")
    resp = raw_request(fw.port, b"GET /ok?delay=0.3 HTTP/1.1\r\nHost: app.test\r\n\r\n", timeout=10)
    assert resp.status == 200 and resp.json()["path"] == "/ok?delay=0.3"


def _upload_held_up(fw, tmp_path, stall: float, *form: str) -> tuple[bytes, str, str]:
    """curl uploads 24 MiB of random bytes (file part `doc`, after the `form` fields) to `/upload?stall=S`: the
    upstream reads nothing for S s after the head. Returns (the file, the answer's body, its status)."""
    data = os.urandom(24 << 20)
    path = tmp_path / "held.bin"
    path.write_bytes(data)
    fields = [arg for field in form for arg in ("-F", field)]
    out = curl("-sS", "-o", "-", "-w", "\n%{http_code}", *fields, "-F", f"doc=@{path};filename=held.bin",
               f"{fw.url}/upload?stall={stall}")
    body, _, code = out.stdout.decode().rpartition("\n")
    return data, body, code


def test_upload_held_up_by_the_upstream_arrives_whole(upstream, formwall_factory, tmp_path):
    """The upstream reads nothing for 3 s after the head (`stall=3`) while curl pushes 24 MiB: Formwall stops
    reading the client, shrinks its buffers to what they hold after a second (ConnectionMachine.tick), then
    streams the rest once the upstream reads. werkzeug's parse of the file must match the file byte for byte.
    The client body timeout (1 s here) does not run while the upstream holds the body up: the client is not
    silent, Formwall is not reading it."""
    fw = formwall_factory(upstream.url, "--workers", "1", "--client-body-timeout", "1")
    data, body, code = _upload_held_up(fw, tmp_path, 3, "note=held up")
    assert code == "200", body[:300]
    answer = json.loads(body)
    assert answer["body_complete"] is True
    assert answer["fields"]["note"] == ["held up"]
    [doc] = answer["files"]["doc"]
    assert doc["size"] == len(data) and doc["sha256"] == sha256(data)


def test_upstream_that_stops_reading_the_body_is_504(upstream, formwall_factory, tmp_path):
    """The upstream takes no byte of a 24 MiB body for 6 s (`stall=6`) with --upstream-response-timeout 1:
    504 upstream_timeout (nginx: proxy_send_timeout), not a 408 that blames the client; logged on stderr."""
    fw = formwall_factory(upstream.url, "--workers", "1", "--upstream-response-timeout", "1")
    start = time.monotonic()
    _, body, code = _upload_held_up(fw, tmp_path, 6)
    assert code == "504", (code, body[:300])
    assert json.loads(body)["error"] == "upstream_timeout"
    assert time.monotonic() - start < 5
    [line] = wait_until(lambda: events_with(fw.stderr_text(), "upstream stopped reading the request"), IO_TIMEOUT,
                        what="the failure line")
    assert line["level"] == "error" and line["kind"] == "upstream" and line["upstream"] == upstream.url.split("//")[1]


def _download_paused(fw, pause: float, size: int) -> tuple[int, bool, float]:
    """GET `size` deterministic bytes through Formwall, reading nothing for `pause` seconds first (the kernel's
    buffers on both sides hold far less than `size`). Returns (body bytes that match, whether the body was
    complete, the monotonic time the connection ended: the bytes are compared after it)."""
    c = socket.create_connection(("127.0.0.1", fw.port))
    c.sendall(f"GET /big?size={size} HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n".encode())
    time.sleep(pause)   # the behaviour under test: a client that stops reading a download
    c.settimeout(IO_TIMEOUT)
    data = bytearray()
    try:
        while True:
            chunk = c.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    finally:
        ended = time.monotonic()
        c.close()
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    return (len(body) if body == deterministic_bytes(len(body)) else -1), len(body) == size, ended


def test_client_that_stops_reading_is_not_the_upstreams_timeout(upstream, formwall_factory, tmp_path):
    """A client reads nothing of a 30 MB download for 4 s, with --upstream-response-timeout 1: Formwall stops
    reading the upstream meanwhile, and that is the client's doing. The download completes, intact (before: cut
    after the upstream timeout, audited as upstream_timeout, and the server reported to passive health)."""
    audit = tmp_path / "audit.jsonl"
    fw = formwall_factory(upstream.url, "--workers", "1", "--upstream-response-timeout", "1",
                          "--audit-log", str(audit))
    matched, complete, _ = _download_paused(fw, 4, 30_000_000)
    assert complete and matched == 30_000_000
    rec = wait_until(lambda: json_lines(audit), IO_TIMEOUT, what="the audit record")[-1]
    assert (rec["decision"], rec["status"], rec["reason"]) == ("allow", 200, None)


def test_client_that_stops_reading_is_cut_after_the_send_timeout(upstream, formwall_factory, tmp_path):
    """The same client with --client-send-timeout 2: the response is cut and audited as client_send_timeout,
    not as the upstream's failure; what arrived before the cut is the response's start, byte for byte."""
    audit = tmp_path / "audit.jsonl"
    fw = formwall_factory(upstream.url, "--workers", "1", "--upstream-response-timeout", "1",
                          "--client-send-timeout", "2", "--audit-log", str(audit))
    start = time.monotonic()
    matched, complete, ended = _download_paused(fw, 5, 30_000_000)
    assert not complete and matched > 0
    rec = wait_until(lambda: json_lines(audit), IO_TIMEOUT, what="the audit record")[-1]
    assert (rec["decision"], rec["status"], rec["reason"]) == ("aborted", 200, "client_send_timeout")
    assert 2 <= rec["duration_ms"] / 1000 < 4.5
    assert ended - start < 10
    assert not events_with(fw.stderr_text(), "upstream marked down")


# ---------------------------------------------------------------------------------------------
# Slow clients


def assert_timeout_close(conn: RawConn, limit: float, start: float) -> None:
    closed = conn.wait_closed(timeout=limit - (time.monotonic() - start))
    assert closed, f"Formwall kept a slow connection open for more than {limit}s"
    if conn.buf:
        text = bytes(conn.buf)
        assert text.startswith(b"HTTP/1.1 408 "), f"unexpected answer to a slow client: {text[:200]!r}"
        assert b"application/json" in text.split(b"\r\n\r\n")[0].lower()


def test_slowloris_partial_head_is_closed(upstream, formwall_factory):
    fw = formwall_factory(upstream.url, "--client-header-timeout", "1")
    start = time.monotonic()
    with RawConn(fw.port) as conn:
        conn.send(b"GET /slow HTTP/1.1\r\nHost: app.test\r\nX-A: ")
        assert_timeout_close(conn, limit=4, start=start)
    assert time.monotonic() - start >= 0.8, "closed before the header timeout"
    assert upstream.records("request_start") == []


def test_slowloris_trickled_head_is_closed(upstream, formwall_factory):
    """One byte at a time: the header timeout bounds the whole head, not the gap between bytes."""
    fw = formwall_factory(upstream.url, "--client-header-timeout", "1")
    start = time.monotonic()
    head = b"GET /slow HTTP/1.1\r\nHost: app.test\r\n" + b"X-Pad: " + b"a" * 1000
    with RawConn(fw.port) as conn:
        closed = False
        for byte in head:
            # Wait up to 0.2s for Formwall to answer or close; if it has not, send one more byte.
            readable, _, _ = select.select([conn.sock], [], [], 0.2)
            if readable:
                closed = conn.wait_closed(timeout=2)
                break
            if time.monotonic() - start > 4:
                break
            try:
                conn.send(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
        assert closed, f"a trickled head kept the connection open for {time.monotonic() - start:.1f}s"
        assert time.monotonic() - start < 4
        if conn.buf:
            assert bytes(conn.buf).startswith(b"HTTP/1.1 408 "), bytes(conn.buf)[:200]


def test_slow_body_is_closed_and_upstream_sees_incomplete(upstream, formwall_factory):
    fw = formwall_factory(upstream.url, "--client-body-timeout", "1")
    request_id = rid("slowbody")
    body = build_multipart([("a", "b")], [FilePart("f", "x.bin", os.urandom(200_000))], "Bsb")
    head = (f"POST /slowbody HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: {request_id}\r\n"
            f"Content-Type: multipart/form-data; boundary=Bsb\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    start = time.monotonic()
    with RawConn(fw.port) as conn:
        conn.send(head + body[:1000])
        closed = conn.wait_closed(timeout=5)
        assert closed, "a stalled body kept the connection open"
        if conn.buf:
            status = int(bytes(conn.buf).split(b" ", 2)[1])
            assert status >= 400, bytes(conn.buf)[:200]
    assert time.monotonic() - start < 5
    if any(r.get("request_id") == request_id for r in upstream.records("request_start")):
        rec = upstream.wait_for_request_id(request_id, timeout=10)
        assert rec["body_complete"] is False





@pytest.mark.parametrize("close", [True, False], ids=["connection-close", "keep-alive"])
def test_download_tail_waits_for_a_pausing_client(upstream, formwall_factory, tmp_path, close):
    """Formwall has read a whole response from the upstream while its last bytes still wait in Formwall's own
    buffer (the kernel's send buffer being full), and the client takes nothing for 2.5 s: longer than the body and
    keep-alive timeouts (1 s), shorter than the send timeout (5 s). The response arrives whole. Before: cut at the
    next second's tick (those timeouts counted from the request), the audit record saying 200.

    How much the kernel holds is measured first on the same connection: a 24 MB download the client does not
    read until Formwall's send queue stops growing. The second download is that much plus 100 kB."""
    audit = tmp_path / "audit.jsonl"
    fw = formwall_factory(upstream.url, "--workers", "1", "--client-body-timeout", "1", "--keepalive-timeout", "1",
                          "--client-send-timeout", "5", "--audit-log", str(audit))
    with RawConn(fw.port) as conn:
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)   # fixed: no autotuning between downloads
        me = conn.sock.getsockname()[1]
        conn.send(b"GET /big?size=24000000 HTTP/1.1\r\nHost: app.test\r\n\r\n")
        seen = []

        def settled():
            # Formwall's send queue towards the client, plus what waits in the client's receive queue.
            seen.append(sum(s.send_queue if s.local_port == fw.port else s.receive_queue for s in tcp_sockets()
                            if {s.local_port, s.remote_port} == {fw.port, me}))
            return len(seen) >= 5 and seen[-1] > 0 and seen[-1] == seen[-5]
        wait_until(settled, IO_TIMEOUT, interval=0.1, what="Formwall's send queue to stop growing")
        kernel = seen[-1]
        assert conn.read_response().body == deterministic_bytes(24_000_000)
        wait_until(lambda: len(json_lines(audit)) == 1, IO_TIMEOUT, what="the first audit record")

        size = kernel + 100_000
        connection = "Connection: close\r\n" if close else ""
        conn.send(f"GET /big?size={size} HTTP/1.1\r\nHost: app.test\r\n{connection}\r\n".encode())
        # Formwall has read the whole response once its record is written; the client has read nothing.
        wait_until(lambda: len(json_lines(audit)) == 2, IO_TIMEOUT, what="the second audit record")
        time.sleep(2.5)   # the behaviour under test: a client that pauses on a download's tail
        resp = conn.read_response()
    body = resp.body
    assert resp.complete and len(body) == size and body == deterministic_bytes(size), (len(body), size)
    rec = json_lines(audit)[-1]
    assert (rec["decision"], rec["status"], rec["reason"]) == ("allow", 200, None)
