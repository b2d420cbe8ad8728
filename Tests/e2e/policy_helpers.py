"""Shared helpers for the policy / quarantine / audit end-to-end tests.

* `Upstream`: a small HTTP/1.1 upstream on 127.0.0.1 (ThreadingHTTPServer). It decodes chunked request bodies
  itself, parses multipart bodies as they stream (python_multipart's low-level parser: size and sha256 per part,
  nothing held in memory), answers JSON {fields, files, body_complete, ...} and appends every request it saw,
  including the ones whose body never completed (`body_complete: false`), to a JSON-lines file.
* `Formwall`: runs `$FORMWALL_BIN serve` on a free port, waits for readiness by poll-connecting with a deadline,
  reloads (SIGHUP), reads the audit log and waits for audit lines by polling the file with a deadline.
* `request()`: a raw-socket HTTP/1.1 client that keeps reading the response while it sends (a proxy that rejects
  mid-body answers early and closes), so the early answer is seen even when the rest of the body cannot be sent.
* `multipart()`: builds multipart bodies byte for byte (hostile filenames, declared types, raw headers).

No sleeps: every wait polls a condition against a deadline.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterable
from urllib.parse import parse_qsl

import pytest
from python_multipart.multipart import MultipartParser

from e2e_helpers import complete_prefix, event_lines, events_with, json_lines

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("FORMWALL_BIN", str(ROOT / ".build/release/formwall"))
RULES = Path(__file__).resolve().parent / "rules"
HOST = "127.0.0.1"


def deadline_loop(timeout: float, what: str):
    """Yields until `timeout` seconds passed, then fails the test with `what`."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        yield
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def wait_for(predicate, timeout: float, what: str, interval: float = 0.005):
    """Polls `predicate` until it returns something truthy (returned) or the deadline passes (test fails).

    The pause between polls is a `select` on nothing with a short timeout, i.e. a bounded poll interval, not a
    fixed sleep standing in for a condition."""
    for _ in deadline_loop(timeout, what):
        value = predicate()
        if value:
            return value
        select.select([], [], [], interval)


# --------------------------------------------------------------------------------------------------------------
# Multipart bodies


@dataclass
class Part:
    name: str | bytes | None
    data: bytes | Iterable[bytes] = b""
    filename: str | bytes | None = None
    content_type: str | bytes | None = None
    raw_headers: bytes | None = None  # replaces the generated headers entirely (anomalies)
    size: int | None = None  # length of `data` when it is an iterable


def _b(value) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")


def part_head(p: Part) -> bytes:
    if p.raw_headers is not None:
        return p.raw_headers
    disposition = b"Content-Disposition: form-data"
    if p.name is not None:
        disposition += b'; name="' + _b(p.name) + b'"'
    if p.filename is not None:
        disposition += b'; filename="' + _b(p.filename) + b'"'
    head = disposition + b"\r\n"
    if p.content_type is not None:
        head += b"Content-Type: " + _b(p.content_type) + b"\r\n"
    return head + b"\r\n"


def multipart(parts: list[Part], boundary: bytes = b"----fwtestBoundary7MA4YWxk") -> tuple[bytes, str]:
    """A whole multipart body (parts with bytes data) and its Content-Type."""
    out = b""
    for p in parts:
        out += b"--" + boundary + b"\r\n" + part_head(p) + _b(p.data) + b"\r\n"
    out += b"--" + boundary + b"--\r\n"
    return out, "multipart/form-data; boundary=" + boundary.decode()


def multipart_stream(parts: list[Part], boundary: bytes = b"----fwtestBoundary7MA4YWxk"):
    """(chunks iterator, length, content type) for parts whose data may be iterables of chunks (big bodies)."""
    pieces: list = []
    length = 0
    for p in parts:
        head = b"--" + boundary + b"\r\n" + part_head(p)
        pieces.append(head)
        length += len(head)
        if isinstance(p.data, (bytes, bytearray)):
            pieces.append(bytes(p.data))
            length += len(p.data)
        else:
            assert p.size is not None, "an iterable part needs its size"
            pieces.append(p.data)
            length += p.size
        pieces.append(b"\r\n")
        length += 2
    tail = b"--" + boundary + b"--\r\n"
    pieces.append(tail)
    length += len(tail)

    def chunks():
        for piece in pieces:
            if isinstance(piece, bytes):
                yield piece
            else:
                yield from piece

    return chunks(), length, "multipart/form-data; boundary=" + boundary.decode()


def repeated(block: bytes, total: int):
    """`total` bytes made of `block` repeated (big parts without holding them)."""
    sent = 0
    while sent < total:
        n = min(len(block), total - sent)
        yield block[:n]
        sent += n


def repeated_sha256(block: bytes, total: int) -> str:
    h = hashlib.sha256()
    for chunk in repeated(block, total):
        h.update(chunk)
    return h.hexdigest()


# Minimal real file signatures for the sniffer.
PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
       b"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"
PDF = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
PHP = b"<?php system($_GET['c']); ?>\n"


# --------------------------------------------------------------------------------------------------------------
# Raw HTTP client


@dataclass
class Response:
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes
    informational: list[int] = field(default_factory=list)
    send_error: str | None = None  # the body could not be sent completely (the proxy answered early / closed)
    sent_body_bytes: int = 0

    def json(self):
        return json.loads(self.body)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def __repr__(self):
        return f"<Response {self.status} {self.headers} {self.body[:600]!r} send_error={self.send_error}>"


class ConnectionFailed(Exception):
    pass


def _read_response(sock: socket.socket, buf: bytearray, deadline: float, method: str = "POST") -> Response | None:
    """Reads one response (skipping 1xx) from `sock`; None if the peer closed before any byte."""
    informational = []
    while True:
        while b"\r\n\r\n" not in buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("response head not received in time")
            sock.settimeout(remaining)
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                data = b""
            if not data:
                if not buf:
                    return None
                raise ConnectionFailed(f"connection closed inside the response head: {bytes(buf)!r}")
            buf += data
        head, _, rest = bytes(buf).partition(b"\r\n\r\n")
        del buf[:len(head) + 4]
        lines = head.decode("latin-1").split("\r\n")
        version, status, *reason = lines[0].split(" ", 2)
        status = int(status)
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if 100 <= status < 200:
            informational.append(status)
            continue
        break
    body = b""
    if method == "HEAD" or status in (204, 304):
        pass
    elif "content-length" in headers:
        n = int(headers["content-length"])
        while len(buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("response body not received in time")
            sock.settimeout(remaining)
            data = sock.recv(65536)
            if not data:
                raise ConnectionFailed("connection closed inside the response body")
            buf += data
        body = bytes(buf[:n])
        del buf[:n]
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        out = b""
        while True:
            while b"\r\n" not in buf:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                data = sock.recv(65536)
                if not data:
                    raise ConnectionFailed("closed inside chunked response")
                buf += data
            line, _, _ = bytes(buf).partition(b"\r\n")
            size = int(line.split(b";")[0], 16)
            need = len(line) + 2 + size + 2
            while len(buf) < need:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                data = sock.recv(65536)
                if not data:
                    raise ConnectionFailed("closed inside chunked response")
                buf += data
            out += bytes(buf[len(line) + 2:len(line) + 2 + size])
            del buf[:need]
            if size == 0:
                break
        body = out
    else:
        while True:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = sock.recv(65536)
            if not data:
                break
            buf += data
        body = bytes(buf)
        buf.clear()
    return Response(status, " ".join(reason), headers, body, informational)


def request(port: int, method: str = "POST", path: str = "/", headers: dict | list | None = None,
            body: bytes | Iterable[bytes] | None = None, chunked: bool = False, timeout: float = 20.0,
            raw_head: bytes | None = None, content_length: int | None = None) -> Response:
    """Sends one request on a fresh connection and returns the response.

    The body is sent while watching the socket: once the proxy answers (an early rejection), sending stops and
    the response is read. `raw_head` sends those bytes as the head verbatim."""
    deadline = time.monotonic() + timeout
    sock = socket.create_connection((HOST, port), timeout=timeout)
    try:
        if raw_head is None:
            hdrs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
            names = {k.lower() for k, _ in hdrs}
            if "host" not in names:
                hdrs.insert(0, ("Host", f"{HOST}:{port}"))
            if body is not None and chunked:
                hdrs.append(("Transfer-Encoding", "chunked"))
            elif body is not None and "content-length" not in names:
                if content_length is None:
                    assert isinstance(body, (bytes, bytearray)), "streamed bodies need content_length"
                    content_length = len(body)
                hdrs.append(("Content-Length", str(content_length)))
            head = f"{method} {path} HTTP/1.1\r\n".encode() + b"".join(
                _b(k) + b": " + _b(v) + b"\r\n" for k, v in hdrs) + b"\r\n"
        else:
            head = raw_head
        sock.sendall(head)
        buf = bytearray()
        send_error = None
        sent = 0
        if body is not None:
            chunks = [body] if isinstance(body, (bytes, bytearray)) else body
            answered = False
            for chunk in chunks:
                if chunked:
                    if not chunk:
                        continue
                    chunk = f"{len(chunk):x}\r\n".encode() + bytes(chunk) + b"\r\n"
                view = memoryview(bytes(chunk))
                while view:
                    if time.monotonic() > deadline:
                        raise TimeoutError("request body not sent in time")
                    readable, writable, _ = select.select([sock], [sock], [], max(0.0, deadline - time.monotonic()))
                    if readable:
                        answered = True
                        break
                    if writable:
                        try:
                            n = sock.send(view[:262144])
                        except (BrokenPipeError, ConnectionResetError) as e:
                            send_error = type(e).__name__
                            answered = True
                            break
                        view = view[n:]
                        sent += n
                if answered:
                    break
            if not answered and chunked:
                try:
                    sock.sendall(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError) as e:
                    send_error = type(e).__name__
            if answered and send_error is None:
                send_error = "answered_before_body_sent"
        response = _read_response(sock, buf, deadline, method)
        if response is None:
            raise ConnectionFailed("connection closed without a response")
        response.send_error = send_error
        response.sent_body_bytes = sent
        return response
    finally:
        sock.close()


def post_form(port: int, path: str, parts: list[Part], request_id: str | None = None, extra_headers=(),
              chunked: bool = False, method: str = "POST", timeout: float = 20.0) -> Response:
    body, ctype = multipart(parts)
    headers = [("Content-Type", ctype), *extra_headers]
    if request_id:
        headers.append(("X-Request-Id", request_id))
    if chunked:
        pieces = [body[i:i + 7] for i in range(0, len(body), 7)]  # many small chunks
        return request(port, method, path, headers, pieces, chunked=True, timeout=timeout)
    return request(port, method, path, headers, body, timeout=timeout)


def new_id(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:20]}"


# --------------------------------------------------------------------------------------------------------------
# Upstream


class _IncompleteBody(Exception):
    pass


class _StreamingForm:
    """Multipart parsing as the body streams: per part name, filename, headers, size, sha256, field value."""

    def __init__(self, boundary: bytes):
        self.parts: list[dict] = []
        self._cur: dict | None = None
        self._hname = b""
        self._hval = b""
        self.error: str | None = None
        callbacks = {
            "on_part_begin": self._begin,
            "on_part_data": self._data,
            "on_part_end": self._end,
            "on_header_field": self._hfield,
            "on_header_value": self._hvalue,
            "on_header_end": self._hend,
        }
        self.parser = MultipartParser(boundary, callbacks, max_header_count=64, max_header_size=1 << 20)

    def _begin(self):
        self._cur = {"headers": [], "size": 0, "hash": hashlib.sha256(), "value": bytearray()}
        self._hname = self._hval = b""

    def _hfield(self, data, start, end):
        self._hname += data[start:end]

    def _hvalue(self, data, start, end):
        self._hval += data[start:end]

    def _hend(self):
        self._cur["headers"].append((self._hname.decode("latin-1"), self._hval))
        self._hname = self._hval = b""

    def _data(self, data, start, end):
        chunk = data[start:end]
        self._cur["size"] += len(chunk)
        self._cur["hash"].update(chunk)
        if len(self._cur["value"]) < 65536:
            self._cur["value"] += chunk[:65536 - len(self._cur["value"])]

    def _end(self):
        cur = self._cur
        disposition = b""
        ctype = None
        for k, v in cur["headers"]:
            if k.lower() == "content-disposition":
                disposition = v
            elif k.lower() == "content-type":
                ctype = v.decode("latin-1")
        name = re.search(rb'(?:^|;)\s*name="([^"]*)"', disposition)
        filename = re.search(rb'(?:^|;)\s*filename="([^"]*)"', disposition)
        self.parts.append({
            "name": name.group(1).decode("utf-8", "replace") if name else None,
            "filename": filename.group(1).decode("utf-8", "replace") if filename else None,
            "filename_hex": filename.group(1).hex() if filename else None,
            "content_type": ctype,
            "size": cur["size"],
            "sha256": cur["hash"].hexdigest(),
            "value": bytes(cur["value"]).decode("utf-8", "replace"),
        })
        self._cur = None

    def feed(self, data: bytes):
        if self.error is None:
            try:
                self.parser.write(data)
            except Exception as e:  # noqa: BLE001 - recorded, the test decides
                self.error = f"{type(e).__name__}: {e}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fw-test-upstream/1"

    def log_message(self, format, *args):  # quiet
        pass

    def setup(self):
        super().setup()
        self.connection.settimeout(30)

    def parse_request(self):
        # A request line arrived: busy until this request is handled (idle keep-alive connections are not busy;
        # a new connection counts as busy from its accept until its first request is handled).
        self.server.upstream._set_busy(self, True)
        return super().parse_request()

    def handle_one_request(self):
        try:
            super().handle_one_request()
        finally:
            self.server.upstream._set_busy(self, False)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.upstream._closed(self)

    def _read_exact(self, n: int) -> bytes:
        data = self.rfile.read(n)
        if data is None or len(data) < n:
            raise _IncompleteBody(data or b"")
        return data

    def _body_chunks(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            while True:
                line = self.rfile.readline(65537)
                if not line.endswith(b"\n"):
                    raise _IncompleteBody()
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:  # trailers
                        t = self.rfile.readline(65537)
                        if not t.endswith(b"\n"):
                            raise _IncompleteBody()
                        if t in (b"\r\n", b"\n"):
                            return
                remaining = size
                while remaining:
                    data = self.rfile.read1(min(remaining, 1 << 20)) if hasattr(self.rfile, "read1") else \
                        self.rfile.read(min(remaining, 1 << 20))
                    if not data:
                        raise _IncompleteBody()
                    remaining -= len(data)
                    yield data
                if self.rfile.read(2) not in (b"\r\n",):
                    raise _IncompleteBody()
        else:
            remaining = int(self.headers.get("Content-Length") or 0)
            while remaining:
                data = self.rfile.read1(min(remaining, 1 << 20))
                if not data:
                    raise _IncompleteBody()
                remaining -= len(data)
                yield data

    def _serve(self):
        up: Upstream = self.server.upstream
        ctype = self.headers.get("Content-Type") or ""
        record = {
            "seq": None,
            "method": self.command,
            "path": self.path,
            "request_id": self.headers.get("X-Request-Id"),
            "content_type": ctype,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body_bytes": 0,
            "body_complete": False,
            "fields": {},
            "files": [],
            "parts": [],
            "multipart_error": None,
        }
        form = None
        m = re.search(r'boundary="?([^";]+)"?', ctype)
        if ctype.lower().startswith("multipart/") and m:
            form = _StreamingForm(m.group(1).encode("latin-1"))
        raw = bytearray()
        try:
            for data in self._body_chunks():
                record["body_bytes"] += len(data)
                if form is not None:
                    form.feed(data)
                elif len(raw) < 1 << 20:
                    raw += data
            record["body_complete"] = True
        except (_IncompleteBody, OSError, ValueError) as e:
            record["incomplete_reason"] = type(e).__name__
        if form is not None:
            if record["body_complete"] and form.error is None:
                form.parser.finalize()
            record["parts"] = form.parts
            record["multipart_error"] = form.error
            for p in form.parts:
                if p["filename"] is None:
                    record["fields"].setdefault(p["name"], []).append(p["value"])
                else:
                    record["files"].append({k: p[k] for k in ("name", "filename", "filename_hex", "size", "sha256",
                                                              "content_type")})
        elif ctype.startswith("application/x-www-form-urlencoded"):
            for k, v in parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True):
                record["fields"].setdefault(k, []).append(v)
        up._record(record)
        if not record["body_complete"]:
            self.close_connection = True
            return
        payload = json.dumps({k: record[k] for k in ("fields", "files", "body_complete", "body_bytes",
                                                     "request_id", "path")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET = do_OPTIONS = _serve

    def do_HEAD(self):
        self._serve()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256

    def get_request(self):
        # Counted before accept: `Upstream.settled()` checks the listener and then the count (see there).
        with self.upstream._lock:
            self.upstream._accepting += 1
        try:
            conn, addr = super().get_request()
            conn.setblocking(True)
        except BaseException:
            with self.upstream._lock:
                self.upstream._accepting -= 1
            raise
        with self.upstream._lock:
            self.upstream._accepting -= 1
            self.upstream._busy[id(conn)] = True  # new connection: busy until its first request was handled
        return conn, addr


class Upstream:
    """The test upstream. `records()` lists every request seen (also written to `log_path` as JSON lines)."""

    def __init__(self, log_path: Path):
        self.log_path = Path(log_path)
        self._lock = threading.Lock()
        self._records: list[dict] = []
        self._busy: dict[int, bool] = {}
        self._accepting = 0
        self.connections = 0
        self.server = _Server((HOST, 0), _Handler)
        self.server.upstream = self
        # serve_forever accepts after select() said the listener was readable. A blocking accept() that then finds
        # nothing (a connection gone from the queue meanwhile) would hold the server thread forever: settled()
        # would never be true and close() would hang (seen once in CI). Non-blocking, it fails with EAGAIN, which
        # serve_forever ignores.
        self.server.socket.setblocking(False)
        self.port = self.server.server_address[1]
        self.url = f"http://{HOST}:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()

    def _set_busy(self, handler, busy: bool):
        with self._lock:
            self._busy[id(handler.connection)] = busy

    def _closed(self, handler):
        with self._lock:
            self._busy.pop(id(handler.connection), None)

    def _record(self, record: dict):
        with self._lock:
            record["seq"] = len(self._records)
            self._records.append(record)
            with open(self.log_path, "a") as f:
                f.write(json.dumps(record) + "\n")

    def records(self, request_id: str | None = None) -> list[dict]:
        with self._lock:
            return [r for r in self._records if request_id is None or r["request_id"] == request_id]

    def settled(self) -> bool:
        """No connection pending in the accept queue and none inside a request. The listener is checked first,
        then the counters: a connection accepted in between was counted before its accept()."""
        readable, _, _ = select.select([self.server.socket], [], [], 0)
        if readable:
            return False
        with self._lock:
            return self._accepting == 0 and not any(self._busy.values())

    def wait_settled(self, timeout: float = 10.0):
        wait_for(self.settled, timeout, "the upstream to finish every request it received")

    def assert_no_complete_body(self, request_id: str, timeout: float = 10.0) -> list[dict]:
        """After a rejection: whatever the upstream got for this request, no body completed."""
        self.wait_settled(timeout)
        seen = self.records(request_id)
        complete = [r for r in seen if r["body_complete"]]
        assert not complete, f"the upstream received a complete body for a rejected request: {complete}"
        return seen

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------------------------------------------
# The proxy


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Formwall:
    def __init__(self, tmp: Path, upstream: Upstream, rules: list[Path] | Path | None, *,
                 quarantine_dir: Path | None = None, audit_log: Path | None = None, extra: list[str] = (),
                 workers: int = 2):
        self.tmp = Path(tmp)
        self.upstream = upstream
        self.port = free_port()
        self.audit_log = Path(audit_log) if audit_log else self.tmp / "audit.log"
        self.quarantine_dir = Path(quarantine_dir) if quarantine_dir else self.tmp / "quarantine"
        self.stderr_path = self.tmp / f"formwall-{self.port}.stderr"
        args = [BIN, "serve", "--listen", f"{HOST}:{self.port}", "--upstream", upstream.url,
                "--workers", str(workers), "--quarantine-dir", str(self.quarantine_dir),
                "--audit-log", str(self.audit_log)]
        if rules is not None:
            for r in rules if isinstance(rules, (list, tuple)) else [rules]:
                args += ["--rules", str(r)]
        args += list(extra)
        self.args = args
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self._stderr)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 10.0):
        def ready():
            if self.proc.poll() is not None:
                pytest.fail(f"formwall exited with {self.proc.returncode}: {self.stderr()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.2):
                    return True
            except OSError:
                return False
        wait_for(ready, timeout, f"formwall to accept on port {self.port}", interval=0.01)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def events(self, msg: str | None = None) -> list[dict]:
        """The JSON event lines on stderr so far (those with `msg` when given)."""
        return event_lines(self.stderr()) if msg is None else events_with(self.stderr(), msg)

    def reload(self):
        self.proc.send_signal(signal.SIGHUP)

    def audit_records(self) -> list[dict]:
        return json_lines(self.audit_log)

    def audit_lines_raw(self) -> bytes:
        """The log's complete lines as written (see e2e_helpers.complete_prefix)."""
        return complete_prefix(self.audit_log.read_bytes()) if self.audit_log.exists() else b""

    def wait_audit(self, request_id: str, timeout: float = 10.0) -> dict:
        """The audit record of `request_id`, waiting for it to be written; fails if there are several."""
        def find():
            found = [r for r in self.audit_records() if r.get("request_id") == request_id]
            return found or None
        found = wait_for(find, timeout, f"the audit line of {request_id}")
        assert len(found) == 1, f"{len(found)} audit lines for {request_id}: {found}"
        return found[0]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._stderr.close()


def read_rotated(path: Path) -> list[bytes]:
    """Lines across `path` and its rotated generations `path.N.gz` (and a leftover uncompressed `path.1`)."""
    lines: list[bytes] = []
    base = Path(path)
    for gen in sorted(base.parent.glob(base.name + ".*.gz")):
        lines += gzip.decompress(gen.read_bytes()).splitlines()
    leftover = base.parent / (base.name + ".1")
    if leftover.exists():
        lines += leftover.read_bytes().splitlines()
    if base.exists():
        lines += base.read_bytes().splitlines()
    return lines


@pytest.fixture
def upstream(tmp_path):
    up = Upstream(tmp_path / "upstream.jsonl")
    yield up
    up.close()


def start_formwall(request, tmp_path, upstream, rules, **kwargs) -> Formwall:
    """Starts formwall for one test and registers its teardown."""
    fw = Formwall(tmp_path, upstream, rules, **kwargs)
    request.addfinalizer(fw.stop)
    return fw


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def formwall_with_rules(tmp_path_factory, name: str, rules_text: str):
    """Generator for a module fixture: a Formwall in front of an echo `Upstream`, with the rule file
    `rules_text` written into a fresh directory; stops both afterwards."""
    tmp = tmp_path_factory.mktemp(name)
    rules = tmp / f"{name}.rules"
    rules.write_text(rules_text)
    up = Upstream(tmp / "upstream.jsonl")
    fw = Formwall(tmp, up, rules)
    yield fw
    fw.stop()
    up.close()
