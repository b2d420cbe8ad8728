"""Non-multipart traffic through Formwall: bodies byte-identical, response framings, keep-alive,
connection reuse, pipelining, and the headers Formwall adds or removes."""

from __future__ import annotations

import json
import os
import re
import uuid

import pytest

from e2e_helpers import RawConn, new_session, sha256
from upstream_app import deterministic_bytes

MiB = 1 << 20
REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def rid() -> str:
    return "pt-" + uuid.uuid4().hex[:16]


def get(path: str, host: str = "app.test", extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode()


# ---------------------------------------------------------------------------------------------
# Request bodies that are not multipart pass through unchanged


def test_json_body_passthrough(proxy, upstream):
    payload = {"user": "ada", "items": list(range(1000)), "nested": {"ünïcode": "☃"}}
    request_id = rid()
    with new_session() as s:
        resp = s.post(f"{proxy.url}/api/items?page=2", json=payload, timeout=30,
                      headers={"X-Request-Id": request_id})
    sent = resp.request.body
    assert resp.status_code == 200, resp.text[:300]
    rec = upstream.wait_for_request_id(request_id)
    assert rec["body_complete"] is True
    assert rec["body_size"] == len(sent) and rec["body_sha256"] == sha256(sent)
    assert rec["headers"]["content-type"] == "application/json"
    assert rec["path"] == "/api/items?page=2"
    assert "fields" not in rec


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_octet_stream_passthrough(proxy, upstream, framing):
    data = os.urandom(8 * MiB + 5)
    request_id = rid()
    if framing == "content-length":
        head = (f"PUT /blob HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: {request_id}\r\n"
                f"Content-Type: application/octet-stream\r\nContent-Length: {len(data)}\r\n\r\n").encode()
        wire = head + data
    else:
        head = (f"PUT /blob HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: {request_id}\r\n"
                f"Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
        step = 100_003
        wire = head + b"".join(b"%x\r\n%s\r\n" % (len(data[i:i + step]), data[i:i + step])
                               for i in range(0, len(data), step)) + b"0\r\n\r\n"
    with RawConn(proxy.port, timeout=60) as conn:
        conn.send(wire)
        resp = conn.read_response()
    assert resp.status == 200, resp.body[:300]
    rec = upstream.wait_for_request_id(request_id)
    assert rec["body_complete"] is True
    assert rec["body_size"] == len(data) and rec["body_sha256"] == sha256(data)
    assert rec["method"] == "PUT"
    if framing == "content-length":
        # a known length stays known (or is re-framed as chunked), never anything else
        assert rec["content_length"] == str(len(data)) or rec["transfer_encoding"] == "chunked", rec["headers"]


def test_get_without_body(proxy, upstream):
    request_id = rid()
    with RawConn(proxy.port) as conn:
        conn.send(get("/search?q=a%20b&x=%2F", extra=f"X-Request-Id: {request_id}\r\n"))
        resp = conn.read_response()
    assert resp.status == 200
    doc = resp.json()
    assert doc["method"] == "GET" and doc["path"] == "/search?q=a%20b&x=%2F"
    assert doc["body_size"] == 0 and doc["content_length"] in (None, "0") and doc["transfer_encoding"] is None


# ---------------------------------------------------------------------------------------------
# Responses


@pytest.mark.parametrize("resp_framing", ["length", "chunked", "close"])
def test_response_body_framings(proxy, resp_framing):
    size = 300_001
    expected = deterministic_bytes(size)
    with RawConn(proxy.port) as conn:
        conn.send(get(f"/dl?size={size}&resp={resp_framing}"))
        resp = conn.read_response()
        assert resp.status == 200
        assert resp.complete, "response body ended early"
        assert len(resp.body) == size and resp.body == expected
        if resp_framing == "length":
            assert resp.framing == "length" and resp.header("Content-Length") == str(size)
        elif resp_framing == "chunked":
            assert resp.framing in ("chunked", "length")
        else:
            # close-delimited upstream: either relayed close-delimited or re-framed; if close-
            # delimited the connection must end right after.
            if resp.framing == "close":
                assert conn.eof


def test_head_then_get_on_one_connection(proxy):
    with RawConn(proxy.port) as conn:
        conn.send(b"HEAD /h?size=5000 HTTP/1.1\r\nHost: app.test\r\n\r\n")
        head = conn.read_response(method="HEAD")
        assert head.status == 200 and head.body == b""
        assert head.header("Content-Length") == "5000"
        conn.send(get("/after-head?size=10"))
        after = conn.read_response()
    assert after.status == 200 and after.body == deterministic_bytes(10), \
        "HEAD response must not carry a body (the next response would be corrupted)"


def test_204_and_304_then_more_on_one_connection(proxy):
    with RawConn(proxy.port) as conn:
        conn.send(get("/nc?status=204"))
        r204 = conn.read_response()
        conn.send(get("/nm?status=304&hdr=ETag:%22abc%22"))
        r304 = conn.read_response()
        conn.send(get("/last?size=3"))
        last = conn.read_response()
    assert r204.status == 204 and r204.body == b""
    assert r304.status == 304 and r304.body == b"" and r304.header("ETag") == '"abc"'
    assert last.status == 200 and last.body == deterministic_bytes(3)


def test_upstream_error_status_and_headers_pass_through(proxy):
    with RawConn(proxy.port) as conn:
        conn.send(get("/missing?status=404&hdr=X-App:yes&hdr=Set-Cookie:a%3D1&hdr=Set-Cookie:b%3D2"))
        resp = conn.read_response()
    assert resp.status == 404
    assert resp.header("X-App") == "yes"
    assert resp.header_all("Set-Cookie") == ["a=1", "b=2"], "repeated response fields must be kept apart"
    assert resp.header("Content-Type") == "application/json" and resp.json()["path"].startswith("/missing")


# ---------------------------------------------------------------------------------------------
# Keep-alive, upstream reuse, pipelining


def test_keepalive_requests_session(proxy, upstream):
    with new_session() as s:
        ids = []
        for i in range(6):
            request_id = rid()
            if i % 2:
                r = s.post(f"{proxy.url}/ka/{i}", data=b"x" * (i * 1000), timeout=10,
                           headers={"X-Request-Id": request_id})
            else:
                r = s.get(f"{proxy.url}/ka/{i}", timeout=10, headers={"X-Request-Id": request_id})
            assert r.status_code == 200
            assert r.json()["path"] == f"/ka/{i}"
            ids.append(request_id)
    for request_id in ids:
        upstream.wait_for_request_id(request_id)


def test_keepalive_raw_and_upstream_connection_reuse(upstream, formwall_factory):
    fw = formwall_factory(upstream.url, "--workers", "1")
    n = 8
    with RawConn(fw.port) as conn:
        local_port = conn.sock.getsockname()[1]
        for i in range(n):
            body = os.urandom(i * 100)
            conn.send(f"POST /seq/{i} HTTP/1.1\r\nHost: app.test\r\nContent-Length: {len(body)}\r\n"
                      f"Content-Type: application/octet-stream\r\n\r\n".encode() + body)
            resp = conn.read_response()
            assert resp.status == 200, f"request {i} on the kept-alive connection: {resp.body[:200]!r}"
            doc = resp.json()
            assert doc["path"] == f"/seq/{i}" and doc["body_sha256"] == sha256(body)
            assert conn.sock.getsockname()[1] == local_port
    conn_ids = [r["conn_id"] for r in upstream.requests() if r["path"].startswith("/seq/")]
    assert len(conn_ids) == n
    assert len(set(conn_ids)) < n, f"Formwall opened a new upstream connection for every request: {conn_ids}"


def test_pipelined_requests_answered_in_order(proxy, upstream):
    body = b'{"pipelined": true}'
    wire = (get("/p/1")
            + b"POST /p/2 HTTP/1.1\r\nHost: app.test\r\nContent-Type: application/json\r\n"
            + b"Content-Length: %d\r\n\r\n" % len(body) + body
            + get("/p/3?size=7")
            + b"POST /p/4 HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"3\r\nabc\r\n0\r\n\r\n"
            + get("/p/5"))
    with RawConn(proxy.port) as conn:
        conn.send(wire)
        responses = [conn.read_response() for _ in range(5)]
    assert [r.status for r in responses] == [200] * 5
    assert responses[0].json()["path"] == "/p/1"
    assert responses[1].json()["path"] == "/p/2" and responses[1].json()["body_sha256"] == sha256(body)
    assert responses[2].body == deterministic_bytes(7)
    assert responses[3].json()["path"] == "/p/4" and responses[3].json()["body_sha256"] == sha256(b"abc")
    assert responses[4].json()["path"] == "/p/5"


def test_connection_close_from_client_is_honoured(proxy):
    with RawConn(proxy.port) as conn:
        conn.send(get("/bye", extra="Connection: close\r\n"))
        resp = conn.read_response()
        assert resp.status == 200
        assert conn.wait_closed(timeout=5), "Formwall must close after a Connection: close request"


# ---------------------------------------------------------------------------------------------
# Headers added and removed


def test_forwarding_headers_added(proxy, upstream):
    with RawConn(proxy.port) as conn:
        conn.send(get("/fwd", host="shop.example:8443"))
        doc = conn.read_response().json()
    h = doc["headers"]
    assert h["host"] == "shop.example:8443", "Host passes through"
    assert h["x-forwarded-for"] == "127.0.0.1"
    assert h["x-forwarded-proto"] == "http"
    assert h["x-forwarded-host"] == "shop.example:8443"
    assert h["via"] == "1.1 formwall"
    assert REQUEST_ID_RE.match(h["x-request-id"])


def test_forwarding_headers_with_client_supplied_values(proxy):
    with RawConn(proxy.port) as conn:
        conn.send(get("/fwd2", extra="X-Forwarded-For: 203.0.113.9\r\nVia: 1.0 edge\r\n"))
        h = conn.read_response().json()["headers"]
    # Formwall's own hop is always last, whether it appends to or replaces what the client sent.
    assert [p.strip() for p in h["x-forwarded-for"].split(",")][-1] == "127.0.0.1"
    assert [p.strip() for p in h["via"].split(",")][-1] == "1.1 formwall"


@pytest.mark.parametrize("sent,kept", [
    ("client-id.1:2_3-x", True),
    ("A" * 128, True),
    ("A" * 129, False),
    ("has space", False),
    ("semi;colon", False),
    ("ünï", False),
    (None, False),
])
def test_request_id(proxy, upstream, sent, kept):
    extra = f"X-Request-Id: {sent}\r\n" if sent is not None else ""
    with RawConn(proxy.port) as conn:
        conn.send(f"GET /rid HTTP/1.1\r\nHost: app.test\r\n{extra}\r\n".encode("utf-8"))
        resp = conn.read_response()
    assert resp.status == 200, resp.body[:300]
    got = resp.json()["headers"].get("x-request-id")
    assert got is not None and REQUEST_ID_RE.match(got), got
    if kept:
        assert got == sent
    else:
        assert got != sent


def test_generated_request_ids_are_unique(proxy):
    seen = set()
    with RawConn(proxy.port) as conn:
        for _ in range(5):
            conn.send(get("/uniq"))
            seen.add(conn.read_response().json()["headers"]["x-request-id"])
    assert len(seen) == 5


def test_hop_by_hop_headers_removed(proxy):
    extra = ("Connection: keep-alive, X-Hop-Custom\r\nX-Hop-Custom: secret\r\nKeep-Alive: timeout=5\r\n"
             "Proxy-Connection: keep-alive\r\nTE: trailers\r\n"
             "X-End-To-End: kept\r\n")
    with RawConn(proxy.port) as conn:
        conn.send(get("/hop", extra=extra))
        h = conn.read_response().json()["headers"]
    for name in ("x-hop-custom", "keep-alive", "proxy-connection", "te"):
        assert name not in h, f"hop-by-hop {name} was forwarded: {h}"
    assert "x-hop-custom" not in h.get("connection", "").lower()
    assert h["x-end-to-end"] == "kept"


def test_http10_client_gets_a_chunked_response_dechunked(proxy):
    """HTTP/1.0 has no chunked coding: the payload is sent close-delimited, then the connection closes."""
    size = 70_001
    expected = deterministic_bytes(size)
    with RawConn(proxy.port) as conn:
        conn.send(f"GET /dl?size={size}&resp=chunked HTTP/1.0\r\nHost: app.test\r\n\r\n".encode())
        resp = conn.read_response()
        assert resp.status == 200
        assert resp.header("Transfer-Encoding") is None
        assert resp.framing == "close"
        assert resp.body == expected
        assert conn.eof
