"""Formwall in front of real upstream servers, as they really behave.

The servers (Tests/e2e/upstreams/servers.py) are unmodified: werkzeug's development server and
php -S close the connection after every response, gunicorn's sync workers too; uvicorn and node
keep connections alive and close them after an idle timeout. Each app echoes what it parsed (field
values, per-file name/size/sha256) so every answer is checked for data integrity.

Waits are on conditions with deadlines; every request has a 5 s timeout so a hang fails fast
instead of eating the pytest-timeout.
"""

from __future__ import annotations

import hashlib
import json
import select
import socket
import threading
import time
from pathlib import Path

import pytest

from e2e_helpers import (FilePart, PeerClosed, RawConn, build_multipart, new_session, sha256,
                         tcp_sockets, wait_until)

HERE = Path(__file__).resolve().parent
RULES_MAX_2MIB = HERE / "rules" / "max2mib.rules"
REQUEST_TIMEOUT = 5.0
MAX_LATENCY = 1.0

# Upstreams a default Formwall (chunked upstream bodies) must work with: all of them parse a
# chunked multipart body (see test_framework_chunked_table.py). Django is in test_django.py.
# php -S answers close-delimited (no Content-Length); php-content-length is the same server with an
# app that sets Content-Length, as frameworks commonly do.
KINDS = ["werkzeug", "php", "php-content-length", "gunicorn", "uvicorn", "node"]


def _payload(i: int) -> bytes:
    return hashlib.sha256(str(i).encode()).digest() * (8 + i % 50)  # 256 B .. 1.8 KiB


def _post_form(session, url: str, i: int, tag: str):
    """One multipart POST (a field + a small file); returns (latency, problem or None)."""
    value = f"{tag}-{i} ✓ grüße"
    data = _payload(i)
    start = time.monotonic()
    try:
        resp = session.post(f"{url}/upload/{i}", data={"note": value},
                            files={"file": (f"f{i}.bin", data, "application/octet-stream")},
                            headers={"X-Request-Id": f"{tag}-{i}"}, timeout=REQUEST_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - any failure is reported with its request number
        return time.monotonic() - start, f"request {tag}-{i}: {type(exc).__name__}: {exc}"
    latency = time.monotonic() - start
    if resp.status_code != 200:
        return latency, f"request {tag}-{i}: status {resp.status_code}: {resp.text[:300]}"
    doc = resp.json()
    want_files = {"file": [{"filename": f"f{i}.bin", "size": len(data), "sha256": sha256(data)}]}
    if doc.get("fields") != {"note": [value]} or doc.get("files") != want_files:
        return latency, f"request {tag}-{i}: data not intact: {json.dumps(doc)[:400]}"
    return latency, None


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", KINDS)
def test_real_upstream_sequential_then_concurrent(kind, real_upstream_factory, formwall_factory):
    up = real_upstream_factory(kind)
    fw = formwall_factory(up.url)

    # 200 sequential requests on one client session; stop at the first failure (a hang costs 5 s).
    latencies = []
    session = new_session()
    for i in range(200):
        latency, problem = _post_form(session, fw.url, i, "seq")
        latencies.append(latency)
        assert problem is None, f"{kind}, sequential: {problem} (after {i} good requests)"
    session.close()
    seq_max = max(latencies)

    # 8 threads x 100 requests, a requests.Session each; each thread stops at its first failure.
    problems: list[str] = []
    conc_latencies: list[float] = []
    lock = threading.Lock()

    def client(t: int):
        s = new_session()
        try:
            for i in range(100):
                latency, problem = _post_form(s, fw.url, t * 1000 + i, f"t{t}")
                with lock:
                    conc_latencies.append(latency)
                    if problem:
                        problems.append(problem)
                        return
        finally:
            s.close()

    threads = [threading.Thread(target=client, args=(t,), daemon=True) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=100)
    assert not any(th.is_alive() for th in threads), "client threads still running"
    assert not problems, f"{kind}, concurrent: {len(problems)} threads failed: {problems[:4]}"
    assert len(conc_latencies) == 800
    conc_max = max(conc_latencies)
    print(f"{kind}: max latency sequential {seq_max:.3f} s, concurrent {conc_max:.3f} s")
    assert seq_max < MAX_LATENCY, f"{kind}: slowest sequential request took {seq_max:.2f} s"
    assert conc_max < MAX_LATENCY, f"{kind}: slowest concurrent request took {conc_max:.2f} s"


# ---------------------------------------------------------------------------------------------
# Clients that read while they upload: a server may answer (and close) before the body is sent.


def upload_reading_early(port: int, head: bytes, body: bytes, timeout: float = REQUEST_TIMEOUT):
    """Sends head + body, but stops sending as soon as the socket is readable (an early answer)
    or sending fails; then reads one response. Returns the RawResponse, or a string saying how the
    connection ended without one ("closed", "reset", "timeout")."""
    deadline = time.monotonic() + timeout
    with RawConn(port, timeout) as conn:
        conn.send(head)
        view = memoryview(body)
        sent = 0
        while sent < len(body):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            readable, writable, _ = select.select([conn.sock], [conn.sock], [], remaining)
            if readable:
                break
            if writable:
                try:
                    sent += conn.sock.send(view[sent:sent + 65536])
                except (BrokenPipeError, ConnectionResetError):
                    break
        try:
            return conn.read_response("POST", timeout=max(0.1, deadline - time.monotonic()))
        except PeerClosed as exc:
            return "reset" if "reset" in str(exc) else "closed"
        except (socket.timeout, TimeoutError):
            return "timeout"


def _form_request(port: int, file_size: int, request_id: str, boundary: str = "early-answer-b0undary"):
    body = build_multipart([("note", "hello")], [FilePart("upload", "big.bin", b"\xa5" * file_size)], boundary)
    head = (f"POST /upload HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Request-Id: {request_id}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return head, body


class EarlyAnswerUpstream:
    """A raw-socket upstream: reads a request head, answers 403 with a short body and
    `Connection: close`, and closes without reading the body (which makes the kernel send a RST
    when body bytes are still unread)."""

    BODY = b'{"error":"denied early"}'

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.heads = 0
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket):
        conn.settimeout(REQUEST_TIMEOUT)
        buf = b""
        try:
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            self.heads += 1
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(self.BODY) + self.BODY)
        except OSError:
            pass
        finally:
            conn.close()

    def stop(self):
        self._stop = True
        self.sock.close()


@pytest.fixture
def early_answer_upstream():
    up = EarlyAnswerUpstream()
    yield up
    up.stop()


def test_upstream_early_403_reaches_every_client(early_answer_upstream, formwall_factory):
    """The upstream refuses after the head, before the 1 MiB body: each client must get its 403.
    20 clients one after another, then 20 at once."""
    fw = formwall_factory(early_answer_upstream.url)

    def one(i: int) -> str:
        head, body = _form_request(fw.port, 1 << 20, f"early-{i}")
        resp = upload_reading_early(fw.port, head, body)
        if isinstance(resp, str):
            return resp
        return f"{resp.status} {resp.body[:60].decode(errors='replace')}"

    sequential = [one(i) for i in range(20)]
    concurrent: list[str] = []
    threads = [threading.Thread(target=lambda i=i: concurrent.append(one(100 + i)), daemon=True)
               for i in range(20)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=REQUEST_TIMEOUT + 5)
    assert len(concurrent) == 20, "concurrent clients did not finish"
    expected = f"403 {early_answer_upstream.BODY.decode()}"
    summary = {name: {o: outcomes.count(o) for o in set(outcomes)}
               for name, outcomes in (("sequential", sequential), ("concurrent", concurrent))}
    assert all(o == expected for o in sequential + concurrent), \
        f"not every client got the upstream's 403: {summary}"


# ---------------------------------------------------------------------------------------------
# A pooled upstream connection that the upstream closed while it was idle


def _established_server_sockets(port: int) -> int:
    """Sockets in ESTABLISHED state whose local port is `port` (the server side of connections)."""
    return sum(s.local_port == port and s.state == "01" for s in tcp_sockets())


@pytest.mark.parametrize("kind", ["uvicorn", "gunicorn-gthread"])
def test_idle_pooled_connection_closed_by_upstream(kind, real_upstream_factory, formwall_factory):
    up = real_upstream_factory(kind, keep_alive=1)  # the upstream closes connections idle for 1 s
    fw = formwall_factory(up.url, "--workers", "1")
    session = new_session()
    for round_ in range(2):
        latency, problem = _post_form(session, fw.url, round_, f"idle-a{round_}")
        assert problem is None, problem
        # Premise: Formwall keeps the upstream connection for reuse (else there is nothing to test).
        assert _established_server_sockets(up.port) >= 1, "no pooled upstream connection after a request"
        # The scenario itself: let the upstream's 1 s keep-alive timer close the idle connection.
        # This is a condition wait (no server-side ESTABLISHED socket left), bounded at 5 s.
        wait_until(lambda: _established_server_sockets(up.port) == 0, timeout=5.0,
                   what=f"{kind} closing its idle connections")
        get_start = time.monotonic()
        resp = session.get(f"{fw.url}/after-idle", headers={"X-Request-Id": f"idle-get{round_}"},
                           timeout=REQUEST_TIMEOUT)
        get_latency = time.monotonic() - get_start
        assert resp.status_code == 200, f"round {round_}: {resp.status_code} {resp.text[:300]}"
        assert get_latency < MAX_LATENCY, f"round {round_}: GET after idle close took {get_latency:.2f} s"
        wait_until(lambda: _established_server_sockets(up.port) == 0, timeout=5.0,
                   what=f"{kind} closing its idle connections")
        latency, problem = _post_form(session, fw.url, 100 + round_, f"idle-b{round_}")
        assert problem is None, f"round {round_}: POST after idle close: {problem}"
        assert latency < MAX_LATENCY, f"round {round_}: POST after idle close took {latency:.2f} s"
    session.close()


# ---------------------------------------------------------------------------------------------
# Rejected requests never become complete requests at the upstream (chunked upstream bodies)


@pytest.mark.parametrize("kind", KINDS)
def test_rejected_upload_never_completes_at_upstream(kind, real_upstream_factory, formwall_factory):
    up = real_upstream_factory(kind)
    fw = formwall_factory(up.url, "--rules", str(RULES_MAX_2MIB), "--upstream-body", "chunked")
    rejected_id = f"rejected-{kind}"
    head, body = _form_request(fw.port, 5 << 19, rejected_id)  # 2.5 MiB file, the rule says 2 MiB
    resp = upload_reading_early(fw.port, head, body, timeout=10)
    assert not isinstance(resp, str), f"no response to the 2.5 MiB upload: {resp}"
    assert resp.status == 413, f"{resp.status} {resp.body[:300]!r}"
    assert json.loads(resp.body).get("error") == "file_too_large", resp.body[:300]

    # Barrier: a valid upload through the same Formwall, answered only after the app logged it.
    session = new_session()
    latency, problem = _post_form(session, fw.url, 7, f"barrier-{kind}")
    session.close()
    assert problem is None, problem
    assert up.records_for(f"barrier-{kind}-7"), "the barrier request was not logged"
    handled = up.records_for(rejected_id)
    assert handled == [], f"{kind} handled the rejected request: {json.dumps(handled)[:600]}"
