"""`--max-connections`: the real binary (supervisor and proxy process) in front of the werkzeug upstream.

- At the limit, a new connection closes the longest-idle keep-alive connection and is served; the others stay
  open and usable.
- With every connection busy (request bodies still arriving), a new connection waits in the backlog, unanswered,
  until a busy one closes; then it is served.
- Both are counted in `formwall_connection_limit_total` and logged as `connection limit reached`.
- At start-up the proxy process raises its soft open-file limit to what the limit needs (2 x workers x
  max-connections + 256), up to the hard limit, and warns when the hard limit is lower.

Every wait polls a condition (a response, a closed socket, a metric, an event line) with a deadline.
"""

from __future__ import annotations

import resource
import socket

from e2e_helpers import HOST, IO_TIMEOUT, START_TIMEOUT, RawConn, events_with, free_port, wait_until
from test_admin import scrape, value, wait_ready

GET = b"GET /echo HTTP/1.1\r\nHost: app.test\r\n\r\n"


def start(formwall_factory, upstream, limit: int):
    admin = free_port()
    fw = formwall_factory(upstream.url, "--workers", "1", "--max-connections", str(limit),
                          "--admin", f"{HOST}:{admin}")
    wait_ready(admin)
    # The start-up probe's connection must be gone before the test counts connections.
    wait_until(lambda: value(scrape(admin), "formwall_active_connections") == 0, IO_TIMEOUT,
               what="no client connection open")
    return fw, admin


def limit_counts(admin: int) -> tuple[float, float]:
    metrics = scrape(admin)
    return (value(metrics, "formwall_connection_limit_total", action="closed_idle"),
            value(metrics, "formwall_connection_limit_total", action="paused"))


def served(conn: RawConn, request: bytes = GET) -> int:
    conn.send(request)
    return conn.read_response().status


def nothing_received(conn: RawConn) -> bool:
    """True when the connection has neither data nor an EOF to read now (it is not waited for)."""
    conn.sock.setblocking(False)
    try:
        conn.sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    finally:
        conn.sock.settimeout(conn.default_timeout)
    return False


def test_a_new_connection_closes_the_longest_idle_one(formwall_factory, upstream):
    fw, admin = start(formwall_factory, upstream, 3)
    conns = [RawConn(fw.port) for _ in range(3)]
    try:
        for conn in conns:
            assert served(conn) == 200   # each is now an idle keep-alive connection, the first the oldest
        assert limit_counts(admin) == (0, 0)
        assert value(scrape(admin), "formwall_max_connections") == 3   # one worker x 3
        newcomer = RawConn(fw.port)
        conns.append(newcomer)
        assert served(newcomer) == 200
        assert conns[0].wait_closed(IO_TIMEOUT), "the longest-idle connection was not closed"
        for conn in conns[1:3]:
            assert served(conn) == 200   # the other idle ones stay open and usable
        assert limit_counts(admin) == (1, 0)
        lines = events_with(fw.stderr_text(), "connection limit reached")
        assert [(e["action"], e["max_connections"]) for e in lines] == [("closed_idle", 3)]
        assert lines[0]["idle_s"] >= 0
    finally:
        for conn in conns:
            conn.close()


def test_busy_connections_make_new_ones_wait(formwall_factory, upstream):
    fw, admin = start(formwall_factory, upstream, 2)
    head = (b"POST /echo HTTP/1.1\r\nHost: app.test\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n"
            b"%s\r\n")
    closing = RawConn(fw.port)
    keeping = RawConn(fw.port)
    waiting = None
    try:
        closing.send(head % b"Connection: close\r\n" + b"abc")
        keeping.send(head % b"" + b"abc")
        wait_until(lambda: value(scrape(admin), "formwall_active_connections") == 2, IO_TIMEOUT,
                   what="both busy connections accepted")
        waiting = RawConn(fw.port)   # the kernel completes the handshake from the backlog
        waiting.send(GET)
        wait_until(lambda: limit_counts(admin)[1] >= 1, IO_TIMEOUT, what="accepting paused at the limit")
        assert nothing_received(waiting)
        assert value(scrape(admin), "formwall_active_connections") == 2
        # A busy request ends with Connection: close: its connection closes and the waiting one is served.
        closing.send(b"defghij")
        assert closing.read_response().status == 200
        assert waiting.read_response().status == 200
        keeping.send(b"defghij")
        assert keeping.read_response().status == 200
        assert limit_counts(admin)[0] == 0   # nothing was idle: no connection was closed to make room
        paused = [e for e in events_with(fw.stderr_text(), "connection limit reached") if e["action"] == "paused"]
        assert paused and paused[0]["max_connections"] == 2
    finally:
        for conn in (closing, keeping, waiting):
            if conn is not None:
                conn.close()


def _limits(pid: int) -> tuple[int, int]:
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no open-files line")


def _nofile(soft: int, hard: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _proxy_process(fw) -> int:
    started = wait_until(lambda: events_with(fw.stderr_text(), "proxy process started"), START_TIMEOUT,
                         what="the proxy process started")
    return started[-1]["child_pid"]


def test_descriptor_limit_is_raised_to_fit(formwall_factory, upstream):
    fw = formwall_factory(upstream.url, "--workers", "2", "--max-connections", "1000", preexec=_nofile(300, 8000))
    listening = wait_until(lambda: events_with(fw.stderr_text(), "listening"), START_TIMEOUT, what="listening")[-1]
    assert listening["max_connections"] == 1000
    assert listening["descriptor_limit"] == 2 * 2 * 1000 + 256
    assert _limits(_proxy_process(fw)) == (4256, 8000)
    assert not events_with(fw.stderr_text(), "descriptor limit below what max-connections needs")


def test_descriptor_limit_below_need_is_a_warning(formwall_factory, upstream):
    fw = formwall_factory(upstream.url, "--workers", "1", "--max-connections", "4096", preexec=_nofile(256, 1024))
    listening = wait_until(lambda: events_with(fw.stderr_text(), "listening"), START_TIMEOUT, what="listening")[-1]
    assert listening["descriptor_limit"] == 1024
    warning = events_with(fw.stderr_text(), "descriptor limit below what max-connections needs")
    assert [(w["level"], w["descriptor_limit"], w["hard_limit"], w["needed"]) for w in warning] == \
        [("warn", 1024, 1024, 2 * 4096 + 256)]
    assert _limits(_proxy_process(fw)) == (1024, 1024)
    with RawConn(fw.port) as conn:
        assert served(conn) == 200   # it still serves
