"""End-to-end tests for `formwall tail`: runs the built binary ($FORMWALL_BIN, default .build/debug/formwall)."""

import datetime
import gzip
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from e2e_helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("FORMWALL_BIN", str(ROOT / ".build/debug/formwall"))
DEADLINE = 10.0  # seconds to wait for a followed line before failing


def ts(ago_seconds=0.0):
    t = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=ago_seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def record(request_id, decision, route, *, path=None, status=200, reason=None, ago=0.0, part_name=None,
           detail=None):
    """One audit line in the schema of docs/operations.md (members in the documented order)."""
    parts, violations = [], []
    if part_name is not None:
        parts = [{"index": 0, "name": part_name, "kind": "file", "filename": "x.bin", "declared_type": None,
                  "sniffed_type": None, "size": 3, "sha256": "00" * 32, "action": "reject",
                  "quarantine_id": None}]
        violations = [{"kind": reason, "part": 0, "rule": "rules/avatar.rules:12", "detail": detail}]
    rec = {"ts": ts(ago), "request_id": request_id, "client": "10.0.0.7:51234", "method": "POST",
           "path": path or (route or "/nowhere"), "route": route, "decision": decision, "status": status,
           "reason": reason, "bytes_in": 10, "bytes_upstream": 10, "duration_ms": 1.5, "upstream_ms": None,
           "parts": parts, "violations": violations, "anomalies": [], "error": None}
    return json.dumps(rec, separators=(",", ":"))


def tail(*args, **kwargs):
    return subprocess.run([BIN, "tail", *map(str, args)], capture_output=True, text=True, timeout=30, **kwargs)


@pytest.fixture
def log(tmp_path):
    lines = [
        record("r1", "reject", "/api/avatar", status=413, reason="file_too_large", part_name="avatar",
               detail="7.2 MiB > 5 MiB", ago=7200),
        record("r2", "allow", "/api/avatar/crop", ago=3600),
        record("r3", "modified", "/upload", ago=120),
        record("r4", "monitor", "/upload", ago=60),
        record("r5", "allow", None, path="/other", ago=5),
    ]
    path = tmp_path / "audit.log"
    path.write_text("".join(line + "\n" for line in lines))
    return path, lines


def ids(stdout):
    return [json.loads(line)["request_id"] for line in stdout.splitlines()]


def test_json_passes_every_line_through_unchanged(log):
    path, lines = log
    result = tail(path, "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "".join(line + "\n" for line in lines)
    assert result.stderr == ""


@pytest.mark.parametrize("args, expected", [
    (["--decision", "reject"], ["r1"]),
    (["--decision", "allow"], ["r2", "r5"]),
    (["--decision", "modified", "--decision", "monitor"], ["r3", "r4"]),
    (["--decision", "reject,monitor"], ["r1", "r4"]),
    (["--route", "/api/avatar"], ["r1", "r2"]),
    (["--route", "/upload", "--decision", "monitor"], ["r4"]),
    (["--route", "/"], ["r1", "r2", "r3", "r4"]),  # r5 matched no route: never shown by --route
    (["--since", "10m"], ["r3", "r4", "r5"]),
    (["--since", "1h30m"], ["r2", "r3", "r4", "r5"]),
    (["--since", "90s"], ["r4", "r5"]),
], ids=lambda v: " ".join(v) if isinstance(v, list) and v and v[0].startswith("--") else None)
def test_filters_with_json_output(log, args, expected):
    path, lines = log
    result = tail(path, "--json", *args)
    assert result.returncode == 0, result.stderr
    assert ids(result.stdout) == expected
    by_id = {json.loads(line)["request_id"]: line for line in lines}
    assert result.stdout.splitlines() == [by_id[i] for i in expected]  # byte for byte


def test_human_lines_without_colour_when_piped(log):
    path, _ = log
    result = tail(path, "--decision", "reject")
    assert result.returncode == 0, result.stderr
    time_part = json.loads(log[1][0])["ts"][11:23]
    assert result.stdout == (f"{time_part} REJECT 413 POST /api/avatar file_too_large avatar (7.2 MiB > 5 MiB) "
                             "req=r1\n")
    assert "\x1b" not in result.stdout


def test_colour_on_request_and_off_on_request(log):
    path, _ = log
    coloured = tail(path, "--decision", "reject", "--color")
    assert "\x1b[1;31mREJECT\x1b[0m" in coloured.stdout
    plain = tail(path, "--decision", "reject", "--no-color")
    assert "\x1b" not in plain.stdout and "REJECT" in plain.stdout


def test_colour_defaults_on_for_a_terminal(log):
    import pty
    path, _ = log
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run([BIN, "tail", str(path), "--decision", "allow"], stdout=terminal,
                              stderr=subprocess.PIPE, timeout=30)
        os.close(terminal)
        terminal = -1
        out = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO once the terminal side is closed and drained
                break
            if not chunk:
                break
            out += chunk
    finally:
        if terminal >= 0:
            os.close(terminal)
        os.close(controller)
    assert proc.returncode == 0
    assert b"\x1b[32mALLOW\x1b[0m" in out


def test_hostile_text_cannot_reach_the_terminal(tmp_path):
    path = tmp_path / "audit.log"
    path.write_text(record("evil", "allow", "/x", path="/x\x1b[2J\x07") + "\n")
    result = tail(path, "--color")
    assert result.returncode == 0
    assert "/x\\x1b[2J\\x07" in result.stdout
    assert "\x1b[2J" not in result.stdout


def test_since_reads_rotated_generations(tmp_path):
    path = tmp_path / "audit.log"
    old = record("g1", "reject", "/a", ago=30)
    path.with_name("audit.log.1.gz").write_bytes(gzip.compress((old + "\n").encode()))
    path.write_text(record("live", "allow", "/a", ago=1) + "\n")
    assert ids(tail(path, "--json", "--since", "5m").stdout) == ["g1", "live"]
    assert ids(tail(path, "--json").stdout) == ["live"]  # without --since only the live file is read


LOGROTATE_CONF = ROOT / "docker" / "logrotate"


def logrotate_binary() -> str:
    found = shutil.which("logrotate") or ("/usr/sbin/logrotate" if Path("/usr/sbin/logrotate").exists() else None)
    if found is None:
        pytest.skip("logrotate not installed (Debian package logrotate; scripts/install-deps.sh)")
    return found


@pytest.mark.parametrize("naming", ["dateext", "numbered"])
def test_since_reads_every_rotation_the_real_logrotate_makes(tmp_path, naming):
    """docker/logrotate as shipped (dateext with dateformat -%Y%m%d-%s, compress, delaycompress), aimed at a
    scratch directory, forced five times by the real logrotate with records written between the runs; and the
    same file without dateext (numbered). `tail --since` reads every record, oldest first (before: the dated
    names were skipped, 5 of 29 records found)."""
    logrotate = logrotate_binary()
    logs = tmp_path / "log"
    logs.mkdir()
    text = LOGROTATE_CONF.read_text().replace("/var/log/formwall/", f"{logs}/")
    text = re.sub(r"\n\s*postrotate\n.*?endscript", "", text, flags=re.S)  # nothing to signal here
    if naming == "numbered":
        text = re.sub(r"\n\s*(dateext|dateformat .*)(?=\n)", "", text)
    assert "postrotate" not in text and ("dateext" in text) == (naming == "dateext")
    conf = tmp_path / "logrotate.conf"
    conf.write_text(text)
    path = logs / "audit.log"
    written = []
    batches = [6, 3, 7, 4, 4, 5]  # five rotations and the live file
    for n, count in enumerate(batches):
        with path.open("a") as f:
            for _ in range(count):
                written.append(f"r{len(written)}")
                f.write(record(written[-1], "allow", "/a", ago=600 - len(written)) + "\n")
        if n == len(batches) - 1:
            break
        if naming == "dateext":
            # -%s names a rotation by the second logrotate reads with time(2), whose coarse clock can lag
            # time.time() by a tick: the run waits until a tenth of a second into a second no rotation is named by
            # (waiting for the next second alone let two runs name one second under load).
            used = max((int(m.group(1)) for p in logs.iterdir()
                        if (m := re.fullmatch(r"audit\.log-\d{8}-(\d+)(\.gz)?", p.name))), default=0)
            wait_until(lambda: int(time.time() - 0.1) > used, 5, what="a second no rotation is named by")
        result = subprocess.run([logrotate, "-f", "-s", str(tmp_path / "state"), str(conf)], capture_output=True,
                                text=True, timeout=30)
        assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in logs.iterdir())
    rotated = [name for name in names if name != "audit.log"]
    assert len(rotated) == 5 and len([name for name in rotated if name.endswith(".gz")]) == 4, names
    if naming == "dateext":
        assert all(re.fullmatch(r"audit\.log-\d{8}-\d+(\.gz)?", name) for name in rotated), names
    else:
        assert set(rotated) == {"audit.log.1", *(f"audit.log.{n}.gz" for n in range(2, 6))}, names
    result = tail(path, "--json", "--since", "1h")
    assert result.returncode == 0, result.stderr
    assert ids(result.stdout) == written, f"{len(ids(result.stdout))} of {len(written)} records"


def test_since_orders_and_picks_rotations_by_name(tmp_path):
    """Numbered generations (older first: higher numbers), then dated ones by name; a generation present plain
    and compressed (a compression under way) is read once; lock, temporary and other logs' files are not read."""
    path = tmp_path / "audit.log"

    def put(name, request_id, compressed=False):
        data = (record(request_id, "allow", "/a", ago=60) + "\n").encode()
        (tmp_path / name).write_bytes(gzip.compress(data) if compressed else data)

    put("audit.log.2.gz", "n2", compressed=True)
    put("audit.log.1", "n1")
    put("audit.log-20261206.gz", "d1", compressed=True)
    put("audit.log-20261207_0930", "d2")
    put("audit.log-20261207_0930.gz", "d2", compressed=True)
    put("audit.log.lock", "lock")
    put("audit.log.1.gz.tmp", "tmp")
    put("audit.log-old", "old")
    put("audit.log.xz", "xz")
    put("other.log.1", "other")
    put("audit.logs.1", "logs")
    path.write_text(record("live", "allow", "/a", ago=1) + "\n")
    assert ids(tail(path, "--json", "--since", "5m").stdout) == ["n2", "n1", "d1", "d2", "live"]


def test_malformed_lines_are_skipped_and_counted(tmp_path):
    path = tmp_path / "audit.log"
    path.write_text("not json\n" + record("ok", "allow", "/a") + "\n[1,2]\n")
    result = tail(path, "--no-color")
    assert result.returncode == 0
    assert result.stdout.count("\n") == 1 and "req=ok" in result.stdout
    assert result.stderr == f"formwall: skipped 2 lines of {path} that are not a complete JSON object\n"


def test_missing_file_is_one_line_and_exit_1(tmp_path):
    result = tail(tmp_path / "nope.log")
    assert result.returncode == 1
    assert result.stderr == f"formwall: cannot read {tmp_path}/nope.log: No such file or directory\n"


@pytest.mark.parametrize("args", [
    ["--decision", "rejected"], ["--since", "10"], ["--since", "-5m"], ["--since", "10x"], ["a.log", "b.log"],
    ["--color", "--no-color"], ["--route"], ["--lines", "5"],
])
def test_usage_errors_exit_2(log, args):
    path, _ = log
    result = tail(path, *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("formwall: ")


# -- --follow ----------------------------------------------------------------------------------------------------


class Follower:
    """A `formwall tail --follow` subprocess whose stdout lines are collected by a thread."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([BIN, "tail", "--follow", *map(str, args)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, count):
        """The next `count` lines, waiting at most DEADLINE seconds in total."""
        deadline = time.monotonic() + DEADLINE
        got = []
        while len(got) < count:
            remaining = deadline - time.monotonic()
            try:
                got.append(self.lines.get(timeout=max(remaining, 0.001)))
            except queue.Empty:
                pytest.fail(f"waited {DEADLINE}s for {count} lines, got {got}")
        return got

    def stop(self, signum=signal.SIGTERM):
        self.proc.send_signal(signum)
        try:
            code = self.proc.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        return code, self.proc.stderr.read()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def follower():
    started = []

    def start(*args):
        f = Follower(*args)
        started.append(f)
        return f

    yield start
    for f in started:
        f.kill()


def append(path, *lines):
    with open(path, "a") as f:
        f.write("".join(line + "\n" for line in lines))


def test_follow_across_rotation_then_sigterm_exits_0(tmp_path, follower):
    path = tmp_path / "audit.log"
    first = [record(f"a{i}", "allow", "/a") for i in range(3)]
    append(path, *first)
    f = follower(path, "--json")
    assert f.expect(3) == first  # the backlog: the file is open now

    appended = [record(f"b{i}", "reject", "/a") for i in range(3)]
    append(path, *appended)
    assert f.expect(3) == appended

    rotated = path.with_name("audit.log.1")
    path.rename(rotated)
    late = [record("late", "allow", "/a")]  # a writer that has not reopened yet still writes the old file
    append(rotated, *late)
    fresh = [record(f"c{i}", "modified", "/a") for i in range(3)]
    append(path, *fresh)  # creates the new file
    assert f.expect(4) == late + fresh

    more = [record(f"d{i}", "monitor", "/a") for i in range(50)]
    append(path, *more)
    assert f.expect(50) == more

    code, stderr = f.stop(signal.SIGTERM)
    assert code == 0, stderr
    assert stderr == ""
    assert f.lines.empty()


def test_follow_filters_and_sigint_exits_0(tmp_path, follower):
    path = tmp_path / "audit.log"
    append(path, record("x0", "allow", "/a"))
    f = follower(path, "--json", "--decision", "reject")
    append(path, record("x1", "allow", "/a"), record("x2", "reject", "/a"), record("x3", "allow", "/a"),
           record("x4", "reject", "/b"))
    assert ids("\n".join(f.expect(2))) == ["x2", "x4"]
    code, _ = f.stop(signal.SIGINT)
    assert code == 0
    assert f.lines.empty()


def test_follow_waits_for_a_missing_file(tmp_path, follower):
    path = tmp_path / "later.log"
    f = follower(path, "--no-color")
    append(path, record("born", "allow", "/a"))
    (line,) = f.expect(1)
    assert line.endswith("ALLOW 200 POST /a req=born")
    assert f.stop()[0] == 0


def test_follow_restarts_after_truncation(tmp_path, follower):
    path = tmp_path / "audit.log"
    append(path, *[record(f"t{i}", "allow", "/a") for i in range(5)])
    f = follower(path, "--json")
    f.expect(5)
    after = record("t-new", "reject", "/a")
    with open(path, "r+") as file:  # copytruncate: same inode, shorter content
        file.truncate(0)
        file.write(after + "\n")
    assert f.expect(1) == [after]
    assert f.stop()[0] == 0
