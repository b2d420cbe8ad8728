"""Helpers for the Formwall end-to-end suite: processes, readiness, raw HTTP/1.1, multipart bodies.

Nothing here sleeps to "let things settle": every wait is for a condition (a port accepting, a
line printed, a log record written, a socket readable) with a deadline.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
UPSTREAM_APP = HERE / "upstream_app.py"
HOST = "127.0.0.1"

# Generous bounds for a loaded 2-core machine; every wait below is "until X, at most this".
START_TIMEOUT = 10.0
IO_TIMEOUT = 15.0


class ProcessExited(RuntimeError):
    pass


EVENT_KEYS = {"ts", "level", "msg", "pid"}
LEVELS = ("debug", "info", "warn", "error")


def load_bench(name: str):
    """bench/proxy/NAME.py loaded as a module (the benchmarks are scripts, not a package), for tests of their
    arithmetic."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"bench_proxy_{name}", REPO / "bench" / "proxy" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def event_lines(text: str) -> list[dict]:
    """Every complete line of `formwall serve`'s stderr as its JSON event object (docs/operations.md, "Logs on
    stderr"). A line that is not one JSON object with ts, level, msg and pid fails the test."""
    events = []
    for line in complete_prefix(text).splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            raise AssertionError(f"a stderr line is not JSON: {line!r}") from None
        assert isinstance(event, dict) and EVENT_KEYS <= event.keys(), line
        assert event["level"] in LEVELS, line
        events.append(event)
    return events


def events_with(text: str, msg: str) -> list[dict]:
    """The stderr events whose `msg` is `msg`."""
    return [e for e in event_lines(text) if e["msg"] == msg]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_accepts(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(predicate, timeout: float, interval: float = 0.02, what: str = "condition"):
    """Polls predicate() until it returns a truthy value; returns it, or raises TimeoutError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        # a polling interval, bounded by the deadline (poll-with-deadline, not a settle sleep)
        time.sleep(min(interval, remaining))


def new_request_id() -> str:
    """A fresh X-Request-Id. Formwall keeps a valid id a client sends, so a test can find its own audit line."""
    return "t-" + uuid.uuid4().hex


def complete_prefix(data):
    """`data` (bytes or str) up to and including its last newline. Linux copies a write(2) into a file a page at
    a time and a concurrent read does not wait for it, so a reader racing Formwall's writers can see the first
    part of a line: the text after the last newline is not yet a line."""
    return data[:data.rfind(b"\n" if isinstance(data, bytes) else "\n") + 1]


@dataclass
class TcpSocket:
    """One row of /proc/net/tcp or /proc/net/tcp6: ports, state (hex, "01" is ESTABLISHED) and queued bytes."""
    local_port: int
    remote_port: int
    state: str
    send_queue: int
    receive_queue: int


def tcp_sockets() -> list[TcpSocket]:
    """This machine's TCP sockets, IPv4 and IPv6, as the kernel lists them."""
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            tx, rx = cols[4].split(":")
            rows.append(TcpSocket(int(cols[1].rsplit(":", 1)[1], 16), int(cols[2].rsplit(":", 1)[1], 16), cols[3],
                                  int(tx, 16), int(rx, 16)))
    return rows


def json_lines(path) -> list[dict]:
    """The JSON records on the complete, non-blank lines of the file at `path`; [] while it does not exist."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in complete_prefix(path.read_bytes()).splitlines() if line.strip()]


def wait_audit_record(path, request_id: str, timeout: float = 10.0) -> dict:
    """The audit record of `request_id` in the log at `path`, waiting for it. A worker writes the lines of the
    requests that ended during one turn of its event loop at the end of that turn, so a client can see its
    response a moment before the line is in the file; and the last line may belong to an earlier request."""
    def find():
        return next((r for r in json_lines(path) if r.get("request_id") == request_id), None)
    return wait_until(find, timeout, what=f"the audit line of {request_id}")


def formwall_binary() -> Path:
    value = os.environ.get("FORMWALL_BIN")
    path = Path(value) if value else REPO / ".build" / "release" / "formwall"
    return path


# ---------------------------------------------------------------------------------------------
# Processes


class Upstream:
    """The werkzeug upstream (upstream_app.py) in a subprocess, with its JSON-lines log."""

    def __init__(self, workdir: Path, mode: str = "echo", delay: float = 5.0, name: str = "upstream",
                 extra: list[str] = ()):
        self.log_path = workdir / f"{name}.jsonl"
        self.stderr_path = workdir / f"{name}.stderr"
        self.log_path.touch()
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(UPSTREAM_APP), "--port", "0", "--mode", mode,
             "--delay", str(delay), "--log", str(self.log_path), *extra],
            stdout=subprocess.PIPE, stderr=self._stderr, stdin=subprocess.DEVNULL,
        )
        self.port = self._read_ready_line()
        self.url = f"{'https' if '--tls-cert' in extra else 'http'}://{HOST}:{self.port}"

    def _read_ready_line(self) -> int:
        deadline = time.monotonic() + START_TIMEOUT
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop()
                raise TimeoutError("upstream_app did not print READY in time")
            ready, _, _ = select.select([self.proc.stdout], [], [], remaining)
            if ready:
                byte = os.read(self.proc.stdout.fileno(), 1)
                if not byte:
                    self.stop()
                    raise ProcessExited(f"upstream_app exited: {self.stderr_path.read_text()[-2000:]}")
                line += byte
        text = line.decode().strip()
        assert text.startswith("READY "), text
        return int(text.split()[1])

    def records(self, event: str | None = "request") -> list[dict]:
        out = []
        with open(self.log_path, "r") as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # a line being written
                rec = json.loads(line)
                if event is None or rec.get("event") == event:
                    out.append(rec)
        return out

    def requests(self) -> list[dict]:
        return self.records("request")

    def wait_for(self, predicate, timeout: float = IO_TIMEOUT, event: str = "request",
                 what: str = "an upstream log record") -> dict:
        def find():
            for rec in self.records(event):
                if predicate(rec):
                    return rec
            return None
        return wait_until(find, timeout, what=what)

    def wait_for_request_id(self, request_id: str, timeout: float = IO_TIMEOUT, event: str = "request") -> dict:
        return self.wait_for(lambda r: r.get("request_id") == request_id, timeout, event,
                             what=f"upstream {event} with X-Request-Id {request_id}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if self.proc.stdout:
            self.proc.stdout.close()
        self._stderr.close()


class Formwall:
    """`formwall serve` in a subprocess; ready when its port accepts connections."""

    def __init__(self, workdir: Path, upstream_url: str | None, args: list[str] = (), name: str = "formwall",
                 port: int | None = None, env: dict[str, str | None] | None = None, preexec=None):
        """`upstream_url` None: no --upstream (a --config file names it). `port`: the port a --config file
        listens on, when the command line gives no --listen. `env`: variables set over the test's environment
        (None removes one). `preexec`: run in the child before formwall starts (resource limits)."""
        binary = formwall_binary()
        if not binary.exists():
            raise FileNotFoundError(
                f"formwall binary not found at {binary}; set FORMWALL_BIN or build with "
                "`swift build -c release`"
            )
        self.port = port if port is not None else free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.stderr_path = workdir / f"{name}.stderr"
        self.stdout_path = workdir / f"{name}.stdout"
        self._stderr = open(self.stderr_path, "wb")
        self._stdout = open(self.stdout_path, "wb")
        self.argv = [str(binary), "serve"]
        if port is None:
            self.argv += ["--listen", f"{HOST}:{self.port}"]
        if upstream_url is not None:
            self.argv += ["--upstream", upstream_url]
        self.argv += list(args)
        environment = None
        if env is not None:
            environment = dict(os.environ)
            for key, value in env.items():
                if value is None:
                    environment.pop(key, None)
                else:
                    environment[key] = value
        self.proc = subprocess.Popen(self.argv, stdout=self._stdout, stderr=self._stderr,
                                     stdin=subprocess.DEVNULL, env=environment, preexec_fn=preexec)
        self.stopped_by_test = False
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if port_accepts(self.port, timeout=0.5):
                return
            try:
                code = self.proc.wait(timeout=0.02)  # doubles as the poll interval
            except subprocess.TimeoutExpired:
                code = None
            if code is not None:
                self._close_files()
                raise ProcessExited(
                    f"formwall exited with code {code} before accepting on port {self.port}\n"
                    f"argv: {' '.join(self.argv)}\nstderr:\n{self.stderr_text()[-4000:]}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"formwall did not accept on port {self.port} within {START_TIMEOUT}s")

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def events(self, msg: str | None = None) -> list[dict]:
        """The JSON event lines on stderr so far (those with `msg` when given)."""
        return event_lines(self.stderr_text()) if msg is None else events_with(self.stderr_text(), msg)

    def signal(self, sig: int) -> None:
        self.stopped_by_test = True
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """Exit code, or raises subprocess.TimeoutExpired."""
        code = self.proc.wait(timeout=timeout)
        self._close_files()
        return code

    def terminate(self, timeout: float = 10.0) -> int:
        self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self._close_files()

    def _close_files(self) -> None:
        for f in (self._stderr, self._stdout):
            if not f.closed:
                f.close()


# ---------------------------------------------------------------------------------------------
# Raw HTTP/1.1 over a socket


@dataclass
class RawResponse:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes = b""
    framing: str = "none"  # length | chunked | close | none
    complete: bool = True  # False: the connection ended before the framing said the body ended
    interim: list[int] = field(default_factory=list)
    trailers: list[str] = field(default_factory=list)

    def header(self, name: str) -> str | None:
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def header_all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def json(self):
        return json.loads(self.body)


class PeerClosed(Exception):
    """The peer closed (or reset) the connection before a response status line arrived."""


class RawConn:
    """A client connection that sends bytes verbatim and parses responses strictly."""

    def __init__(self, port: int, timeout: float = IO_TIMEOUT):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.eof = False
        self.reset = False
        self.default_timeout = timeout

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self, deadline: float) -> bool:
        """Reads more bytes; False at EOF/reset. Raises socket.timeout past the deadline."""
        if self.eof:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("deadline passed")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(1 << 20)
        except ConnectionResetError:
            self.reset = True
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def _take_line(self, deadline: float, limit: int = 65536) -> bytes | None:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 2]
                return line
            if len(self.buf) > limit:
                raise ValueError("line too long")
            if not self._fill(deadline):
                return None

    def _take(self, n: int, deadline: float) -> bytes:
        while len(self.buf) < n:
            if not self._fill(deadline):
                break
        data = bytes(self.buf[:n])
        del self.buf[: len(data)]
        return data

    def read_response(self, method: str = "GET", timeout: float | None = None) -> RawResponse:
        deadline = time.monotonic() + (timeout if timeout is not None else self.default_timeout)
        interim = []
        while True:
            # head
            while b"\r\n\r\n" not in self.buf:
                if len(self.buf) > 1 << 16:
                    raise ValueError("response head too large")
                if not self._fill(deadline):
                    if self.buf:
                        raise PeerClosed(f"closed inside a response head: {bytes(self.buf[:200])!r}")
                    raise PeerClosed("connection closed before a response" + (" (reset)" if self.reset else ""))
            end = self.buf.find(b"\r\n\r\n")
            head = bytes(self.buf[:end]).decode("latin-1")
            del self.buf[: end + 4]
            lines = head.split("\r\n")
            version, _, rest = lines[0].partition(" ")
            assert version in ("HTTP/1.1", "HTTP/1.0"), f"bad status line {lines[0]!r}"
            code_text, _, reason = rest.partition(" ")
            status = int(code_text)
            headers = []
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                assert sep and name and name == name.strip(), f"bad header line {line!r}"
                headers.append((name, value.strip(" \t")))
            if 100 <= status < 200 and status != 101:
                interim.append(status)
                continue
            break
        resp = RawResponse(status, reason, headers, interim=interim)
        te = resp.header("Transfer-Encoding")
        cl = resp.header("Content-Length")
        if method == "HEAD" or status in (204, 304):
            resp.framing = "none"
        elif te is not None:
            assert te.lower() == "chunked", f"unexpected response Transfer-Encoding {te!r}"
            resp.framing = "chunked"
            body = bytearray()
            while True:
                line = self._take_line(deadline)
                if line is None:
                    resp.complete = False
                    break
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:
                        trailer = self._take_line(deadline)
                        if trailer is None:
                            resp.complete = False
                            break
                        if trailer == b"":
                            break
                        resp.trailers.append(trailer.decode("latin-1"))
                    break
                data = self._take(size, deadline)
                body += data
                if len(data) < size:
                    resp.complete = False
                    break
                crlf = self._take(2, deadline)
                if crlf != b"\r\n":
                    resp.complete = False
                    break
            resp.body = bytes(body)
        elif cl is not None:
            resp.framing = "length"
            n = int(cl)
            resp.body = self._take(n, deadline)
            resp.complete = len(resp.body) == n
        else:
            resp.framing = "close"
            while self._fill(deadline):
                pass
            resp.body = bytes(self.buf)
            self.buf.clear()
            resp.complete = True
        return resp

    def wait_closed(self, timeout: float) -> bool:
        """True if the peer closes (EOF or reset) within timeout; data received meanwhile is kept."""
        deadline = time.monotonic() + timeout
        try:
            while self._fill(deadline):
                pass
            return True
        except (socket.timeout, TimeoutError):
            return False


def raw_request(port: int, data: bytes, method: str = "GET", timeout: float = IO_TIMEOUT) -> RawResponse:
    with RawConn(port, timeout) as conn:
        conn.send(data)
        return conn.read_response(method=method, timeout=timeout)


def assert_json_error(resp: RawResponse, status: int, kind: str | None = None) -> dict:
    assert resp.status == status, f"expected {status}, got {resp.status} {resp.reason}: {resp.body[:300]!r}"
    ctype = resp.header("Content-Type") or ""
    assert ctype.split(";")[0].strip().lower() == "application/json", f"Content-Type {ctype!r}"
    doc = json.loads(resp.body)
    assert doc.get("status") == status, doc
    assert isinstance(doc.get("error"), str) and doc["error"], doc
    assert isinstance(doc.get("request_id"), str) and doc["request_id"], doc
    if kind is not None:
        assert doc["error"] == kind, f"expected error kind {kind!r}, got {doc!r}"
    return doc


# ---------------------------------------------------------------------------------------------
# Multipart bodies and expectations


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class FilePart:
    name: str
    filename: str
    data: bytes
    content_type: str = "application/octet-stream"


def build_multipart(fields: list[tuple[str, str]], files: list[FilePart], boundary: str,
                    preamble: bytes = b"", epilogue: bytes = b"") -> bytes:
    out = bytearray(preamble)
    b = boundary.encode()
    for name, value in fields:
        out += b"--" + b + b"\r\n"
        out += f'Content-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        out += value.encode() + b"\r\n"
    for f in files:
        out += b"--" + b + b"\r\n"
        out += f'Content-Disposition: form-data; name="{f.name}"; filename="{f.filename}"\r\n'.encode()
        out += f"Content-Type: {f.content_type}\r\n\r\n".encode()
        out += f.data + b"\r\n"
    out += b"--" + b + b"--\r\n" + epilogue
    return bytes(out)


def expected_fields(fields: list[tuple[str, str]]) -> dict:
    out: dict[str, list[str]] = {}
    for name, value in fields:
        out.setdefault(name, []).append(value)
    return out


def expected_files(files: list[FilePart], with_content_type: bool = True) -> dict:
    out: dict[str, list[dict]] = {}
    for f in files:
        entry = {"filename": f.filename, "size": len(f.data), "sha256": sha256(f.data)}
        if with_content_type:
            entry["content_type"] = f.content_type
        out.setdefault(f.name, []).append(entry)
    return out


def strip_content_type(files: dict) -> dict:
    return {k: [{kk: vv for kk, vv in e.items() if kk != "content_type"} for e in v] for k, v in files.items()}


def boundary_of(content_type: str) -> str:
    for piece in content_type.split(";")[1:]:
        k, _, v = piece.strip().partition("=")
        if k.lower() == "boundary":
            return v.strip('"')
    raise AssertionError(f"no boundary in {content_type!r}")


def assert_canonical_parts(rec: dict) -> None:
    """Each re-encoded part carries only Content-Disposition, plus Content-Type for files."""
    for part in rec["parts"]:
        allowed = {"content-disposition", "content-type"} if "filename" in part else {"content-disposition"}
        names = part["header_names"]
        assert "content-disposition" in names, part
        assert set(names) <= allowed, f"part {part['name']!r} has extra headers {names}"
        assert len(names) == len(set(names)), f"duplicate part headers {names}"


def assert_upstream_chunked(rec: dict) -> None:
    assert (rec["transfer_encoding"] or "").lower() == "chunked", rec["headers"]
    assert rec["content_length"] is None, rec["headers"]


def assert_upstream_spooled(rec: dict) -> None:
    assert rec["transfer_encoding"] is None, rec["headers"]
    assert rec["content_length"] is not None and int(rec["content_length"]) == rec["body_bytes"], rec["headers"]


def curl(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """curl with no proxy from the environment and a hard bound on time."""
    argv = ["curl", "-sS", "--noproxy", "*", "--max-time", str(int(timeout)), *args]
    return subprocess.run(argv, capture_output=True, timeout=timeout + 10)


def new_session():
    import requests

    s = requests.Session()
    s.trust_env = False  # never use an HTTP proxy from the environment
    return s
