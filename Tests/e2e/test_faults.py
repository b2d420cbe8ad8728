"""Faults that must not burn a core or hold resources: out of descriptors, peers that reset while the
other side is paused, trickling bodies, and the lingering close that lets a rejected client read its
answer.

Each test samples the Formwall process tree's CPU time, descriptors and RSS before, during and after the
fault (`ProcessSampler`) and fails on a spin (CPU time growing while nothing happens) or a leak. The CPU
window is a measured interval, the scenario itself, not a wait for readiness.
"""

from __future__ import annotations

import os
import resource
import socket
import struct
import subprocess
import threading
import time

import pytest

from e2e_helpers import HOST, IO_TIMEOUT, json_lines, wait_audit_record, wait_until

CLK_TCK = os.sysconf("SC_CLK_TCK")
# A busy loop burns ~1 s of CPU per second; an idle Formwall a few milliseconds.
SPIN_WINDOW = 1.5
SPIN_LIMIT = 0.3


def tree(pid: int) -> list[int]:
    """The process and its descendants (a supervisor's child included)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


class ProcessSampler:
    def __init__(self, pid: int):
        self.pid = pid

    def cpu(self) -> float:
        total = 0
        for p in tree(self.pid):
            try:
                with open(f"/proc/{p}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime
            except OSError:
                pass
        return total / CLK_TCK

    def fds(self) -> int:
        n = 0
        for p in tree(self.pid):
            try:
                n += len(os.listdir(f"/proc/{p}/fd"))
            except OSError:
                pass
        return n

    def rss_kib(self) -> int:
        n = 0
        for p in tree(self.pid):
            try:
                with open(f"/proc/{p}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            n += int(line.split()[1])
            except OSError:
                pass
        return n

    def fd_targets(self) -> list[str]:
        out = []
        for p in tree(self.pid):
            try:
                for fd in os.listdir(f"/proc/{p}/fd"):
                    try:
                        out.append(f"{p}:{fd}->{os.readlink(f'/proc/{p}/fd/{fd}')}")
                    except OSError:
                        pass
            except OSError:
                pass
        return out

    def baseline(self, port: int) -> tuple[int, int]:
        """Descriptors and RSS once a first connection has come and gone (a 400 for a bad head, which never
        touches the upstream), so that nothing opened lazily at the first request counts as a leak."""
        s = connect(port)
        s.sendall(b"NOT HTTP\r\n\r\n")
        read_response(s)
        s.close()
        time.sleep(0.05)  # let the worker see the close; the check below waits with a deadline anyway
        self.before_targets = self.fd_targets()
        return self.fds(), self.rss_kib()

    def assert_released(self, before: tuple[int, int], what: str, rss_slack_kib: int = 16 * 1024) -> None:
        """After the fault: every descriptor it took is closed again (waited on with a deadline) and RSS did not
        grow by more than the slack (buffers are per connection and freed with it)."""
        fds_before, rss_before = before
        try:
            wait_until(lambda: self.fds() <= fds_before, IO_TIMEOUT, what=f"{what}: descriptors released")
        except TimeoutError:
            extra = sorted(set(self.fd_targets()) - set(getattr(self, "before_targets", [])))
            raise AssertionError(f"{what}: descriptors not released: {extra}")
        grown = self.rss_kib() - rss_before
        assert grown < rss_slack_kib, f"{what}: RSS grew by {grown} KiB"

    def assert_no_spin(self, what: str) -> float:
        start = self.cpu()
        end_at = time.monotonic() + SPIN_WINDOW
        while time.monotonic() < end_at:
            time.sleep(0.1)  # the measured window itself
        used = self.cpu() - start
        assert used < SPIN_LIMIT, f"{what}: Formwall used {used:.2f} s of CPU in {SPIN_WINDOW} s (a spin)"
        return used


def rst_close(sock: socket.socket) -> None:
    """Close with SO_LINGER 0: the peer gets a reset, not a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def connect(port: int) -> socket.socket:
    s = socket.create_connection((HOST, port), timeout=IO_TIMEOUT)
    return s


def read_response(sock: socket.socket, timeout: float = IO_TIMEOUT) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


class RawUpstream:
    """A hand-scripted upstream on a thread: `behave(conn)` runs for each accepted connection."""

    def __init__(self, behave):
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind((HOST, 0))
        self.srv.listen(16)
        self.port = self.srv.getsockname()[1]
        self.url = f"http://{HOST}:{self.port}"
        self.behave = behave
        self.conns: list[socket.socket] = []
        self.accepted = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        self.srv.settimeout(0.2)
        while not self.done.is_set():
            try:
                conn, _ = self.srv.accept()
            except OSError:
                continue
            self.conns.append(conn)
            self.accepted.set()
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        try:
            self.behave(conn, self)
        except OSError:
            pass

    def stop(self):
        self.done.set()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass
        self.srv.close()


def read_head(conn: socket.socket) -> bytes:
    conn.settimeout(IO_TIMEOUT)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


@pytest.fixture
def raw_upstream():
    started = []

    def start(behave):
        up = RawUpstream(behave)
        started.append(up)
        return up

    yield start
    for up in started:
        up.stop()


def test_out_of_descriptors_pauses_accepting_without_spinning(upstream, formwall_factory):
    fw = formwall_factory(upstream.url, "--workers", "1")
    sampler = ProcessSampler(fw.proc.pid)
    for p in tree(fw.proc.pid):
        resource.prlimit(p, resource.RLIMIT_NOFILE, (32, 32))
    idle = []
    try:
        for _ in range(40):
            idle.append(connect(fw.port))  # the kernel completes them; Formwall runs out of fds accepting
        wait_until(lambda: sampler.fds() >= 28, IO_TIMEOUT, what="Formwall to fill its descriptor table")
        sampler.assert_no_spin("40 idle connections under ulimit -n 32")
    finally:
        for s in idle:
            s.close()
    # The backlog is served once descriptors are free again.
    def served():
        try:
            s = connect(fw.port)
            s.sendall(b"GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return read_response(s, timeout=2).startswith(b"HTTP/1.1 200")
        except OSError:
            return False
    wait_until(served, 10, what="a request to succeed after the idle connections closed")


def test_client_reset_while_upstream_stalls_costs_no_cpu(upstream_factory, formwall_factory):
    up = upstream_factory("slow", delay=20)
    fw = formwall_factory(up.url, "--workers", "1")
    sampler = ProcessSampler(fw.proc.pid)
    before = sampler.baseline(fw.port)
    s = connect(fw.port)
    s.sendall(b"GET /stall?x=1 HTTP/1.1\r\nHost: x\r\nX-Request-Id: stall-reset-1\r\n\r\n")
    up.wait_for_request_id("stall-reset-1", event="request_start")
    rst_close(s)
    sampler.assert_no_spin("client reset while the upstream stalls")
    sampler.assert_released(before, "client reset while the upstream stalls")


def test_client_reset_while_upload_is_held_back_costs_no_cpu(raw_upstream, formwall_factory):
    def never_read(conn, up):
        up.done.wait(30)  # accept, read nothing: the upload backs up into Formwall and then the client

    up = raw_upstream(never_read)
    fw = formwall_factory(up.url, "--workers", "1")
    sampler = ProcessSampler(fw.proc.pid)
    before = sampler.baseline(fw.port)
    s = connect(fw.port)
    s.sendall(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
              b"Content-Length: 268435456\r\n\r\n")
    s.setblocking(False)
    block = b"x" * 65536
    sent, deadline = 0, time.monotonic() + IO_TIMEOUT
    while time.monotonic() < deadline:
        try:
            sent += s.send(block)
        except BlockingIOError:
            # Blocked: wait for the kernel buffers to stay full (no progress within 0.5 s).
            import select
            _, w, _ = select.select([], [s], [], 0.5)
            if not w:
                break
    assert sent > 0
    rst_close(s)
    sampler.assert_no_spin("client reset while its upload is held back")
    up.stop()  # the upstream side closes too: nothing of the exchange may stay open
    sampler.assert_released(before, "client reset while its upload is held back")


def test_upstream_reset_while_client_not_reading_costs_no_cpu(raw_upstream, formwall_factory):
    def flood_then_reset(conn, up):
        read_head(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n")
        conn.setblocking(False)
        block = b"y" * 65536
        import select
        while True:
            try:
                conn.send(block)
            except BlockingIOError:
                _, w, _ = select.select([], [conn], [], 0.5)
                if not w:
                    break
        rst_close(conn)

    up = raw_upstream(flood_then_reset)
    fw = formwall_factory(up.url, "--workers", "1")
    sampler = ProcessSampler(fw.proc.pid)
    before = sampler.baseline(fw.port)
    s = connect(fw.port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    wait_until(lambda: up.accepted.is_set() and any(c.fileno() == -1 for c in up.conns), IO_TIMEOUT,
               what="the upstream to flood and reset")
    sampler.assert_no_spin("upstream reset while the client is not reading")
    s.close()
    sampler.assert_released(before, "upstream reset while the client is not reading")


def test_trickling_body_is_cut_at_the_minimum_rate(upstream, formwall_factory):
    fw = formwall_factory(upstream.url, "--client-body-min-rate", "100", "--client-body-rate-grace", "2")
    s = connect(fw.port)
    s.sendall(b"POST /trickle HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
              b"Content-Length: 100000\r\n\r\n")
    s.setblocking(False)
    started = time.monotonic()
    got = b""
    import select
    while time.monotonic() - started < 15:
        try:
            s.send(b"12345")  # 10 bytes per second: the trickle under test
        except OSError:
            break
        r, _, _ = select.select([s], [], [], 0.5)
        if r:
            try:
                chunk = s.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
            if b"\r\n\r\n" in got:
                break
    elapsed = time.monotonic() - started
    assert got.startswith(b"HTTP/1.1 408"), got[:200]
    assert b"client_body_too_slow" in got
    assert elapsed < 10, f"cut after {elapsed:.1f} s"


def test_rejected_upload_reads_answer_then_fin_not_reset(upstream, formwall_factory):
    """A body rejected mid-way (malformed multipart) while the client is still sending: the client, which
    reads only after sending everything, still gets the whole 400 and then a FIN (lingering close)."""
    fw = formwall_factory(upstream.url)
    body = b"--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n--b\r\nBROKEN" + b"z" * (8 << 20)
    s = connect(fw.port)
    s.sendall(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode())
    try:
        s.sendall(body)
    except (BrokenPipeError, ConnectionResetError):
        pytest.fail("Formwall reset the connection while the client was still sending")
    data = read_response(s)
    assert data.startswith(b"HTTP/1.1 400"), data[:200]
    assert b"malformed_body" in data


def answers_declaring(length: bytes):
    """An upstream that reads a request head, answers 200 with `Content-Length: length` and one byte, and closes."""
    def behave(conn, up):
        read_head(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + length + b"\r\n\r\nx")
        conn.close()
    return behave


def answer_through_formwall(raw_upstream, formwall_factory, length: bytes) -> bytes:
    """What a client gets through Formwall, up to the close, for a GET that such an upstream answers."""
    up = raw_upstream(answers_declaring(length))
    fw = formwall_factory(up.url, "--workers", "1")
    s = connect(fw.port)
    try:
        s.sendall(b"GET /length HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return read_response(s)
    finally:
        s.close()


@pytest.mark.parametrize("length", [b"9223372036854775808", b"18446744073709551615"])
def test_response_length_past_int64_is_502(raw_upstream, formwall_factory, length):
    """A response length no signed 64-bit parser holds (curl ignores it and reads to the close) is a malformed
    response: the client gets Formwall's 502, never the upstream's head."""
    answer = answer_through_formwall(raw_upstream, formwall_factory, length)
    assert answer.startswith(b"HTTP/1.1 502 "), answer[:200]
    assert b'"bad_upstream_response"' in answer
    assert length not in answer


def test_response_length_of_int64_max_is_relayed(raw_upstream, formwall_factory):
    """The largest length accepted, 2^63 - 1: relayed as the upstream sent it, and the cut-short body ends with
    the upstream's close."""
    answer = answer_through_formwall(raw_upstream, formwall_factory, b"9223372036854775807")
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert b"\r\nContent-Length: 9223372036854775807\r\n" in answer
    assert answer.endswith(b"\r\n\r\nx")


def test_every_reset_request_whose_head_arrived_has_its_audit_line(upstream, formwall_factory, tmp_path):
    """300 clients each send a whole request head and half of a 1 MiB body, then reset (SO_LINGER 0). The
    bytes the kernel received before the reset are still readable when epoll reports it, so every one of
    them is a request Formwall saw, and each has its one audit line: aborted, client_reset."""
    audit = tmp_path / "audit.jsonl"
    fw = formwall_factory(upstream.url, "--workers", "1", "--audit-log", str(audit))
    count = 300
    half = b"x" * (512 << 10)
    for i in range(count):
        s = connect(fw.port)
        s.sendall(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                  + f"X-Request-Id: reset-{i}\r\nContent-Length: {1 << 20}\r\n\r\n".encode() + half)
        rst_close(s)

    def all_recorded():
        ids = {r.get("request_id") for r in json_lines(audit)}
        return ids if all(f"reset-{i}" in ids for i in range(count)) else None

    try:
        wait_until(all_recorded, 20, what=f"the audit lines of all {count} reset requests")
    except TimeoutError:
        ids = {r.get("request_id") for r in json_lines(audit)}
        recorded = sum(f"reset-{i}" in ids for i in range(count))
        pytest.fail(f"{recorded} of {count} reset requests have an audit line")
    records = [r for r in json_lines(audit) if str(r.get("request_id", "")).startswith("reset-")]
    assert len(records) == count, "one line per request, not more"
    for r in records:
        assert r["decision"] == "aborted", r
        assert r["status"] == 499, r
        assert "client_reset" in (r.get("error") or "") or r.get("reason") == "client_reset", r


def resets_after_close_delimited_body(size: int):
    """An upstream that answers 200 with no Content-Length and no chunking (the body ends at the close), sends
    `size` bytes of it, then resets."""
    def behave(conn, up):
        read_head(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n" + b"d" * size)
        rst_close(conn)
    return behave


@pytest.mark.parametrize("http10", [False, True], ids=["http1.1", "http1.0"])
def test_upstream_reset_in_a_close_delimited_body_is_no_end_for_the_client(raw_upstream, formwall_factory,
                                                                           tmp_path, http10):
    """A close-delimited response cut by an upstream reset must not reach the client as complete: curl reports
    the cut (HTTP/1.1: the body comes chunked and its last chunk never does, exit 18; HTTP/1.0: the connection
    is reset, exit 56), and the audit line says aborted."""
    up = raw_upstream(resets_after_close_delimited_body(100_000))
    audit = tmp_path / "audit.jsonl"
    fw = formwall_factory(up.url, "--workers", "1", "--audit-log", str(audit))
    out = tmp_path / "body"
    cmd = ["curl", "-sS", "-o", str(out), "-H", "X-Request-Id: cut-download", "--max-time", "20",
           f"{fw.url}/download"]
    if http10:
        cmd.insert(1, "-0")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert done.returncode in (18, 56), f"curl exit {done.returncode}: the cut looked complete ({done.stderr})"
    got = out.read_bytes() if out.exists() else b""
    assert got == b"d" * len(got), "only the upstream's bytes"
    record = wait_audit_record(audit, "cut-download")
    assert record["decision"] == "aborted", record
    assert record["status"] == 200 and record["reason"] == "upstream_closed", record
