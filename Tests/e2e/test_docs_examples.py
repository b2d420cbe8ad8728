"""The examples in docs/operations.md match what Formwall really writes and does.

* Each JSON example (an audit request record, a `worker_exit` event) has the keys of a real record, in the same
  order, with values of the same types; the values that name things (route, rule, anomaly flags) have the real
  form.
* The logrotate example's `postrotate` command, run as written against a `formwall serve --pid-file`, makes the
  proxy reopen the log (without reloading rules).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess

import pytest

from e2e_helpers import IO_TIMEOUT, REPO, START_TIMEOUT, Formwall, json_lines, wait_until
from policy_helpers import Part, multipart, new_id, request

OPERATIONS = REPO / "docs" / "operations.md"


def doc_json_examples() -> list[dict]:
    """Every ```json block of docs/operations.md, unwrapped (the examples are wrapped for reading)."""
    blocks = re.findall(r"```json\n(.*?)```", OPERATIONS.read_text(), re.S)
    return [json.loads(block.replace("\n", "")) for block in blocks]


def doc_example(predicate) -> dict:
    (example,) = [e for e in doc_json_examples() if predicate(e)]
    return example


def same_shape(doc, real, where: str = "record"):
    """`doc` has `real`'s keys in order and its values' types (an integer in the doc must be an integer)."""
    if isinstance(doc, dict):
        assert isinstance(real, dict), f"{where}: {real!r} is not an object"
        assert list(doc) == list(real), f"{where}: documented keys {list(doc)} != real keys {list(real)}"
        for key in doc:
            same_shape(doc[key], real[key], f"{where}.{key}")
    elif isinstance(doc, list):
        assert isinstance(real, list), f"{where}: {real!r} is not an array"
        for i, (d, r) in enumerate(zip(doc, real)):
            same_shape(d, r, f"{where}[{i}]")
    elif doc is None or real is None:
        assert doc is real, f"{where}: documented {doc!r}, real {real!r}"
    elif isinstance(doc, bool) or isinstance(doc, str):
        assert type(real) is type(doc), f"{where}: documented {doc!r}, real {real!r}"
    elif isinstance(doc, int):
        assert type(real) is int, f"{where}: documented integer {doc!r}, real {real!r}"
    else:
        assert type(real) in (int, float), f"{where}: documented number {doc!r}, real {real!r}"


def audit_records(path) -> list[dict]:
    return json_lines(path)


def avatar_upload_record(tmp_path, upstream, rules, avatar: Part, status: int) -> dict:
    """POSTs `user_id=42` and `avatar` to /api/avatar through a Formwall with `rules`; the request's audit record."""
    audit = tmp_path / "audit.log"
    fw = Formwall(tmp_path, upstream.url, ["--rules", str(rules), "--audit-log", str(audit)])
    try:
        rid = new_id()
        body, ctype = multipart([Part("user_id", b"42"), avatar])
        resp = request(fw.port, "POST", "/api/avatar", [("Content-Type", ctype), ("X-Request-Id", rid)], body)
        assert resp.status == status, resp
        return wait_until(lambda: next((r for r in audit_records(audit) if r.get("request_id") == rid), None),
                          IO_TIMEOUT, what="the audit record")
    finally:
        fw.terminate()


def test_audit_request_example_matches_a_real_record(tmp_path, upstream):
    example = doc_example(lambda e: "request_id" in e and e.get("decision") == "reject")
    # The example's own rule file (rules/avatar.rules in the repository).
    record = avatar_upload_record(tmp_path, upstream, REPO / "rules" / "avatar.rules",
                                  Part("avatar", b"\x89PNG\r\n\x1a\n" + bytes(5_500_000), "me.png", "image/png"), 413)
    same_shape(example, record)
    # The parts documented are the real ones, by index.
    for part in example["parts"]:
        same_shape(part, record["parts"][part["index"]], f"parts[{part['index']}]")
    for key in ("path", "route", "decision", "status", "reason"):
        assert example[key] == record[key], (key, example[key], record[key])
    # Rules are named as given to --rules (here an absolute path; the example's is relative).
    assert len(example["violations"]) == len(record["violations"]), record
    for documented, real in zip(example["violations"], record["violations"]):
        assert real["rule"].endswith("/" + documented["rule"]), (documented, real)
    assert [v["kind"] for v in example["violations"]] == [v["kind"] for v in record["violations"]], record


def test_audit_anomaly_names_in_the_schema_are_real_flags(tmp_path, upstream):
    """The schema's `anomalies` row names flags as the audit log spells them."""
    row = next(line for line in OPERATIONS.read_text().splitlines() if line.startswith("| `anomalies` |"))
    named = re.findall(r"`([a-z][a-z_-]*)`", row.split("|")[3])
    assert named, row
    rules = tmp_path / "lf.rules"
    rules.write_text("route / {\n    field a;\n    anomaly lf-line log;\n}\n")
    audit = tmp_path / "audit.log"
    fw = Formwall(tmp_path, upstream.url, ["--rules", str(rules), "--audit-log", str(audit)])
    try:
        rid = new_id()
        body = b"--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nvalue\n--XyZ--\n"
        head = (f"POST /f HTTP/1.1\r\nHost: x\r\nX-Request-Id: {rid}\r\n"
                f"Content-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        assert request(fw.port, raw_head=head, body=body).status == 200
        record = wait_until(lambda: next((r for r in audit_records(audit) if r.get("request_id") == rid), None),
                            IO_TIMEOUT, what="the audit record")
    finally:
        fw.terminate()
    assert set(named) <= set(record["anomalies"]), (named, record["anomalies"])


def test_worker_exit_example_matches_a_real_event(tmp_path, upstream):
    example = doc_example(lambda e: e.get("event") == "worker_exit")
    audit = tmp_path / "audit.log"
    fw = Formwall(tmp_path, upstream.url, ["--audit-log", str(audit), "--workers", "1"])
    try:
        child = wait_until(lambda: next(iter(_children(fw.proc.pid)), None), START_TIMEOUT,
                           what="the proxy process")
        os.kill(child, signal.SIGKILL)
        event = wait_until(lambda: next((r for r in audit_records(audit) if r.get("event") == "worker_exit"), None),
                           IO_TIMEOUT, what="the worker_exit record")
    finally:
        fw.terminate()
    same_shape(example, event)


def _children(pid: int) -> list[int]:
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out += [int(p) for p in open(f"/proc/{pid}/task/{tid}/children").read().split()]
        except FileNotFoundError:
            pass
    return out


def test_logrotate_example_reopens_the_log_through_the_pid_file(tmp_path, upstream):
    text = OPERATIONS.read_text()
    block = re.search(r"### Rotation option 1: logrotate\n(.*?)### ", text, re.S).group(1)
    postrotate = re.search(r"postrotate\n(.*?)\n\s*endscript", block, re.S).group(1).strip()
    serve_line = re.search(r"formwall serve [^\n]*", block).group(0)
    pid_file = re.search(r"--pid-file (\S+)", serve_line).group(1)
    assert pid_file in postrotate, (serve_line, postrotate)
    assert "USR1" in postrotate, "SIGHUP would also reload the rules; the example must send SIGUSR1"

    mine = tmp_path / "formwall.pid"
    audit = tmp_path / "audit.log"
    fw = Formwall(tmp_path, upstream.url, ["--audit-log", str(audit), "--pid-file", str(mine)])
    try:
        wait_until(mine.exists, START_TIMEOUT, what="the pid file")
        first = new_id()
        assert request(fw.port, "GET", "/", [("X-Request-Id", first)]).status == 200
        wait_until(lambda: any(r.get("request_id") == first for r in audit_records(audit)), IO_TIMEOUT,
                   what="the first record")
        audit.rename(tmp_path / "audit.log.1")   # what logrotate does before postrotate
        subprocess.run(["sh", "-c", postrotate.replace(pid_file, str(mine))], check=True, timeout=30)
        # Records written after the signal reached every worker go to the new file.
        def reopened():
            rid = new_id()
            assert request(fw.port, "GET", "/", [("X-Request-Id", rid)]).status == 200
            return any(r.get("request_id") == rid for r in audit_records(audit)) or None
        wait_until(reopened, IO_TIMEOUT, what="a record in the re-created log")
        assert fw.events("rules reloaded") == []
    finally:
        fw.terminate()


def test_audit_monitor_example_matches_a_real_record(tmp_path, upstream):
    """The monitor-mode example: a request enforce would refuse, forwarded and recorded with `would_status`."""
    example = doc_example(lambda e: e.get("decision") == "monitor")
    rules = tmp_path / "m.rules"
    # Line 6 is the `file avatar` rule, as the example's `"rule":"m.rules:6"` says.
    rules.write_text("mode monitor;\n\nroute /api/avatar {\n    methods POST;\n    field user_id;\n"
                     "    file avatar { extensions .png; }\n}\n")
    record = avatar_upload_record(tmp_path, upstream, rules,
                                  Part("avatar", b"GIF89a" + bytes(4894), "me.gif", "image/gif"), 200)
    same_shape(example, record)
    for key in ("path", "route", "decision", "status", "reason", "would_status"):
        assert example[key] == record[key], (key, example[key], record[key])
    assert [(v["kind"], v["outcome"], v["enforced"]) for v in example["violations"]] == \
        [(v["kind"], v["outcome"], v["enforced"]) for v in record["violations"]], record
    assert record["violations"][0]["rule"].endswith("/" + example["violations"][0]["rule"]), record
