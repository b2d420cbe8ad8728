"""The running proxy's view of how full the quarantine store is (issue 52).

The store's usage is what the proxy last found on disk plus its own writes and removals since; it looks again
(a rescan) when a part does not fit, on /metrics and /readyz, and every 10 s, at most once every 10 ms and 20
times the last rescan's duration. So items removed with `formwall quarantine delete` or by hand make room without
a restart, /metrics shows `formwall_quarantine_bytes` and `formwall_quarantine_max_bytes`, and /readyz's
`quarantine` check fails while the store is full. Run with one process and with the supervisor and two workers.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import requests

from e2e_helpers import HOST, IO_TIMEOUT, FilePart, assert_json_error, build_multipart, formwall_binary, free_port, \
    raw_request, wait_until

RULES = "route /media/upload { file doc { types application/pdf; action quarantine; } }\n"
CAP = 8 * 1024
TEXT = b"plain text, declared as a PDF\n" * 100  # 3000 bytes: a violation, so quarantined


def upload(port: int) -> int:
    body = build_multipart([], [FilePart("doc", "notes.pdf", TEXT, "application/pdf")], "fwQuarantineUsage")
    head = (f"POST /media/upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; "
            f"boundary=fwQuarantineUsage\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    response = raw_request(port, head + body, method="POST")
    if response.status != 200:
        assert_json_error(response, 503, "quarantine_unavailable")
    return response.status


def gauges(admin: int) -> dict[str, float]:
    r = requests.get(f"http://{HOST}:{admin}/metrics", timeout=IO_TIMEOUT)
    assert r.status_code == 200
    out = {}
    for line in r.text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("formwall_quarantine_bytes", "formwall_quarantine_max_bytes"):
            out[name] = float(value)
    return out


def wait_readyz(admin: int, status: int) -> dict:
    """Polls /readyz (its result is cached for 1 s) until it answers `status`; returns its quarantine check."""
    def check():
        r = requests.get(f"http://{HOST}:{admin}/readyz", timeout=IO_TIMEOUT)
        return r.json()["checks"]["quarantine"] if r.status_code == status else None
    return wait_until(check, IO_TIMEOUT, what=f"/readyz {status}")


def on_disk(store: Path) -> int:
    """Bytes of the complete items: data plus sidecar, where both are there."""
    total = 0
    for sidecar in store.glob("[0-9][0-9][0-9][0-9]/[0-9][0-9]/[0-9][0-9]/*/*.json"):
        data = sidecar.with_suffix(".bin")
        if data.exists():
            total += sidecar.stat().st_size + data.stat().st_size
    return total


def quarantine_cli(*args) -> str:
    result = subprocess.run([str(formwall_binary()), "quarantine", *map(str, args)], capture_output=True,
                            timeout=30)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


@pytest.mark.parametrize("mode", [["--single-process"], ["--workers", "2"]], ids=["single-process", "supervised"])
def test_room_made_outside_the_proxy_is_used_without_a_restart(formwall_factory, upstream, tmp_path, mode):
    rules = tmp_path / "q.rules"
    rules.write_text(RULES)
    store = tmp_path / "S"
    admin = free_port()
    fw = formwall_factory(upstream.url, *mode, "--rules", str(rules), "--quarantine-dir", str(store),
                          "--quarantine-max", "8KiB", "--admin", f"{HOST}:{admin}")
    assert wait_readyz(admin, 200) == {"ok": True}
    assert gauges(admin) == {"formwall_quarantine_bytes": 0, "formwall_quarantine_max_bytes": CAP}

    # Two parts fit in 8 KiB, the third does not.
    assert [upload(fw.port) for _ in range(4)] == [200, 200, 503, 503]
    full = on_disk(store)
    assert 2 * len(TEXT) < full <= CAP
    assert gauges(admin) == {"formwall_quarantine_bytes": full, "formwall_quarantine_max_bytes": CAP}
    check = wait_readyz(admin, 503)
    assert check["ok"] is False and check["error"].startswith(f"full: {full} of {CAP} bytes"), check

    # `formwall quarantine delete` empties the store; uploads are taken again, without a restart or a signal.
    ids = [line.split()[0] for line in quarantine_cli("list", "--dir", store).splitlines()[1:]]
    assert len(ids) == 2
    for item in ids:
        quarantine_cli("delete", item, "--dir", store)
    assert on_disk(store) == 0
    wait_until(lambda: gauges(admin)["formwall_quarantine_bytes"] == 0, IO_TIMEOUT,
               what="formwall_quarantine_bytes 0 after the deletes")
    assert wait_readyz(admin, 200) == {"ok": True}
    assert [upload(fw.port) for _ in range(3)] == [200, 200, 503]
    assert gauges(admin)["formwall_quarantine_bytes"] == on_disk(store) == full

    # By hand: one item directory removed with rm -r makes room for one more part, which the upload that does not
    # fit by the proxy's count finds by rescanning (well before the 10 s periodic rescan; nothing else asks here).
    (first, *_) = store.glob("[0-9][0-9][0-9][0-9]/[0-9][0-9]/[0-9][0-9]/*")
    shutil.rmtree(first)
    assert on_disk(store) < full
    wait_until(lambda: upload(fw.port) == 200, 5, what="an upload taken after an item was removed by hand")
    assert gauges(admin)["formwall_quarantine_bytes"] == on_disk(store) == full
