#!/usr/bin/env python3
"""Which frameworks accept a chunked request body? Measured, not remembered.

Sends one multipart/form-data request with ``Transfer-Encoding: chunked`` (no Content-Length)
DIRECTLY to each real server in servers.py (no Formwall in between) and records what the app
parsed. The same body with a Content-Length is sent first as a control.

    .venv/bin/python Tests/e2e/upstreams/measure_chunked.py     # prints the Markdown table

Outcomes: ``intact`` (every field and file arrived), ``empty form`` (200, but the app saw no
fields and no files), ``error NNN``, ``no response`` (nothing within the deadline), ``closed`` (the
connection closed without a response), ``partial`` (some of the form).
The expected table lives in Tests/e2e/test_framework_chunked_table.py (EXPECTED); the copy in
docs/configuration.md is checked against it by the same test.
"""

from __future__ import annotations

import json
import socket
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from e2e_helpers import FilePart, PeerClosed, RawConn, build_multipart, expected_fields, sha256  # noqa: E402
from servers import HOST, KINDS, RealUpstream  # noqa: E402

# The servers of the table, in its order.
TABLE_KINDS = ["werkzeug", "gunicorn", "uvicorn", "django-gunicorn", "django-runserver", "php", "node"]
TIMEOUT = 5.0
BOUNDARY = "measure-chunked-7d1e"
FIELDS = [("title", "Grüße, ça va"), ("n", "42")]
FILE = FilePart("doc", "report.bin", bytes(range(256)) * 64)  # 16 KiB
BODY = build_multipart(FIELDS, [FILE], BOUNDARY)


def _chunked(body: bytes, piece: int = 4096) -> bytes:
    out = bytearray()
    for i in range(0, len(body), piece):
        chunk = body[i:i + piece]
        out += f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    return bytes(out + b"0\r\n\r\n")


def request_bytes(port: int, chunked: bool) -> bytes:
    head = (f"POST /upload HTTP/1.1\r\nHost: {HOST}:{port}\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
            "Connection: close\r\n")
    if chunked:
        return (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + _chunked(BODY)
    return (head + f"Content-Length: {len(BODY)}\r\n\r\n").encode() + BODY


def classify(doc: dict) -> str:
    want_files = {FILE.name: [{"filename": FILE.filename, "size": len(FILE.data), "sha256": sha256(FILE.data)}]}
    fields, files = doc.get("fields") or {}, doc.get("files") or {}
    if fields == expected_fields(FIELDS) and files == want_files:
        return "intact"
    if not fields and not files:
        return "empty form"
    return "partial"


def send(port: int, chunked: bool) -> str:
    try:
        with RawConn(port, timeout=TIMEOUT) as conn:
            conn.send(request_bytes(port, chunked))
            resp = conn.read_response("POST", timeout=TIMEOUT)
    except (socket.timeout, TimeoutError):
        return "no response"
    except (PeerClosed, ConnectionError):
        return "closed"
    if resp.status != 200:
        return f"error {resp.status}"
    return classify(json.loads(resp.body))


def measure(kind: str, workdir: Path) -> dict:
    up = RealUpstream(kind, workdir, name=f"measure-{kind}")
    try:
        return {"content-length": send(up.port, chunked=False), "chunked": send(up.port, chunked=True)}
    finally:
        up.stop()


def measure_all(workdir: Path | None = None) -> dict[str, str]:
    """{kind: outcome of the chunked request}; raises if a control (Content-Length) request failed."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="measure-chunked-"))
    out = {}
    for kind in TABLE_KINDS:
        result = measure(kind, workdir)
        if result["content-length"] != "intact":
            raise AssertionError(f"{kind}: the Content-Length control request was {result['content-length']}")
        out[kind] = result["chunked"]
    return out


LABELS = {
    "werkzeug": "werkzeug dev server (`run_simple`) + Flask",
    "gunicorn": "gunicorn (sync workers) + Flask",
    "uvicorn": "uvicorn + Starlette (python-multipart)",
    "django-gunicorn": "Django (`request.POST`/`FILES`) under gunicorn",
    "django-runserver": "Django (`request.POST`/`FILES`) under `manage.py runserver`",
    "php": "`php -S` + `$_POST`/`$_FILES`",
    "node": "node `http` module (the test's own minimal multipart parser)",
}


def markdown(table: dict[str, str]) -> str:
    lines = ["| server + framework | id | chunked multipart request |", "| --- | --- | --- |"]
    for kind, outcome in table.items():
        lines.append(f"| {LABELS[kind]} | `{kind}` | {outcome} |")
    return "\n".join(lines)


if __name__ == "__main__":
    start = time.monotonic()
    table = measure_all()
    print(markdown(table))
    print(f"\n({time.monotonic() - start:.1f} s)", file=sys.stderr)
