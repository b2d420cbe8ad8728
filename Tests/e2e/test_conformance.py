"""HTTP conformance a first deployment hits, through the real proxy: the field that tells the upstream what
was stripped or quarantined (spool mode only), CORS preflights on routes with `methods`, and WebSocket
handshakes (refused with 501). Rules: Tests/e2e/rules/conformance.rules."""

from __future__ import annotations

import base64
import os
import socket

import pytest

from policy_helpers import HOST, RULES, Formwall, Part, Upstream, new_id, post_form, request

PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n"


@pytest.fixture(scope="module")
def fw(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("conformance")
    up = Upstream(tmp / "upstream.jsonl")
    proxy = Formwall(tmp, up, RULES / "conformance.rules")
    yield proxy
    proxy.stop()
    up.close()


def forwarded(fw, rid):
    (seen,) = fw.upstream.records(rid)
    return seen


# ------------------------------------------------------------------------------- X-Formwall-Modified


def test_spool_lists_stripped_and_quarantined_parts(fw):
    rid = new_id("mod")
    resp = post_form(fw.port, "/c/spool", [
        Part("keep", b"k"),
        Part("doc", b"far too long", filename="a.txt", content_type="text/plain"),
        Part("scan", PDF, filename="s.txt", content_type="application/pdf"),
        Part("extra field", b"x"),
    ], request_id=rid, extra_headers=[("X-Formwall-Modified", "forged"), ("Connection", "X-Formwall-Modified")])
    assert resp.status == 200, resp
    seen = forwarded(fw, rid)
    assert seen["headers"]["x-formwall-modified"] == "stripped=doc,extra%20field; quarantined=scan"
    assert [p["name"] for p in seen["parts"]] == ["keep"]


def test_spool_without_changes_sends_no_field_and_drops_the_clients(fw):
    rid = new_id("mod")
    resp = post_form(fw.port, "/c/spool", [Part("keep", b"k")], request_id=rid,
                     extra_headers=[("X-Formwall-Modified", "stripped=keep")])
    assert resp.status == 200, resp
    assert "x-formwall-modified" not in forwarded(fw, rid)["headers"]


def test_chunked_mode_announces_a_trailer_and_drops_the_clients(fw):
    """In chunked mode the list goes in a trailer field (announced by `Trailer`), never in the head; the
    client's forged copy is dropped. (This upstream, like WSGI, does not expose trailers.)"""
    rid = new_id("mod")
    resp = post_form(fw.port, "/c/chunked", [Part("doc", b"far too long", filename="a.txt",
                                                  content_type="text/plain")],
                     request_id=rid, extra_headers=[("X-Formwall-Modified", "forged")])
    assert resp.status == 200, resp
    seen = forwarded(fw, rid)
    assert seen["parts"] == [] and "x-formwall-modified" not in seen["headers"]
    assert seen["headers"].get("trailer") == "X-Formwall-Modified", seen["headers"]


def test_modified_header_renamed(fw):
    rid = new_id("mod")
    resp = post_form(fw.port, "/c/named", [Part("doc", b"far too long", filename="a.txt",
                                                content_type="text/plain")], request_id=rid)
    assert resp.status == 200, resp
    h = forwarded(fw, rid)["headers"]
    assert h["x-stripped"] == "stripped=doc" and "x-formwall-modified" not in h


# ------------------------------------------------------------------------------- CORS preflight

CORS = [("Origin", "https://app.example"), ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", "content-type")]


def test_preflight_reaches_the_upstream_on_a_post_only_route(fw):
    rid = new_id("cors")
    resp = request(fw.port, "OPTIONS", "/c/cors", [*CORS, ("X-Request-Id", rid)])
    assert resp.status == 200, resp
    seen = forwarded(fw, rid)
    assert seen["method"] == "OPTIONS" and seen["headers"]["origin"] == "https://app.example"


@pytest.mark.parametrize("path,headers", [
    ("/c/cors-strict", CORS),
    ("/c/cors", CORS[:1]),
])
def test_other_options_requests_are_405(fw, path, headers):
    rid = new_id("cors")
    resp = request(fw.port, "OPTIONS", path, [*headers, ("X-Request-Id", rid)])
    assert resp.status == 405, resp
    assert resp.header("Allow") == "POST"
    assert fw.upstream.records(rid) == []


# ------------------------------------------------------------------------------- Upgrade


def test_websocket_handshake_is_refused_with_501(fw):
    rid = new_id("ws")
    key = base64.b64encode(os.urandom(16)).decode()
    handshake = (f"GET /c/ws HTTP/1.1\r\nHost: {HOST}:{fw.port}\r\nUpgrade: websocket\r\n"
                 f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                 f"Origin: https://app.example\r\nX-Request-Id: {rid}\r\n\r\n").encode()
    resp = request(fw.port, raw_head=handshake, method="GET")
    assert resp.status == 501, resp
    doc = resp.json()
    assert doc["error"] == "upgrade_not_supported" and doc["detail"] == "Upgrade: websocket"
    assert resp.header("Upgrade") is None and resp.header("Sec-WebSocket-Accept") is None
    assert fw.upstream.records(rid) == []


def test_h2c_upgrade_is_ignored(fw):
    rid = new_id("h2c")
    resp = request(fw.port, "GET", "/c/any", [("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"),
                                               ("HTTP2-Settings", "AAMAAABkAAQAoAAAAAIAAAAA"),
                                               ("X-Request-Id", rid)])
    assert resp.status == 200, resp
    h = forwarded(fw, rid)["headers"]
    assert "upgrade" not in h and "http2-settings" not in h
