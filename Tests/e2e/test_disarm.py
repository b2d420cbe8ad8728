"""`disarm` end to end: JPEG with GPS EXIF and a comment, PNG with text and eXIf chunks, SVG with scripts, all
written by the test byte by byte, posted through the real `formwall serve`; the upstream receives the rewritten
file and the audit log says what was removed (docs/rules.md, "Disarm").

Hiding places (issue 53): real JPEG, PNG, GIF and WebP images made by Pillow, with a PHP shell placed past the
sniffer's 4 KiB prefix in the places a format lets a file carry data beside its image (JPEG APP2 and APP1 XMP, a
profile-shaped APP2 with markup, PNG private and text chunks, GIF comment and application extensions, WebP EXIF,
XMP and unknown chunks). A capturing upstream keeps the bytes Formwall forwards: they must not hold the shell,
must decode with Pillow to the original's pixels, and keep a real ICC profile.
"""

from __future__ import annotations

import io
import struct
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from PIL import Image, ImageCms

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
route /avatar {
    file avatar { types image/jpeg image/png image/gif image/webp; max 10MiB; disarm; }
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


# ------------------------------------------------------------------------------------------------------------
# Hiding places: real images with a shell where a format carries data beside its image

SHELL = b"<?php system($_GET['c']); ?>"
SRGB = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()


def noise(size: int, mode: str = "RGB") -> Image.Image:
    """A deterministic image that compresses badly, so its data pushes what follows past the sniffed prefix."""
    data = bytearray()
    state = 0x2545F491
    for _ in range(size * size * len(mode)):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        data.append(state >> 16 & 0xFF)
    return Image.frombytes(mode, (size, size), bytes(data))


def encode(image: Image.Image, fmt: str, **params) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **params)
    return out.getvalue()


def fake_icc(text: bytes) -> bytes:
    """A profile-shaped blob: ICC header fields right, one tag holding `text`."""
    tag = b"desc\0\0\0\0" + text
    head = bytearray(128)
    head[0:4] = struct.pack(">I", 144 + len(tag))
    head[36:40] = b"acsp"
    return bytes(head) + struct.pack(">I4sII", 1, b"desc", 144, len(tag)) + tag


def jpeg_with_shells() -> bytes:
    """Pillow's JPEG with the sRGB profile; after a 5 KiB comment, APP2 and APP1 XMP segments holding the shell."""
    base = encode(noise(64), "JPEG", quality=95, icc_profile=SRGB)
    at = base.index(b"\xff\xdb")  # the first DQT, after APP0 and the ICC APP2
    extra = (segment(0xFE, b" " * 5000) + segment(0xE2, SHELL)
             + segment(0xE2, b"ICC_PROFILE\0\x01\x01" + fake_icc(SHELL))
             + segment(0xE1, b"http://ns.adobe.com/xap/1.0/\0<x:xmpmeta>" + SHELL + b"</x:xmpmeta>"))
    return base[:at] + extra + base[at:]


def png_with_shells() -> bytes:
    """Pillow's PNG with the sRGB profile; a private chunk and a tEXt holding the shell after the image data."""
    base = encode(noise(64), "PNG", icc_profile=SRGB)
    at = base.rindex(b"IEND") - 4
    return base[:at] + chunk(b"prVt", SHELL) + chunk(b"tEXt", b"Comment\0" + SHELL) + base[at:]


def gif_sub_blocks(data: bytes) -> bytes:
    return b"".join(bytes([len(data[i:i + 255])]) + data[i:i + 255] for i in range(0, len(data), 255)) + b"\0"


def gif_with_shells() -> bytes:
    """Pillow's two-frame looping GIF; a comment and an XMP application extension holding the shell before the
    trailer."""
    frames = [noise(96).convert("P"), noise(96).transpose(Image.Transpose.ROTATE_90).convert("P")]
    base = encode(frames[0], "GIF", save_all=True, append_images=frames[1:], loop=0, duration=100)
    assert base.endswith(b"\x3b")
    extra = (b"\x21\xfe" + gif_sub_blocks(SHELL)
             + b"\x21\xff\x0bXMP DataXMP" + gif_sub_blocks(SHELL + b" " * 300))
    return base[:-1] + extra + b"\x3b"


def riff_chunk(kind: bytes, data: bytes) -> bytes:
    return kind + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")


def webp_with_shells() -> bytes:
    """Pillow's lossless WebP with the sRGB profile (VP8X, ICCP, VP8L); EXIF, XMP and an unknown chunk holding the
    shell appended, the VP8X flags and RIFF size set to match."""
    base = encode(noise(64), "WEBP", lossless=True, icc_profile=SRGB)
    assert base[12:16] == b"VP8X"
    body = bytearray(base[12:])
    body[8] |= 0x08 | 0x04  # EXIF and XMP present
    body += riff_chunk(b"EXIF", b"MM\0*\0\0\0\x08" + SHELL) + riff_chunk(b"XMP ", SHELL) + riff_chunk(b"ZZZZ", SHELL)
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + bytes(body)


class Capture:
    """An upstream that keeps every request body it receives (Content-Length or chunked) and answers 200."""

    def __init__(self):
        self.bodies: list[tuple[str, bytes]] = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    body = bytearray()
                    while True:
                        size = int(self.rfile.readline().split(b";")[0], 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b""):
                                pass
                            break
                        body += self.rfile.read(size)
                        self.rfile.readline()
                else:
                    body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                capture.bodies.append((self.headers.get("Content-Type", ""), bytes(body)))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def last_file(self) -> bytes:
        """The file part of the last body received."""
        ctype, body = self.bodies[-1]
        boundary = ctype.split("boundary=", 1)[1].strip('"').encode()
        for part in body.split(b"--" + boundary):
            head, sep, content = part.partition(b"\r\n\r\n")
            if sep and b"filename=" in head:
                return content[:-2]  # the CRLF before the next delimiter
        raise AssertionError("no file part upstream")

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def captured(formwall_factory, tmp_path):
    capture = Capture()
    rules = tmp_path / "disarm.rules"
    rules.write_text(RULES)
    audit = tmp_path / "audit.log"
    fw = formwall_factory(capture.url, "--rules", str(rules), "--audit-log", str(audit))
    fw.audit = audit
    yield fw, capture
    capture.stop()


def pixels(data: bytes) -> list[bytes]:
    """Every frame's RGBA pixels as Pillow decodes them."""
    image = Image.open(io.BytesIO(data))
    frames = []
    for k in range(getattr(image, "n_frames", 1)):
        image.seek(k)
        frames.append(image.convert("RGBA").tobytes())
    return frames


@pytest.mark.parametrize("name,ctype,build,removed", [
    ("a.jpg", "image/jpeg", jpeg_with_shells, {"comment", "app2", "icc", "xmp"}),
    ("a.png", "image/png", png_with_shells, {"prVt", "tEXt"}),
    ("a.gif", "image/gif", gif_with_shells, {"comment", "application"}),
    ("a.webp", "image/webp", webp_with_shells, {"exif", "xmp", "unknown-chunk"}),
])
def test_disarm_leaves_no_hiding_place_and_the_image_still_decodes(captured, name, ctype, build, removed):
    fw, capture = captured
    original = build()
    assert SHELL in original and SHELL not in original[:4096]
    r = post(fw, "/avatar", "avatar", name, original, ctype)
    assert r.status_code == 200, r.text
    forwarded = capture.last_file()
    assert SHELL not in forwarded and b"<?php" not in forwarded
    assert pixels(forwarded) == pixels(original)
    part = last(fw)["parts"][0]
    assert part["action"] == "disarm" and removed <= set(part["disarmed"]), part
    if ctype != "image/gif":  # the sRGB profile Pillow embedded is a real one: kept
        assert Image.open(io.BytesIO(forwarded)).info.get("icc_profile") == SRGB
    if ctype == "image/gif":
        assert Image.open(io.BytesIO(forwarded)).info.get("loop") == 0
    if ctype == "image/webp":
        assert struct.unpack("<I", forwarded[4:8])[0] == len(forwarded) - 8
        assert forwarded[20] & (0x08 | 0x04) == 0 and forwarded[20] & 0x20
