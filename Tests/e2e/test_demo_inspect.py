"""`formwall demo` answers the README's curl examples as documented; `formwall inspect` streams in constant
memory, re-encodes, and applies a policy; `--audit-field` logs opted-in field values only."""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import time
import zlib
import struct
from pathlib import Path

import pytest
import requests

from e2e_helpers import json_lines, wait_until

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("FORMWALL_BIN", str(ROOT / ".build" / "release" / "formwall"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, deadline: float = 15.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        assert proc.poll() is None, f"process exited early with {proc.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            select.select([], [], [], 0.02)
    raise AssertionError(f"port {port} never accepted")


def png_1x1() -> bytes:
    def chunk(t: bytes, d: bytes) -> bytes:
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0\0\0\0")) + chunk(b"IEND", b""))


def read_lines_until(stream, count: int, deadline: float = 10.0) -> list[str]:
    lines: list[str] = []
    end = time.monotonic() + deadline
    buf = b""
    fd = stream.fileno()
    while len(lines) < count and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        data = os.read(fd, 65536)
        if not data:
            break
        buf += data
        *done, buf = buf.split(b"\n")
        lines += [d.decode() for d in done if d.strip()]
    return lines


def test_demo_answers_the_readme_examples(tmp_path):
    listen, echo = free_port(), free_port()
    proc = subprocess.Popen([BIN, "demo", "--listen", f"127.0.0.1:{listen}", "--echo", f"127.0.0.1:{echo}"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_port(listen, proc)
        url = f"http://127.0.0.1:{listen}/upload"
        png = png_1x1()
        ok = requests.post(url, data={"caption": "hello"}, files={"image": ("photo.png", png, "image/png")}, timeout=10)
        assert ok.status_code == 200, ok.text
        echoed = ok.json()
        assert echoed["fields"] == {"caption": ["hello"]}
        (f,) = echoed["files"]
        assert f["filename"] == "photo.png" and f["size"] == len(png)
        import hashlib
        assert f["sha256"] == hashlib.sha256(png).hexdigest()

        big = requests.post(url, files={"image": ("big.png", os.urandom(7_000_000), "image/png")}, timeout=20)
        assert big.status_code == 413 and big.json()["error"] == "body_too_large", big.text

        cat = requests.post(url, files={"image": ("cat.jpg", b"<?php system($_GET[1]); ?>", "image/jpeg")}, timeout=10)
        assert cat.status_code == 415, cat.text
        assert cat.json()["error"] == "type_not_allowed" and "application/x-php" in cat.json()["detail"]

        lines = read_lines_until(proc.stdout, 3)
        assert len(lines) == 3, lines
        assert " ALLOW 200 POST /upload" in lines[0]
        assert " REJECT 413 POST /upload body_too_large" in lines[1]
        assert " REJECT 415 POST /upload type_not_allowed" in lines[2]
        for line, resp in zip(lines[1:], (big, cat)):
            assert f"req={resp.json()['request_id']}" in line
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0


def multipart(boundary: str, parts: list[tuple[str, str | None, bytes]]) -> bytes:
    out = b""
    for name, filename, data in parts:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        out += f"--{boundary}\r\nContent-Disposition: {disp}\r\n".encode()
        if filename is not None:
            out += b"Content-Type: application/octet-stream\r\n"
        out += b"\r\n" + data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


def test_inspect_reencodes_and_reports(tmp_path):
    body = multipart("AaB03x", [("a", None, b"v1"), ("f", "x.bin", b"\x00\x01data")])
    src = tmp_path / "body"
    src.write_bytes(body)
    out = tmp_path / "canonical"
    r = subprocess.run([BIN, "inspect", "--content-type", "multipart/form-data; boundary=AaB03x", str(src),
                        "--reencode", str(out)], capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["error"] is None and doc["anomalies"] == []
    assert [(p["name"], p["filename"], p["size"]) for p in doc["parts"]] == [("a", None, 2), ("f", "x.bin", 6)]
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    boundary = doc["boundary"]
    assert boundary.startswith("formwall-") and len(boundary) >= 41
    # The canonical body parses back to the same parts.
    again = subprocess.run([BIN, "inspect", "--content-type", f"multipart/form-data; boundary={boundary}",
                            str(out)], capture_output=True, timeout=30)
    assert again.returncode == 0
    assert [(p["name"], p["sha256"]) for p in json.loads(again.stdout)["parts"]] == \
        [(p["name"], p["sha256"]) for p in doc["parts"]]


def test_inspect_malformed_exits_1(tmp_path):
    src = tmp_path / "body"
    src.write_bytes(b"--AaB03x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nno end")
    r = subprocess.run([BIN, "inspect", "--content-type", "multipart/form-data; boundary=AaB03x", str(src)],
                       capture_output=True, timeout=30)
    assert r.returncode == 1
    assert json.loads(r.stdout)["error"] == "truncated"


def test_inspect_applies_a_policy(tmp_path):
    body = multipart("AaB03x", [("caption", None, b"hi"), ("image", "cat.jpg", b"<?php system($_GET[1]); ?>")])
    src = tmp_path / "body"
    src.write_bytes(body)
    r = subprocess.run([BIN, "inspect", "--rules", str(ROOT / "rules" / "demo.rules"), "--path", "/upload",
                        "--content-type", "multipart/form-data; boundary=AaB03x", str(src)],
                       capture_output=True, timeout=30)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["decision"] == "reject" and doc["status"] == 415 and doc["route"] == "/upload"
    (v,) = [v for v in doc["violations"] if v["kind"] == "type_not_allowed"]
    assert v["part"] == "image" and v["rule"].endswith("demo.rules:14") or v["rule"].startswith(str(ROOT))


@pytest.mark.parametrize("extra,kind,status", [
    (["--path", "/upload/My%20File"], None, None),
    (["--path", "/upload%2Fx"], "ambiguous_path", 400),
    (["--path", "/x/..%2Fupload"], "ambiguous_path", 400),
    (["--path", "/UPLOAD"], "ambiguous_path", 400),
    (["--path", "/upload", "--header", "X-HTTP-Method-Override: DELETE"], "method_not_allowed", 405),
    (["--path", "/upload?_method=put"], "method_not_allowed", 405),
])
def test_inspect_judges_paths_and_method_overrides_as_backends_read_them(tmp_path, extra, kind, status):
    """`formwall inspect` runs the head checks the proxy runs: a path a backend reads as another route's
    (demo.rules has `/upload` and the implicit fallback), and method overrides against `methods POST`."""
    body = multipart("AaB03x", [("caption", None, b"hi")])
    src = tmp_path / "body"
    src.write_bytes(body)
    r = subprocess.run([BIN, "inspect", "--rules", str(ROOT / "rules" / "demo.rules"), *extra,
                        "--content-type", "multipart/form-data; boundary=AaB03x", str(src)],
                       capture_output=True, timeout=30)
    doc = json.loads(r.stdout)
    if kind is None:
        # Every reading puts `/upload/My%20File` under `/upload`: judged there, whatever the body's verdict.
        assert doc["route"] == "/upload" and doc.get("error") not in ("ambiguous_path", "method_not_allowed"), doc
        return
    assert r.returncode == 1 and doc["error"] == kind and doc["status"] == status, doc


GIB_FEEDER = r"""
import json, os, resource, subprocess, sys
binary, boundary = sys.argv[1], "gib0123456789"
head = ("--%s\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big.bin\"\r\n\r\n" % boundary).encode()
tail = ("\r\n--%s--\r\n" % boundary).encode()
block = os.urandom(1 << 20).replace(b"\n", b"\x0b")
proc = subprocess.Popen([binary, "inspect", "--content-type", "multipart/form-data; boundary=" + boundary, "-"],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
proc.stdin.write(head)
for _ in range(1024):
    proc.stdin.write(block)
proc.stdin.write(tail)
proc.stdin.close()
out = proc.stdout.read()
code = proc.wait()
# This process has exactly one child, so RUSAGE_CHILDREN is the inspector's own peak RSS.
print(json.dumps({"code": code, "doc": json.loads(out),
                  "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_inspect_streams_a_gib_in_constant_memory(tmp_path):
    """1 GiB through `inspect -` from a pipe: the inspector's peak RSS stays far below the body size."""
    r = subprocess.run([sys.executable, "-c", GIB_FEEDER, BIN], capture_output=True, timeout=170)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["code"] == 0
    assert result["doc"]["parts"][0]["size"] == 1 << 30
    assert result["peak_kib"] < 64 * 1024, f"peak RSS {result['peak_kib']} KiB"


def test_audit_field_logs_only_named_fields(tmp_path):
    up_port, port = free_port(), free_port()
    echo = subprocess.Popen([BIN, "demo", "--listen", f"127.0.0.1:{free_port()}", "--echo", f"127.0.0.1:{up_port}"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    audit = tmp_path / "audit.log"
    fw = subprocess.Popen([BIN, "serve", "--listen", f"127.0.0.1:{port}", "--upstream", f"http://127.0.0.1:{up_port}",
                           "--workers", "1", "--audit-log", str(audit), "--audit-field", "user"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_port(up_port, echo)
        wait_port(port, fw)
        r = requests.post(f"http://127.0.0.1:{port}/x", files={"user": (None, "alice"), "password": (None, "s3cret")},
                          timeout=10)
        assert r.status_code == 200
        record = wait_until(lambda: (json_lines(audit) or [None])[-1], 10, what="the audit line")
        assert record["fields"] == [{"name": "user", "value": "alice", "truncated": False}]
        assert "s3cret" not in audit.read_text()
    finally:
        for p in (fw, echo):
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=15)


def test_port_in_use_is_one_clear_line(tmp_path):
    """Also when the port is held by another formwall (whose workers use SO_REUSEPORT)."""
    port, up = free_port(), free_port()
    first = subprocess.Popen([BIN, "serve", "--listen", f"127.0.0.1:{port}", "--upstream", f"http://127.0.0.1:{up}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, first)
        r = subprocess.run([BIN, "serve", "--listen", f"127.0.0.1:{port}", "--upstream", f"http://127.0.0.1:{up}"],
                           capture_output=True, timeout=10)
        assert r.returncode == 1
        lines = r.stderr.decode().strip().splitlines()
        assert len(lines) == 1, lines
        event = json.loads(lines[0])
        assert event["level"] == "error" and event["msg"] == "cannot start", event
        assert event["error"] == f"address already in use: 127.0.0.1:{port}", event
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=15) == 0
