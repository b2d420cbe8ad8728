"""`upstream-body chunked|hold|spool` per route, and what the upstream sees of a rejected request in each.

The route /chunked streams (the global default), /hold holds file parts whose verdict is pending, /spool
stages the whole body and sends a Content-Length. A 2.5 MiB file over its `max 2MiB` is rejected in each:
- chunked: the upstream gets part of the body and never a complete one (no last chunk, connection closed);
- hold: the upstream gets the caption and nothing of the file;
- spool: the upstream sees nothing of the request at all.
"""

import os

import pytest

from policy_helpers import Part, new_id, post_form, start_formwall, upstream  # noqa: F401
from e2e_helpers import REPO

RULES = REPO / "Tests" / "e2e" / "rules" / "upstream_body.rules"
MIB = 1 << 20
BIG = os.urandom(2 * MIB + MIB // 2)
SMALL = os.urandom(5000)


def form(data: bytes) -> list[Part]:
    return [Part("caption", b"hello \xc3\xa9"), Part("doc", data, "doc.bin", "application/octet-stream")]


def barrier(fw, up):
    """A request through the same Formwall that must be logged first: what came before has settled."""
    rid = new_id("barrier")
    resp = post_form(fw.port, "/chunked", form(b"x"), request_id=rid)
    assert resp.status == 200
    up.wait_settled()


@pytest.mark.parametrize("path,framing", [("/chunked", "chunked"), ("/hold", "chunked"), ("/spool", "length")])
def test_allowed_form_arrives_intact_with_the_routes_framing(request, tmp_path, upstream, path, framing):
    fw = start_formwall(request, tmp_path, upstream, RULES)
    rid = new_id()
    resp = post_form(fw.port, path, form(SMALL), request_id=rid)
    assert resp.status == 200, resp.body[:300]
    upstream.wait_settled()
    (rec,) = upstream.records(rid)
    assert rec["body_complete"]
    assert rec["fields"] == {"caption": ["hello é"]}
    assert [f["size"] for f in rec["files"]] == [len(SMALL)]
    if framing == "chunked":
        assert rec["headers"].get("transfer-encoding") == "chunked"
        assert "content-length" not in rec["headers"]
    else:
        assert "transfer-encoding" not in rec["headers"]
        assert int(rec["headers"]["content-length"]) == rec["body_bytes"]


def test_chunked_rejection_never_reaches_the_upstream_complete(request, tmp_path, upstream):
    fw = start_formwall(request, tmp_path, upstream, RULES)
    rid = new_id()
    resp = post_form(fw.port, "/chunked", form(BIG), request_id=rid)
    assert resp.status == 413, resp.body[:300]
    barrier(fw, upstream)
    seen = upstream.assert_no_complete_body(rid)
    # Streaming forwards bytes before the verdict: this is the documented chunked-mode guarantee, no more.
    assert all(not r["body_complete"] for r in seen)


def test_hold_rejection_sends_nothing_of_the_file(request, tmp_path, upstream):
    fw = start_formwall(request, tmp_path, upstream, RULES)
    rid = new_id()
    resp = post_form(fw.port, "/hold", form(BIG), request_id=rid)
    assert resp.status == 413, resp.body[:300]
    barrier(fw, upstream)
    seen = upstream.assert_no_complete_body(rid)
    # At most the canonical head and the caption part went up; none of the 2.5 MiB file.
    assert all(r["body_bytes"] < 4096 for r in seen), [r["body_bytes"] for r in seen]


def test_spool_rejection_sends_nothing_at_all(request, tmp_path, upstream):
    fw = start_formwall(request, tmp_path, upstream, RULES)
    rid = new_id()
    resp = post_form(fw.port, "/spool", form(BIG), request_id=rid)
    assert resp.status == 413, resp.body[:300]
    barrier(fw, upstream)
    assert upstream.records(rid) == []
