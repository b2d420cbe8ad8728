"""Every rule action through the real proxy: strip, quarantine, log, `filename sanitize`, and `mode monitor`.

Rules: Tests/e2e/rules/actions.rules and monitor.rules. The upstream's own parse of the re-encoded body says
what was forwarded; the audit line and the quarantine store say what happened to the rest.
"""

import hashlib
import json
import stat
import subprocess
from datetime import datetime, timezone

import pytest

from policy_helpers import BIN, PDF, PHP, PNG, RULES, Formwall, Part, Upstream, new_id, post_form


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("actions")
    up = Upstream(tmp / "upstream.jsonl")
    fw = Formwall(tmp, up, RULES / "actions.rules")
    yield fw
    fw.stop()
    up.close()


@pytest.fixture(scope="module")
def monitor(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("monitor")
    up = Upstream(tmp / "upstream.jsonl")
    fw = Formwall(tmp, up, RULES / "monitor.rules")
    yield fw
    fw.stop()
    up.close()


def forwarded(fw, rid):
    (seen,) = fw.upstream.records(rid)
    assert seen["body_complete"] and seen["multipart_error"] is None, seen
    return seen


def part_actions(record):
    return {p["name"]: p["action"] for p in record["parts"]}


def kinds(record):
    return sorted(v["kind"] for v in record["violations"])


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------- strip

def test_strip_drops_only_the_offending_parts(env):
    rid = new_id()
    resp = post_form(env.port, "/a/strip", [
        Part("keep", b"first"),
        Part("drop", b"too long for max 4"),
        Part("doc", b"not a pdf", "notes.txt", "text/plain"),
    ], rid)
    assert resp.status == 200, resp
    seen = forwarded(env, rid)
    assert seen["fields"] == {"keep": ["first"]}
    assert seen["files"] == []
    record = env.wait_audit(rid)
    assert record["decision"] == "modified" and record["status"] == 200, record
    actions = part_actions(record)
    assert actions["drop"] == "strip" and actions["doc"] == "strip", record
    assert actions["keep"] not in ("strip", "quarantine", "reject"), record  # its name: see test_audit_records
    assert {"extension_not_allowed", "field_too_large"} <= set(kinds(record)), record


def test_strip_keeps_a_conforming_request_whole(env):
    rid = new_id()
    resp = post_form(env.port, "/a/strip", [Part("keep", b"k"), Part("drop", b"1234"),
                                            Part("doc", PDF, "a.pdf", "application/pdf")], rid)
    assert resp.status == 200, resp
    seen = forwarded(env, rid)
    assert seen["fields"] == {"keep": ["k"], "drop": ["1234"]}
    assert [(f["name"], f["filename"], f["sha256"]) for f in seen["files"]] == [("doc", "a.pdf", sha(PDF))]
    record = env.wait_audit(rid)
    assert record["decision"] == "allow" and record["violations"] == [], record


# ---------------------------------------------------------------------------------------------- quarantine

def items_on_disk(store):
    return sorted(p for p in store.glob("[0-9][0-9][0-9][0-9]/[0-9][0-9]/[0-9][0-9]/*") if p.is_dir())


def check_item(store, item_id, data, rid, part_name, filename):
    (directory,) = [p for p in items_on_disk(store) if p.name == item_id]
    day = directory.parent
    now = datetime.now(timezone.utc)
    assert day.relative_to(store).parts == (f"{now:%Y}", f"{now:%m}", f"{now:%d}")
    for d in (store, day.parent.parent, day.parent, day, directory):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert sorted(p.name for p in directory.iterdir()) == [f"{item_id}.bin", f"{item_id}.json"]
    for f in directory.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    assert (directory / f"{item_id}.bin").read_bytes() == data
    sidecar = json.loads((directory / f"{item_id}.json").read_text())
    assert sidecar["format"] == 1 and sidecar["id"] == item_id
    assert sidecar["request_id"] == rid
    assert sidecar["part_name"] == part_name
    assert sidecar["filename"] == filename
    assert sidecar["filename_hex"] == filename.encode().hex()
    assert sidecar["size"] == len(data)
    assert sidecar["sha256"] == sha(data)
    assert sidecar["violations"], sidecar
    return sidecar


def test_quarantine_stores_the_part_and_forwards_the_rest(env):
    rid = new_id()
    resp = post_form(env.port, "/a/quarantine", [
        Part("keep", b"value"),
        Part("doc", PHP, "invoice.pdf", "application/pdf"),
    ], rid)
    assert resp.status == 200, resp
    seen = forwarded(env, rid)
    assert seen["fields"] == {"keep": ["value"]} and seen["files"] == []
    assert PHP not in json.dumps(seen).encode()

    record = env.wait_audit(rid)
    assert record["decision"] == "modified", record
    (doc,) = [p for p in record["parts"] if p["name"] == "doc"]
    assert doc["action"] == "quarantine" and doc["quarantine_id"], doc
    assert doc["sha256"] == sha(PHP) and doc["size"] == len(PHP)
    assert "type_not_allowed" in kinds(record), record

    sidecar = check_item(env.quarantine_dir, doc["quarantine_id"], PHP, rid, "doc", "invoice.pdf")
    assert sidecar["route"] == "/a/quarantine"
    assert sidecar["declared_type"] == "application/pdf"
    assert sidecar["sniffed_type"] not in (None, "application/pdf"), sidecar
    assert sidecar["client"].startswith("127.0.0.1")
    assert "type_not_allowed" in [v["kind"] for v in sidecar["violations"]]

    listed = subprocess.run([BIN, "quarantine", "list", "--dir", str(env.quarantine_dir), "--json"],
                            capture_output=True, timeout=30)
    assert listed.returncode == 0, listed.stderr
    objects = [json.loads(line) for line in listed.stdout.decode().splitlines()]
    assert sidecar in objects


def test_quarantine_decided_at_part_start(env):
    """A wrong extension is known from the part head: the data streams straight into the store."""
    rid = new_id()
    data = PDF * 50
    resp = post_form(env.port, "/a/quarantine", [Part("doc", data, "report.txt", "application/pdf"),
                                                 Part("keep", b"after")], rid)
    assert resp.status == 200, resp
    seen = forwarded(env, rid)
    assert seen["fields"] == {"keep": ["after"]} and seen["files"] == []
    record = env.wait_audit(rid)
    (doc,) = [p for p in record["parts"] if p["name"] == "doc"]
    assert doc["action"] == "quarantine", record
    assert "extension_not_allowed" in kinds(record)
    check_item(env.quarantine_dir, doc["quarantine_id"], data, rid, "doc", "report.txt")


def test_conforming_part_is_not_quarantined(env):
    before = items_on_disk(env.quarantine_dir)
    rid = new_id()
    resp = post_form(env.port, "/a/quarantine", [Part("doc", PDF, "a.pdf", "application/pdf")], rid)
    assert resp.status == 200, resp
    assert forwarded(env, rid)["files"][0]["sha256"] == sha(PDF)
    assert env.wait_audit(rid)["decision"] == "allow"
    assert items_on_disk(env.quarantine_dir) == before


# ---------------------------------------------------------------------------------------------- log

def test_log_forwards_and_records(env):
    rid = new_id()
    resp = post_form(env.port, "/a/log", [
        Part("keep", b"k"),
        Part("note", b"longer than four"),
        Part("doc", PNG, "a.png", "image/png"),
    ], rid)
    assert resp.status == 200, resp
    seen = forwarded(env, rid)
    assert seen["fields"] == {"keep": ["k"], "note": ["longer than four"]}
    assert [(f["name"], f["sha256"]) for f in seen["files"]] == [("doc", sha(PNG))]
    record = env.wait_audit(rid)
    assert record["status"] == 200 and record["decision"] == "allow", record
    assert set(kinds(record)) == {"field_too_large", "type_not_allowed"}, record
    assert record["reason"] is None


# ---------------------------------------------------------------------------------------------- filename sanitize

SANITIZE = [
    ("../../etc/passwd.txt", "passwd.txt", "filename_path_separators"),
    ("C:\\Users\\me\\report.pdf", "report.pdf", "filename_path_separators"),
    ("invoice\u202egnp.txt", "invoicegnp.txt", "filename_bidi_controls"),
    ("shell.txt. . ", "shell.txt", "filename_trailing_dots_spaces"),
    ("nul.txt", "_nul.txt", "filename_reserved_name"),
    ("a" * 300 + ".txt", "a" * 251 + ".txt", "filename_too_long"),
]


@pytest.mark.parametrize("sent,expected,kind", SANITIZE, ids=[k for _, _, k in SANITIZE])
def test_filename_sanitize(env, sent, expected, kind):
    rid = new_id()
    resp = post_form(env.port, "/a/sanitize", [Part("doc", b"content", sent, "text/plain")], rid)
    assert resp.status == 200, resp
    seen = forwarded(env, rid)
    assert [f["filename"] for f in seen["files"]] == [expected]
    assert seen["files"][0]["sha256"] == sha(b"content")
    record = env.wait_audit(rid)
    assert record["decision"] == "modified", record
    assert kind in kinds(record), record
    assert record["parts"][0]["filename"] == sent  # the audit keeps the name as sent


def test_filename_sanitize_cannot_fix_a_dangerous_extension(env):
    rid = new_id()
    resp = post_form(env.port, "/a/sanitize", [Part("doc", b"MZ", "dir/invoice.pdf.exe", "text/plain")], rid)
    assert resp.status == 415, resp
    assert resp.json()["error"] == "filename_dangerous_extension"
    env.upstream.assert_no_complete_body(rid)


# ---------------------------------------------------------------------------------------------- monitor mode

def test_monitor_forwards_everything_and_records_the_violations(monitor):
    rid = new_id()
    parts = [
        Part("a", b"longer than four"),
        Part("user_id", b"abc"),
        Part("f", PDF, "x.gif", "application/pdf"),
        Part("surprise", b"unknown part"),
    ]
    resp = post_form(monitor.port, "/m", parts, rid)
    assert resp.status == 200, resp
    seen = forwarded(monitor, rid)
    assert seen["fields"] == {"a": ["longer than four"], "user_id": ["abc"], "surprise": ["unknown part"]}
    assert [(f["name"], f["filename"], f["sha256"]) for f in seen["files"]] == [("f", "x.gif", sha(PDF))]
    record = monitor.wait_audit(rid)
    assert record["decision"] == "monitor" and record["status"] == 200, record
    found = set(kinds(record))
    assert {"field_too_large", "pattern_mismatch", "extension_not_allowed", "type_not_allowed",
            "unknown_part"} <= found, record
    assert all(p["action"] != "strip" and p["quarantine_id"] is None for p in record["parts"]), record


def test_monitor_missing_required_is_forwarded(monitor):
    rid = new_id()
    resp = post_form(monitor.port, "/m", [Part("a", b"ok")], rid)
    assert resp.status == 200, resp
    assert forwarded(monitor, rid)["fields"] == {"a": ["ok"]}
    record = monitor.wait_audit(rid)
    assert record["decision"] == "monitor" and kinds(record) == ["missing_required"], record


def test_monitor_clean_request_is_allow(monitor):
    rid = new_id()
    resp = post_form(monitor.port, "/m", [Part("user_id", b"7"), Part("f", PNG, "x.png", "image/png")], rid)
    assert resp.status == 200, resp
    record = monitor.wait_audit(rid)
    assert record["decision"] == "allow" and record["violations"] == [], record


def test_monitor_still_enforces_request_limits_it_can_only_record(monitor):
    """Monitor forwards everything: even a body over its limits is forwarded and recorded."""
    rid = new_id()
    resp = post_form(monitor.port, "/m", [Part(f"x{i}", b"v") for i in range(12)] + [Part("user_id", b"1")], rid)
    assert resp.status == 200, resp
    assert len(forwarded(monitor, rid)["fields"]) == 13
    record = monitor.wait_audit(rid)
    assert record["decision"] == "monitor" and "too_many_parts" in kinds(record), record
