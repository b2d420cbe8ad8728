"""`deny-embedded-markup` reads the whole part (docs/rules.md, "What deny-embedded-markup reads"): valid PNG, JPEG,
GIF, WebP, PDF and text files built here, each carrying a PHP, ASP, JSP, ColdFusion or SSI payload after about
5 KiB (past the sniffed prefix), through the real `formwall serve`. Refused 415 `embedded_markup` under the
directive, forwarded without it; a refused part never reaches the upstream as a complete request.
"""

from __future__ import annotations

import os
import random
import struct
import zlib

import pytest
import requests

from e2e_helpers import IO_TIMEOUT, new_request_id, wait_audit_record

RULES = """
route /avatar { file avatar { types image/png image/jpeg image/gif image/webp; deny-embedded-markup; } }
route /docs { file doc { types application/pdf text/plain; deny-embedded-markup; } }
route /short { file doc { deny-embedded-markup php-short-tags; } }
route /lax { file avatar { } file doc { } }
"""

PAYLOADS = [
    b"<?php system($_GET['c']); ?>",
    b"<% Runtime.getRuntime().exec(request.getParameter(\"c\")); %>",
    b"<jsp:scriptlet>Runtime.getRuntime().exec(request.getParameter(\"c\"));</jsp:scriptlet>",
    b"<cfexecute name=\"#url.c#\" timeout=\"5\"></cfexecute>",
    b"<!--#exec cmd=\"id\" -->",
    b"<script>fetch('/admin').then(r => r.text())</script>",
]

# Deterministic "image data" without a `<`, so nothing but the payload can match.
NOISE = bytes(b if b != 0x3C else 0x3D for b in random.Random(53).randbytes(6000))


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(payload: bytes) -> bytes:
    """A valid 1x1 PNG whose private `ruSt` chunk, after 5 KiB of another, carries the payload."""
    sig = b"\x89PNG\r\n\x1a\n"
    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    pad = chunk(b"prVt", NOISE[:5200])
    idat = chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
    return sig + ihdr + pad + chunk(b"ruSt", payload) + idat + chunk(b"IEND", b"")


def segment(marker: int, payload: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


def jpeg(payload: bytes) -> bytes:
    """A baseline JPEG's structure; the payload in an APP2 segment after 5 KiB of APP1."""
    app0 = segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
    app1 = segment(0xE1, b"Exif\x00\x00" + NOISE[:5200])
    app2 = segment(0xE2, b"ICC_PROFILE\x00\x01\x01" + payload)
    dqt = segment(0xDB, b"\x00" + bytes(range(1, 65)))
    sof = segment(0xC0, b"\x08\x00\x01\x00\x01\x01\x01\x11\x00")
    dht = segment(0xC4, b"\x00" + bytes([0, 1] + [0] * 14) + b"\x00")
    sos = segment(0xDA, b"\x01\x01\x00\x00\x3f\x00")
    return b"\xff\xd8" + app0 + app1 + app2 + dqt + sof + dht + sos + b"\x12\x34\x56" + b"\xff\xd9"


def gif(payload: bytes) -> bytes:
    """A 1x1 GIF89a; the payload in a comment extension after 5 KiB of an application extension."""
    def blocks(data: bytes) -> bytes:
        return b"".join(bytes([len(data[i:i + 255])]) + data[i:i + 255] for i in range(0, len(data), 255)) + b"\x00"
    head = b"GIF89a" + struct.pack("<HHBBB", 1, 1, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    app = b"\x21\xff\x0bXMP DataXMP" + blocks(NOISE[:5200])
    comment = b"\x21\xfe" + blocks(payload)
    image = b"\x2c" + struct.pack("<HHHHB", 0, 0, 1, 1, 0) + b"\x02\x02\x44\x01\x00"
    return head + app + comment + image + b"\x3b"


def webp(payload: bytes) -> bytes:
    """A RIFF WebP with an `EXIF` chunk of 5 KiB and an `XMP ` chunk holding the payload."""
    def rchunk(kind: bytes, data: bytes) -> bytes:
        return kind + struct.pack("<I", len(data)) + data + (b"\x00" if len(data) % 2 else b"")
    vp8l = rchunk(b"VP8L", b"\x2f\x00\x00\x00\x00\x07\x10\x11\x11\x88\x88\xfe\x07\x00")
    body = b"WEBP" + rchunk(b"VP8X", b"\x0c\x00\x00\x00\x00\x00\x00\x00\x00\x00") + vp8l \
        + rchunk(b"EXIF", NOISE[:5200]) + rchunk(b"XMP ", payload)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def pdf(payload: bytes) -> bytes:
    """A one-page PDF with a 5 KiB stream, then the payload in a second object."""
    stream = NOISE[:5200]
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 10 10] >>",
            b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
            b"(" + payload + b")"]
    out = b"%PDF-1.4\n"
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)


def text(payload: bytes) -> bytes:
    return b"Meeting notes, nothing to see.\n" * 180 + payload + b"\n"


FILES = [("/avatar", "avatar", "a.png", "image/png", png), ("/avatar", "avatar", "a.jpg", "image/jpeg", jpeg),
         ("/avatar", "avatar", "a.gif", "image/gif", gif), ("/avatar", "avatar", "a.webp", "image/webp", webp),
         ("/docs", "doc", "a.pdf", "application/pdf", pdf), ("/docs", "doc", "a.txt", "text/plain", text)]


@pytest.fixture
def fw(upstream, formwall_factory, tmp_path):
    rules = tmp_path / "markup.rules"
    rules.write_text(RULES)
    audit = tmp_path / "audit.log"
    f = formwall_factory(upstream.url, "--rules", str(rules), "--audit-log", str(audit))
    f.audit = audit
    return f


def post(fw, path, name, filename, data, ctype):
    fw.last_request_id = new_request_id()
    return requests.post(fw.url + path, files={name: (filename, data, ctype)},
                         headers={"X-Request-Id": fw.last_request_id}, timeout=IO_TIMEOUT)


@pytest.mark.parametrize("path,name,filename,ctype,build", FILES, ids=[f[2] for f in FILES])
def test_markup_past_the_sniffed_prefix_is_refused(fw, upstream, path, name, filename, ctype, build):
    for payload in PAYLOADS:
        data = build(payload)
        assert data.index(payload) > 5 * 1024
        r = post(fw, path, name, filename, data, ctype)
        assert r.status_code == 415, (filename, payload, r.text)
        assert r.json()["error"] == "embedded_markup", r.text
        rec = wait_audit_record(fw.audit, fw.last_request_id, IO_TIMEOUT)
        detail = rec["violations"][0]["detail"]
        assert f"at byte {data.index(payload)}" in detail, detail
        # The upstream may have seen the start of the body, never a complete request.
        assert not any(q.get("request_id") == fw.last_request_id and q.get("body_complete")
                       for q in upstream.requests())
        # Without the directive the same file is forwarded whole.
        r = post(fw, "/lax", name, filename, data, ctype)
        assert r.status_code == 200, r.text
        assert r.json()["files"][name][0]["size"] == len(data)


def test_clean_files_pass(fw):
    for path, name, filename, ctype, build in FILES:
        r = post(fw, path, name, filename, build(b"nothing here"), ctype)
        assert r.status_code == 200, (filename, r.text)


def test_short_open_tags_only_where_the_route_says_so(fw):
    data = text(b"<? system($_GET['c']); ?>")
    assert post(fw, "/docs", "doc", "a.txt", data, "text/plain").status_code == 200
    r = post(fw, "/short", "doc", "a.txt", data, "text/plain")
    assert r.status_code == 415 and r.json()["error"] == "embedded_markup", r.text


def test_a_large_random_file_passes(fw):
    data = os.urandom(8 << 20)
    r = post(fw, "/docs", "doc", "blob.txt", data, "application/octet-stream")
    # Random bytes are not text/plain: refused for their type, never for markup.
    assert r.json().get("error") != "embedded_markup", r.text
