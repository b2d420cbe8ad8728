"""Recovery that never makes an outage worse: the supervisor after a failed reload, a crash, and a proxy process
that cannot start; `formwall reload`; systemd's notification protocol (Type=notify).

* A rule file broken on disk, SIGHUP (the old policy stays), then SIGKILL of the proxy process: the restarted
  process serves the policy that was in force (same /rules digest, same answers) and says, at each start, that
  the files on disk are invalid.
* A --config setting changed and reported by SIGHUP as "needs a restart" is not applied by a crash either.
* A proxy process that cannot start (its spool directory is gone): connections are refused at once, not left
  waiting in the listen backlog; once it can start again, it serves.
* `formwall reload --pid-file`: exit 0 when the reload worked, 1 with the diagnostics when it did not (from its own
  check, or from the supervisor when the check is skipped).
* NOTIFY_SOCKET: a datagram socket bound by the test receives READY=1, RELOADING=1 with MONOTONIC_USEC, READY=1
  after the reload, and STOPPING=1, all from the supervisor's pid.
"""

from __future__ import annotations

import errno
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from e2e_helpers import START_TIMEOUT, formwall_binary, free_port, wait_until
from policy_helpers import Part, multipart, new_id, request
from test_supervisor import children, serving_pid

ALLOW_B = "route /r {\n    methods POST;\n    field a;\n    field b;\n}\n"
REJECT_B = "route /r {\n    methods POST;\n    field a;\n}\n"
INVALID = "route /r {\n    methods POST;\n    field a;\n    bogus-directive;\n}\n"


def install(path: Path, text: str) -> None:
    """Replaces a file atomically, as a deployment would."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def admin_get(port: int, path: str, timeout: float = 5.0) -> tuple[int, dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as resp:
        return resp.status, json.loads(resp.read())


def post_ab(port: int, timeout: float = 5.0):
    body, ctype = multipart([Part("a", b"1"), Part("b", b"2")])
    return request(port, "POST", "/r", [("Content-Type", ctype), ("X-Request-Id", new_id("r"))], body,
                   timeout=timeout)


def ready_children(fw) -> list[int]:
    return [e["child_pid"] for e in fw.events("proxy process ready")]


def listening_pids(fw) -> list[int]:
    return [e["pid"] for e in fw.events("listening")]


def restart(fw, victim: int, check=None) -> int:
    """SIGKILLs the proxy process `victim`, runs `check` (what a client sees right after), and returns the pid of
    its successor once that one listens."""
    before = len(listening_pids(fw))
    os.kill(victim, signal.SIGKILL)
    if check:
        check()
    pids = wait_until(lambda: listening_pids(fw)[before:] or None, START_TIMEOUT,
                      what="the restarted proxy process to listen")
    assert pids[0] != victim
    return pids[0]


def test_a_crash_after_a_failed_reload_serves_the_last_good_rules(upstream, formwall_factory, tmp_path):
    rules = tmp_path / "policy.rules"
    install(rules, REJECT_B)
    admin = free_port()
    fw = formwall_factory(upstream.url, "--rules", str(rules), "--admin", f"127.0.0.1:{admin}")
    first = serving_pid(fw)
    resp = post_ab(fw.port)
    assert resp.status == 403 and resp.json()["error"] == "unknown_part", resp
    _, rules_before = admin_get(admin, "/rules")

    install(rules, INVALID)
    os.kill(fw.proc.pid, signal.SIGHUP)
    wait_until(lambda: fw.events("rules reload failed"), 10, what="the failed reload")
    assert post_ab(fw.port).status == 403

    def answered_by_the_old_policy():
        # The restarted process serves at once, with the policy that was in force: not the broken file.
        resp = post_ab(fw.port, timeout=5)
        assert resp.status == 403 and resp.json()["error"] == "unknown_part", resp

    second = restart(fw, first, answered_by_the_old_policy)
    status, health = admin_get(admin, "/healthz")
    assert status == 200 and health == {"status": "ok"}
    _, rules_after = admin_get(admin, "/rules")
    assert rules_after == rules_before, (rules_before, rules_after)
    # And it says so, loudly, at each start.
    (invalid,) = [e for e in fw.events("configuration on disk invalid") if e["pid"] == second]
    assert invalid["level"] == "error" and "bogus-directive" in invalid["error"], invalid
    assert invalid["action"] == "serving the last good configuration", invalid
    assert invalid["last_good_at"] == rules_before["loaded_at"], invalid
    (listening,) = [e for e in fw.events("listening") if e["pid"] == second]
    assert listening["last_good_at"] == rules_before["loaded_at"], listening

    third = restart(fw, second)
    assert [e["pid"] for e in fw.events("configuration on disk invalid")] == [second, third]
    assert post_ab(fw.port).status == 403

    # A reload of a fixed file applies it, and the next restart serves that one.
    install(rules, ALLOW_B)
    os.kill(fw.proc.pid, signal.SIGHUP)
    wait_until(lambda: [e for e in fw.events("rules reloaded") if e["pid"] == third], 10, what="the reload")
    assert post_ab(fw.port).status == 200
    fourth = restart(fw, third)
    assert post_ab(fw.port).status == 200
    assert [e for e in fw.events("configuration on disk invalid") if e["pid"] == fourth] == []
    assert fw.events("rules reload failed")[0]["pid"] == first


CONF = """listen 127.0.0.1:{port};
upstream {upstream};
max-connections {max_connections};
admin 127.0.0.1:{admin};
"""


def test_a_crash_does_not_apply_settings_that_need_a_restart(upstream, formwall_factory, tmp_path):
    port, admin = free_port(), free_port()
    conf = tmp_path / "formwall.conf"
    install(conf, CONF.format(port=port, upstream=upstream.url, max_connections=100, admin=admin))
    pid_file = tmp_path / "formwall.pid"
    fw = formwall_factory(None, "--config", str(conf), "--workers", "1", "--pid-file", str(pid_file), port=port)
    first = serving_pid(fw)
    assert request(fw.port, "GET", "/", timeout=5).status == 200

    install(conf, CONF.format(port=port, upstream=upstream.url, max_connections=200, admin=admin))
    os.kill(fw.proc.pid, signal.SIGHUP)
    (warned,) = wait_until(lambda: fw.events("configuration change needs a restart"), 10, what="the warning")
    assert warned["settings"] == ["max-connections"] and warned["pid"] == first, warned

    second = restart(fw, first)
    (listening,) = [e for e in fw.events("listening") if e["pid"] == second]
    assert listening["max_connections"] == 100, listening
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5) as resp:
        assert "formwall_max_connections 100\n" in resp.read().decode()
    # The restarted process says again that the file asks for something it does not apply.
    again = [e for e in fw.events("configuration change needs a restart") if e["pid"] == second]
    assert again and again[0]["settings"] == ["max-connections"], fw.events("configuration change needs a restart")
    assert request(fw.port, "GET", "/", timeout=5).status == 200
    # `formwall reload` succeeds (nothing failed) and passes the warning on.
    done = reload_command("--pid-file", str(pid_file), "--config", str(conf))
    assert done.returncode == 0, done
    assert f"warning: {conf}: max-connections changed; not applied until formwall restarts" in done.stderr, done


def connection_outcome(port: int, timeout: float) -> str:
    """What a client sees within `timeout`: `refused`, `reset`, `closed`, `answered` or `hangs`."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except ConnectionRefusedError:
        return "refused"
    except socket.timeout:
        return "hangs"
    with sock:
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            data = sock.recv(100)
        except ConnectionResetError:
            return "reset"
        except socket.timeout:
            return "hangs"
        return "answered" if data else "closed"


def test_connections_are_refused_while_no_proxy_process_can_start(upstream, formwall_factory, tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    admin = free_port()
    fw = formwall_factory(upstream.url, "--spool-dir", str(spool), "--admin", f"127.0.0.1:{admin}")
    first = serving_pid(fw)
    assert request(fw.port, "GET", "/", timeout=5).status == 200
    spool.rmdir()
    os.kill(first, signal.SIGKILL)
    # The next proxy process cannot start (no spool directory): nothing waits for it in the backlog.
    wait_until(lambda: len(fw.events("proxy process exited")) >= 2, START_TIMEOUT, what="a failed start")
    for port in (fw.port, admin):
        started = time.monotonic()
        outcome = connection_outcome(port, timeout=3)
        assert outcome in ("refused", "reset"), (port, outcome)
        assert time.monotonic() - started < 1.0
    (refusing,) = fw.events("not serving")
    assert refusing["level"] == "error" and refusing["pid"] == fw.proc.pid, refusing
    assert refusing["action"] == "refusing connections until a proxy process starts", refusing

    # Once a proxy process can start again (within the 5 s backoff), it listens and serves.
    spool.mkdir()
    wait_until(lambda: len(ready_children(fw)) >= 2, 15, what="a proxy process to start again")
    assert request(fw.port, "GET", "/", timeout=5).status == 200
    assert admin_get(admin, "/healthz")[0] == 200
    assert fw.proc.poll() is None


def reload_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(formwall_binary()), "reload", *args], capture_output=True, text=True, timeout=60)


def test_reload_command_reports_the_outcome(upstream, formwall_factory, tmp_path):
    rules = tmp_path / "policy.rules"
    install(rules, ALLOW_B)
    pid_file = tmp_path / "formwall.pid"
    fw = formwall_factory(upstream.url, "--rules", str(rules), "--pid-file", str(pid_file))
    serving_pid(fw)
    wait_until(lambda: listening_pids(fw), START_TIMEOUT, what="the proxy process to listen")
    status = Path(f"{pid_file}.status")
    assert status.stat().st_mode & 0o777 == 0o600
    assert json.loads(status.read_text())["pid"] == fw.proc.pid

    install(rules, REJECT_B)
    done = reload_command("--pid-file", str(pid_file), str(rules))
    assert done.returncode == 0, done
    assert done.stdout.splitlines()[-1] == f"formwall reload: reloaded (pid {fw.proc.pid})", done.stdout
    # "reloaded" means in force: the very next request sees the new rules.
    assert post_ab(fw.port).status == 403

    # A broken file: the check fails first and nothing is signalled.
    install(rules, INVALID)
    checked = reload_command("--pid-file", str(pid_file), str(rules))
    assert checked.returncode == 1 and "bogus-directive" in checked.stderr, checked
    assert "nothing was signalled" in checked.stderr, checked.stderr
    assert fw.events("rules reload failed") == []

    # Without the check, the proxy process's own failure comes back through the supervisor.
    failed = reload_command("--pid-file", str(pid_file))
    assert failed.returncode == 1, failed
    assert "reload failed; the previous configuration stays in force" in failed.stderr, failed.stderr
    assert "bogus-directive" in failed.stderr, failed.stderr
    assert len(fw.events("rules reload failed")) == 1
    assert post_ab(fw.port).status == 403
    reload = json.loads(status.read_text())["reload"]
    assert reload["finished_ns"] >= reload["started_ns"] and reload["errors"], reload

    assert reload_command("--pid-file", str(tmp_path / "missing.pid")).returncode == 1
    assert reload_command().returncode == 2
    fw.signal(signal.SIGTERM)
    assert fw.wait(timeout=15) == 0
    assert not pid_file.exists() and not status.exists()


def test_formwall_help_lists_reload():
    out = subprocess.run([str(formwall_binary()), "--help"], capture_output=True, text=True, timeout=10).stdout
    assert "\n  reload " in out, out


class Notifications:
    """A datagram socket bound at a path, as systemd's NOTIFY_SOCKET, that records each message and its sender."""

    def __init__(self, path: Path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.messages: list[tuple[int, dict[str, str]]] = []

    def next(self, timeout: float = 10.0) -> tuple[int, dict[str, str]]:
        ready, _, _ = select.select([self.sock], [], [], timeout)
        assert ready, f"no notification within {timeout} s (so far: {self.messages})"
        data, ancillary, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        sender = next(struct.unpack("iII", d)[0] for level, kind, d in ancillary
                      if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS)
        fields = dict(line.split("=", 1) for line in data.decode().splitlines() if line)
        self.messages.append((sender, fields))
        return sender, fields


def test_type_notify_protocol(upstream, formwall_factory, tmp_path):
    notify = Notifications(tmp_path / "notify.sock")
    rules = tmp_path / "policy.rules"
    install(rules, ALLOW_B)
    fw = formwall_factory(upstream.url, "--rules", str(rules), env={"NOTIFY_SOCKET": str(tmp_path / "notify.sock")})
    sender, ready = notify.next()
    assert sender == fw.proc.pid and ready.get("READY") == "1", ready
    assert ready_children(fw), "READY=1 before the proxy process was ready"

    install(rules, REJECT_B)
    before = time.monotonic()
    os.kill(fw.proc.pid, signal.SIGHUP)
    sender, reloading = notify.next()
    assert sender == fw.proc.pid and reloading.get("RELOADING") == "1", reloading
    # CLOCK_MONOTONIC in microseconds, taken when the supervisor began the reload.
    stamp = int(reloading["MONOTONIC_USEC"]) / 1e6
    assert before <= stamp <= time.monotonic(), (before, stamp)
    sender, reloaded = notify.next()
    assert sender == fw.proc.pid and reloaded.get("READY") == "1", reloaded
    assert fw.events("rules reloaded"), "READY=1 before the reload was over"
    assert post_ab(fw.port).status == 403

    fw.signal(signal.SIGTERM)
    sender, stopping = notify.next()
    assert sender == fw.proc.pid and stopping.get("STOPPING") == "1", stopping
    assert fw.wait(timeout=15) == 0
    # Only the supervisor (the unit's main process) notifies.
    assert {s for s, _ in notify.messages} == {fw.proc.pid}, notify.messages
    notify.sock.close()
