"""multipart/form-data uploads through Formwall: what the upstream parsed equals what was sent,
re-encoded with a fresh boundary and canonical part headers, chunked (default) or spooled."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

from e2e_helpers import (
    FilePart,
    RawConn,
    assert_canonical_parts,
    assert_upstream_chunked,
    assert_upstream_spooled,
    boundary_of,
    build_multipart,
    curl,
    expected_fields,
    expected_files,
    new_session,
    sha256,
)

MiB = 1 << 20
GiB = 1 << 30


def rid() -> str:
    return "e2e-" + uuid.uuid4().hex[:16]


def pattern(n: int, seed: int = 0) -> bytes:
    """n non-periodic bytes (a misplaced or dropped block changes the sha256)."""
    block = hashlib.sha256(b"seed-%d" % seed).digest() * 2048  # 64 KiB
    out = bytearray()
    i = 0
    while len(out) < n:
        out += i.to_bytes(8, "little") + block[8:]
        i += 1
    return bytes(out[:n])


def check_upload(rec: dict, fields, files, client_boundary: str | None, spooled: bool = False) -> None:
    assert rec["body_complete"] is True, rec.get("body_error")
    assert rec["fields"] == expected_fields(fields)
    assert rec["files"] == expected_files(files)
    if client_boundary is not None:
        assert rec["boundary"] != client_boundary, "upstream must see a fresh boundary"
    assert_canonical_parts(rec)
    assert rec["preamble_len"] == 0 and rec["epilogue_len"] == 0, "canonical body has no preamble/epilogue"
    if spooled:
        assert_upstream_spooled(rec)
    else:
        assert_upstream_chunked(rec)


# ---------------------------------------------------------------------------------------------
# curl -F


def curl_sent_boundary(verbose_stderr: bytes) -> str:
    for line in verbose_stderr.decode("latin-1").splitlines():
        if line.lower().startswith("> content-type: multipart/form-data"):
            return boundary_of(line[2:].split(":", 1)[1])
    raise AssertionError("curl -v did not show the multipart Content-Type it sent")


@pytest.mark.parametrize("size", [0, 1, 1000, MiB + 1, 16 * MiB], ids=lambda s: f"{s}B")
def test_curl_form_upload(proxy, upstream, tmp_path, size):
    data = pattern(size, seed=size)
    path = tmp_path / "upload.bin"
    path.write_bytes(data)
    request_id = rid()
    out = tmp_path / "resp.json"
    r = curl("-v", "-o", str(out), "-w", "%{http_code}", "-H", f"X-Request-Id: {request_id}",
             "-F", "title=Quarterly report", "-F", "tags=a", "-F", "tags=b",
             "-F", f"doc=@{path};type=application/pdf;filename=report.pdf",
             f"{proxy.url}/upload")
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == b"200", out.read_bytes()[:500]
    fields = [("title", "Quarterly report"), ("tags", "a"), ("tags", "b")]
    files = [FilePart("doc", "report.pdf", data, "application/pdf")]
    doc = json.loads(out.read_bytes())
    rec = upstream.wait_for_request_id(request_id)
    for seen in (doc, rec):
        check_upload(seen, fields, files, client_boundary=curl_sent_boundary(r.stderr))
    assert rec["method"] == "POST" and rec["path"] == "/upload"


def test_curl_chunked_form_upload(proxy, upstream, tmp_path):
    data = pattern(3 * MiB + 17, seed=3)
    (tmp_path / "a.bin").write_bytes(data)
    request_id = rid()
    r = curl("-v", "-H", "Transfer-Encoding: chunked", "-H", f"X-Request-Id: {request_id}",
             "-F", "k=v", "-F", f"f=@{tmp_path / 'a.bin'};type=application/octet-stream",
             f"{proxy.url}/chunked")
    assert r.returncode == 0, r.stderr.decode()
    rec = upstream.wait_for_request_id(request_id)
    check_upload(rec, [("k", "v")], [FilePart("f", "a.bin", data)],
                 client_boundary=curl_sent_boundary(r.stderr))


# ---------------------------------------------------------------------------------------------
# Python requests (files=)


@pytest.mark.parametrize("size", [0, 10, 65536, 5 * MiB], ids=lambda s: f"{s}B")
def test_requests_files_upload(proxy, upstream, size):
    data = os.urandom(size)
    small = b"tiny \x00\xff binary"
    request_id = rid()
    with new_session() as s:
        resp = s.post(
            f"{proxy.url}/form?x=1",
            data={"name": "Ada", "empty": ""},
            files=[("attachment", ("data.bin", data, "application/x-test")),
                   ("attachment", ("second.txt", small, "text/plain"))],
            headers={"X-Request-Id": request_id},
            timeout=60,
        )
    assert resp.status_code == 200, resp.text[:500]
    sent_boundary = boundary_of(resp.request.headers["Content-Type"])
    fields = [("name", "Ada"), ("empty", "")]
    files = [FilePart("attachment", "data.bin", data, "application/x-test"),
             FilePart("attachment", "second.txt", small, "text/plain")]
    rec = upstream.wait_for_request_id(request_id)
    check_upload(rec, fields, files, client_boundary=sent_boundary)
    assert resp.json()["files"] == rec["files"]
    assert rec["path"] == "/form?x=1"


def test_spool_mode_sends_content_length(upstream, formwall_factory, tmp_path):
    fw = formwall_factory(upstream.url, "--upstream-body", "spool")
    data = pattern(20 * MiB + 3, seed=7)
    (tmp_path / "s.bin").write_bytes(data)
    request_id = rid()
    r = curl("-v", "-H", f"X-Request-Id: {request_id}", "-F", "a=1",
             "-F", f"f=@{tmp_path / 's.bin'};type=image/png", f"{fw.url}/spool")
    assert r.returncode == 0, r.stderr.decode()
    rec = upstream.wait_for_request_id(request_id)
    check_upload(rec, [("a", "1")], [FilePart("f", "s.bin", data, "image/png")],
                 client_boundary=curl_sent_boundary(r.stderr),
                 spooled=True)


def test_spool_mode_small_requests_upload(upstream, formwall_factory):
    fw = formwall_factory(upstream.url, "--upstream-body", "spool")
    data = os.urandom(1234)
    request_id = rid()
    with new_session() as s:
        resp = s.post(f"{fw.url}/s", data={"x": "y"}, files={"f": ("f.txt", data, "text/plain")},
                      headers={"X-Request-Id": request_id}, timeout=30)
    assert resp.status_code == 200
    rec = upstream.wait_for_request_id(request_id)
    check_upload(rec, [("x", "y")], [FilePart("f", "f.txt", data, "text/plain")],
                 client_boundary=boundary_of(resp.request.headers["Content-Type"]), spooled=True)


# ---------------------------------------------------------------------------------------------
# Raw bodies: tricky content, chunked framing split everywhere, Expect: 100-continue


def tricky_body(boundary: str):
    b = boundary.encode()
    data = (b"\r\n--" + b[:-1] + b"!"  # a partial delimiter
            + b"--" + b + b"--"        # the boundary without the leading CRLF
            + b"\r\n\r\n" + os.urandom(5000) + b"\r\n--" + b[:3] + b"\r\r\n\n")
    fields = [("plain", "value with -- dashes"), ("multi-line", "line1\r\nline2\r\n"), ("utf8", "naïve ☃")]
    files = [FilePart("up", "weird.bin", data), FilePart("up2", "nul.bin", b"\x00" * 1000, "application/x-nul")]
    body = build_multipart(fields, files, boundary, preamble=b"ignored preamble\r\n",
                           epilogue=b"ignored epilogue\r\n")
    return body, fields, files


def test_raw_content_length_tricky_content(proxy, upstream):
    boundary = "AaB03x"
    body, fields, files = tricky_body(boundary)
    request_id = rid()
    head = (f"POST /raw HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: {request_id}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with RawConn(proxy.port) as conn:
        conn.send(head + body)
        resp = conn.read_response()
    assert resp.status == 200, resp.body[:500]
    rec = upstream.wait_for_request_id(request_id)
    check_upload(rec, fields, files, client_boundary=boundary)


@pytest.mark.parametrize("chunk", [1, 7, 4096], ids=lambda c: f"chunks-of-{c}")
def test_raw_chunked_client_body(proxy, upstream, chunk):
    boundary = "chunky-boundary-1234"
    if chunk == 1:  # one byte per chunk: keep it small
        fields, files = [("a", "b")], [FilePart("f", "small.bin", os.urandom(300))]
        body = build_multipart(fields, files, boundary)
    else:
        body, fields, files = tricky_body(boundary)
    request_id = rid()
    framed = bytearray()
    for i in range(0, len(body), chunk):
        piece = body[i:i + chunk]
        ext = b";ext=1" if i == 0 else b""
        framed += b"%x%s\r\n%s\r\n" % (len(piece), ext, piece)
    framed += b"0\r\n\r\n"
    head = (f"POST /chunked HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: {request_id}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
            f"Transfer-Encoding: chunked\r\n\r\n").encode()
    with RawConn(proxy.port) as conn:
        conn.send(head + bytes(framed))
        resp = conn.read_response()
    assert resp.status == 200, resp.body[:500]
    rec = upstream.wait_for_request_id(request_id)
    check_upload(rec, fields, files, client_boundary=boundary)


def test_expect_100_continue_is_answered(proxy, upstream):
    boundary = "exp100"
    data = os.urandom(2 * MiB)
    body = build_multipart([("a", "1")], [FilePart("f", "e.bin", data)], boundary)
    request_id = rid()
    head = (f"POST /expect HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: {request_id}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
            f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n").encode()
    with RawConn(proxy.port) as conn:
        conn.send(head)
        # Nothing of the body is sent until an interim 100 arrives (bounded wait).
        line = conn._take_line(deadline=time.monotonic() + 5)
        assert line is not None and line.startswith(b"HTTP/1.1 100"), f"expected 100 Continue, got {line!r}"
        assert conn._take_line(deadline=time.monotonic() + 5) == b""
        conn.send(body)
        resp = conn.read_response()
    assert resp.status == 200, resp.body[:500]
    rec = upstream.wait_for_request_id(request_id)
    check_upload(rec, [("a", "1")], [FilePart("f", "e.bin", data)], client_boundary=boundary)


# ---------------------------------------------------------------------------------------------
# 1 GiB, streamed from a file on /dev/shm (curl) and from a generator (requests, chunked)


@pytest.fixture(scope="module")
def gib_file(tmp_path_factory):
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() and shutil.disk_usage("/dev/shm").free > 3 * GiB \
        else tmp_path_factory.mktemp("big")
    path = base / f"formwall-e2e-{uuid.uuid4().hex[:8]}.bin"
    digest = hashlib.sha256()
    block = os.urandom(MiB)
    with open(path, "wb") as f:  # fully written, not sparse
        for i in range(GiB // MiB):
            piece = i.to_bytes(8, "little") + block[8:]
            digest.update(piece)
            f.write(piece)
    yield path, digest.hexdigest()
    path.unlink(missing_ok=True)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_1gib_curl_upload(proxy, upstream, gib_file, tmp_path):
    path, digest = gib_file
    request_id = rid()
    r = curl("-o", str(tmp_path / "r.json"), "-w", "%{http_code}", "-H", f"X-Request-Id: {request_id}",
             "-F", "kind=big", "-F", f"blob=@{path};type=application/octet-stream;filename=big.bin",
             f"{proxy.url}/big", timeout=150)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == b"200"
    rec = upstream.wait_for_request_id(request_id)
    assert rec["body_complete"] is True, rec.get("body_error")
    assert rec["fields"] == {"kind": ["big"]}
    assert rec["files"] == {"blob": [{"filename": "big.bin", "content_type": "application/octet-stream",
                                      "size": GiB, "sha256": digest}]}
    assert_upstream_chunked(rec)
    assert_canonical_parts(rec)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_1gib_requests_generator_chunked_upload(proxy, upstream, gib_file):
    path, digest = gib_file
    boundary = "gen-" + uuid.uuid4().hex
    request_id = rid()

    def body():
        yield (f"--{boundary}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nstreamed\r\n"
               f"--{boundary}\r\nContent-Disposition: form-data; name=\"blob\"; filename=\"gen.bin\"\r\n"
               f"Content-Type: application/x-gen\r\n\r\n").encode()
        with open(path, "rb") as f:
            while True:
                piece = f.read(MiB)
                if not piece:
                    break
                yield piece
        yield f"\r\n--{boundary}--\r\n".encode()

    with new_session() as s:
        resp = s.post(f"{proxy.url}/gen", data=body(), timeout=150,
                      headers={"Content-Type": f"multipart/form-data; boundary={boundary}",
                               "X-Request-Id": request_id})
    assert resp.request.headers.get("Transfer-Encoding") == "chunked"
    assert resp.status_code == 200, resp.text[:300]
    rec = upstream.wait_for_request_id(request_id)
    assert rec["body_complete"] is True, rec.get("body_error")
    assert rec["fields"] == {"note": ["streamed"]}
    assert rec["files"] == {"blob": [{"filename": "gen.bin", "content_type": "application/x-gen",
                                      "size": GiB, "sha256": digest}]}
    assert rec["boundary"] != boundary
    assert_upstream_chunked(rec)
