"""Request smuggling and malformed heads over a raw socket: Formwall answers with a JSON error of the
right status and kind, closes the connection, and forwards nothing to the upstream."""

from __future__ import annotations

import uuid

import pytest

from e2e_helpers import RawConn, assert_json_error, raw_request

H = "POST /target HTTP/1.1\r\nHost: app.test\r\n"

CASES = [
    # id, raw request, status, kind
    ("cl-and-te", H + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     400, "content_length_with_transfer_encoding"),
    ("te-and-cl", H + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
     400, "content_length_with_transfer_encoding"),
    ("duplicate-cl", H + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
     400, "duplicate_content_length"),
    ("duplicate-cl-different", H + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
     400, "duplicate_content_length"),
    ("cl-list", H + "Content-Length: 5, 5\r\n\r\nhello", 400, "content_length_list"),
    ("cl-plus-sign", H + "Content-Length: +5\r\n\r\nhello", 400, "invalid_content_length"),
    ("cl-not-digits", H + "Content-Length: 0x5\r\n\r\nhello", 400, "invalid_content_length"),
    # Past 2^63 - 1: nginx and Go refuse it, curl ignores it. Passed on, the next parser would frame the body
    # differently (or not at all), so it is refused here too.
    ("cl-past-int64", H + "Content-Length: 9223372036854775808\r\n\r\nhello", 400, "invalid_content_length"),
    ("cl-uint64-max", H + "Content-Length: 18446744073709551615\r\n\r\nhello", 400, "invalid_content_length"),
    # Request-target forms (RFC 9112 section 3.2). A server reads an absolute-form target's authority and ignores
    # Host (werkzeug sets HTTP_HOST from it), so one naming another host than Host is refused: routed by Host,
    # it would be judged by another host's rules.
    ("absolute-form-other-host", "GET http://admin.test/upload HTTP/1.1\r\nHost: app.test\r\n\r\n", 400,
     "host_mismatch"),
    ("absolute-form-other-port", "GET http://app.test:8080/ HTTP/1.1\r\nHost: app.test\r\n\r\n", 400,
     "host_mismatch"),
    ("absolute-form-http10-no-host", "GET http://app.test/ HTTP/1.0\r\n\r\n", 400, "host_mismatch"),
    ("absolute-form-userinfo", "GET http://u@app.test/ HTTP/1.1\r\nHost: app.test\r\n\r\n", 400,
     "invalid_request_target"),
    ("absolute-form-ftp", "GET ftp://app.test/f HTTP/1.1\r\nHost: app.test\r\n\r\n", 400,
     "invalid_request_target"),
    ("asterisk-form-get", "GET * HTTP/1.1\r\nHost: app.test\r\n\r\n", 400, "invalid_request_target"),
    ("authority-form-get", "GET app.test:80 HTTP/1.1\r\nHost: app.test:80\r\n\r\n", 400,
     "invalid_request_target"),
    ("relative-target", "GET upload HTTP/1.1\r\nHost: app.test\r\n\r\n", 400, "invalid_request_target"),
    # No target form has a fragment; Go keeps `#x` in the path where werkzeug and route matching cut it.
    ("fragment", "GET /x#/../upload HTTP/1.1\r\nHost: app.test\r\n\r\n", 400, "invalid_request_target"),
    ("obs-fold", H + "X-Long: first\r\n  continued\r\nContent-Length: 0\r\n\r\n", 400, "obs_fold"),
    ("bare-lf-in-headers", "GET / HTTP/1.1\r\nHost: app.test\nX-A: b\r\n\r\n", 400, "bare_lf"),
    ("bare-lf-everywhere", "GET / HTTP/1.1\nHost: app.test\n\n", 400, "bare_lf"),
    ("bare-cr", "GET / HTTP/1.1\r\nHost: app.test\rX-A: b\r\n\r\n", 400, "bare_cr"),
    ("space-before-colon", H + "Content-Length : 5\r\n\r\nhello", 400, "whitespace_before_colon"),
    ("te-gzip", H + "Transfer-Encoding: gzip\r\n\r\n", 501, "unsupported_transfer_encoding"),
    ("te-gzip-chunked", H + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501,
     "unsupported_transfer_encoding"),
    ("te-chunked-twice", H + "Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400,
     "invalid_transfer_encoding"),
    ("te-two-fields", H + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
     "invalid_transfer_encoding"),
    ("te-chunked-not-last", H + "Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", 400, "chunked_not_final"),
    ("te-in-http10", "POST / HTTP/1.0\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
     "transfer_encoding_in_http10"),
    ("missing-host", "GET / HTTP/1.1\r\nX-A: b\r\n\r\n", 400, "missing_host"),
    ("duplicate-host", "GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", 400, "duplicate_host"),
    ("bad-request-line", "GET  / HTTP/1.1\r\nHost: app.test\r\n\r\n", 400, "invalid_request_line"),
    ("http2-version", "GET / HTTP/2.0\r\nHost: app.test\r\n\r\n", 505, "unsupported_version"),
    ("expect-other", H + "Expect: 200-ok\r\nContent-Length: 0\r\n\r\n", 417, "unsupported_expectation"),
    ("nul-in-value", "GET / HTTP/1.1\r\nHost: app.test\r\nX-A: a\x00b\r\n\r\n", 400, "invalid_header_value"),
    ("huge-head", "GET / HTTP/1.1\r\nHost: app.test\r\nX-Big: " + "a" * 40000 + "\r\n\r\n", 431,
     "head_too_large"),
    ("too-many-headers", "GET / HTTP/1.1\r\nHost: app.test\r\n"
     + "".join(f"X-H{i}: {i}\r\n" for i in range(150)) + "\r\n", 431, "too_many_headers"),
]


def assert_upstream_saw_nothing(proxy, upstream, marker: str) -> None:
    """Barrier: a canary request through Formwall reaches the upstream and is logged; by then, any
    forwarded piece of the rejected request would have been logged (request heads are logged on
    arrival). Nothing but the canary may be there."""
    canary = "canary-" + marker
    resp = raw_request(proxy.port, f"GET /canary HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: {canary}\r\n\r\n".encode())
    assert resp.status == 200, "Formwall must still serve after rejecting a request"
    upstream.wait_for_request_id(canary)
    starts = [r for r in upstream.records("request_start") if r.get("request_id") != canary]
    assert starts == [], f"the rejected request reached the upstream: {starts}"


@pytest.mark.parametrize("raw,status,kind", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_request_rejected(proxy, upstream, raw, status, kind):
    marker = uuid.uuid4().hex[:12]
    with RawConn(proxy.port) as conn:
        conn.send(raw.encode("latin-1"))
        resp = conn.read_response(timeout=10)
        assert_json_error(resp, status, kind)
        assert (resp.header("Connection") or "").lower() == "close"
        assert conn.wait_closed(timeout=5), "Formwall must close the connection after a framing error"
    assert_upstream_saw_nothing(proxy, upstream, marker)


def test_smuggled_second_request_is_not_forwarded(proxy, upstream):
    """The classic CL.TE payload: whatever the framing, the embedded request must never arrive."""
    smuggled = "GET /smuggled HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: smuggled\r\n\r\n"
    body = "0\r\n\r\n" + smuggled
    raw = (H + f"Content-Length: {len(body)}\r\nTransfer-Encoding: chunked\r\n\r\n" + body).encode()
    with RawConn(proxy.port) as conn:
        conn.send(raw)
        resp = conn.read_response(timeout=10)
        assert_json_error(resp, 400, "content_length_with_transfer_encoding")
        conn.wait_closed(timeout=5)
    assert_upstream_saw_nothing(proxy, upstream, "smuggle")
    assert not [r for r in upstream.records(None) if r.get("path") == "/smuggled"]


def test_invalid_chunk_size_in_body(proxy, upstream):
    """A framing error inside a chunked body: 400 for the client (or a close, if the response had
    started), and the upstream never sees a complete body."""
    request_id = "badchunk-" + uuid.uuid4().hex[:8]
    raw = (H + f"X-Request-Id: {request_id}\r\nContent-Type: application/octet-stream\r\n"
           "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nnope\r\n0\r\n\r\n").encode()
    with RawConn(proxy.port) as conn:
        conn.send(raw)
        resp = conn.read_response(timeout=10)
        assert_json_error(resp, 400, "invalid_chunk_size")
        assert conn.wait_closed(timeout=5)
    # If the head was forwarded already, its body must end incomplete.
    resp = raw_request(proxy.port, b"GET /canary HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: canary-bc\r\n\r\n")
    assert resp.status == 200
    upstream.wait_for_request_id("canary-bc")
    if any(r.get("request_id") == request_id for r in upstream.records("request_start")):
        rec = upstream.wait_for_request_id(request_id)
        assert rec["body_complete"] is False, "upstream received a complete body for a broken request"


@pytest.mark.parametrize("target,forwarded", [
    ("http://app.test/abs/x?q=1", "/abs/x?q=1"),
    ("HTTP://APP.TEST?only=query", "/?only=query"),
])
def test_absolute_form_for_the_host_goes_upstream_in_origin_form(proxy, upstream, target, forwarded):
    """An absolute-form target naming the Host's own authority is served, and the upstream gets the origin-form
    that Formwall routed by, with the same Host: nothing upstream can read another host from it."""
    rid = "absform-" + uuid.uuid4().hex[:12]
    resp = raw_request(proxy.port, f"GET {target} HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: {rid}\r\n"
                                   "Connection: close\r\n\r\n".encode())
    assert resp.status == 200, resp.body[:300]
    upstream.wait_for_request_id(rid)
    start = [r for r in upstream.records("request_start") if r.get("request_id") == rid]
    assert len(start) == 1
    assert start[0]["path"] == forwarded
    assert start[0]["headers"]["host"] == "app.test"
