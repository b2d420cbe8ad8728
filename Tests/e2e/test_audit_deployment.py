"""What a first real deployment hits: policy verdicts that must not be false, an audit log that says what
happened, and `formwall inspect` agreeing with `serve` on every body type.

Rules: Tests/e2e/rules/deployment.rules, inspect.rules and monitor.rules. Each test names the item of the issue it
covers; docs/rules.md and docs/operations.md say what is expected.
"""

import json
import select
import socket
import subprocess

import pytest

from e2e_helpers import json_lines
from policy_helpers import (BIN, HOST, PDF, PNG, RULES, Formwall, Part, Upstream, free_port, new_id, post_form,
                            request, wait_for)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("deployment")
    up = Upstream(tmp / "upstream.jsonl")
    fw = Formwall(tmp, up, RULES / "deployment.rules")
    yield fw
    fw.stop()
    up.close()


@pytest.fixture(scope="module")
def monitor(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("deployment-monitor")
    up = Upstream(tmp / "upstream.jsonl")
    fw = Formwall(tmp, up, RULES / "monitor.rules")
    yield fw
    fw.stop()
    up.close()


def tail_human(fw, *args) -> str:
    done = subprocess.run([BIN, "tail", str(fw.audit_log), "--no-color", *args], capture_output=True, timeout=20)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def line_of(text: str, rid: str) -> str:
    (line,) = [l for l in text.splitlines() if f"req={rid}" in l]
    return line


def forwarded(fw, rid):
    (seen,) = fw.upstream.records(rid)
    assert seen["body_complete"], seen
    return seen


# ------------------------------------------------------------------------------- 1. stripped parts are not typed

def test_unknown_strip_drops_an_unnamed_file_without_type_checking_it(env):
    """`unknown strip`: a third file part no rule names (declared image/png, not a PNG) is dropped, not refused 415
    with a `type_mismatch` from a rule that does not exist (`rule: null`)."""
    rid = new_id()
    resp = post_form(env.port, "/d", [
        Part("title", b"report"),
        Part("doc", PDF, "r.pdf", "application/pdf"),
        Part("extra", b"this is not a png at all", "x.png", "image/png"),
    ], rid)
    assert resp.status == 200, resp
    seen = forwarded(env, rid)
    assert seen["fields"] == {"title": ["report"]}
    assert [f["filename"] for f in seen["files"]] == ["r.pdf"]
    record = env.wait_audit(rid)
    assert record["decision"] == "modified", record
    assert [(v["kind"], v["part"], v["outcome"]) for v in record["violations"]] == [("unknown_part", 2, "strip")]
    assert record["parts"][2]["action"] == "strip"


def test_strip_action_on_a_declared_type_records_no_false_sniffed_violation(env):
    """`action strip` on a type failure: the part is stripped for its declared type; its content is sniffed as what
    it is (application/pdf), and no `type_mismatch` against an unfed sniffer's application/x-empty is recorded."""
    rid = new_id()
    resp = post_form(env.port, "/s", [Part("title", b"t"), Part("doc", PDF, "r.pdf", "application/pdf")], rid)
    assert resp.status == 200, resp
    assert forwarded(env, rid)["files"] == []
    record = env.wait_audit(rid)
    assert [v["kind"] for v in record["violations"]] == ["type_not_allowed"], record
    assert "declared application/pdf" in record["violations"][0]["detail"]
    doc = record["parts"][1]
    assert doc["action"] == "strip" and doc["sniffed_type"] == "application/pdf", doc


# ------------------------------------------------------------------- 3. a part refused at its header is listed

@pytest.mark.parametrize("path,part,kind,status", [
    ("/x", Part("doc", b"hello", "notes.txt", "text/plain"), "extension_not_allowed", 415),
    ("/u", Part("stranger", b"hello"), "unknown_part", 403),
])
def test_part_refused_at_its_header_is_listed_and_named_by_tail(env, path, part, kind, status):
    rid = new_id()
    resp = post_form(env.port, path, [part], rid)
    assert resp.status == status and resp.json()["error"] == kind, resp
    record = env.wait_audit(rid)
    (v,) = record["violations"]
    assert v["kind"] == kind and v["part"] == 0
    assert [(p["index"], p["name"], p["action"]) for p in record["parts"]] == [(0, part.name, "reject")], record
    line = line_of(tail_human(env), rid)
    assert f" {kind} {part.name} (" in line, line


# --------------------------------------------------------------- 4. a bad %-escape: client and log agree

@pytest.mark.parametrize("body", [b"a=%zz", b"a=1%"])
def test_bad_percent_escape_is_malformed_body_for_client_and_log(env, body):
    rid = new_id()
    resp = request(env.port, "POST", "/u", [("Content-Type", "application/x-www-form-urlencoded"),
                                            ("X-Request-Id", rid)], body)
    assert resp.status == 400, resp
    answer = resp.json()
    assert answer["error"] == "malformed_body" and "percent escape" in answer["detail"], answer
    record = env.wait_audit(rid)
    assert record["decision"] == "reject" and record["reason"] == "malformed_body", record
    (v,) = record["violations"]
    assert v["kind"] == "malformed_body" and v["detail"] == answer["detail"], record


# ------------------------------------------------------------------------------------- 5. monitor mode records

def test_monitor_record_says_what_enforce_would_have_answered(monitor):
    """docs/rules.md: monitor records every violation with what enforce would have done (`enforced: false`);
    docs/operations.md: `reason` is the violation enforce would have refused for, `would_status` its status."""
    rid = new_id()
    resp = post_form(monitor.port, "/m", [Part("user_id", b"7"), Part("f", PNG, "x.gif", "image/png"),
                                          Part("a", b"longer than four")], rid)
    assert resp.status == 200, resp
    record = monitor.wait_audit(rid)
    assert record["decision"] == "monitor" and record["status"] == 200, record
    assert record["reason"] == "extension_not_allowed" and record["would_status"] == 415, record
    assert [(v["kind"], v["outcome"], v["enforced"]) for v in record["violations"]] == [
        ("extension_not_allowed", "reject", False), ("field_too_large", "reject", False)], record
    line = line_of(tail_human(monitor), rid)
    assert "MONITOR 200 POST /m extension_not_allowed would=415 f (" in line, line


def test_clean_monitor_request_has_no_reason(monitor):
    rid = new_id()
    assert post_form(monitor.port, "/m", [Part("user_id", b"7")], rid).status == 200
    record = monitor.wait_audit(rid)
    assert record["decision"] == "allow" and record["reason"] is None and record["would_status"] is None, record


# --------------------------------------------------------------------------- 6. tail shows the quarantine id

def test_tail_line_of_a_quarantined_part_shows_its_name_and_id(env):
    rid = new_id()
    resp = post_form(env.port, "/q", [Part("doc", PDF, "r.pdf", "application/pdf")], rid)
    assert resp.status == 200, resp
    record = env.wait_audit(rid)
    (doc,) = record["parts"]
    assert doc["action"] == "quarantine" and doc["quarantine_id"], record
    assert record["decision"] == "modified" and record["reason"] == "type_not_allowed", record
    line = line_of(tail_human(env), rid)
    assert f"MODIFIED 200 POST /q type_not_allowed doc quarantine={doc['quarantine_id']} (" in line, line


# ------------------------------------------------- 2. `formwall inspect` runs the stage `serve` runs, any body

INSPECT_CASES = [
    ("/form", "application/x-www-form-urlencoded", b"a=hello&a2="),           # unknown field: 403
    ("/form", "application/x-www-form-urlencoded", b"a=hello+you"),           # allowed: 200
    ("/form", "application/x-www-form-urlencoded", b"a=far+too+long+a+value"),  # 413 field_too_large
    ("/form", "application/x-www-form-urlencoded", b"a=%zz"),                 # 400 malformed_body
    ("/api", "application/json", b'{"k": "v"}'),                            # opaque: 200
    ("/api", "application/json", b'{"k": "' + b"v" * 2000 + b'"}'),          # 413 body_too_large
    ("/api", "text/plain", b"hi"),                                            # 415 content_type_not_allowed
]


@pytest.fixture(scope="module")
def inspect_env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inspect")
    up = Upstream(tmp / "upstream.jsonl")
    fw = Formwall(tmp, up, RULES / "inspect.rules")
    yield fw
    fw.stop()
    up.close()


@pytest.mark.parametrize("path,ctype,body", INSPECT_CASES)
def test_inspect_agrees_with_serve_for_every_body_type(inspect_env, tmp_path, path, ctype, body):
    rid = new_id()
    resp = request(inspect_env.port, "POST", path, [("Content-Type", ctype), ("X-Request-Id", rid)], body)
    served = inspect_env.wait_audit(rid)
    captured = tmp_path / "body"
    captured.write_bytes(body)
    done = subprocess.run([BIN, "inspect", "--content-type", ctype, "--rules", str(RULES / "inspect.rules"),
                           "--path", path, str(captured)], capture_output=True, timeout=20)
    assert done.returncode in (0, 1), done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["status"] == resp.status == served["status"], (verdict, resp, served)
    assert verdict["decision"] == served["decision"], (verdict, served)
    assert [v["kind"] for v in verdict["violations"]] == [v["kind"] for v in served["violations"]], (verdict, served)
    if resp.status != 200:
        assert resp.json()["error"] == served["reason"] == verdict["error"], (resp, verdict, served)


def test_inspect_reencodes_a_urlencoded_body_as_the_proxy_forwards_it(inspect_env, tmp_path):
    rid = new_id()
    body = b"a=h%C3%A9+x"
    resp = request(inspect_env.port, "POST", "/form", [("Content-Type", "application/x-www-form-urlencoded"),
                                                       ("X-Request-Id", rid)], body)
    assert resp.status == 200, resp
    captured, out = tmp_path / "body", tmp_path / "out"
    captured.write_bytes(body)
    done = subprocess.run([BIN, "inspect", "--content-type", "application/x-www-form-urlencoded", "--rules",
                           str(RULES / "inspect.rules"), "--path", "/form", "--reencode", str(out), str(captured)],
                          capture_output=True, timeout=20)
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["body"] == "urlencoded" and verdict["body_bytes"] == len(body), verdict
    assert [(p["name"], p["action"]) for p in verdict["parts"]] == [("a", "forward")], verdict
    assert out.read_bytes() == b"a=h%C3%A9+x"


# ------------------------------------------- 7. upstream down, cut responses (already fixed; guarded here)

def test_upstream_down_is_error_with_nothing_sent_upstream(tmp_path):
    closed = free_port()   # nothing listens there

    class Down:
        url = f"http://{HOST}:{closed}"

    fw = Formwall(tmp_path, Down, RULES / "deployment.rules")
    try:
        rid = new_id()
        resp = post_form(fw.port, "/u", [Part("a", b"x" * 5000)], rid)
        assert resp.status == 502, resp
        record = fw.wait_audit(rid)
        assert (record["decision"], record["status"], record["bytes_upstream"]) == ("error", 502, 0), record
        assert record["error"] is not None, record
    finally:
        fw.stop()


def test_response_cut_short_is_aborted_and_not_a_rejection(upstream_factory, tmp_path):
    """The upstream declares a Content-Length, sends half and closes: `aborted`, which `tail --decision reject`
    does not show."""
    up = upstream_factory("echo")
    audit = tmp_path / "cut-audit.log"
    port = free_port()
    proc = subprocess.Popen([BIN, "serve", "--listen", f"{HOST}:{port}", "--upstream", up.url,
                             "--audit-log", str(audit), "--single-process"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def accepting():
            assert proc.poll() is None, proc.stderr.read()
            try:
                socket.create_connection((HOST, port), timeout=0.2).close()
                return True
            except OSError:
                return False
        wait_for(accepting, 10, "formwall to accept")
        rid = new_id()
        with socket.create_connection((HOST, port), timeout=10) as conn:
            conn.sendall(f"GET /die?die=1&size=200000&resp=length HTTP/1.1\r\nHost: a\r\nX-Request-Id: {rid}\r\n\r\n"
                         .encode())
            got = 0
            while True:
                ready, _, _ = select.select([conn], [], [], 10)
                assert ready, "no end of the cut response within 10 s"
                data = conn.recv(65536)
                if not data:
                    break
                got += len(data)
        assert got < 200000
        def record():
            found = [r for r in json_lines(audit) if r.get("request_id") == rid]
            return found[0] if found else None
        rec = wait_for(record, 10, "the audit line")
        assert rec["decision"] == "aborted" and rec["status"] == 200, rec
        assert rec["upstream_ms"] is not None, rec
        shown = subprocess.run([BIN, "tail", str(audit), "--no-color", "--decision", "reject"], capture_output=True,
                               timeout=20)
        assert shown.returncode == 0 and rid not in shown.stdout.decode(), shown
    finally:
        proc.terminate()
        proc.wait(timeout=10)
