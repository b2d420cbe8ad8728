"""Content-Encoding on request bodies (gzip, deflate), end to end: the real `formwall serve`, Python requests and
curl, the werkzeug upstream. A compressed form body is decoded as it streams, inspected, and forwarded decoded
without its Content-Encoding; limits apply to decoded bytes; unknown codings get 415 unless a route passes them
explicitly. docs/rules.md, "Compressed request bodies".
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import random
import subprocess
import time
import zlib
from pathlib import Path

import pytest
import requests

from e2e_helpers import IO_TIMEOUT, wait_audit_record

BOUNDARY = "gzB0undary7"
HEADERS = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}


def form(fields: dict[str, str], files: dict[str, tuple[str, bytes, str]] = {}) -> bytes:
    out = b""
    for name, value in fields.items():
        out += (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").encode()
    for name, (filename, data, ctype) in files.items():
        out += (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n"
                f"Content-Type: {ctype}\r\n\r\n").encode() + data + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


REQUEST_IDS = itertools.count(1)


def post(fw, body: bytes, encoding: str | None, path: str = "/upload", headers=HEADERS) -> requests.Response:
    """POSTs `body`, with an X-Request-Id of its own (Formwall keeps a valid client id and logs it), so that
    `record_of` can find this request's audit record."""
    h = dict(headers)
    h["X-Request-Id"] = f"gz-{next(REQUEST_IDS)}"
    if encoding:
        h["Content-Encoding"] = encoding
    return requests.post(fw.url + path, data=body, headers=h, timeout=IO_TIMEOUT)


def record_of(path: Path, response: requests.Response) -> dict:
    """The audit record of the request `response` answers, found by its id (the newest line may still be an
    earlier request's: `wait_audit_record`)."""
    return wait_audit_record(path, response.request.headers["X-Request-Id"], IO_TIMEOUT)


RULES = """
route /upload {
    field caption { max 64; }
    file doc { types text/plain image/png; max 1MiB; }
}
route /ratio { compression-ratio-max 2000; body-max 200MiB; unknown allow; }
route /stacked { encodings-max 2; unknown allow; }
route /opaque { unknown-encoding pass; unknown allow; }
route /form { field name; }
"""


@pytest.fixture
def fw(upstream, formwall_factory, tmp_path):
    rules = tmp_path / "enc.rules"
    rules.write_text(RULES)
    audit = tmp_path / "audit.log"
    f = formwall_factory(upstream.url, "--rules", str(rules), "--audit-log", str(audit))
    f.audit = audit
    return f


@pytest.mark.parametrize("encoding,pack", [("gzip", gzip.compress), ("x-gzip", gzip.compress),
                                            ("deflate", zlib.compress), ("GZIP", gzip.compress)])
def test_compressed_forms_are_decoded_inspected_and_forwarded_plain(fw, upstream, encoding, pack):
    data = os.urandom(1000).hex().encode()
    r = post(fw, pack(form({"caption": "hello"}, {"doc": ("a.txt", data, "text/plain")})), encoding)
    assert r.status_code == 200, r.text
    seen = r.json()
    assert seen["fields"] == {"caption": ["hello"]}
    assert seen["files"]["doc"][0]["size"] == len(data)
    assert "content-encoding" not in seen["headers"]
    rec = record_of(fw.audit, r)
    assert rec["decision"] == "allow" and rec["parts"][1]["size"] == len(data)
    assert rec["bytes_in"] < len(data)   # counted as received: compressed


def test_content_encoding_before_content_type_without_rules(upstream, formwall_factory):
    """No policy, and Content-Encoding sent before Content-Type: dropping Content-Encoding for the upstream moves
    the Content-Type field among the head's fields, and its boundary is still the one read."""
    f = formwall_factory(upstream.url)
    data = os.urandom(500).hex().encode()
    body = gzip.compress(form({"caption": "first"}, {"doc": ("a.txt", data, "text/plain")}))
    for order in (["Content-Encoding", "Content-Type"], ["Content-Type", "Content-Encoding"]):
        values = {"Content-Encoding": "gzip", "Content-Type": HEADERS["Content-Type"]}
        r = requests.post(f.url + "/upload", data=body, headers={k: values[k] for k in order}, timeout=IO_TIMEOUT)
        assert r.status_code == 200, (order, r.text)
        seen = r.json()
        assert seen["fields"] == {"caption": ["first"]}, order
        assert seen["files"]["doc"][0]["size"] == len(data), order
        assert "content-encoding" not in seen["headers"], order


def test_the_policy_sees_the_decoded_content(fw):
    php = b"<?php system($_GET['c']); ?>"
    r = post(fw, gzip.compress(form({"caption": "x"}, {"doc": ("a.txt", php, "text/plain")})), "gzip")
    assert r.status_code == 415, r.text
    assert record_of(fw.audit, r)["reason"] in {"sniffed_not_allowed", "type_mismatch", "type_not_allowed"}


def test_curl_sends_a_gzip_file(fw, tmp_path):
    body = tmp_path / "body.gz"
    body.write_bytes(gzip.compress(form({"caption": "curl"}, {"doc": ("a.txt", b"plain text", "text/plain")})))
    out = subprocess.run(["curl", "-sS", "-H", f"Content-Type: multipart/form-data; boundary={BOUNDARY}",
                          "-H", "Content-Encoding: gzip", "--data-binary", f"@{body}", fw.url + "/upload"],
                         capture_output=True, text=True, timeout=IO_TIMEOUT)
    assert json.loads(out.stdout)["fields"] == {"caption": ["curl"]}


def test_urlencoded_bodies_too(fw):
    r = post(fw, gzip.compress(b"name=alice"), "gzip", "/form",
             headers={"Content-Type": "application/x-www-form-urlencoded"})
    import hashlib
    assert r.status_code == 200, r.text
    seen = r.json()
    # The upstream receives the decoded form, re-encoded, without a Content-Encoding.
    assert seen["body_sha256"] == hashlib.sha256(b"name=alice").hexdigest() and "content-encoding" not in seen["headers"]
    r = post(fw, gzip.compress(b"name=alice&role=admin"), "gzip", "/form",
             headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 403, r.text   # the decoded body has an unknown field


def test_body_max_counts_decoded_bytes(fw):
    big = b"abcdefgh" * (256 << 10)   # 2 MiB decoded, a few KiB compressed
    r = post(fw, gzip.compress(form({"caption": "x"}, {"doc": ("a.txt", big, "text/plain")})), "gzip")
    assert r.status_code == 413
    assert record_of(fw.audit, r)["reason"] in {"body_too_large", "file_too_large", "compression_ratio_exceeded"}


def test_a_gzip_bomb_is_refused_early_with_flat_memory(fw, upstream):
    # 1 GiB of zeros in about 1 MiB: refused long before it is decoded.
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    bomb = b"".join(packer.compress(block) for _ in range(1024)) + packer.flush()
    t0 = time.monotonic()
    r = post(fw, bomb, "gzip", "/upload")
    assert r.status_code == 413 and r.json()["error"] == "compression_ratio_exceeded", r.text
    assert time.monotonic() - t0 < 10
    rec = record_of(fw.audit, r)
    assert rec["violations"][0]["kind"] == "compression_ratio_exceeded"
    # The route whose ratio was exceeded (line 2 of RULES): read for a decoded body only (ConnectionMachine).
    assert rec["violations"][0]["rule"].endswith("enc.rules:2"), rec["violations"][0]
    assert upstream.requests() == [] or all(q.get("path") != "/upload" or not q.get("body_complete") for q in upstream.requests())


def test_a_route_can_allow_a_higher_ratio(fw):
    text = b"0123456789" * 100_000   # 1 MB, compresses about 300 times
    r = post(fw, gzip.compress(form({"a": "b"}, {"f": ("t.txt", text, "text/plain")})), "gzip", "/ratio")
    assert r.status_code == 200 and r.json()["files"]["f"][0]["size"] == len(text)
    r = post(fw, gzip.compress(form({"caption": "b"}, {"doc": ("t.txt", text, "text/plain")})), "gzip", "/upload")
    assert r.status_code == 413 and r.json()["error"] == "compression_ratio_exceeded", r.text


def test_a_large_gzip_upload_within_the_ratio_is_forwarded_whole(fw):
    # 8 MB that gzip shrinks about 17 times (one random byte in 40): each read of the compressed body decodes to
    # far more than the upstream queue's hard cap (1 MiB). Decoding pauses at the high-water mark and goes on as
    # the upstream reads; before, the whole read's output went into the queue and the request got 500
    # body_sink_failed.
    rng = random.Random(11)
    block = bytearray(40 * 1024)
    for i in range(0, len(block), 40):
        block[i] = rng.randrange(256)
    data = bytes(block) * 200
    packed = gzip.compress(form({}, {"f": ("z.bin", data, "application/octet-stream")}), 6)
    assert 10 < len(data) / len(packed) < 100
    r = post(fw, packed, "gzip", "/ratio")
    assert r.status_code == 200, r.text
    received = r.json()["files"]["f"][0]
    assert received["size"] == len(data), received


def test_unknown_codings_are_415_unless_passed_explicitly(fw, upstream):
    for enc in ("br", "zstd", "compress", "gzip, br"):
        r = post(fw, b"whatever", enc)
        assert r.status_code == 415 and r.json()["error"] == "encoding_not_supported", (enc, r.text)
    r = post(fw, b"\x0b\x02\x80opaque", "br", "/opaque")
    assert r.status_code == 200
    seen = r.json()
    assert seen["headers"]["content-encoding"] == "br"
    rec = record_of(fw.audit, r)
    assert "encoding-uninspected" in rec["anomalies"] and rec["decision"] == "allow"


def test_stacked_codings_need_encodings_max(fw):
    body = gzip.compress(zlib.compress(form({"caption": "two layers"})))
    assert post(fw, body, "deflate, gzip").status_code == 415
    r = post(fw, body, "deflate, gzip", "/stacked")
    assert r.status_code == 200 and r.json()["fields"] == {"caption": ["two layers"]}
    # identity is no coding at all.
    assert post(fw, form({"caption": "x"}), "identity").status_code == 200


def test_truncated_trailing_and_corrupt_bodies_are_400(fw):
    good = gzip.compress(form({"caption": "x"}))
    for bad in (good[:-6], good + b"\x1f\x8b\x08\x00junk", good[:10] + bytes(40) + good[50:]):
        r = post(fw, bad, "gzip")
        assert r.status_code == 400 and r.json()["error"] == "bad_content_encoding", r.text


@pytest.mark.parametrize("mode", ["spool", "hold"])
def test_other_upstream_body_modes(upstream, formwall_factory, tmp_path, mode):
    rules = tmp_path / "enc.rules"
    rules.write_text(RULES)
    fw = formwall_factory(upstream.url, "--rules", str(rules), "--upstream-body", mode)
    data = os.urandom(300_000).hex().encode()
    r = post(fw, gzip.compress(form({"caption": mode}, {"doc": ("a.txt", data, "text/plain")})), "gzip")
    assert r.status_code == 200, r.text
    assert r.json()["files"]["doc"][0]["size"] == len(data)


def test_json_keeps_its_encoding(fw, upstream):
    r = requests.post(fw.url + "/api", data=gzip.compress(b'{"a":1}'),
                      headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}, timeout=IO_TIMEOUT)
    # No route for /api: the fallback refuses form parts, but a JSON body is opaque and keeps its coding.
    assert r.status_code == 200, r.text
    seen = r.json()
    assert seen["headers"]["content-encoding"] == "gzip" and seen["body_size"] == len(gzip.compress(b'{"a":1}'))
