"""The supervisor: `formwall serve` (without --single-process) keeps serving when its proxy process dies.

Client threads send requests on fresh connections while the proxy process (the supervisor's child) is killed
with SIGKILL. Only the requests in flight at that moment may fail; a request sent right after the kill is
answered within a second (the supervisor keeps the listening sockets, so nothing is refused), and the audit log
records the exit. Signals sent to the supervisor reach the proxy process: SIGHUP reloads the rules, SIGTERM
drains and both exit 0. `--single-process` is today's single process.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from e2e_helpers import START_TIMEOUT, json_lines, wait_until
from policy_helpers import Part, multipart, new_id, request

THREADS = 8


def children(pid: int) -> list[int]:
    """The pids whose parent is `pid` (from /proc/<pid>/task/*/children)."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    for tid in tasks:
        try:
            out += [int(p) for p in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def serving_pid(fw, previous: int | None = None) -> int:
    """The pid of the process that serves: the supervisor's child once it has said it listens, or (a binary
    without a supervisor) the process itself. With `previous`, waits for a child other than that one."""
    def find():
        kids = [k for k in children(fw.proc.pid) if k != previous]
        if kids:
            return kids[0]
        if previous is None and fw.events("listening"):
            return fw.proc.pid
        return None
    return wait_until(find, START_TIMEOUT, what="the proxy process")


def audit_events(path: Path) -> list[dict]:
    return [r for r in json_lines(path) if "event" in r]


class Load:
    """THREADS clients, each sending one GET at a time on a fresh connection, recording every outcome."""

    def __init__(self, port: int):
        self.port = port
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.results: list[list[tuple[float, float, object]]] = [[] for _ in range(THREADS)]
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(THREADS)]

    def run(self, i: int):
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                outcome = request(self.port, "GET", f"/load?t={i}", [("X-Request-Id", new_id("load"))],
                                  timeout=5).status
            except Exception as e:  # noqa: BLE001 - every failure is recorded and counted
                outcome = f"{type(e).__name__}: {e}"
            with self.lock:
                self.results[i].append((started, time.monotonic(), outcome))

    def ok_count(self, since: float = 0.0) -> int:
        with self.lock:
            return min(sum(1 for s, _, o in r if o == 200 and s >= since) for r in self.results)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=15)


def kill_under_load(fw, load: Load, victim: int) -> float:
    """Kills `victim` once every client has had 10 answers; returns the time of the kill."""
    wait_until(lambda: load.ok_count() >= 10, 30, what="every client to get 10 answers before the kill")
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    return killed_at


def test_sigkill_of_the_proxy_process_loses_only_requests_in_flight(upstream, formwall_factory, tmp_path):
    audit = tmp_path / "audit.log"
    fw = formwall_factory(upstream.url, "--workers", "2", "--audit-log", str(audit))
    first = serving_pid(fw)
    with Load(fw.port) as load:
        killed_at = kill_under_load(fw, load, first)
        # A request sent right after the kill: connected (queued by the kernel), then answered by the new process.
        probe = request(fw.port, "GET", "/after-kill", [("X-Request-Id", new_id("probe"))], timeout=5)
        probe_done = time.monotonic()
        wait_until(lambda: load.ok_count(since=killed_at) >= 10, 30,
                   what="every client to get 10 answers after the kill")
    assert probe.status == 200, probe
    assert probe_done - killed_at < 1.0, f"first request after the kill took {probe_done - killed_at:.2f} s"

    failed = [(s, f, o) for r in load.results for s, f, o in r if o != 200]
    # Each client has one request at a time, so at most THREADS were in flight when the process died.
    assert len(failed) <= THREADS, failed
    assert all(s < killed_at for s, _, _ in failed), f"requests started after the kill failed: {failed}"
    for r in load.results:
        after = [(s, f, o) for s, f, o in r if s >= killed_at]
        assert after and all(o == 200 for _, _, o in after), after[:5]
        # Each client's first request after the kill is answered within a second of the kill.
        assert after[0][1] - killed_at < 1.0, f"first answer after the kill came {after[0][1] - killed_at:.2f} s later"

    second = serving_pid(fw, previous=first)
    assert second != fw.proc.pid and fw.proc.poll() is None
    event = wait_until(lambda: audit_events(audit), 10, what="the worker_exit audit record")[0]
    assert event["event"] == "worker_exit", event
    assert event["signal"] == "SIGKILL" and event["exit_status"] is None, event
    assert event["restarts"] == 1 and event["pid"] == first, event
    (exited,) = wait_until(lambda: fw.events("proxy process exited") or None, 10, what="the exit line on stderr")
    assert exited["level"] == "error" and exited["pid"] == fw.proc.pid, exited
    assert exited["child_pid"] == first and exited["signal"] == "SIGKILL" and "exit_status" not in exited, exited
    assert exited["restarts"] == 1 and exited["restart_in_s"] == 0 and exited["uptime_s"] > 0, exited
    started = fw.events("proxy process started")
    assert [e["child_pid"] for e in started][:2] == [first, second], started

    # A second crash: restart 2, and the service carries on.
    os.kill(second, signal.SIGKILL)
    wait_until(lambda: len(audit_events(audit)) >= 2, 10, what="the second worker_exit record")
    assert audit_events(audit)[1]["restarts"] == 2 and audit_events(audit)[1]["pid"] == second
    assert request(fw.port, "GET", "/after-second-kill", timeout=5).status == 200

    fw.signal(signal.SIGTERM)
    assert fw.wait(timeout=15) == 0, fw.stderr_text()[-2000:]


ALLOW_B = "route /r {\n    methods POST;\n    field a;\n    field b;\n}\n"
REJECT_B = "route /r {\n    methods POST;\n    field a;\n}\n"


def test_sighup_to_the_supervisor_reloads_rules_in_the_proxy_process(upstream, formwall_factory, tmp_path):
    rules = tmp_path / "policy.rules"
    rules.write_text(ALLOW_B)
    fw = formwall_factory(upstream.url, "--rules", str(rules))
    child = serving_pid(fw)
    body, ctype = multipart([Part("a", b"1"), Part("b", b"2")])

    def post():
        return request(fw.port, "POST", "/r", [("Content-Type", ctype)], body, timeout=10)

    assert post().status == 200
    tmp = rules.with_suffix(".tmp")
    tmp.write_text(REJECT_B)
    os.replace(tmp, rules)
    os.kill(fw.proc.pid, signal.SIGHUP)
    wait_until(lambda: fw.events("rules reloaded"), 10, what="the reload message on stderr")
    resp = post()
    assert resp.status == 403 and resp.json()["error"] == "unknown_part", resp
    # The reload happened in the same proxy process: nothing was restarted.
    assert children(fw.proc.pid) == [child] and fw.events("proxy process exited") == []
    assert fw.events("rules reloaded")[0]["pid"] == child


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_stop_signal_to_the_supervisor_stops_both_with_status_0(upstream, formwall_factory, sig):
    fw = formwall_factory(upstream.url)
    child = serving_pid(fw)
    assert child != fw.proc.pid, "no proxy process under the supervisor"
    assert request(fw.port, "GET", "/warm", timeout=5).status == 200
    fw.signal(sig)
    assert fw.wait(timeout=15) == 0, fw.stderr_text()[-2000:]
    assert not alive(child)
    assert fw.events("proxy process exited") == []
    (stopped,) = fw.events("stopped")
    assert stopped["pid"] == child and stopped["level"] == "info", stopped


def test_proxy_process_drains_when_the_supervisor_is_killed(upstream, formwall_factory):
    fw = formwall_factory(upstream.url)
    child = serving_pid(fw)
    assert child != fw.proc.pid, "no proxy process under the supervisor"
    fw.stopped_by_test = True
    fw.kill()
    # No orphan keeps the port: the proxy process gets SIGTERM (parent-death signal), drains and exits.
    wait_until(lambda: not alive(child), 15, what="the orphaned proxy process to exit")


def test_single_process_option_serves_without_a_child(upstream, formwall_factory):
    fw = formwall_factory(upstream.url, "--single-process")
    assert request(fw.port, "GET", "/single", timeout=5).status == 200
    (listening,) = wait_until(lambda: fw.events("listening"), START_TIMEOUT, what="the listening message")
    assert listening["pid"] == fw.proc.pid, listening
    assert children(fw.proc.pid) == []
    assert fw.events("proxy process started") == []
    fw.signal(signal.SIGTERM)
    assert fw.wait(timeout=15) == 0, fw.stderr_text()[-2000:]


@pytest.mark.parametrize("given, expected", [
    (None, "glibc.malloc.tcache_count=128"),
    ("glibc.malloc.arena_max=2", "glibc.malloc.arena_max=2:glibc.malloc.tcache_count=128"),
    ("glibc.malloc.tcache_count=7", "glibc.malloc.tcache_count=7"),
])
def test_the_proxy_process_starts_with_a_larger_malloc_cache(upstream, formwall_factory, given, expected):
    """The supervisor gives the proxy process glibc's tunable for a per-thread cache of 128 blocks a size
    (docs/configuration.md, "Memory per connection"), keeping other tunables an operator set and their own cache size."""
    fw = formwall_factory(upstream.url, env={"GLIBC_TUNABLES": given})
    child = serving_pid(fw)
    assert child != fw.proc.pid, "the supervisor's child serves"
    started = wait_until(lambda: fw.events("proxy process started"), START_TIMEOUT, what="the start event")
    assert started[0]["child_pid"] == child and started[0]["glibc_tunables"] == expected, started
    # What the child itself holds. glibc rewrites the variable in place as it reads it, and the process's own
    # copy of a list of several tunables then ends after the first, so only one tunable is read back here.
    environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
    tunables = [e.split(b"=", 1)[1].decode() for e in environ if e.startswith(b"GLIBC_TUNABLES=")]
    assert tunables == [expected.split(":")[0]], environ
    assert request(fw.port, "GET", "/", [("X-Request-Id", new_id("tunables"))]).status == 200

