"""Big parts and early answers: what the upstream never sees.

* A stripped part and a quarantined part of 100 MiB never reach the upstream; the other parts arrive intact.
* A 413 for an oversized Content-Length is answered from the head, before the client sends a body byte, and
  without a `100 Continue`.
"""

import json
import os
import socket
import time

import pytest

from policy_helpers import (HOST, RULES, Formwall, Part, Upstream, _read_response, multipart, multipart_stream,  # noqa: F401
                            upstream,
                            new_id, repeated, repeated_sha256, request, sha256_of)

MIB = 1 << 20
BIG = 100 * MIB
BLOCK = os.urandom(64 * 1024)
SMALL = os.urandom(3000)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("streaming")
    up = Upstream(tmp / "upstream.jsonl")
    fw = Formwall(tmp, up, RULES / "actions.rules")
    yield fw
    fw.stop()
    up.close()


@pytest.fixture(scope="module")
def big_sha():
    return repeated_sha256(BLOCK, BIG)


def send_big(fw, part_name, filename, rid):
    parts = [
        Part("keep", b"before"),
        Part(part_name, repeated(BLOCK, BIG), filename, "application/octet-stream", size=BIG),
        Part("ok", SMALL, "small.bin", "application/octet-stream"),
        Part("keep", b"after"),
    ]
    chunks, length, ctype = multipart_stream(parts)
    resp = request(fw.port, "POST", "/a/big", [("Content-Type", ctype), ("X-Request-Id", rid)], chunks,
                   content_length=length, timeout=120)
    return resp, length


@pytest.mark.parametrize("part_name,filename,action", [
    ("stripme", "big.bin", "strip"),               # over max 1 MiB: held, then dropped
    ("quarantineme", "big.bin", "quarantine"),     # wrong extension: decided at the part head, streamed to the store
    ("quarantinebig", "big.bin", "quarantine"),    # over max 1 MiB: held, then moved to the store
])
def test_100_mib_part_never_reaches_the_upstream(env, big_sha, part_name, filename, action):
    rid = new_id()
    resp, length = send_big(env, part_name, filename, rid)
    assert resp.status == 200, resp
    assert resp.send_error is None and resp.sent_body_bytes == length

    (seen,) = env.upstream.records(rid)
    assert seen["body_complete"] and seen["multipart_error"] is None, seen
    assert seen["body_bytes"] < 64 * 1024, f"the upstream received {seen['body_bytes']} body bytes"
    assert seen["fields"] == {"keep": ["before", "after"]}
    assert [(f["name"], f["filename"], f["size"], f["sha256"]) for f in seen["files"]] == [
        ("ok", "small.bin", len(SMALL), sha256_of(SMALL))]

    record = env.wait_audit(rid)
    assert record["decision"] == "modified" and record["status"] == 200, record
    assert record["bytes_in"] == length, record
    assert record["bytes_upstream"] < 64 * 1024, record
    (big,) = [p for p in record["parts"] if p["name"] == part_name]
    assert big["action"] == action, big
    assert big["size"] == BIG and big["sha256"] == big_sha, big
    if action == "quarantine":
        item = big["quarantine_id"]
        (directory,) = list(env.quarantine_dir.glob(f"*/*/*/{item}"))
        data = directory / f"{item}.bin"
        assert data.stat().st_size == BIG
        sidecar = json.loads((directory / f"{item}.json").read_text())
        assert sidecar["sha256"] == big_sha and sidecar["size"] == BIG
        data.unlink()  # 100 MiB: do not keep it around for the rest of the module
    else:
        assert big["quarantine_id"] is None


# ---------------------------------------------------------------------------------------------- Expect: 100-continue

def head_only(fw, path, length, ctype="multipart/form-data; boundary=XyZ", method="POST", rid=None):
    rid = rid or new_id()
    head = (f"{method} {path} HTTP/1.1\r\nHost: {HOST}\r\nX-Request-Id: {rid}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {length}\r\nExpect: 100-continue\r\n\r\n").encode()
    sock = socket.create_connection((HOST, fw.port), timeout=10)
    sock.sendall(head)
    return sock, rid


def test_oversized_content_length_is_refused_before_the_body(env):
    sock, rid = head_only(env, "/a/big", 1_000_000_000)
    try:
        resp = _read_response(sock, bytearray(), time.monotonic() + 10)  # no body byte was ever sent
    finally:
        sock.close()
    assert resp is not None
    assert resp.informational == [], f"sent {resp.informational} before refusing"
    assert resp.status == 413, resp
    body = resp.json()
    assert body["error"] == "body_too_large" and body["limit"] == 300 * MIB and body["request_id"] == rid
    record = env.wait_audit(rid)
    assert record["status"] == 413 and record["bytes_in"] == 0 and record["upstream_ms"] is None, record
    env.upstream.wait_settled()
    assert env.upstream.records(rid) == []


@pytest.mark.parametrize("method,ctype,status", [("GET", "multipart/form-data; boundary=XyZ", 415),
                                                 ("POST", "application/json", 415)])
def test_other_head_refusals_send_no_continue(tmp_path, upstream, method, ctype, status):
    rules = tmp_path / "r.rules"
    rules.write_text("route /r { methods POST; content-types multipart/form-data; field a; }\n")
    fw = Formwall(tmp_path, upstream, rules)
    try:
        if method == "GET":
            status = 405
        sock, rid = head_only(fw, "/r", 100, ctype=ctype, method=method)
        try:
            resp = _read_response(sock, bytearray(), time.monotonic() + 10)
        finally:
            sock.close()
        assert resp.informational == [] and resp.status == status, resp
    finally:
        fw.stop()


def test_accepted_head_gets_100_continue_then_the_answer(env):
    body, ctype = multipart([Part("keep", b"v")])
    sock, rid = head_only(env, "/a/big", len(body), ctype=ctype)
    try:
        buf = bytearray()
        sock.settimeout(10)
        while b"\r\n\r\n" not in buf:
            data = sock.recv(4096)
            assert data, "closed before 100 Continue"
            buf += data
        assert bytes(buf).startswith(b"HTTP/1.1 100 Continue\r\n"), bytes(buf)
        del buf[:bytes(buf).index(b"\r\n\r\n") + 4]
        sock.sendall(body)
        resp = _read_response(sock, buf, time.monotonic() + 10)
    finally:
        sock.close()
    assert resp.status == 200, resp
    assert env.upstream.records(rid)[0]["fields"] == {"keep": ["v"]}
