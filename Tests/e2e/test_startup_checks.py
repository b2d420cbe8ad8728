"""Start-up checks: a configuration mistake is refused at once, with one clear line on stderr, instead of a
proxy that starts and then fails every request (docs/configuration.md, "Exit status").

Exit status 1 for a start-up failure (a path that cannot be used, rules that cannot work), with one JSON event line
(level error, msg "cannot start", the cause in `error`); 2 for a usage error (an option without the option it
needs), with one `formwall: …` text line. Each case runs with the supervisor (the default) and, where the check
is made in both processes, with `--single-process`. A binary that starts instead of refusing fails the test as
soon as its port accepts.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import time

import pytest

from e2e_helpers import START_TIMEOUT, Formwall, event_lines, free_port, port_accepts, wait_until
from policy_helpers import BIN

MODES = [[], ["--single-process"]]
MODE_IDS = ["supervisor", "single-process"]


def refuse(*args: str) -> tuple[int, str]:
    """Runs `formwall serve` expecting it to exit before it listens; returns (status, stderr)."""
    port = free_port()
    argv = [BIN, "serve", "--listen", f"127.0.0.1:{port}", "--upstream", "http://127.0.0.1:9", *args]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while proc.poll() is None:
            if port_accepts(port, timeout=0.05):
                pytest.fail(f"formwall started instead of refusing: {' '.join(argv)}")
            if time.monotonic() > deadline:
                pytest.fail(f"formwall neither exited nor listened within {START_TIMEOUT}s: {' '.join(argv)}")
            try:
                proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
        return proc.returncode, proc.stderr.read().decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        proc.stderr.close()


def one_line(stderr: str) -> str:
    """The one text line of a usage error."""
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {lines}"
    assert lines[0].startswith("formwall: "), lines
    return lines[0]


def start_error(stderr: str) -> str:
    """The cause named by the one `cannot start` event line of a start-up failure."""
    (event,) = event_lines(stderr)
    assert event["level"] == "error" and event["msg"] == "cannot start", event
    return event["error"]


# ---------------------------------------------------------------------------------------------- --spool-dir

@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("what", ["missing", "not-a-directory"])
def test_unusable_spool_dir_is_refused(tmp_path, mode, what):
    spool = tmp_path / "spool"
    if what == "not-a-directory":
        spool.write_text("a file")
    code, err = refuse("--spool-dir", str(spool), *mode)
    assert code == 1, err
    line = start_error(err)
    assert "--spool-dir" in line and str(spool) in line, line


# ---------------------------------------------------------------------------------------------- --rules

@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_rules_directory_without_rules_files_is_refused(tmp_path, mode):
    empty = tmp_path / "rules.d"
    empty.mkdir()
    (empty / "README").write_text("not a rules file")
    code, err = refuse("--rules", str(empty), *mode)
    assert code == 1, err
    assert f"directory '{empty}' has no *.rules files" in start_error(err), err
    # `formwall check` loads rules exactly as serve does, so it says the same.
    check = subprocess.run([BIN, "check", str(empty)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 1 and "has no *.rules files" in check.stderr, check


def test_empty_rules_file_is_accepted_as_check_accepts_it(tmp_path, upstream, formwall_factory):
    empty = tmp_path / "empty.rules"
    empty.write_text("")
    check = subprocess.run([BIN, "check", str(empty)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check
    fw = formwall_factory(upstream.url, "--rules", str(empty))
    assert port_accepts(fw.port)


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_quarantine_action_without_quarantine_dir_is_refused(tmp_path, mode):
    rules = tmp_path / "docs.rules"
    rules.write_text("route /upload {\n    field title;\n    file doc {\n        types application/pdf;\n"
                     "        action quarantine;\n    }\n}\n")
    code, err = refuse("--rules", str(rules), *mode)
    assert code == 1, err
    line = start_error(err)
    assert f"{rules}:3:" in line and "action quarantine" in line and "--quarantine-dir" in line, line


# ---------------------------------------------------------------------------------------------- --quarantine-dir

@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_quarantine_dir_with_missing_parent_is_refused_and_not_created(tmp_path, mode):
    typo = tmp_path / "var" / "lib" / "formwal" / "quarantine"
    code, err = refuse("--quarantine-dir", str(typo), *mode)
    assert code == 1, err
    line = start_error(err)
    assert str(typo.parent) in line and "does not exist" in line, line
    assert not (tmp_path / "var").exists(), "the missing parents were created"


def test_quarantine_dir_itself_is_created_0700(tmp_path, upstream, formwall_factory):
    store = tmp_path / "quarantine"
    formwall_factory(upstream.url, "--quarantine-dir", str(store))
    assert stat.S_IMODE(store.stat().st_mode) == 0o700


# ---------------------------------------------------------------------------------------------- usage errors

@pytest.mark.parametrize("args,needs", [
    (["--audit-rotate", "1MiB"], "--audit-log"),
    (["--audit-keep", "3"], "--audit-log"),
    (["--audit-field", "title"], "--audit-log"),
    (["--quarantine-max", "1GiB"], "--quarantine-dir"),
    (["--quarantine-retention", "7"], "--quarantine-dir"),
], ids=lambda v: v if isinstance(v, str) else v[0])
def test_option_without_the_option_it_needs_is_a_usage_error(args, needs):
    code, err = refuse(*args)
    assert code == 2, err
    line = one_line(err)
    assert f"{args[0]} needs {needs}" in line, line


def test_quarantine_retention_error_speaks_of_days(tmp_path):
    code, err = refuse("--quarantine-dir", str(tmp_path / "q"), "--quarantine-retention", "soon")
    assert code == 2, err
    line = one_line(err)
    assert "days" in line and "seconds" not in line, line


@pytest.mark.parametrize("value,bad", [("10.0.0.0/33", "10.0.0.0/33"), ("10.0.0.0/8,proxy.lan", "proxy.lan"),
                                       ("", "")])
def test_trusted_proxies_must_be_ranges(value, bad):
    code, err = refuse("--trusted-proxies", value)
    assert code == 2, err
    line = one_line(err)
    assert f"--trusted-proxies: '{bad}' is not an address or CIDR range" in line, line


# ---------------------------------------------------------------------------------------------- --pid-file

@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_pid_file_names_the_process_to_signal_and_is_removed_at_exit(tmp_path, upstream, mode):
    pid_file = tmp_path / "formwall.pid"
    fw = Formwall(tmp_path, upstream.url, ["--pid-file", str(pid_file), *mode])
    try:
        wait_until(pid_file.exists, START_TIMEOUT, what="the pid file")
        assert pid_file.read_text() == f"{fw.proc.pid}\n"
        assert stat.S_IMODE(pid_file.stat().st_mode) == 0o644
        os.kill(int(pid_file.read_text()), signal.SIGTERM)
        fw.stopped_by_test = True
        assert fw.wait(timeout=15) == 0
        assert not pid_file.exists()
    finally:
        fw.kill()


def test_pid_file_in_a_missing_directory_is_refused(tmp_path):
    code, err = refuse("--pid-file", str(tmp_path / "run" / "formwall.pid"))
    assert code == 1, err
    assert "--pid-file" in start_error(err)

