"""The main configuration file (`serve --config`, `check --config`) and upstream groups, end to end.

Real werkzeug upstreams (upstream_app.py), the real `formwall serve`, Python requests. Which server served a
request is read twice, independently: from the audit record's `upstream` field, and from the upstream logs
(each upstream logs the X-Request-Id it received).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest
import requests

from e2e_helpers import HOST, IO_TIMEOUT, events_with, formwall_binary, free_port, json_lines, port_accepts, wait_until
from tls_certs import make_certs


def write_config(tmp_path: Path, text: str, name: str = "formwall.conf") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def audit_records(path: Path) -> list[dict]:
    return json_lines(path)


def wait_audit(path: Path, count: int) -> list[dict]:
    return wait_until(lambda: (lambda r: r if len(r) >= count else None)(audit_records(path)), IO_TIMEOUT,
                      what=f"{count} audit records")


def post(url: str, path: str = "/upload", **params) -> requests.Response:
    return requests.post(url + path, files={"doc": ("a.txt", b"hello")}, data={"caption": "hi"},
                         params=params, timeout=IO_TIMEOUT)


def served_by(upstreams, request_id: str) -> list[int]:
    """Indexes of the upstreams whose log holds `request_id`."""
    return [i for i, up in enumerate(upstreams) if any(r.get("request_id") == request_id for r in up.requests())]


def group_config(upstreams, *, balance="round-robin", weights=None, extra="", max_fails=1, fail_timeout=30):
    servers = "\n".join(
        f"    server {HOST}:{up.port}" + (f" weight {weights[i]}" if weights else "") + ";"
        for i, up in enumerate(upstreams))
    return f"""
upstream app;
upstream app {{
{servers}
    balance {balance};
    max-fails {max_fails};
    fail-timeout {fail_timeout};
}}
{extra}
"""


def test_round_robin_spreads_requests_and_the_audit_names_each_server(tmp_path, upstream_factory,
                                                                       formwall_factory):
    ups = [upstream_factory("echo") for _ in range(3)]
    conf = write_config(tmp_path, group_config(ups))
    audit = tmp_path / "audit.log"
    fw = formwall_factory(None, "--config", str(conf), "--workers", "1", "--audit-log", str(audit))
    for _ in range(30):
        assert post(fw.url).status_code == 200
    records = wait_audit(audit, 30)
    counts = [len(up.requests()) for up in ups]
    assert counts == [10, 10, 10], counts
    for rec in records:
        assert served_by(ups, rec["request_id"]) == [ups.index(next(
            u for u in ups if f"{HOST}:{u.port}" == rec["upstream"]))], rec


def test_weights_share_requests(tmp_path, upstream_factory, formwall_factory):
    ups = [upstream_factory("echo") for _ in range(2)]
    conf = write_config(tmp_path, group_config(ups, weights=[1, 3]))
    fw = formwall_factory(None, "--config", str(conf), "--workers", "1")
    for _ in range(40):
        assert post(fw.url).status_code == 200
    assert [len(up.requests()) for up in ups] == [10, 30]


def test_least_conn_avoids_the_busy_server(tmp_path, upstream_factory, formwall_factory):
    ups = [upstream_factory("echo") for _ in range(2)]
    conf = write_config(tmp_path, group_config(ups, balance="least-conn"))
    audit = tmp_path / "audit.log"
    fw = formwall_factory(None, "--config", str(conf), "--workers", "1", "--audit-log", str(audit))
    slow = threading.Thread(target=lambda: post(fw.url, delay="3"))
    slow.start()
    try:
        # The slow request is logged by its upstream before the delay starts.
        busy = wait_until(lambda: next((i + 1 for i, up in enumerate(ups) if up.requests()), None), IO_TIMEOUT,
                          what="the slow request reaching an upstream") - 1
        for _ in range(6):
            assert post(fw.url).status_code == 200
        # Round-robin would have sent three of the six to the busy server.
        assert len(ups[busy].requests()) == 1
        assert len(ups[1 - busy].requests()) == 6
    finally:
        slow.join(timeout=IO_TIMEOUT)


def test_requests_keep_succeeding_when_a_server_is_killed_mid_run(tmp_path, upstream_factory, formwall_factory):
    ups = [upstream_factory("echo") for _ in range(3)]
    conf = write_config(tmp_path, group_config(ups, max_fails=1, fail_timeout=60))
    audit = tmp_path / "audit.log"
    fw = formwall_factory(None, "--config", str(conf), "--workers", "2", "--audit-log", str(audit))
    session = requests.Session()
    statuses = []
    for i in range(60):
        if i == 20:
            ups[1].stop()
        r = session.post(fw.url + "/upload", files={"doc": ("a.txt", b"x" * 100)}, timeout=IO_TIMEOUT)
        statuses.append(r.status_code)
    assert statuses == [200] * 60
    records = wait_audit(audit, 60)
    dead = f"{HOST}:{ups[1].port}"
    assert any(r["upstream"] == dead for r in records[:20])
    # After the kill nothing is served by the dead server; every request was answered by a live one.
    assert all(r["upstream"] != dead and r["status"] == 200 for r in records[20:]), records[20:]
    for rec in records[20:]:
        assert served_by(ups, rec["request_id"]) == [[f"{HOST}:{u.port}" for u in ups].index(rec["upstream"])]
    # Passive health: the failing server was marked down (at most once per worker within the fail timeout).
    text = fw.stderr_text()
    down = events_with(text, "upstream marked down")
    assert 1 <= len(down) <= 2 and all(e["upstream"] == dead and e["group"] == "app" for e in down), text
    refused = [e for e in events_with(text, "upstream unreachable") if e["upstream"] == dead]
    assert 1 <= len(refused) <= 2, text


def test_every_server_down_answers_502(tmp_path, formwall_factory):
    ports = [free_port(), free_port()]
    conf = write_config(tmp_path, f"""
upstream app;
upstream app {{ server {HOST}:{ports[0]}; server {HOST}:{ports[1]}; }}
""")
    audit = tmp_path / "audit.log"
    fw = formwall_factory(None, "--config", str(conf), "--workers", "1", "--audit-log", str(audit))
    r = post(fw.url)
    assert r.status_code == 502 and r.json()["error"] == "upstream_unreachable"
    rec = wait_audit(audit, 1)[0]
    assert rec["decision"] == "error" and rec["upstream"] in {f"{HOST}:{p}" for p in ports}, rec


def test_a_refused_connect_moves_on_to_the_next_server(tmp_path, formwall_factory):
    """One server refuses; the other accepts and closes at once. The request reaches the second (its socket sees
    the connection), so the answer is the second's failure, not the first's."""
    listener = socket.socket()
    listener.bind((HOST, 0))
    listener.listen(8)
    second = listener.getsockname()[1]
    refused = free_port()
    conf = write_config(tmp_path, f"""
upstream app;
upstream app {{ server {HOST}:{refused}; server {HOST}:{second}; }}
""")
    audit = tmp_path / "audit.log"
    fw = formwall_factory(None, "--config", str(conf), "--workers", "1", "--audit-log", str(audit))
    accepted = []

    def accept_and_close():
        listener.settimeout(IO_TIMEOUT)
        conn, _ = listener.accept()
        accepted.append(conn)
        conn.close()

    t = threading.Thread(target=accept_and_close)
    t.start()
    try:
        r = post(fw.url)
    finally:
        t.join(timeout=IO_TIMEOUT)
        listener.close()
    assert len(accepted) == 1
    assert r.status_code == 502 and r.json()["error"] == "upstream_closed", r.text
    rec = wait_audit(audit, 1)[0]
    assert rec["upstream"] == f"{HOST}:{second}", rec


def test_a_route_chooses_its_group(tmp_path, upstream_factory, formwall_factory):
    alpha, beta = upstream_factory("echo"), upstream_factory("echo")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "routes.rules").write_text("""
route / { unknown allow; }
route /a { upstream alpha; unknown allow; }
route /b { upstream beta; unknown allow; }
""")
    conf = write_config(tmp_path, f"""
upstream alpha;
upstream alpha {{ server {HOST}:{alpha.port}; }}
upstream beta {{ server {HOST}:{beta.port}; }}
include rules/*.rules;
""")
    fw = formwall_factory(None, "--config", str(conf), "--workers", "1")
    for _ in range(3):
        assert post(fw.url, "/a").status_code == 200
        assert post(fw.url, "/b").status_code == 200
        assert post(fw.url, "/other").status_code == 200
    assert sorted(r["path"] for r in alpha.requests()) == ["/a"] * 3 + ["/other"] * 3
    assert sorted(r["path"] for r in beta.requests()) == ["/b"] * 3


def test_listen_and_limits_come_from_the_file_and_the_command_line_wins(tmp_path, upstream_factory,
                                                                         formwall_factory):
    file_up, cli_up = upstream_factory("echo"), upstream_factory("echo")
    port = free_port()
    conf = write_config(tmp_path, f"""
listen {HOST}:{port};
upstream http://{HOST}:{file_up.port};
workers 1;
max-head-bytes 4096;
""")
    fw = formwall_factory(None, "--config", str(conf), port=port)
    assert post(fw.url).status_code == 200
    assert len(file_up.requests()) == 1
    # The file's head limit is in force: a 5 KiB header is refused with 431.
    r = requests.get(fw.url + "/", headers={"X-Big": "a" * 5000}, timeout=IO_TIMEOUT)
    assert r.status_code == 431
    fw.terminate()
    # The same file with --upstream and --max-head-bytes on the command line: those win.
    fw2 = formwall_factory(cli_up.url, "--config", str(conf), "--max-head-bytes", "16384", port=port)
    assert post(fw2.url).status_code == 200
    assert len(cli_up.requests()) == 1 and len(file_up.requests()) == 1
    assert requests.get(fw2.url + "/", headers={"X-Big": "a" * 5000}, timeout=IO_TIMEOUT).status_code == 200


def test_sighup_reads_the_includes_again(tmp_path, upstream_factory, formwall_factory):
    up = upstream_factory("echo")
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "a.rules").write_text("route / { unknown allow; }\n")
    conf = write_config(tmp_path, f"upstream {up.url};\ninclude rules/*.rules;\n")
    fw = formwall_factory(None, "--config", str(conf))
    assert post(fw.url, "/strict").status_code == 200  # only the catch-all route: forwarded
    (rules / "b.rules").write_text('route /strict { methods GET; }\n')
    fw.signal(signal.SIGHUP)
    fw.stopped_by_test = False
    wait_until(lambda: post(fw.url, "/strict").status_code == 405, IO_TIMEOUT, what="the new include enforced")


def test_serve_refuses_a_route_naming_an_undeclared_group(tmp_path, upstream_factory):
    up = upstream_factory("echo")
    (tmp_path / "r.rules").write_text("route /x {\n    upstream missing;\n}\n")
    conf = write_config(tmp_path, f"listen {HOST}:{free_port()};\nupstream {up.url};\ninclude r.rules;\n")
    proc = subprocess.run([str(formwall_binary()), "serve", "--config", str(conf)], capture_output=True,
                          text=True, timeout=IO_TIMEOUT)
    assert proc.returncode == 1, proc
    assert f"{tmp_path}/r.rules:2:14: route /x names upstream group 'missing'" in proc.stderr, proc.stderr


def run_check(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(formwall_binary()), "check", *args], capture_output=True, text=True,
                          timeout=IO_TIMEOUT, cwd=cwd)


def test_every_path_in_the_file_is_relative_to_the_file(tmp_path, upstream_factory, formwall_factory):
    """A file in etc/ names everything relatively, and formwall runs in another directory (as under systemd,
    whose working directory is /) with a relative --config: the rules, audit log, quarantine store, pid file,
    spool and TLS files are the ones beside the file, and nothing is written where it runs. `check --config`
    resolves them the same way (before: all but `include` were taken relative to the working directory, so serve
    exited 1 on the missing spool directory, and check failed on `rules extra.rules`)."""
    up = upstream_factory("echo")
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "spool").mkdir(mode=0o700)
    certs = make_certs(etc)
    (etc / "extra.rules").write_text("route / {\n    unknown allow;\n    file doc {\n        max 3;\n"
                                     "        action quarantine;\n    }\n}\n")
    port = free_port()
    conf = write_config(etc, f"""listen https://{HOST}:{port};
upstream {up.url};
workers 1;
rules extra.rules;
audit-log audit.log;
quarantine-dir quarantine;
pid-file formwall.pid;
upstream-body spool;
spool-dir spool;
tls-certificate certs/{certs.server.cert.name};
tls-key certs/{certs.server.key.name};
""")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    relative_conf = os.path.relpath(conf, elsewhere)
    assert relative_conf == "../etc/formwall.conf"

    checked = run_check("--config", relative_conf, cwd=elsewhere)
    assert checked.returncode == 0 and "2 files, 0 errors" in checked.stdout, checked.stdout + checked.stderr

    fw = formwall_factory(None, "--config", relative_conf, port=port, preexec=lambda: os.chdir(elsewhere))
    r = requests.post(f"https://{HOST}:{port}/upload", files={"doc": ("a.txt", b"hello")}, data={"caption": "hi"},
                      verify=str(certs.ca.cert), timeout=IO_TIMEOUT)
    assert r.status_code == 200, r.text
    (rec,) = wait_audit(etc / "audit.log", 1)
    (doc,) = [part for part in rec["parts"] if part["name"] == "doc"]
    assert rec["decision"] == "modified" and doc["action"] == "quarantine", rec
    assert list((etc / "quarantine").rglob(doc["quarantine_id"] + "*")), list((etc / "quarantine").rglob("*"))
    assert (etc / "formwall.pid").read_text().strip() == str(fw.proc.pid)
    assert list(elsewhere.iterdir()) == []


def test_check_reports_every_mistake_with_its_position(tmp_path):
    (tmp_path / "r.rules").write_text("route /x { upstream nowhere; }\n")
    conf = write_config(tmp_path, """listen 127.0.0.1:8080;
upstream app;
upstream app { server 127.0.0.1:9000 weight 2; server 127.0.0.1:9001; balance fastest; }
workrs 2;
proxy-protocol maybe;
include r.rules;
""")
    out = run_check("--config", str(conf))
    assert out.returncode == 1
    assert f"{conf}:4:1: error: unknown directive 'workrs'; did you mean 'workers'?" in out.stderr, out.stderr
    assert f"{conf}:5:1: error: 'proxy-protocol' takes 'on' or 'off'" in out.stderr, out.stderr
    # Values are checked once the file parses; fix the syntax errors and the next layer shows.
    conf.write_text(conf.read_text().replace("workrs", "workers").replace("maybe", "on"))
    out = run_check("--config", str(conf))
    assert out.returncode == 1
    column = conf.read_text().splitlines()[2].index("fastest") + 1
    assert f"{conf}:3:{column}: error: balance must be round-robin or least-conn, got 'fastest'" in out.stderr, out.stderr
    conf.write_text(conf.read_text().replace("fastest", "least-conn"))
    out = run_check("--config", str(conf))
    assert out.returncode == 1
    assert f"{tmp_path}/r.rules:1:21: error: upstream group 'nowhere' is not declared" in out.stderr, out.stderr
    (tmp_path / "r.rules").write_text("route /x { upstream app; }\n")
    out = run_check("--config", str(conf))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "formwall check: 2 files, 0 errors, 0 warnings"


def test_check_warns_about_a_host_that_does_not_resolve_here(tmp_path):
    conf = write_config(tmp_path, "listen 0.0.0.0:8080;\nupstream http://no-such-host.invalid:9000;\n")
    out = run_check("--config", str(conf))
    assert out.returncode == 0, out.stderr
    assert f"{conf}:2:1: warning: upstream: cannot resolve upstream" in out.stderr, out.stderr
    assert "no rules: every well-formed request would be forwarded" in out.stderr
    # serve itself refuses it: it must connect there.
    proc = subprocess.run([str(formwall_binary()), "serve", "--config", str(conf)], capture_output=True, text=True,
                          timeout=IO_TIMEOUT)
    assert proc.returncode == 2 and "cannot resolve upstream" in proc.stderr, proc


@pytest.mark.parametrize("supervised", [True, False])
def test_several_listeners_serve_the_same_policy(tmp_path, upstream_factory, formwall_factory, supervised):
    up = upstream_factory("echo")
    first, second = free_port(), free_port()
    conf = write_config(tmp_path, f"""
listen {HOST}:{first};
listen {HOST}:{second};
upstream {up.url};
workers 2;
""")
    args = ["--config", str(conf)] + ([] if supervised else ["--single-process"])
    fw = formwall_factory(None, *args, port=first)
    wait_until(lambda: requests.get(f"http://{HOST}:{second}/", timeout=IO_TIMEOUT).status_code == 200, IO_TIMEOUT,
               what="the second listener answering")
    for port in (first, second):
        for _ in range(4):
            assert post(f"http://{HOST}:{port}").status_code == 200
    assert len([r for r in up.requests() if r["method"] == "POST"]) == 8
    [listening] = events_with(fw.stderr_text(), "listening")
    assert listening["listen"] == f"{HOST}:{first},{HOST}:{second}", listening
    # The command line replaces the file's list.
    fw.terminate()
    third = free_port()
    fw2 = formwall_factory(None, *args, "--listen", f"{HOST}:{third}", port=third)
    assert post(fw2.url).status_code == 200
    assert not port_accepts(first, timeout=0.2) and not port_accepts(second, timeout=0.2)
