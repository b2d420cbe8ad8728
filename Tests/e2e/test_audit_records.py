"""The audit record itself, against docs/operations.md: member order and types, bytes counters, the parts of
allowed, sanitised and rejected requests, hostile names, and reopening the log on SIGUSR1.
"""

import hashlib
import json
import os
import re
import signal

import pytest

from e2e_helpers import complete_prefix, json_lines
from policy_helpers import RULES, Formwall, Part, Upstream, multipart, new_id, post_form, request, wait_for

KEYS = ["ts", "request_id", "client", "tls", "method", "path", "route", "decision", "status", "reason", "would_status",
        "bytes_in",
        "bytes_upstream", "duration_ms", "client_body_ms", "upstream_ms", "upstream_connect_ms", "upstream_header_ms",
        "upstream_response_ms", "upstream", "parts", "violations", "anomalies", "error"]
PART_KEYS = ["index", "name", "kind", "filename", "declared_type", "sniffed_type", "size", "sha256", "action",
             "quarantine_id", "disarmed"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit")
    up = Upstream(tmp / "upstream.jsonl")
    fw = Formwall(tmp, up, RULES / "audit.rules")
    yield fw
    fw.stop()
    up.close()


def raw_line(fw, rid) -> bytes:
    fw.wait_audit(rid)
    (line,) = [l for l in fw.audit_lines_raw().split(b"\n") if rid.encode() in l]
    return line


def test_allowed_record_schema_and_counters(env):
    rid = new_id()
    data = os.urandom(700)
    body, ctype = multipart([Part("a", b"hello"), Part("f", data, "x.bin", "application/octet-stream")])
    resp = request(env.port, "POST", "/s/form", [("Content-Type", ctype), ("X-Request-Id", rid)], body)
    assert resp.status == 200, resp
    record = json.loads(raw_line(env, rid))
    assert list(record) == KEYS, list(record)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["ts"]), record["ts"]
    assert record["method"] == "POST" and record["path"] == "/s/form" and record["route"] == "/s/form"
    assert record["decision"] == "allow" and record["status"] == 200 and record["reason"] is None
    assert record["error"] is None and record["violations"] == [] and record["anomalies"] == []
    assert record["bytes_in"] == len(body)
    (seen,) = env.upstream.records(rid)
    assert record["bytes_upstream"] == seen["body_bytes"]
    assert isinstance(record["duration_ms"], (int, float)) and record["duration_ms"] >= 0
    assert round(record["duration_ms"], 3) == record["duration_ms"]
    assert isinstance(record["upstream_ms"], (int, float))
    assert [list(p) for p in record["parts"]] == [PART_KEYS, PART_KEYS]
    a, f = record["parts"]
    assert (a["index"], a["name"], a["kind"], a["filename"], a["size"], a["sha256"]) == (0, "a", "field", None, 5, None)
    assert (f["index"], f["name"], f["kind"], f["filename"], f["size"]) == (1, "f", "file", "x.bin", 700)
    assert f["declared_type"] == "application/octet-stream"
    assert f["sha256"] == hashlib.sha256(data).hexdigest()
    assert a["quarantine_id"] is None and f["quarantine_id"] is None


def test_head_rejection_never_contacts_the_upstream(env):
    rid = new_id()
    resp = request(env.port, "GET", "/s/form", [("X-Request-Id", rid)])
    assert resp.status == 405, resp
    record = env.wait_audit(rid)
    assert record["upstream_ms"] is None and record["bytes_upstream"] == 0 and record["decision"] == "reject"
    assert record["violations"][0]["part"] is None and record["violations"][0]["rule"].endswith("audit.rules:2")


def test_violation_rule_is_file_and_line(env):
    rid = new_id()
    resp = post_form(env.port, "/s/form", [Part("a", b"x" * 65)], rid)
    assert resp.status == 413, resp
    (v,) = env.wait_audit(rid)["violations"]
    assert v["kind"] == "field_too_large" and v["part"] == 0
    assert v["rule"] == f"{RULES / 'audit.rules'}:4" or v["rule"].endswith("audit.rules:4"), v
    assert v["detail"] == "65 B > 64 B", v


def test_rejected_part_is_listed_in_parts(env):
    """docs/operations.md's example: the offending part is in `parts` with action `reject`, so the violation's
    `part` index points at an entry."""
    rid = new_id()
    resp = post_form(env.port, "/s/form", [Part("a", b"ok"), Part("f", b"x" * 5000, "big.bin")], rid)
    assert resp.status == 413, resp
    record = env.wait_audit(rid)
    (v,) = record["violations"]
    assert v["part"] == 1
    indexes = {p["index"]: p for p in record["parts"]}
    assert 1 in indexes, f"violation points at part 1, parts lists only {sorted(indexes)}: {record}"
    assert indexes[1]["name"] == "f" and indexes[1]["action"] == "reject", record


def test_forwarded_part_action_is_forward(env):
    """docs/operations.md: part `action` is `forward`, `sanitize`, `strip`, `quarantine` or `reject`."""
    rid = new_id()
    assert post_form(env.port, "/s/form", [Part("a", b"v")], rid).status == 200
    (part,) = env.wait_audit(rid)["parts"]
    assert part["action"] == "forward", part


def test_sanitised_part_action_is_sanitize(env):
    rid = new_id()
    resp = post_form(env.port, "/s/form", [Part("doc", b"text", "../x.txt", "text/plain")], rid)
    assert resp.status == 200, resp
    assert env.upstream.records(rid)[0]["files"][0]["filename"] == "x.txt"
    record = env.wait_audit(rid)
    assert record["decision"] == "modified"
    (part,) = record["parts"]
    assert part["filename"] == "../x.txt"
    assert part["action"] == "sanitize", part


def test_client_is_ip_and_port(env):
    """docs/operations.md: `client` is `ip:port`."""
    rid = new_id()
    assert post_form(env.port, "/s/form", [Part("a", b"v")], rid).status == 200
    client = env.wait_audit(rid)["client"]
    assert re.fullmatch(r"127\.0\.0\.1:\d+", client), client


def test_route_is_null_when_no_route_matched(env):
    """docs/operations.md: `route` is null when no route matched (the implicit fallback)."""
    rid = new_id()
    resp = request(env.port, "GET", "/nowhere", [("X-Request-Id", rid)])
    assert resp.status == 200, resp
    assert env.wait_audit(rid)["route"] is None


def test_hostile_path_and_filename_stay_on_one_line(env):
    rid = new_id()
    filename = b"a\x1b[2J\x7f\xff\xfe.txt"
    raw = b'Content-Disposition: form-data; name="f"; filename="' + filename + b'"\r\n\r\n'
    body, ctype = multipart([Part("f", b"data", raw_headers=raw)])
    resp = request(env.port, "POST", "/s/hostile?q=%0a%22", [("Content-Type", ctype), ("X-Request-Id", rid)], body)
    assert resp.status == 200, resp
    line = raw_line(env, rid)
    assert b"\x1b" not in line and b"\x7f" not in line
    assert b"\\u001b" in line and b"\\u007f" in line
    record = json.loads(line)
    assert record["path"] == "/s/hostile?q=%0a%22"
    assert record["parts"][0]["filename"] == "a\x1b[2J\x7f\ufffd.txt" or \
        record["parts"][0]["filename"] == "a\x1b[2J\x7f\ufffd\ufffd.txt", record["parts"][0]


def test_sigusr1_reopens_the_log(tmp_path):
    up = Upstream(tmp_path / "upstream.jsonl")
    fw = Formwall(tmp_path, up, RULES / "audit.rules")
    try:
        first = [new_id("before") for _ in range(20)]
        for rid in first:
            assert post_form(fw.port, "/s/form", [Part("a", b"v")], rid).status == 200
        wait_for(lambda: fw.audit_lines_raw().count(b"\n") >= 20, 10, "20 audit lines")
        rotated = tmp_path / "audit.log.old"
        os.rename(fw.audit_log, rotated)
        fw.proc.send_signal(signal.SIGUSR1)
        # The signal reaches the workers asynchronously (through the supervisor, then each worker's loop):
        # the reopened file appears once the first worker reopened. Requests racing the signal may still land
        # in the old file; none may be lost or written twice, and once every worker has reopened, every
        # record goes to the new file.
        wait_for(lambda: fw.audit_log.exists(), 10, "the reopened log to be created")
        second = []
        def late_records_in_new_file():
            batch = [new_id("after") for _ in range(4)]
            second.extend(batch)
            for rid in batch:
                assert post_form(fw.port, "/s/form", [Part("a", b"v")], rid).status == 200
            wait_for(lambda: sum(fw.audit_lines_raw().count(r.encode())
                                 + complete_prefix(rotated.read_bytes()).count(r.encode())
                                 for r in batch) >= len(batch), 10, "the batch's audit lines")
            return all(r.encode() in fw.audit_lines_raw() for r in batch)
        wait_for(late_records_in_new_file, 10, "a whole batch of records in the reopened log")
        old = [r["request_id"] for r in json_lines(rotated)]
        new = [json.loads(l)["request_id"] for l in fw.audit_lines_raw().splitlines()]
        assert sorted(old + new) == sorted(first + second), (old, new)
        assert set(first) <= set(old), old
        assert new, "nothing was written to the reopened log"
        assert oct(os.stat(fw.audit_log).st_mode & 0o777) == oct(0o600)
    finally:
        fw.stop()
        up.close()
