"""The admin listener (`--admin HOST:PORT`): /healthz, /readyz, /rules, /metrics, /upstreams, 404/405.

The load test sends a few hundred mixed requests (allowed, rejected by a rule, malformed) over several
connections, then checks that /metrics says what the audit log says, summed from its JSON lines: requests by
decision and status, bytes, parts, files, violations by kind. Restarts: the proxy process is killed with SIGKILL
and the new one exports `formwall_supervisor_restarts_total 1`. Every wait polls a condition with a deadline.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import socket
import subprocess
import threading
from collections import Counter
from pathlib import Path

import requests

from e2e_helpers import HOST, IO_TIMEOUT, START_TIMEOUT, events_with, formwall_binary, free_port, json_lines, wait_until

RULES = """route /r {
    methods POST;
    field a { max 64; }
    file f { max 200; }
}
"""
RULES_B = """route /r {
    methods POST;
    field a { max 64; }
}
"""
INVALID = "route /r { bogus-directive; }\n"


def admin_get(port: int, path: str) -> requests.Response:
    return requests.get(f"http://{HOST}:{port}{path}", timeout=IO_TIMEOUT)


def wait_ready(port: int, timeout: float = START_TIMEOUT) -> dict:
    """Polls /readyz until it answers 200; returns its JSON."""
    seen = {}

    def ready():
        try:
            r = admin_get(port, "/readyz")
        except requests.RequestException:
            return False
        seen["body"] = r.json()
        return r.status_code == 200

    wait_until(ready, timeout, what=f"/readyz 200 on admin port {port}")
    return seen["body"]


LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    """/metrics as {(name, frozenset(labels)): value}; checks HELP/TYPE precede each family's samples."""
    r = admin_get(port, "/metrics")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    out: dict[tuple[str, frozenset], float] = {}
    typed: set[str] = set()
    for line in r.text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        name, _, labels = head.partition("{")
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name.endswith(("_bucket", "_sum", "_count")) else name
        assert family in typed or name in typed, f"sample before its # TYPE: {line}"
        pairs = frozenset((k, v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\"))
                          for k, v in LABEL.findall(labels))
        out[(name, pairs)] = float(value)
    return out


def by_label(metrics: dict, name: str, *labels: str) -> dict:
    """Samples of `name`, keyed by the values of `labels` (one label: the value itself)."""
    out = {}
    for (n, pairs), value in metrics.items():
        if n != name:
            continue
        d = dict(pairs)
        key = tuple(d.get(label) for label in labels)
        out[key[0] if len(labels) == 1 else key] = value
    return out


def value(metrics: dict, name: str, **labels) -> float:
    return metrics[(name, frozenset(labels.items()))]


def audit_lines(path: Path) -> list[dict]:
    return json_lines(path)


def start(formwall_factory, upstream, tmp_path, *args) -> tuple:
    admin = free_port()
    fw = formwall_factory(upstream.url, "--workers", "2", "--admin", f"{HOST}:{admin}", *args)
    wait_ready(admin)
    return fw, admin


def test_healthz_readyz_and_unknown_paths(formwall_factory, upstream, tmp_path):
    fw, admin = start(formwall_factory, upstream, tmp_path)
    r = admin_get(admin, "/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    ready = wait_ready(admin)
    assert ready["status"] == "ready" and "upstream" not in ready["checks"], ready
    r = admin_get(admin, "/nope")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    assert r.headers["Connection"] == "close"
    r = requests.post(f"http://{HOST}:{admin}/metrics", data=b"x", timeout=IO_TIMEOUT)
    assert r.status_code == 405 and r.headers["Allow"] == "GET"
    r = requests.delete(f"http://{HOST}:{admin}/healthz", timeout=IO_TIMEOUT)
    assert r.status_code == 405
    # A head over the limit is refused, and the listener keeps serving.
    r = requests.get(f"http://{HOST}:{admin}/healthz", headers={"X-Big": "a" * 8000}, timeout=IO_TIMEOUT)
    assert r.status_code == 431
    assert admin_get(admin, "/healthz").status_code == 200
    # The upstream goes away: the replica stays ready (readiness is Formwall's own; a load balancer taking every
    # replica out would not bring the application back) and /upstreams shows the server down once a request
    # failed on it. /healthz still 200.
    upstream.stop()
    r = requests.get(fw.url + "/", timeout=IO_TIMEOUT)
    assert r.status_code == 502 and r.json()["error"] == "upstream_unreachable"
    r = admin_get(admin, "/readyz")
    assert r.status_code == 200 and r.json()["status"] == "ready", r.text
    [group] = admin_get(admin, "/upstreams").json()["groups"]
    assert group["name"] == "default" and group["up"] is False, group
    assert group["servers"][0]["last_failure"]["reason"] == "upstream_unreachable", group
    assert admin_get(admin, "/healthz").status_code == 200


def test_readyz_checks_quarantine_and_rules(formwall_factory, upstream, tmp_path):
    rules = tmp_path / "a.rules"
    rules.write_text(RULES)
    fw, admin = start(formwall_factory, upstream, tmp_path, "--rules", str(rules),
                      "--quarantine-dir", str(tmp_path / "q"))
    checks = wait_ready(admin)["checks"]
    assert checks["rules"]["ok"] and checks["quarantine"]["ok"] and checks["accepting"]["ok"]
    assert not [p for p in (tmp_path / "q").iterdir() if p.name.startswith(".formwall-ready")]


def test_rules_digest_follows_reload(formwall_factory, upstream, tmp_path):
    rules = tmp_path / "a.rules"
    rules.write_text(RULES)
    fw, admin = start(formwall_factory, upstream, tmp_path, "--rules", str(rules))
    first = admin_get(admin, "/rules").json()
    assert first["files"] == [str(rules)]
    assert first["digest"] == hashlib.sha256(RULES.encode()).hexdigest()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", first["loaded_at"])

    tmp = rules.with_suffix(".tmp")
    tmp.write_text(RULES_B)
    os.replace(tmp, rules)
    fw.proc.send_signal(signal.SIGHUP)
    want = hashlib.sha256(RULES_B.encode()).hexdigest()
    wait_until(lambda: admin_get(admin, "/rules").json()["digest"] == want, IO_TIMEOUT, what="new digest")
    assert admin_get(admin, "/rules").json()["loaded_at"] >= first["loaded_at"]
    m = scrape(admin)
    assert value(m, "formwall_rule_reloads_total", result="ok") == 1
    assert value(m, "formwall_rule_reloads_total", result="failed") == 0

    # An invalid file: the policy (and its digest) stay, the failure is counted.
    tmp.write_text(INVALID)
    os.replace(tmp, rules)
    fw.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: value(scrape(admin), "formwall_rule_reloads_total", result="failed") == 1, IO_TIMEOUT,
               what="failed reload counted")
    assert admin_get(admin, "/rules").json()["digest"] == want


def multipart_body(fields: list[tuple[str, bytes, str | None]], boundary: str = "fwAdminB0undary") -> tuple[bytes, str]:
    out = b""
    for name, data, filename in fields:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n".encode()
        if filename:
            out += b"Content-Type: application/octet-stream\r\n"
        out += b"\r\n" + data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return out, f"multipart/form-data; boundary={boundary}"


def mixed_request(i: int) -> tuple[str, bytes, dict]:
    """Request number i of the load: allowed, rejected by a rule, or malformed."""
    kind = i % 5
    if kind in (0, 1):  # allowed: a field and a small file
        body, ctype = multipart_body([("a", b"v%d" % i, None), ("f", b"x" * (i % 150), "f%d.bin" % i)])
    elif kind == 2:  # file over its limit: file_too_large
        body, ctype = multipart_body([("a", b"v", None), ("f", b"y" * 500, "big.bin")])
    elif kind == 3:  # a part the route does not know: unknown_part
        body, ctype = multipart_body([("a", b"v", None), ("zz", b"w" * (i % 30), None)])
    else:  # malformed: the closing delimiter never comes
        body = b"--fwAdminB0undary\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--fwAdminB0undaryXX"
        ctype = "multipart/form-data; boundary=fwAdminB0undary"
    return "/r", body, {"Content-Type": ctype}


def test_metrics_agree_with_the_audit_log_under_load(formwall_factory, upstream, tmp_path):
    rules = tmp_path / "a.rules"
    rules.write_text(RULES)
    audit = tmp_path / "audit.jsonl"
    fw, admin = start(formwall_factory, upstream, tmp_path, "--rules", str(rules), "--audit-log", str(audit))
    total, threads = 300, 6
    statuses = Counter()
    lock = threading.Lock()
    errors = []

    def client(t: int):
        session = requests.Session()
        try:
            for i in range(t, total, threads):
                path, body, headers = mixed_request(i)
                r = session.post(fw.url + path, data=body, headers=headers, timeout=IO_TIMEOUT)
                with lock:
                    statuses[r.status_code] += 1
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
        finally:
            session.close()

    workers = [threading.Thread(target=client, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    assert sum(statuses.values()) == total
    assert len(statuses) >= 3, statuses  # allowed, rejected and malformed all happened
    wait_until(lambda: len(audit_lines(audit)) >= total, IO_TIMEOUT, what=f"{total} audit lines")
    records = [r for r in audit_lines(audit) if r.get("event", "request") == "request"]
    assert len(records) == total

    m = scrape(admin)
    requests_by = by_label(m, "formwall_requests_total", "route", "decision", "status")
    expected = Counter((r["route"] or "", r["decision"], str(r["status"])) for r in records)
    assert {k: int(v) for k, v in requests_by.items()} == dict(expected)
    assert value(m, "formwall_client_bytes_total") == sum(r["bytes_in"] for r in records)
    assert value(m, "formwall_upstream_bytes_total") == sum(r["bytes_upstream"] for r in records)
    parts = [p for r in records for p in r.get("parts", [])]
    assert value(m, "formwall_parts_total") == len(parts)
    assert value(m, "formwall_files_total") == sum(1 for p in parts if p.get("filename") is not None)
    violations = Counter(v["kind"] for r in records for v in r.get("violations", []))
    assert {k: int(v) for k, v in by_label(m, "formwall_violations_total", "kind").items()} == dict(violations)
    assert violations["file_too_large"] > 0 and violations["unknown_part"] > 0
    anomalies = Counter(a for r in records for a in r.get("anomalies", []))
    assert {k: int(v) for k, v in by_label(m, "formwall_anomalies_total", "flag").items()} == dict(anomalies)
    assert value(m, "formwall_request_duration_seconds_count") == total
    assert value(m, "formwall_request_duration_seconds_bucket", le="+Inf") == total
    assert value(m, "formwall_upstream_duration_seconds_count") == sum(
        1 for r in records if r.get("upstream_ms") is not None)
    for name, field in [("formwall_upstream_connect_seconds", "upstream_connect_ms"),
                        ("formwall_upstream_header_seconds", "upstream_header_ms"),
                        ("formwall_upstream_response_seconds", "upstream_response_ms"),
                        ("formwall_client_body_seconds", "client_body_ms")]:
        assert value(m, name + "_count") == sum(1 for r in records if r.get(field) is not None), name
    buckets = sorted((float(dict(k[1])["le"]), v) for k, v in m.items()
                     if k[0] == "formwall_request_duration_seconds_bucket")
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)  # cumulative
    wait_until(lambda: value(scrape(admin), "formwall_active_connections") == 0, IO_TIMEOUT,
               what="connections closed")


def test_metrics_count_without_an_audit_log(formwall_factory, upstream, tmp_path):
    fw, admin = start(formwall_factory, upstream, tmp_path)
    for i in range(5):
        r = requests.post(fw.url + "/x", data=b"hello", timeout=IO_TIMEOUT)
        assert r.status_code == 200
    wait_until(lambda: sum(by_label(scrape(admin), "formwall_requests_total", "status").values()) == 5,
               IO_TIMEOUT, what="5 requests counted")
    m = scrape(admin)
    assert value(m, "formwall_requests_total", route="", decision="allow", status="200") == 5
    assert value(m, "formwall_client_bytes_total") == 25


def children(pid: int) -> list[int]:
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out += [int(p) for p in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def test_supervisor_restarts_are_exported(formwall_factory, upstream, tmp_path):
    fw, admin = start(formwall_factory, upstream, tmp_path)
    assert value(scrape(admin), "formwall_supervisor_restarts_total") == 0
    wait_until(lambda: children(fw.proc.pid), START_TIMEOUT, what="the proxy process")
    child = children(fw.proc.pid)[0]
    os.kill(child, signal.SIGKILL)
    wait_until(lambda: [c for c in children(fw.proc.pid) if c != child], START_TIMEOUT, what="a new proxy process")
    wait_ready(admin)
    assert value(scrape(admin), "formwall_supervisor_restarts_total") == 1


def test_admin_address_in_use_is_a_startup_error(upstream, tmp_path):
    taken = socket.socket()
    taken.bind((HOST, 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        for extra in ([], ["--single-process"]):
            proc = subprocess.run([str(formwall_binary()), "serve", "--listen", f"{HOST}:{free_port()}",
                                   "--upstream", upstream.url, "--admin", f"{HOST}:{port}", *extra],
                                  capture_output=True, text=True, timeout=START_TIMEOUT)
            assert proc.returncode == 1, proc.stderr
            [line] = events_with(proc.stderr, "cannot start")
            assert line["level"] == "error" and line["error"].startswith("admin address in use"), proc.stderr
    finally:
        taken.close()
