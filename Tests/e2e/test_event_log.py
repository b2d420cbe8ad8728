"""Event and error lines on stderr (docs/operations.md, "Logs on stderr").

`formwall serve` writes every event as one JSON object per line: ts (RFC 3339 UTC, milliseconds), level, msg, pid,
then fields. A run goes through start-up, a request the upstream refuses, a SIGHUP reload that works and one that
fails, and SIGTERM; every stderr line must parse, every msg must be one docs/operations.md lists, and the upstream
failure must name the request id its audit record has. `--log-level` drops the lines below it.
"""

from __future__ import annotations

import re
import signal

import pytest

from e2e_helpers import IO_TIMEOUT, REPO, START_TIMEOUT, Formwall, event_lines, free_port, json_lines, wait_until
from policy_helpers import new_id, request

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
GOOD = "route /r {\n    methods POST;\n    field a;\n}\n"
GOOD_PUT = "route /r {\n    methods PUT;\n    field a;\n}\n"
BAD = "route /r {\n    bogus-directive;\n}\n"


def documented_msgs() -> set[str]:
    """The msg values listed in docs/operations.md's "Logs on stderr" table (first column, in backquotes)."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text[text.index("## Logs on stderr"):]
    section = section[:section.index("\n## ", 1)]
    return set(re.findall(r"^\| `([a-z][a-z ,]*)` \| (?:debug|info|warn|error) \|", section, re.M))


def audit_records(path) -> list[dict]:
    return json_lines(path)


def run_events(tmp_path, *args: str) -> tuple[Formwall, dict]:
    """Starts serve (supervised, one worker, an upstream port nothing listens on), causes every kind of event and
    stops it with SIGTERM. Returns the process and what the test caused: the refused request's id, the rules path."""
    rules = tmp_path / "policy.rules"
    rules.write_text(GOOD)
    audit = tmp_path / "audit.log"
    closed = free_port()
    fw = Formwall(tmp_path, f"http://127.0.0.1:{closed}",
                  ["--workers", "1", "--rules", str(rules), "--audit-log", str(audit), *args])
    path = f"/refused/{new_id()}"
    resp = request(fw.port, "GET", path)
    assert resp.status == 502 and resp.json()["error"] == "upstream_unreachable", resp
    record = wait_until(lambda: next((r for r in audit_records(audit) if r.get("path") == path), None), IO_TIMEOUT,
                        what="the audit record of the refused request")
    assert record["request_id"] == resp.json()["request_id"], (record, resp.json())

    # A reload that works: GET /r is refused at its head with 405 under both policies, never reaching the upstream
    # (which would add failure lines); its Allow shows which policy is in force, at every --log-level.
    def allow():
        resp = request(fw.port, "GET", "/r")
        assert resp.status == 405, resp
        return resp.header("allow")
    assert allow() == "POST"
    rules.write_text(GOOD_PUT)
    fw.signal(signal.SIGHUP)
    wait_until(lambda: allow() == "PUT", IO_TIMEOUT, what="the first reload")
    # One that fails: the line is an error, written at every --log-level.
    rules.write_text(BAD)
    fw.signal(signal.SIGHUP)
    wait_until(lambda: any(e["msg"] == "rules reload failed" for e in event_lines(fw.stderr_text())),
               IO_TIMEOUT, what="the failed reload line")
    assert fw.terminate(timeout=15) == 0, fw.stderr_text()[-2000:]
    return fw, {"request_id": record["request_id"], "rules": str(rules), "upstream": f"127.0.0.1:{closed}"}


def test_every_stderr_line_is_a_json_event_with_documented_msg(tmp_path):
    fw, caused = run_events(tmp_path)
    text = fw.stderr_text()
    assert text.endswith("\n")
    events = event_lines(text)
    assert len(events) == len(text.splitlines())
    documented = documented_msgs()
    assert {"listening", "upstream unreachable", "rules reloaded", "stopped"} <= documented, documented
    for e in events:
        assert TS.match(e["ts"]), e
        assert isinstance(e["pid"], int) and e["pid"] > 0, e
        assert e["msg"] in documented, f"msg {e['msg']!r} is not listed in docs/operations.md: {e}"
        assert e["level"] != "debug", e   # the default level is info
    msgs = [e["msg"] for e in events]
    supervisor = fw.proc.pid

    # Start: the supervisor starts the proxy process, which then listens.
    (started,) = [e for e in events if e["msg"] == "proxy process started"]
    assert started["level"] == "info" and started["pid"] == supervisor, started
    child = started["child_pid"]
    (listening,) = [e for e in events if e["msg"] == "listening"]
    assert listening["level"] == "info" and listening["pid"] == child, listening
    assert listening["listen"] == f"127.0.0.1:{fw.port}" and listening["upstream"] == caused["upstream"], listening
    assert listening["workers"] == 1, listening
    # No order between these two: the supervisor writes its line after posix_spawn returns, and by then the
    # proxy process may already listen.

    # The refused request: one error line naming the request the audit log recorded.
    (failure,) = [e for e in events if e["msg"] == "upstream unreachable"]
    assert failure["level"] == "error" and failure["pid"] == child and failure["kind"] == "upstream", failure
    assert failure["request_id"] == caused["request_id"], failure
    assert failure["upstream"] == caused["upstream"] and "refused" in failure["error"].lower(), failure
    assert failure["worker"] == 0 and "suppressed" not in failure, failure

    # SIGHUP twice: reloaded, then a failure that names the file and keeps the previous rules.
    (reloaded,) = [e for e in events if e["msg"] == "rules reloaded"]
    assert reloaded["level"] == "info" and reloaded["rules"] == [caused["rules"]], reloaded
    (failed,) = [e for e in events if e["msg"] == "rules reload failed"]
    assert failed["level"] == "error" and caused["rules"] in failed["error"], failed
    assert "bogus-directive" in failed["error"], failed
    assert msgs.index("rules reloaded") < msgs.index("rules reload failed")

    # SIGTERM: the proxy process drains and stops; nothing was restarted.
    (draining,) = [e for e in events if e["msg"] == "draining"]
    assert draining["signal"] == "SIGTERM" and draining["pid"] == child, draining
    assert msgs[-1] == "stopped" and events[-1]["pid"] == child and events[-1]["level"] == "info", events[-1]
    assert "proxy process exited" not in msgs


@pytest.mark.parametrize("level,allowed", [
    ("error", {"error"}),
    ("warn", {"warn", "error"}),
    ("debug", {"debug", "info", "warn", "error"}),
])
def test_log_level_drops_the_lines_below_it(tmp_path, level, allowed):
    fw, caused = run_events(tmp_path, "--log-level", level)
    events = event_lines(fw.stderr_text())
    assert {e["level"] for e in events} <= allowed, events
    msgs = [e["msg"] for e in events]
    # Failures are written at every level.
    (failure,) = [e for e in events if e["msg"] == "upstream unreachable"]
    assert failure["request_id"] == caused["request_id"], failure
    assert "rules reload failed" in msgs
    if level == "debug":
        assert {"listening", "rules reloaded", "stopped", "proxy process started"} <= set(msgs), msgs
        hups = [e for e in events if e["msg"] == "signal received" and e["signal"] == "SIGHUP"]
        # Each SIGHUP is seen by the supervisor (which forwards it) and by the proxy process.
        assert len(hups) == 4 and {e["pid"] for e in hups} == {fw.proc.pid, hups[0]["child_pid"]}, hups
    else:
        assert not {"listening", "rules reloaded", "stopped", "proxy process started", "draining"} & set(msgs), msgs


def test_log_level_must_be_a_level(tmp_path):
    import subprocess
    from policy_helpers import BIN
    r = subprocess.run([BIN, "serve", "--listen", "127.0.0.1:1", "--upstream", "http://127.0.0.1:9",
                        "--log-level", "verbose"], capture_output=True, text=True, timeout=START_TIMEOUT)
    assert r.returncode == 2
    assert r.stderr == "formwall: --log-level must be debug, info, warn or error, got 'verbose'\n", r.stderr


def test_text_format_is_for_a_terminal(tmp_path, upstream):
    fw = Formwall(tmp_path, upstream.url, ["--log-format", "text", "--single-process"])
    assert fw.terminate(timeout=15) == 0
    lines = fw.stderr_text().splitlines()
    assert lines[0].startswith(f"formwall: listening listen=127.0.0.1:{fw.port} upstream=127.0.0.1:{upstream.port}"), lines
    assert lines[-1] == "formwall: stopped", lines
