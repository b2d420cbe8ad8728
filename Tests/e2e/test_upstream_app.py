"""The upstream oracle itself, without Formwall: if these fail, proxy results mean nothing."""

from __future__ import annotations

import json
import os
import time

from e2e_helpers import (
    IO_TIMEOUT,
    FilePart,
    RawConn,
    build_multipart,
    curl,
    expected_fields,
    expected_files,
    sha256,
)
from upstream_app import deterministic_bytes


def test_direct_curl_form_upload_is_parsed(upstream, tmp_path):
    data = os.urandom(300_000) + b"\r\n--not-a-boundary\r\n" + os.urandom(1000)
    (tmp_path / "photo.jpg").write_bytes(data)
    (tmp_path / "empty.txt").write_bytes(b"")
    r = curl("-F", "title=hello world", "-F", "title=second", "-F", "note=é ünïcode",
             "-F", f"photo=@{tmp_path / 'photo.jpg'};type=image/jpeg",
             "-F", f"empty=@{tmp_path / 'empty.txt'};type=text/plain",
             "-H", "X-Request-Id: direct-1", f"{upstream.url}/upload")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["body_complete"] is True
    assert doc["method"] == "POST" and doc["path"] == "/upload"
    assert doc["fields"] == {"title": ["hello world", "second"], "note": ["é ünïcode"]}
    assert doc["files"] == {
        "photo": [{"filename": "photo.jpg", "content_type": "image/jpeg", "size": len(data), "sha256": sha256(data)}],
        "empty": [{"filename": "empty.txt", "content_type": "text/plain", "size": 0, "sha256": sha256(b"")}],
    }
    assert doc["content_length"] is not None and int(doc["content_length"]) == doc["body_bytes"]
    logged = upstream.wait_for_request_id("direct-1")
    assert logged["files"] == doc["files"]


def test_direct_chunked_raw_upload_and_keepalive(upstream):
    files = [FilePart("f", "a.bin", os.urandom(70_000))]
    fields = [("k", "v")]
    body = build_multipart(fields, files, "XyZ")
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 777]), body[i:i + 777]) for i in range(0, len(body), 777))
    head = (b"POST /c HTTP/1.1\r\nHost: up\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Type: multipart/form-data; boundary=XyZ\r\n\r\n")
    with RawConn(upstream.port) as conn:
        conn.send(head + chunks + b"0\r\n\r\n")
        first = conn.read_response()
        conn.send(b"GET /second HTTP/1.1\r\nHost: up\r\n\r\n")
        second = conn.read_response()
    doc = first.json()
    assert doc["body_complete"] and doc["transfer_encoding"] == "chunked"
    assert doc["fields"] == expected_fields(fields) and doc["files"] == expected_files(files)
    assert second.json()["conn_id"] == doc["conn_id"], "upstream app must keep connections alive"
    assert second.json()["request_on_conn"] == 2


def test_direct_truncated_body_is_logged_incomplete(upstream):
    body = build_multipart([("a", "b")], [FilePart("f", "x", os.urandom(50_000))], "B0")
    head = (b"POST /t HTTP/1.1\r\nHost: up\r\nX-Request-Id: trunc-1\r\nContent-Length: %d\r\n"
            b"Content-Type: multipart/form-data; boundary=B0\r\n\r\n" % len(body))
    with RawConn(upstream.port) as conn:
        conn.send(head + body[: len(body) // 2])
    rec = upstream.wait_for_request_id("trunc-1")
    assert rec["body_complete"] is False
    assert rec["body_error"].startswith("incomplete")


def test_direct_die_mid_response_mode(upstream_factory):
    up = upstream_factory("die-mid-response")
    with RawConn(up.port) as conn:
        conn.send(b"GET / HTTP/1.1\r\nHost: up\r\n\r\n")
        resp = conn.read_response()
    assert resp.status == 200 and resp.framing == "length" and resp.complete is False


def test_deterministic_body_is_sent_after_its_head_as_it_is_made(upstream):
    """`size=N` makes its bytes while sending them, head first: a proxy's --upstream-response-timeout measures
    the time to the head, and a 30 MB body takes about a second of SHA-256 in Python on a fast machine (more on a
    loaded one). A body of 1 TiB, which no machine could make in time, so shows its head and first MiB at once
    (before: the whole body was made before the head, and nothing came)."""
    size = 1 << 40
    first = 1 << 20
    with RawConn(upstream.port) as conn:
        conn.send(b"GET /big?size=%d HTTP/1.1\r\nHost: up\r\nConnection: close\r\n\r\n" % size)
        deadline = time.monotonic() + IO_TIMEOUT
        while b"\r\n\r\n" not in conn.buf or len(conn.buf) - conn.buf.find(b"\r\n\r\n") - 4 < first:
            assert conn._fill(deadline), "closed early"
    head, _, body = bytes(conn.buf).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"\r\nContent-Length: %d" % size in head, head
    assert body[:first] == deterministic_bytes(first)


def test_oracle_multipart_parse_is_independent_of_read_boundaries():
    """The upstream must parse the same body the same way however the network cuts it (werkzeug's
    decoder alone does not: see AlignedFeed)."""
    import random

    import upstream_app

    class Pieces:
        def __init__(self, pieces):
            self.pieces = list(pieces)

        def read(self):
            return self.pieces.pop(0) if self.pieces else b""

    rng = random.Random(1234)
    boundary = "cut-boundary-1234"
    for trial in range(600):
        data = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 600))) if trial % 2 else b"\r\n" * rng.randint(0, 50)
        body = build_multipart([("a", "b")], [FilePart("f", "s.bin", data), FilePart("g", "t", b"xy\r\n")], boundary)
        if trial % 3 == 0:
            step = rng.randint(1, 4)
            pieces = [body[i:i + step] for i in range(0, len(body), step)]
        else:
            cuts = sorted(rng.sample(range(1, len(body)), rng.randint(1, 8)))
            pieces = [body[a:b] for a, b in zip([0] + cuts, cuts + [len(body)])]
        doc = upstream_app.parse_multipart(Pieces(pieces), boundary.encode())
        assert doc["fields"] == {"a": ["b"]}
        assert doc["files"]["f"][0]["size"] == len(data) and doc["files"]["f"][0]["sha256"] == sha256(data), trial
        assert doc["files"]["g"][0]["sha256"] == sha256(b"xy\r\n")
