"""Failures the operator must hear of leave a line on stderr; the client gets a generic answer without errno text.

Upstream refusals (502), spool and staging failures (500) and quarantine failures (503) each write one JSON event
line on stderr (level error, the request's `request_id`, the cause in `error`), at most one per kind of failure per
second per worker (the next line's `suppressed` field says how many were left out). The client's JSON `detail`
never carries errno text or paths. Also: a 405 from a route's `methods` lists them in
`Allow` (RFC 9110 §15.5.6).
"""

from __future__ import annotations

import re

import pytest

from e2e_helpers import IO_TIMEOUT, free_port, wait_until
from policy_helpers import PDF, RULES, Formwall, Part, multipart, new_id, post_form, request
from policy_helpers import upstream as policy_upstream  # noqa: F401  (fixture)

ERRNO_TEXT = re.compile(r"errno|mkostemp|No such file|Not a directory|Permission denied|Connection refused|/tmp/")


def assert_generic(body: dict):
    assert not ERRNO_TEXT.search(body.get("detail") or ""), body


# ---------------------------------------------------------------------------------------------- upstream

def test_unreachable_upstream_is_logged_once_per_second_not_told_to_the_client(formwall_factory):
    closed = free_port()   # nothing listens there
    fw = formwall_factory(f"http://127.0.0.1:{closed}", "--workers", "1")
    rid = new_id()
    resp = request(fw.port, "GET", "/x", [("X-Request-Id", rid)])
    assert resp.status == 502 and resp.json()["error"] == "upstream_unreachable", resp
    assert_generic(resp.json())
    (line,) = wait_until(lambda: fw.events("upstream unreachable") or None, IO_TIMEOUT, what="the stderr line")
    assert line["level"] == "error" and line["kind"] == "upstream" and line["request_id"] == rid, line
    assert line["upstream"] == f"127.0.0.1:{closed}" and "refused" in line["error"].lower(), line
    assert "suppressed" not in line, line

    # A burst: still at most one line per second; once a second has passed, the next line counts the rest.
    def burst_reported():
        for _ in range(5):
            assert request(fw.port, "GET", "/x").status == 502
        return [e for e in fw.events("upstream unreachable") if "suppressed" in e] or None
    (note, *_) = wait_until(burst_reported, IO_TIMEOUT, what="a line counting the suppressed failures")
    assert isinstance(note["suppressed"], int) and note["suppressed"] >= 1, note
    assert len(fw.events("upstream unreachable")) < 10


# ---------------------------------------------------------------------------------------------- spool, staging

def test_spool_failure_is_logged_not_told_to_the_client(tmp_path, upstream, formwall_factory):
    spool = tmp_path / "spool"
    spool.mkdir()
    fw = formwall_factory(upstream.url, "--upstream-body", "spool", "--spool-dir", str(spool))
    spool.rmdir()   # usable at start-up, gone later (an operator's cleanup, a full disk...)
    body, ctype = multipart([Part("a", b"1")])
    resp = request(fw.port, "POST", "/form", [("Content-Type", ctype)], body)
    assert resp.status == 500 and resp.json()["error"] == "spool_unavailable", resp
    assert_generic(resp.json())
    (line,) = wait_until(lambda: fw.events("spool failed") or None, IO_TIMEOUT, what="the stderr line")
    assert line["level"] == "error" and line["kind"] == "spool" and line["request_id"], line
    assert str(spool) in line["error"] and "No such file or directory" in line["error"], line


def test_staging_failure_is_logged_not_told_to_the_client(tmp_path, upstream, formwall_factory):
    spool = tmp_path / "spool"
    spool.mkdir()
    rules = tmp_path / "hold.rules"
    rules.write_text("route /up {\n    file doc { max 1MiB; }\n}\n")
    fw = formwall_factory(upstream.url, "--upstream-body", "hold", "--spool-dir", str(spool), "--rules", str(rules))
    spool.rmdir()
    body, ctype = multipart([Part("doc", PDF, "a.pdf", "application/pdf")])
    resp = request(fw.port, "POST", "/up", [("Content-Type", ctype)], body)
    assert resp.status == 500 and resp.json()["error"] == "staging_failed", resp
    assert_generic(resp.json())
    (line,) = wait_until(lambda: fw.events("hold failed") or None, IO_TIMEOUT, what="the stderr line")
    assert line["level"] == "error" and line["kind"] == "spool" and line["request_id"], line
    assert str(spool) in line["error"] and "No such file or directory" in line["error"], line


# ---------------------------------------------------------------------------------------------- quarantine

def test_quarantine_failure_is_logged_not_told_to_the_client(tmp_path, policy_upstream):  # noqa: F811
    store = tmp_path / "store"
    fw = Formwall(tmp_path, policy_upstream, RULES / "actions.rules", quarantine_dir=store)
    try:
        store.rename(tmp_path / "store.away")
        store.write_text("not a directory")
        rid = new_id()
        resp = post_form(fw.port, "/a/quarantine", [Part("doc", PDF, "x.txt", "application/pdf")], rid)
        assert resp.status == 503 and resp.json()["error"] == "quarantine_unavailable", resp
        assert_generic(resp.json())
        (line,) = wait_until(lambda: fw.events("quarantine failed") or None, IO_TIMEOUT, what="the stderr line")
        assert line["level"] == "error" and line["kind"] == "quarantine" and line["request_id"] == rid, line
        assert str(store) in line["error"] and "Not a directory" in line["error"], line
    finally:
        fw.stop()


# ---------------------------------------------------------------------------------------------- 405 Allow

@pytest.mark.parametrize("accept", ["application/json", "text/html"])
def test_405_lists_the_route_methods_in_allow(tmp_path, upstream, formwall_factory, accept):
    rules = tmp_path / "methods.rules"
    rules.write_text("route /m {\n    methods POST PUT;\n    field a;\n}\n")
    fw = formwall_factory(upstream.url, "--rules", str(rules))
    resp = request(fw.port, "DELETE", "/m", [("Accept", accept)])
    assert resp.status == 405, resp
    assert resp.header("allow") == "POST, PUT", resp.headers
