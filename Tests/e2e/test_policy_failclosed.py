"""Fail closed: when the quarantine store cannot take a part, the request is refused with 503
`quarantine_unavailable`, the upstream never sees a complete body, and nothing partial is left in the store.

The store is a real 64 KiB tmpfs (disk full) and the same tmpfs remounted read-only (EROFS). Mounting needs
root; the tests skip, saying why, only when the mount itself is impossible.
"""

import os
import subprocess

import pytest

from policy_helpers import PDF, RULES, Formwall, Part, multipart_stream, new_id, post_form, repeated, request
from policy_helpers import upstream  # noqa: F401  (fixture)

KIB = 1024


@pytest.fixture
def tiny_store(tmp_path):
    store = tmp_path / "quarantine"
    store.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(store)],
                            capture_output=True, timeout=30)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root and CAP_SYS_ADMIN): {result.stderr.decode().strip()}")
    try:
        yield store
    finally:
        if subprocess.run(["umount", str(store)], capture_output=True, timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(store)], capture_output=True, timeout=30)


def leftovers(store):
    """Everything in the store that is not part of a complete item (sidecar present)."""
    bad = []
    for root, dirs, files in os.walk(store):
        for f in files:
            path = os.path.join(root, f)
            if f.startswith(".tmp-"):
                bad.append(path)
            elif f.endswith(".bin") and not os.path.exists(path[:-4] + ".json"):
                bad.append(path)
        if root != str(store) and len(os.path.relpath(root, store).split(os.sep)) == 4:
            if not files:
                bad.append(root + "/ (empty item directory)")
    return bad


def complete_items(store):
    return sorted(p.name for p in store.glob("*/*/*/*") if (p / f"{p.name}.json").exists())


def big_part_request(fw, name, size, rid):
    parts = [Part("keep", b"before"), Part(name, repeated(os.urandom(4096), size), "big.bin",
                                           "application/octet-stream", size=size), Part("keep", b"after")]
    chunks, length, ctype = multipart_stream(parts)
    return request(fw.port, "POST", "/a/big", [("Content-Type", ctype), ("X-Request-Id", rid)], chunks,
                   content_length=length, timeout=30)


def check_fail_closed(fw, resp, rid):
    assert resp.status == 503, resp
    body = resp.json()
    assert body["error"] == "quarantine_unavailable" and body["request_id"] == rid, body
    record = fw.wait_audit(rid)
    assert record["decision"] == "error" and record["status"] == 503, record
    assert record["reason"] == "quarantine_unavailable", record
    fw.upstream.assert_no_complete_body(rid)


@pytest.mark.parametrize("name", ["quarantineme", "quarantinebig"])
def test_disk_full_is_503_and_leaves_nothing(tmp_path, upstream, tiny_store, name):  # noqa: F811
    fw = Formwall(tmp_path, upstream, RULES / "actions.rules", quarantine_dir=tiny_store)
    try:
        # The store works: a small item fits.
        rid = new_id()
        resp = post_form(fw.port, "/a/quarantine", [Part("doc", PDF, "small.txt", "application/pdf")], rid)
        assert resp.status == 200, resp
        (kept,) = complete_items(tiny_store)

        # 2 MiB cannot fit in 64 KiB: ENOSPC while storing.
        rid = new_id()
        resp = big_part_request(fw, name, 2048 * KIB, rid)
        check_fail_closed(fw, resp, rid)
        assert complete_items(tiny_store) == [kept]
        assert leftovers(tiny_store) == []

        # The proxy keeps serving.
        rid = new_id()
        resp = post_form(fw.port, "/a/quarantine", [Part("keep", b"v")], rid)
        assert resp.status == 200, resp
    finally:
        fw.stop()


def test_read_only_store_is_503(tmp_path, upstream, tiny_store):  # noqa: F811
    fw = Formwall(tmp_path, upstream, RULES / "actions.rules", quarantine_dir=tiny_store)
    try:
        remount = subprocess.run(["mount", "-o", "remount,ro", str(tiny_store)], capture_output=True, timeout=30)
        assert remount.returncode == 0, remount.stderr
        for request_parts in (
            [Part("keep", b"v"), Part("doc", PDF, "x.txt", "application/pdf")],      # decided at the part head
            [Part("keep", b"v"), Part("doc", b"<?php ?>", "x.pdf", "application/pdf")],  # decided on sniffing
        ):
            rid = new_id()
            resp = post_form(fw.port, "/a/quarantine", request_parts, rid)
            check_fail_closed(fw, resp, rid)
        assert leftovers(tiny_store) == [] and complete_items(tiny_store) == []
    finally:
        fw.stop()


def test_store_directory_replaced_by_a_file_is_503(tmp_path, upstream):  # noqa: F811
    store = tmp_path / "store"
    fw = Formwall(tmp_path, upstream, RULES / "actions.rules", quarantine_dir=store)
    try:
        store.rename(tmp_path / "store.away")
        store.write_text("not a directory")
        rid = new_id()
        resp = post_form(fw.port, "/a/quarantine", [Part("doc", PDF, "x.txt", "application/pdf")], rid)
        check_fail_closed(fw, resp, rid)
        assert store.read_text() == "not a directory"
    finally:
        fw.stop()
