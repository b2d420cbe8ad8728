"""The header set docs/configuration.md ("Headers sent upstream") promises, checked on the upstream's own
record of a request that exercises every row: forwarded, dropped, replaced and extended fields; and who the
client is with --trusted-proxies and --proxy-protocol."""

from __future__ import annotations

import uuid

import pytest

from e2e_helpers import IO_TIMEOUT, RawConn, json_lines, wait_until


def test_documented_upstream_header_set(proxy, upstream):
    request_id = "hdr-" + uuid.uuid4().hex[:12]
    body = (b"--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n--XyZ--\r\n")
    head = (
        "POST /form?x=1 HTTP/1.1\r\n"
        "Host: shop.example:8443\r\n"
        f"X-Request-Id: {request_id}\r\n"
        "Content-Type: multipart/form-data; charset=utf-8; boundary=XyZ\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: keep-alive, X-Hop\r\n"
        "X-Hop: secret\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\n"
        "Trailer: X-Checksum\r\n"
        "X-Forwarded-For: 203.0.113.9\r\n"
        "X-Forwarded-Proto: https\r\n"
        "X-Forwarded-Host: evil.example\r\n"
        "Via: 1.0 edge\r\n"
        "X-End-To-End: kept\r\n"
        "\r\n"
    ).encode()
    with RawConn(proxy.port) as conn:
        conn.send(head + body)
        resp = conn.read_response()
    assert resp.status == 200, resp.body[:300]
    rec = upstream.wait_for_request_id(request_id)
    h = rec["headers"]
    assert rec["method"] == "POST" and rec["path"] == "/form?x=1"
    # Forwarded as sent.
    assert h["host"] == "shop.example:8443"
    assert h["x-end-to-end"] == "kept"
    # Hop-by-hop, and what Connection names: dropped.
    for name in ("x-hop", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "expect"):
        assert name not in h, f"{name} forwarded: {h}"
    assert "x-hop" not in h.get("connection", "").lower()
    # Replaced.
    assert h["x-forwarded-proto"] == "http"
    assert h["x-forwarded-host"] == "shop.example:8443"
    assert h["x-request-id"] == request_id, "a valid client X-Request-Id is kept"
    # Without --trusted-proxies the client's chain is not believed: replaced by the peer's address.
    assert h["x-forwarded-for"] == "127.0.0.1"
    # Extended: the client's Via, then Formwall's.
    assert h["via"] == "1.0 edge, 1.1 formwall"
    # The re-encoded form: Formwall's boundary, no charset, its own framing.
    content_type = h["content-type"]
    assert content_type.startswith("multipart/form-data; boundary=")
    assert "XyZ" not in content_type and "charset" not in content_type
    assert h["transfer-encoding"] == "chunked" and "content-length" not in h
    assert rec["body_complete"] is True
    assert [p["name"] for p in rec["parts"]] == ["title"]
    # Each field once: nothing Formwall sets is duplicated from the client's copy.
    names = [k.lower() for k, _ in rec["header_list"]]
    for name in ("x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "via", "x-request-id",
                 "content-type", "transfer-encoding"):
        assert names.count(name) == 1, (name, rec["header_list"])


def test_invalid_client_request_id_is_replaced(proxy, upstream):
    with RawConn(proxy.port) as conn:
        conn.send(b"GET /rid HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: has space\r\n\r\n")
        resp = conn.read_response()
    assert resp.status == 200
    got = resp.json()["headers"]["x-request-id"]
    assert got != "has space" and " " not in got


def audit_client(path, request_id):
    def find():
        return next((r["client"] for r in json_lines(path) if r.get("request_id") == request_id), None)
    return wait_until(find, IO_TIMEOUT, what="the audit record")


def test_trusted_proxy_chain_is_kept_and_names_the_client(tmp_path, upstream, formwall_factory):
    audit = tmp_path / "audit.log"
    fw = formwall_factory(upstream.url, "--trusted-proxies", "10.0.0.0/8,127.0.0.1/32", "--audit-log", str(audit))
    with RawConn(fw.port) as conn:
        conn.send(b"GET /t HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: trusted-1\r\n"
                  b"X-Forwarded-For: 6.6.6.6, 198.51.100.9\r\nX-Forwarded-For: 10.1.2.3\r\n\r\n")
        resp = conn.read_response()
    assert resp.status == 200
    assert resp.json()["headers"]["x-forwarded-for"] == "6.6.6.6, 198.51.100.9, 10.1.2.3, 127.0.0.1"
    assert audit_client(audit, "trusted-1") == "198.51.100.9"


def test_untrusted_peer_chain_is_replaced(tmp_path, upstream, formwall_factory):
    audit = tmp_path / "audit.log"
    fw = formwall_factory(upstream.url, "--trusted-proxies", "10.0.0.0/8", "--audit-log", str(audit))
    with RawConn(fw.port) as conn:
        conn.send(b"GET /t HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: untrusted-1\r\n"
                  b"X-Forwarded-For: 198.51.100.9\r\n\r\n")
        resp = conn.read_response()
    assert resp.json()["headers"]["x-forwarded-for"] == "127.0.0.1"
    assert audit_client(audit, "untrusted-1").startswith("127.0.0.1:")


V2_TCP4 = (b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x21, 0x11, 0x00, 0x0C])
           + bytes([192, 0, 2, 1, 198, 51, 100, 2, 0xDC, 0x04, 0x01, 0xBB]))


@pytest.mark.parametrize("header", [b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n", V2_TCP4],
                         ids=["v1", "v2"])
def test_proxy_protocol_names_the_client(tmp_path, upstream, formwall_factory, header):
    audit = tmp_path / "audit.log"
    fw = formwall_factory(upstream.url, "--proxy-protocol", "--audit-log", str(audit))
    with RawConn(fw.port) as conn:
        conn.send(header + b"GET /p HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: proxy-1\r\n"
                  b"X-Forwarded-For: 6.6.6.6\r\n\r\n")
        resp = conn.read_response()
    assert resp.status == 200
    assert resp.json()["headers"]["x-forwarded-for"] == "192.0.2.1"
    assert audit_client(audit, "proxy-1") == "192.0.2.1:56324"


def test_proxy_protocol_missing_is_400(upstream, formwall_factory):
    fw = formwall_factory(upstream.url, "--proxy-protocol")
    with RawConn(fw.port) as conn:
        conn.send(b"GET /p HTTP/1.1\r\nHost: app.test\r\n\r\n")
        resp = conn.read_response()
    assert resp.status == 400 and resp.json()["error"] == "invalid_proxy_header"
