"""`disarm` end to end: JPEG with GPS EXIF and a comment, PNG with text and eXIf chunks, SVG with scripts, all
written by the test byte by byte, posted through the real `formwall serve`; the upstream receives the rewritten
file and the audit log says what was removed (docs/rules.md, "Disarm").
"""

from __future__ import annotations

import struct
import zlib

import pytest
import requests

from e2e_helpers import IO_TIMEOUT, new_request_id, wait_audit_record

RULES = """
route /photo {
    file avatar { types image/jpeg image/png image/svg+xml; max 10MiB; disarm; allow-filename dangerous-extension; }
}
route /spelt {
    file avatar { types image/png; action disarm; }
}
route /strict {
    file logo { types image/svg+xml; disarm reject; allow-filename dangerous-extension; }
}
"""


def segment(marker: int, payload: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


def jpeg_with_gps() -> tuple[bytes, bytes]:
    """A small baseline JPEG's structure with EXIF (IFD0 pointing at a GPS IFD) and a comment; and the same without."""
    tiff = b"MM\x00\x2a\x00\x00\x00\x08" + struct.pack(">H", 1) + struct.pack(">HHII", 0x8825, 4, 1, 26) \
        + b"\x00\x00\x00\x00" + struct.pack(">H", 0) + b"\x00\x00\x00\x00"
    app0 = segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
    app1 = segment(0xE1, b"Exif\x00\x00" + tiff)
    com = segment(0xFE, b"shot at home, 51.5N 0.1W")
    dqt = segment(0xDB, b"\x00" + bytes(range(1, 65)))
    sof = segment(0xC0, b"\x08\x00\x10\x00\x10\x01\x01\x11\x00")
    dht = segment(0xC4, b"\x00" + bytes([0, 1] + [0] * 14) + b"\x00")
    sos = segment(0xDA, b"\x01\x01\x00\x00\x3f\x00")
    data = b"\x12\x34\xff\x00\x56\xff\xd0\x78" * 20
    soi, eoi = b"\xff\xd8", b"\xff\xd9"
    with_meta = soi + app0 + app1 + com + dqt + sof + dht + sos + data + eoi
    without = soi + app0 + dqt + sof + dht + sos + data + eoi
    return with_meta, without


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_with_text() -> tuple[bytes, bytes]:
    sig = b"\x89PNG\r\n\x1a\n"
    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    text = chunk(b"tEXt", b"Comment\x00secret location")
    exif = chunk(b"eXIf", b"MM\x00\x2a\x00\x00\x00\x08\x00\x00")
    idat = chunk(b"IDAT", zlib.compress(b"\x00\x00\x00\x00"))
    iend = chunk(b"IEND", b"")
    return sig + ihdr + text + exif + idat + iend, sig + ihdr + idat + iend


SVG = (b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)">'
       b'<script>alert(document.cookie)</script><circle cx="5" cy="5" r="4"/>'
       b'<a href="javascript:alert(2)"><text>hi</text></a></svg>')


@pytest.fixture
def fw(upstream, formwall_factory, tmp_path):
    rules = tmp_path / "disarm.rules"
    rules.write_text(RULES)
    audit = tmp_path / "audit.log"
    f = formwall_factory(upstream.url, "--rules", str(rules), "--audit-log", str(audit))
    f.audit = audit
    return f


def last(fw) -> dict:
    """The audit record of the last request `post` sent."""
    return wait_audit_record(fw.audit, fw.last_request_id, IO_TIMEOUT)


def post(fw, path, name, filename, data, ctype):
    fw.last_request_id = new_request_id()
    return requests.post(fw.url + path, files={name: (filename, data, ctype)},
                         headers={"X-Request-Id": fw.last_request_id}, timeout=IO_TIMEOUT)


def test_jpeg_loses_exif_gps_and_comment_and_keeps_its_image_data(fw, upstream):
    original, expected = jpeg_with_gps()
    r = post(fw, "/photo", "avatar", "me.jpg", original, "image/jpeg")
    assert r.status_code == 200, r.text
    got = r.json()["files"]["avatar"][0]
    assert got["size"] == len(expected)
    import hashlib
    assert got["sha256"] == hashlib.sha256(expected).hexdigest()
    part = last(fw)["parts"][0]
    assert part["action"] == "disarm" and {"exif", "gps", "comment"} <= set(part["disarmed"]), part
    assert last(fw)["decision"] == "modified"


def test_png_loses_its_text_chunks(fw):
    original, expected = png_with_text()
    r = post(fw, "/photo", "avatar", "a.png", original, "image/png")
    assert r.status_code == 200, r.text
    import hashlib
    assert r.json()["files"]["avatar"][0]["sha256"] == hashlib.sha256(expected).hexdigest()
    assert set(last(fw)["parts"][0]["disarmed"]) >= {"tEXt", "eXIf"}


def test_svg_is_stripped_or_refused(fw, upstream):
    r = post(fw, "/photo", "avatar", "a.svg", SVG, "image/svg+xml")
    assert r.status_code == 200, r.text
    removed = set(last(fw)["parts"][0]["disarmed"])
    assert {"script", "onload", "javascript-href"} <= removed, removed
    r = post(fw, "/strict", "logo", "a.svg", SVG, "image/svg+xml")
    assert r.status_code == 422 and r.json()["error"] == "disarm_failed", r.text


def test_a_broken_image_is_disarm_failed(fw):
    original, _ = jpeg_with_gps()
    r = post(fw, "/photo", "avatar", "me.jpg", original[:-40], "image/jpeg")
    assert r.status_code == 422 and r.json()["error"] == "disarm_failed", r.text


def test_action_disarm_is_the_same_directive(fw):
    original, expected = png_with_text()
    r = post(fw, "/spelt", "avatar", "a.png", original, "image/png")
    assert r.status_code == 200, r.text
    import hashlib
    assert r.json()["files"]["avatar"][0]["sha256"] == hashlib.sha256(expected).hexdigest()
