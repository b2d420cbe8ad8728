"""Antivirus with a real clamd, end to end: `formwall serve --antivirus clamd:…` in front of the werkzeug upstream,
clamd (Debian clamav-daemon) started here with a signature database written by the test (the EICAR test file's
MD5: no signature download), over its unix socket and over TCP.

Every file part is held (0600, unlinked) and streamed to clamd with INSTREAM; it reaches the upstream only after
clamd said OK. A detection is the violation `malware` (the signature in the audit record); clamd down, a timeout or
a stream over StreamMaxLength fail closed (503) unless `--antivirus-failure allow`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
import requests

from e2e_helpers import HOST, IO_TIMEOUT, free_port, json_lines, wait_until

EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
CLAMD = shutil.which("clamd") or "/usr/sbin/clamd"
MARKER = b"FORMWALL-TEST-MALWARE-MARKER-7f3a"

pytestmark = pytest.mark.skipif(not os.path.exists(CLAMD) and not os.environ.get("CI"),
                                reason="clamd not installed (scripts/install-deps.sh installs clamav-daemon)")


class Clamd:
    def __init__(self, workdir: Path, stream_max: str = "1M"):
        self.dir = workdir / "clamd"
        (self.dir / "db").mkdir(parents=True)
        digest = hashlib.md5(EICAR).hexdigest()
        (self.dir / "db" / "formwall.hdb").write_text(f"{digest}:{len(EICAR)}:Formwall.Test.EICAR\n")
        # A body signature: the marker anywhere in any file.
        (self.dir / "db" / "formwall.ndb").write_text(f"Formwall.Test.Marker:0:*:{MARKER.hex()}\n")
        self.socket = self.dir / "clamd.sock"
        self.port = free_port()
        (self.dir / "clamd.conf").write_text(f"""DatabaseDirectory {self.dir / 'db'}
LocalSocket {self.socket}
TCPSocket {self.port}
TCPAddr 127.0.0.1
Foreground yes
LogFile {self.dir / 'clamd.log'}
StreamMaxLength {stream_max}
""")
        self.proc = subprocess.Popen([CLAMD, "-c", str(self.dir / "clamd.conf")], stdout=subprocess.DEVNULL,
                                     stderr=open(self.dir / "clamd.err", "wb"))
        wait_until(self.ping, 60, interval=0.1, what="clamd answering PING")

    def ping(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"clamd exited: {(self.dir / 'clamd.err').read_text()}")
        try:
            with socket.create_connection((HOST, self.port), timeout=1) as s:
                s.sendall(b"zPING\0")
                return s.recv(16).startswith(b"PONG")
        except OSError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def clamd(tmp_path_factory):
    c = Clamd(tmp_path_factory.mktemp("av"))
    yield c
    c.stop()


def upload(fw, content: bytes, name: str = "doc", path: str = "/upload") -> requests.Response:
    return requests.post(fw.url + path, data={"caption": "hi"}, files={name: ("file.bin", content)},
                         timeout=IO_TIMEOUT)


def records(path: Path) -> list[dict]:
    return json_lines(path)


@pytest.mark.parametrize("via", ["unix", "tcp"])
def test_eicar_is_refused_and_never_reaches_the_upstream(clamd, upstream, formwall_factory, tmp_path, via):
    address = f"clamd:unix:{clamd.socket}" if via == "unix" else f"clamd:tcp:{HOST}:{clamd.port}"
    audit = tmp_path / "audit.log"
    fw = formwall_factory(upstream.url, "--antivirus", address, "--audit-log", str(audit))
    r = upload(fw, EICAR)
    assert r.status_code == 403 and r.json()["error"] == "malware", r.text
    rec = wait_until(lambda: records(audit), IO_TIMEOUT, what="an audit record")[-1]
    assert rec["reason"] == "malware"
    assert any(v["kind"] == "malware" and "Formwall.Test.EICAR" in v["detail"] for v in rec["violations"]), rec
    # Nothing of the file went upstream (it was held): no request there carries it.
    assert not any(r.get("files", {}).get("doc") for r in upstream.requests())
    # A clean file passes whole (under clamd's 1M StreamMaxLength here).
    data = os.urandom(600 << 10)
    r = upload(fw, data)
    assert r.status_code == 200
    assert r.json()["files"]["doc"][0]["sha256"] == hashlib.sha256(data).hexdigest()


def test_quarantine_action_keeps_the_infected_part(clamd, upstream, formwall_factory, tmp_path):
    rules = tmp_path / "av.rules"
    rules.write_text("route /upload { field caption; file doc { action quarantine; } }\n")
    qdir = tmp_path / "quarantine"
    fw = formwall_factory(upstream.url, "--antivirus", f"clamd:unix:{clamd.socket}", "--rules", str(rules),
                          "--quarantine-dir", str(qdir))
    r = upload(fw, EICAR)
    assert r.status_code == 200, r.text
    assert "doc" not in r.json().get("files", {})   # stripped from what went upstream
    sidecars = list(qdir.rglob("*.json"))
    assert sidecars and any("malware" in p.read_text() for p in sidecars)


def test_clamd_down_fails_closed_or_open_when_allowed(upstream, formwall_factory, tmp_path):
    dead = f"clamd:tcp:{HOST}:{free_port()}"
    fw = formwall_factory(upstream.url, "--antivirus", dead)
    r = upload(fw, b"harmless")
    assert r.status_code == 503 and r.json()["error"] == "antivirus_unavailable"
    assert not any(q.get("files", {}).get("doc") for q in upstream.requests())
    audit = tmp_path / "audit.log"
    fw2 = formwall_factory(upstream.url, "--antivirus", dead, "--antivirus-failure", "allow",
                           "--audit-log", str(audit))
    r = upload(fw2, b"harmless")
    assert r.status_code == 200
    rec = wait_until(lambda: records(audit), IO_TIMEOUT, what="an audit record")[-1]
    assert "antivirus-unscanned" in rec["anomalies"]


def test_a_file_over_stream_max_length_fails_closed(clamd, upstream, formwall_factory):
    fw = formwall_factory(upstream.url, "--antivirus", f"clamd:unix:{clamd.socket}")
    r = upload(fw, os.urandom(3 << 20))   # clamd's StreamMaxLength is 1M here
    assert r.status_code == 503 and r.json()["error"] == "antivirus_unavailable", r.text


def test_antivirus_from_the_configuration_file(clamd, upstream, formwall_factory, tmp_path):
    port = free_port()
    conf = tmp_path / "formwall.conf"
    conf.write_text(f"listen {HOST}:{port};\nupstream {upstream.url};\nantivirus clamd unix:{clamd.socket};\n")
    fw = formwall_factory(None, "--config", str(conf), port=port)
    assert upload(fw, EICAR).status_code == 403
    assert upload(fw, b"fine").status_code == 200


def test_a_marker_deep_inside_a_large_file_is_found(clamd, upstream, formwall_factory):
    fw = formwall_factory(upstream.url, "--antivirus", f"clamd:unix:{clamd.socket}")
    data = os.urandom(400 << 10) + MARKER + os.urandom(300 << 10)
    r = upload(fw, data)
    assert r.status_code == 403 and "Formwall.Test.Marker" in r.json().get("detail", ""), r.text


def test_a_silent_clamd_times_out_and_fails_closed(upstream, formwall_factory):
    """A clamd that accepts and reads but never answers: 503 once --antivirus-timeout passed after the part."""
    import threading
    import time
    listener = socket.socket()
    listener.bind((HOST, 0))
    listener.listen(4)
    held = []

    def accept_and_read():
        conn, _ = listener.accept()
        held.append(conn)
        conn.settimeout(IO_TIMEOUT)
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass

    threading.Thread(target=accept_and_read, daemon=True).start()
    fw = formwall_factory(upstream.url, "--antivirus", f"clamd:tcp:{HOST}:{listener.getsockname()[1]}",
                          "--antivirus-timeout", "1")
    t0 = time.monotonic()
    r = upload(fw, b"waiting for a verdict that never comes")
    assert r.status_code == 503 and r.json()["error"] == "antivirus_unavailable", r.text
    assert time.monotonic() - t0 < IO_TIMEOUT
    assert not any(q.get("files", {}).get("doc") for q in upstream.requests())
    for c in held:
        c.close()
    listener.close()
