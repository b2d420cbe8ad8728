"""Where a request's time went, and event lines that a flood of requests can cause.

* The audit record splits the time as nginx does (`upstream_connect_ms`, `upstream_header_ms`,
  `upstream_response_ms` of the attempt that answered) and adds the client's body time (`client_body_ms`):
  an application that sleeps before answering, a response whose body comes late and a client that uploads slowly
  each show in their own field. Every bound below follows from the order of events (the upstream cannot answer
  before it was asked; a body sent after a pause arrives after it), not from the machine's speed.
* /metrics has the same split as histograms, counted like the audit log.
* With every server of a group down, each request marks the servers down again: `upstream marked down` is
  rate-limited like `upstream unreachable` (one line per server per second per worker), the next line says how
  many were left out, and /metrics counts every line left out. So is `accept paused` (out of descriptors), which
  had a rule of its own (the 1st pause and every 100th).
"""

from __future__ import annotations

import resource
import socket
import time

import requests

from e2e_helpers import HOST, IO_TIMEOUT, RawConn, free_port, json_lines, new_request_id, wait_audit_record, wait_until
from test_admin import admin_get, scrape, value, wait_ready

SPLIT = ["duration_ms", "client_body_ms", "upstream_ms", "upstream_connect_ms", "upstream_header_ms",
         "upstream_response_ms", "upstream"]


def get(fw, path: str) -> str:
    rid = new_request_id()
    r = requests.get(fw.url + path, headers={"X-Request-Id": rid}, timeout=IO_TIMEOUT)
    assert r.status_code == 200, r.text
    return rid


def ordered(record: dict) -> None:
    """The times of one exchange nest: connect ≤ header ≤ response ≤ upstream ≤ duration."""
    keys = list(record)
    assert keys[keys.index("duration_ms"):keys.index("upstream") + 1] == SPLIT, keys
    c, h, r = record["upstream_connect_ms"], record["upstream_header_ms"], record["upstream_response_ms"]
    assert 0 <= c <= h <= r <= record["upstream_ms"] <= record["duration_ms"], record


def test_a_slow_application_shows_in_the_header_time(tmp_path, upstream, formwall_factory):
    audit = tmp_path / "audit.log"
    fw = formwall_factory(upstream.url, "--audit-log", str(audit))
    rid = get(fw, "/slow?delay=0.6")
    record = wait_audit_record(audit, rid)
    ordered(record)
    # The upstream got the request after the dial and slept 0.6 s before its head.
    assert record["upstream_header_ms"] >= 600, record
    # A GET has no body: the client took no time.
    assert record["client_body_ms"] == 0, record


def test_a_late_response_body_shows_in_the_response_time(tmp_path, upstream, formwall_factory):
    audit = tmp_path / "audit.log"
    fw = formwall_factory(upstream.url, "--audit-log", str(audit))
    rid = get(fw, "/late?pause=0.6&size=5000")
    record = wait_audit_record(audit, rid)
    ordered(record)
    # The body left the upstream 0.6 s after the head; the head's own way to Formwall is far below 0.3 s.
    assert record["upstream_response_ms"] - record["upstream_header_ms"] >= 300, record
    assert record["client_body_ms"] == 0, record


def test_a_slow_client_upload_shows_in_the_client_body_time(tmp_path, upstream, formwall_factory):
    audit = tmp_path / "audit.log"
    fw = formwall_factory(upstream.url, "--audit-log", str(audit))
    rid = new_request_id()
    pieces = [bytes([0x61 + i]) * 2000 for i in range(5)]
    head = (f"POST /upload HTTP/1.1\r\nHost: x\r\nX-Request-Id: {rid}\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Length: {sum(map(len, pieces))}\r\nConnection: close\r\n\r\n").encode()
    with RawConn(fw.port) as conn:
        conn.send(head + pieces[0])
        for piece in pieces[1:]:
            time.sleep(0.2)  # the behaviour under test (a client uploading slowly), not a test wait
            conn.send(piece)
        assert conn.read_response("POST").status == 200
    record = wait_audit_record(audit, rid)
    ordered(record)
    # 0.8 s of pauses after the head; the head's own way to Formwall is far below 0.4 s.
    assert record["client_body_ms"] >= 400, record
    # The upstream answers after the body's last byte, which it can only have after Formwall did; it was dialled
    # as the head arrived, so its header time spans the upload.
    assert record["upstream_header_ms"] >= record["client_body_ms"], record
    assert record["bytes_in"] == 10000 and record["status"] == 200, record


def test_metrics_split_the_upstream_time(tmp_path, upstream, formwall_factory):
    audit = tmp_path / "audit.log"
    admin = free_port()
    fw = formwall_factory(upstream.url, "--audit-log", str(audit), "--admin", f"{HOST}:{admin}", "--workers", "2")
    wait_ready(admin)
    rids = [get(fw, "/slow?delay=0.3"), get(fw, "/a"), get(fw, "/b")]
    for rid in rids:
        wait_audit_record(audit, rid)
    m = scrape(admin)
    records = [r for r in json_lines(audit) if "request_id" in r]
    assert len(records) == 3
    for name, field in [("formwall_upstream_connect_seconds", "upstream_connect_ms"),
                        ("formwall_upstream_header_seconds", "upstream_header_ms"),
                        ("formwall_upstream_response_seconds", "upstream_response_ms"),
                        ("formwall_client_body_seconds", "client_body_ms")]:
        assert value(m, name + "_count") == 3, name
        assert abs(value(m, name + "_sum") - sum(r[field] for r in records) / 1000) < 0.01, name
    # The slow answer (0.3 s) is past the 0.25 s bucket.
    assert value(m, "formwall_upstream_header_seconds_bucket", le="0.25") <= 2


def test_marked_down_is_rate_limited_and_counted(tmp_path, formwall_factory):
    closed = [free_port(), free_port()]   # nothing listens there
    conf = tmp_path / "formwall.conf"
    conf.write_text(f"upstream app;\nupstream app {{ server {HOST}:{closed[0]}; server {HOST}:{closed[1]}; }}\n")
    admin = free_port()
    fw = formwall_factory(None, "--config", str(conf), "--workers", "1", "--admin", f"{HOST}:{admin}")

    def alive():
        try:
            return admin_get(admin, "/healthz").status_code == 200
        except requests.ConnectionError:
            return False
    wait_until(alive, IO_TIMEOUT, what="/healthz")   # not /readyz: no server of the group is up
    session = requests.Session()
    sent = 0

    def burst(n: int) -> None:
        nonlocal sent
        for _ in range(n):
            assert session.get(fw.url + "/x", timeout=IO_TIMEOUT).status_code == 502
            sent += 1

    started = time.monotonic()
    burst(200)
    elapsed = time.monotonic() - started
    # Each request tries both servers (both down, so tried anyway) and marks each down again: 400 mark-downs, at
    # most one line per server per second.
    down = fw.events("upstream marked down")
    assert 2 <= len(down) <= 2 * (int(elapsed) + 2), (len(down), elapsed)
    # Once a second has passed, the next line of a server says how many of its lines were left out.
    wait_until(lambda: burst(5) or [e for e in fw.events("upstream marked down") if "suppressed" in e] or None,
               IO_TIMEOUT, what="a marked-down line counting the suppressed ones")
    down = fw.events("upstream marked down")
    assert all(e["group"] == "app" and e["upstream"] in {f"{HOST}:{p}" for p in closed} for e in down), down

    def counted():
        m = scrape(admin)
        left_out = value(m, "formwall_log_suppressed_total", message="upstream marked down")
        return m if len(fw.events("upstream marked down")) + left_out == 2 * sent else None
    # Every mark-down is a line or counted as left out; the lines' `suppressed` fields add up to no more.
    m = wait_until(counted, IO_TIMEOUT, what="every mark-down written or counted")
    left_out = value(m, "formwall_log_suppressed_total", message="upstream marked down")
    assert sum(e.get("suppressed", 0) for e in fw.events("upstream marked down")) <= left_out
    unreachable = fw.events("upstream unreachable")
    assert len(unreachable) + value(m, "formwall_log_suppressed_total", message="upstream unreachable") == 2 * sent


def test_accept_paused_is_rate_limited_and_counted(formwall_factory, upstream):
    """Out of descriptors (open files limited to 64), the worker pauses accepting and retries every 50 ms to 1 s
    while the connections that do not fit wait in the backlog: one `accept paused` line a second at most, the next
    one with `suppressed`, every one left out counted in /metrics."""
    admin = free_port()
    fw = formwall_factory(upstream.url, "--workers", "1", "--admin", f"{HOST}:{admin}",
                          preexec=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)))
    wait_ready(admin)
    conns = []
    try:
        for _ in range(80):
            conns.append(socket.create_connection((HOST, fw.port), timeout=IO_TIMEOUT))
        paused = wait_until(lambda: [e for e in fw.events("accept paused") if "suppressed" in e] or None,
                            IO_TIMEOUT, what="an accept-paused line counting the suppressed ones")
    finally:
        for c in conns:
            c.close()
    lines = fw.events("accept paused")
    assert paused[0]["pauses"] == paused[0]["suppressed"] + len(lines[:lines.index(paused[0]) + 1]), lines
    left_out = value(scrape(admin), "formwall_log_suppressed_total", message="accept paused")
    assert left_out >= sum(e.get("suppressed", 0) for e in lines)
