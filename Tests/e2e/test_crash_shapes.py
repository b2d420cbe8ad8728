"""No request can crash Formwall: the ~300-byte shapes that used to kill `formwall serve --rules`.

Bytes after the multipart close delimiter (an epilogue, extra hyphens, transport padding, a second body
behind it) reached a policy evaluator that had already ended, and the process trapped. Each shape goes over
a raw socket to the real binary with a rules file, on a route that logs anomalies (the body is forwarded
canonically: fresh boundary, no preamble, no epilogue) and on one that rejects them (a 4xx JSON error).
After every request the same process must still be alive and serving.
"""

from __future__ import annotations

import uuid

import pytest

from e2e_helpers import RawConn, assert_json_error, raw_request

RULES = """
route /log {
    unknown allow;
    field title { max 64; }
    file doc { max 1KiB; }
}
route /strict {
    anomaly data-after reject;
    anomaly delimiter-lookalike reject;
    unknown allow;
    field title { max 64; }
    file doc { max 1KiB; }
}
"""

CT = "multipart/form-data; boundary=B"
PARTS = (b"--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n"
         b"--B\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"a.txt\"\r\n"
         b"Content-Type: text/plain\r\n\r\nplain text body")
SMUGGLED = (b"--C\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nsmuggled\r\n--C--\r\n")

# id, Content-Type header line(s), body (a list: one chunk each when sent chunked)
SHAPES = [
    ("epilogue", [f"Content-Type: {CT}"], [PARTS + b"\r\n--B--\r\nan epilogue after the close delimiter\r\n"]),
    ("extra-hyphens", [f"Content-Type: {CT}"], [PARTS + b"\r\n--B----\r\n"]),
    ("transport-padding", [f"Content-Type: {CT}"], [PARTS + b"\r\n--B-- \t \r\n"]),
    ("data-without-crlf", [f"Content-Type: {CT}"], [PARTS + b"\r\n--B--x"]),
    ("lookalike-after-last-part", [f"Content-Type: {CT}"],
     [PARTS + b"\r\n--B--\r\n--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nsmuggled\r\n--B--\r\n"]),
    ("two-content-types", [f"Content-Type: {CT}", "Content-Type: multipart/form-data; boundary=C"],
     [PARTS + b"\r\n--B--\r\n" + SMUGGLED]),
    ("rfc2231-boundary-star", ["Content-Type: multipart/form-data; boundary*=utf-8''C; boundary=B"],
     [PARTS + b"\r\n--B--\r\n" + SMUGGLED]),
    ("boundary-in-other-parameter", ["Content-Type: multipart/form-data; charset=\"x; boundary=C\"; boundary=B"],
     [PARTS + b"\r\n--B--\r\n" + SMUGGLED]),
    # The epilogue in a chunk of its own: it reaches the stage after the close delimiter was handled.
    ("epilogue-in-later-chunk", [f"Content-Type: {CT}"], [PARTS + b"\r\n--B--", b"\r\nlate epilogue\r\n"]),
    ("hyphens-in-later-chunk", [f"Content-Type: {CT}"], [PARTS + b"\r\n--B--", b"--"]),
]


def build(path: str, headers: list[str], pieces: list[bytes], chunked: bool, rid: str) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: {rid}\r\n" + "".join(h + "\r\n" for h in headers)
    if chunked:
        body = b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in pieces) + b"0\r\n\r\n"
        return (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + body
    body = b"".join(pieces)
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


@pytest.fixture
def fw(upstream, formwall_factory, tmp_path):
    rules = tmp_path / "crash.rules"
    rules.write_text(RULES)
    return formwall_factory(upstream.url, "--rules", str(rules))


def assert_alive(fw) -> None:
    assert fw.proc.poll() is None, f"formwall died (exit code {fw.proc.returncode})"
    resp = raw_request(fw.port, b"GET /log HTTP/1.1\r\nHost: app.test\r\n\r\n")
    assert resp.status == 200, "formwall must still serve after the shape"
    assert fw.proc.poll() is None


def check_answer(resp, upstream, rid: str, strict: bool) -> None:
    if resp.status == 200:
        seen = upstream.wait_for_request_id(rid)
        assert seen["body_complete"], seen
        assert seen["boundary"] not in ("B", "C"), "the upstream must get Formwall's fresh boundary"
        assert seen["preamble_len"] == 0 and seen["epilogue_len"] == 0, seen
        assert seen["fields"].get("title") == ["hello"], seen
        assert [f["filename"] for f in seen["files"].get("doc", [])] == ["a.txt"], seen
    else:
        assert 400 <= resp.status < 500, f"expected a 4xx or a 200, got {resp.status}: {resp.body[:300]!r}"
        assert_json_error(resp, resp.status)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
@pytest.mark.parametrize("path", ["/log", "/strict"])
@pytest.mark.parametrize("headers,pieces", [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_crash_shape_is_answered_and_formwall_survives(fw, upstream, headers, pieces, path, framing):
    rid = "crash-" + uuid.uuid4().hex[:12]
    with RawConn(fw.port) as conn:
        conn.send(build(path, headers, pieces, framing == "chunked", rid))
        resp = conn.read_response(timeout=10)
    check_answer(resp, upstream, rid, path == "/strict")
    if path == "/strict" and headers == [f"Content-Type: {CT}"]:
        # Only anomalies follow the close delimiter: the strict route refuses them.
        assert resp.status == 400, resp
        assert resp.json()["error"] in ("anomaly_data_after", "anomaly_delimiter_lookalike"), resp.json()
    assert_alive(fw)


def test_every_shape_on_one_process(fw, upstream):
    """All shapes, both routes and both framings against a single process, then it still serves."""
    for _, headers, pieces in SHAPES:
        for path in ("/log", "/strict"):
            for chunked in (False, True):
                rid = "crash-" + uuid.uuid4().hex[:12]
                with RawConn(fw.port) as conn:
                    conn.send(build(path, headers, pieces, chunked, rid))
                    resp = conn.read_response(timeout=10)
                check_answer(resp, upstream, rid, path == "/strict")
    assert_alive(fw)


@pytest.mark.parametrize("length,status,kind", [
    ("9223372036854775807", 413, "body_too_large"),
    ("9223372036854775808", 400, "invalid_content_length"),
    ("18446744073709551615", 400, "invalid_content_length"),
])
def test_huge_content_length_is_an_answer_not_a_crash(fw, length, status, kind):
    """A Content-Length near 2^64 used to overflow while the 413 detail was formatted. The largest length
    accepted (2^63 - 1) still reaches that detail; larger ones are refused as invalid."""
    raw = (b"POST /log HTTP/1.1\r\nHost: app.test\r\nContent-Type: " + CT.encode()
           + b"\r\nContent-Length: " + length.encode() + b"\r\n\r\n")
    with RawConn(fw.port) as conn:
        conn.send(raw)
        resp = conn.read_response(timeout=10)
    assert_json_error(resp, status, kind)
    assert_alive(fw)
