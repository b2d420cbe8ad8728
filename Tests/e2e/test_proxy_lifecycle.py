"""Process lifecycle: SIGTERM/SIGINT drain, drain timeout, workers under concurrent load."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest

from e2e_helpers import HOST, FilePart, RawConn, build_multipart, new_session, wait_until


def connect_refused(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return False
    except ConnectionRefusedError:
        return True
    except OSError as exc:
        return exc.errno == errno.ECONNREFUSED


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_when_idle_exits_zero(proxy, sig):
    resp_ok = RawConn(proxy.port)
    resp_ok.send(b"GET /warm HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n")
    assert resp_ok.read_response().status == 200
    resp_ok.close()
    proxy.signal(sig)
    assert proxy.wait(timeout=10) == 0, proxy.stderr_text()[-2000:]
    assert connect_refused(proxy.port)


def test_sigterm_drains_in_flight_upload(upstream, formwall_factory):
    fw = formwall_factory(upstream.url, "--drain-timeout", "20")
    boundary = "drain-boundary"
    data = os.urandom(3 * (1 << 20))
    body = build_multipart([("stage", "drain")], [FilePart("f", "inflight.bin", data)], boundary)
    request_id = "drain-" + uuid.uuid4().hex[:8]
    head = (f"POST /drain HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: {request_id}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    with RawConn(fw.port, timeout=30) as conn:
        # 1. The upload is in flight: the upstream has its head and part of the body.
        conn.send(head + body[: len(body) // 3])
        upstream.wait_for_request_id(request_id, timeout=10, event="request_start")
        # 2. SIGTERM: Formwall stops accepting.
        fw.signal(signal.SIGTERM)
        wait_until(lambda: connect_refused(fw.port), timeout=5, what="new connections to be refused")
        assert fw.proc.poll() is None, "Formwall exited with a request in flight"
        # 3. The in-flight upload still completes, and is answered.
        conn.send(body[len(body) // 3:])
        resp = conn.read_response(timeout=20)
    assert resp.status == 200, resp.body[:300]
    doc = resp.json()
    assert doc["body_complete"] is True
    assert doc["files"]["f"][0]["size"] == len(data)
    # 4. Then it exits 0.
    assert fw.wait(timeout=10) == 0, fw.stderr_text()[-2000:]


def test_sigterm_waits_for_slow_upstream_response(upstream_factory, formwall_factory):
    up = upstream_factory("slow", delay=1.5)
    fw = formwall_factory(up.url, "--upstream-response-timeout", "10", "--drain-timeout", "10")
    with RawConn(fw.port) as conn:
        conn.send(b"GET /slow-drain HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: slow-drain\r\n\r\n")
        up.wait_for_request_id("slow-drain", timeout=10)  # the upstream is now "thinking"
        fw.signal(signal.SIGTERM)
        resp = conn.read_response(timeout=10)
    assert resp.status == 200
    assert fw.wait(timeout=10) == 0


def test_drain_timeout_bounds_shutdown(upstream, formwall_factory):
    fw = formwall_factory(upstream.url, "--drain-timeout", "1")
    request_id = "stuck-" + uuid.uuid4().hex[:8]
    with RawConn(fw.port) as conn:
        conn.send((f"POST /stuck HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: {request_id}\r\n"
                   "Content-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n").encode() + b"x" * 1000)
        upstream.wait_for_request_id(request_id, timeout=10, event="request_start")
        start = time.monotonic()
        fw.signal(signal.SIGTERM)
        try:
            fw.wait(timeout=6)
        except subprocess.TimeoutExpired:
            pytest.fail("Formwall did not exit within --drain-timeout 1 (+ margin) with a stuck upload")
        assert time.monotonic() - start < 6
    rec = upstream.wait_for_request_id(request_id, timeout=10)
    assert rec["body_complete"] is False


def test_concurrent_uploads_with_workers(upstream, formwall_factory):
    fw = formwall_factory(upstream.url, "--workers", "2")
    errors: list[str] = []
    results: dict[int, dict] = {}

    def client(i: int) -> None:
        data = os.urandom(200_000 + i)
        try:
            with new_session() as s:
                for j in range(3):
                    r = s.post(f"{fw.url}/c/{i}/{j}", files={"f": (f"f{i}.bin", data, "application/octet-stream")},
                               data={"i": str(i)}, timeout=30)
                    if r.status_code != 200:
                        errors.append(f"{i}/{j}: {r.status_code}")
                        return
                    doc = r.json()
                    if doc["files"]["f"][0]["size"] != len(data) or doc["fields"]["i"] != [str(i)]:
                        errors.append(f"{i}/{j}: wrong content {doc['files']}")
                    results[(i, j)] = doc
        except Exception as exc:  # reported below
            errors.append(f"{i}: {exc!r}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "clients still running after 60s"
    assert errors == []
    assert len(results) == 24
