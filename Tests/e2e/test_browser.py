"""A real browser submits a real form through Formwall.

Headless Chromium (Debian's `chromium`) driven by Selenium through Debian's `/usr/bin/chromedriver`; Selenium
Manager is never asked for anything (the driver and browser paths are given, and SE_OFFLINE is set), so
nothing is downloaded. Firefox is not covered: Debian 12 packages `firefox-esr` but not geckodriver.

The form page comes from a tiny static server in this file; its form posts to Formwall, which applies
`rules/browser.rules` and forwards to the echo upstream (upstream_app.py), whose JSON log is the oracle for what
arrived. The browser fills the file inputs with files from tmp_path, with non-ASCII names.

* allowed: several files (one input with `multiple`), a PNG and a non-ASCII text field arrive intact
  (names, sizes, sha256, field value);
* empty file inputs: a typed input left empty ("no file chosen") is left out, a chosen 0-byte file forwarded;
* rejected for its type: the browser shows Formwall's HTML error page (status, reason, part, request id);
* rejected for its size (64 MiB and a sparse 1 GiB file against a 1 MiB rule): the same page, not a network
  error, which needs Formwall to read (drain) the rest of the body before it closes.

Every wait is bounded: page-load and script timeouts on the driver, WebDriverWait deadlines, pytest-timeout.
"""

from __future__ import annotations

import hashlib
import html
import os
import struct
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from e2e_helpers import HOST, RawConn, json_lines, wait_until

RULES = Path(__file__).resolve().parent / "rules" / "browser.rules"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
PAGE_LOAD_TIMEOUT = 30
SUBMIT_TIMEOUT = 45
NAVIGATION_ACCEPT = ("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,"
                     "*/*;q=0.8,application/signed-exchange;v=b3;q=0.7")  # Chromium's, for a form submission
COMMENT = "Grüße aus Köln, 東京 — ✓ “quoted” & <tag>"

FORM_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>upload form</title></head>
<body>
<form id="form" method="post" enctype="multipart/form-data" action="{action}">
<label>Comment <input type="text" name="comment" id="comment"></label>
<label>Attachments <input type="file" name="attachments" id="attachments" multiple></label>
<label>Photo <input type="file" name="photo" id="photo"></label>
<label>Big <input type="file" name="big" id="big"></label>
<button type="submit" id="send">Send</button>
</form>
</body></html>
"""


class _FormPage(BaseHTTPRequestHandler):
    """GET /form?action=URL: the form page, posting to URL."""

    def do_GET(self):  # noqa: N802 (http.server's naming)
        query = parse_qs(urlsplit(self.path).query)
        body = FORM_PAGE.format(action=html.escape(query.get("action", ["/"])[0])).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture(scope="module")
def form_site():
    server = ThreadingHTTPServer((HOST, 0), _FormPage)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield f"http://{HOST}:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    for path in (CHROMIUM, CHROMEDRIVER):
        assert os.access(path, os.X_OK), f"{path} is missing: scripts/install-deps.sh installs chromium-driver"
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not reach the network
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-proxy-server", "--window-size=1024,768",
                f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(arg)
    service = Service(executable_path=CHROMEDRIVER, log_output=str(tmp_path_factory.mktemp("chromedriver") / "log"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT)
    driver.set_script_timeout(10)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def site(form_site, upstream, formwall_factory, tmp_path):
    """Formwall with rules/browser.rules in front of the echo upstream, and the form page posting to it."""
    audit = tmp_path / "audit.log"
    fw = formwall_factory(upstream.url, "--rules", str(RULES), "--audit-log", str(audit))
    return fw, upstream, audit, f"{form_site}/form?action={fw.url}/upload"


def with_action(page: str, path: str) -> str:
    return page.rsplit("/", 1)[0] + path


def png_bytes(width: int = 3, height: int = 2) -> bytes:
    """A small valid PNG (RGB, 8 bits)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + bytes(b for x in range(width) for b in (x * 80, y * 120, 200)) for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def describe(path: Path) -> dict:
    data = path.read_bytes()
    return {"filename": path.name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def submit(driver, page_url: str, *, comment: str | None = None, files: dict[str, list[Path]]) -> None:
    """Loads the form, fills it like a user (typing, choosing files) and submits; returns once the answer loaded."""
    driver.get(page_url)
    if comment is not None:
        driver.find_element(By.ID, "comment").send_keys(comment)
    for name, paths in files.items():
        driver.find_element(By.ID, name).send_keys("\n".join(str(p) for p in paths))
    driver.find_element(By.ID, "send").click()
    # The answer's document has replaced the form page once the URL is no longer the form's and it has loaded.
    wait = WebDriverWait(driver, SUBMIT_TIMEOUT)
    wait.until(lambda d: d.current_url != page_url)
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")


def forwarded(upstream, driver) -> dict:
    """The upstream's record of the form post. The upstream logs a request before answering it, and the browser
    has the answer, so the record is there now; if it is not, the browser shows why."""
    recs = [r for r in upstream.requests() if r.get("path") == "/upload"]
    assert len(recs) == 1, f"the form post did not reach the upstream once; the browser shows {page_text(driver)!r}"
    return recs[0]


def page_text(driver) -> str:
    return driver.find_element(By.TAG_NAME, "body").text


def audit_records(audit: Path) -> list[dict]:
    return json_lines(audit)


def wait_audit(audit: Path, predicate, timeout: float = 10) -> dict:
    return wait_until(lambda: next((r for r in audit_records(audit) if predicate(r)), None), timeout,
                      what="an audit record")


def assert_error_page(driver, audit: Path, *, status: int, reason: str, part: str | None, limit: int | None = None):
    """The browser shows Formwall's HTML error page (not a network error page) with the audit record's request id."""
    text = page_text(driver)
    assert driver.title.startswith(f"{status} "), f"not Formwall's error page: title {driver.title!r}, text {text!r}"
    rec = wait_audit(audit, lambda r: r.get("reason") == reason)
    assert rec["status"] == status
    assert f"Status\n{status}\n" in text, text
    assert f"Reason\n{reason}\n" in text, text
    if part is None:
        assert "Part" not in text, text
    else:
        assert f"Part\n{part}\n" in text, text
    if limit is not None:
        assert f"Limit\n{limit}\n" in text, text
    assert text.endswith(f"Request id\n{rec['request_id']}"), (rec["request_id"], text)
    return rec


def bytes_read(pid: int) -> int:
    """Bytes the process tree (supervisor and proxy process) read through read(2), sockets included."""
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/io") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("rchar:"))
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, StopIteration):
            pass
    return total


def test_allowed_upload_with_several_files_arrives_intact(chromium, site, tmp_path):
    fw, upstream, audit, page = site
    files = tmp_path / "files"
    files.mkdir()
    resume = files / "résumé €.txt"
    resume.write_bytes("".join(f"{i:05d} Lebenslauf — expérience, 経歴\n" for i in range(1500)).encode())
    notes = files / "notes — 2026 (draft).txt"
    notes.write_bytes("line one\r\nligne deux: déjà vu\n".encode() * 100)
    data = files / "data.bin"
    data.write_bytes(bytes(range(256)) * 64)
    photo = files / "фото.png"
    photo.write_bytes(png_bytes())

    submit(chromium, page, comment=COMMENT, files={"attachments": [resume, notes, data], "photo": [photo]})

    rec = forwarded(upstream, chromium)
    assert rec["body_complete"] is True, rec
    assert rec["fields"] == {"comment": [COMMENT]}, rec["fields"]
    got = {name: [{k: f[k] for k in ("filename", "size", "sha256")} for f in items]
           for name, items in rec["files"].items()}
    assert got["attachments"] == [describe(resume), describe(notes), describe(data)]
    assert got["photo"] == [describe(photo)]
    assert "big" not in got  # "no file chosen" is left out (empty-filename strip)
    # The browser shows the upstream's answer (JSON), with the same request id.
    assert rec["request_id"] in page_text(chromium)
    record = wait_audit(audit, lambda r: r.get("path") == "/upload")
    assert record["decision"] == "modified", record
    assert [p["action"] for p in record["parts"] if p["name"] == "big"] == ["strip"], record


def test_rejected_type_shows_the_html_error_page(chromium, site, tmp_path):
    fw, upstream, audit, page = site
    fake = tmp_path / "pas une image é.txt"
    fake.write_text("just text, not a PNG\n" * 10)
    submit(chromium, page, comment="ok", files={"photo": [fake]})
    rec = assert_error_page(chromium, audit, status=415, reason="type_not_allowed", part="photo")
    assert rec["decision"] == "reject"
    assert not [r for r in upstream.requests() if r.get("path") == "/upload" and r.get("body_complete")]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("size", [64 << 20, 1 << 30], ids=["64MiB", "1GiB-sparse"])
def test_too_large_file_shows_the_html_error_page(chromium, site, tmp_path, size):
    fw, upstream, audit, page = site
    big = tmp_path / "größer als erlaubt.bin"
    with open(big, "wb") as f:
        f.truncate(size)  # sparse: no disk or page cache needed, the browser reads zeros
    photo = tmp_path / "photo.png"
    photo.write_bytes(png_bytes())
    read_before = bytes_read(fw.proc.pid)
    submit(chromium, page, comment="big", files={"photo": [photo], "big": [big]})
    rec = assert_error_page(chromium, audit, status=413, reason="file_too_large", part="big", limit=1 << 20)
    # Formwall reads no more of the body than the rejection needed plus its lingering budget (--linger-bytes,
    # 64 MiB by default): wait until its reading has stopped, then bound it.
    last = [bytes_read(fw.proc.pid)]
    def quiet():
        now = bytes_read(fw.proc.pid)
        settled = now == last[0]
        last[0] = now
        return settled
    wait_until(quiet, 60, interval=0.5, what="Formwall to stop reading the rejected upload")
    read = last[0] - read_before
    assert read <= rec["bytes_in"] + (64 << 20) + (2 << 20), f"read {read} bytes of a {size}-byte upload"
    assert read < size or size <= (64 << 20)


def test_empty_named_file_is_allowed(chromium, site, tmp_path):
    """A chosen 0-byte file (declared text/plain) has no content to contradict its type (docs/rules.md,
    "Empty file parts"); the typed `photo` input is left empty at the same time."""
    fw, upstream, audit, page = site
    empty = tmp_path / "leer.txt"
    empty.write_bytes(b"")
    submit(chromium, page, comment="leer", files={"attachments": [empty]})
    rec = forwarded(upstream, chromium)
    assert [(f["filename"], f["size"]) for f in rec["files"]["attachments"]] == [("leer.txt", 0)]
    record = wait_audit(audit, lambda r: r.get("path") == "/upload")
    # The chosen empty file is forwarded; the inputs left empty are left out.
    assert {p["name"]: p["action"] for p in record["parts"]} == {
        "comment": "forward", "attachments": "forward", "photo": "strip", "big": "strip"}, record


def test_empty_optional_typed_input_is_allowed(chromium, site, tmp_path):
    """An optional `types image/png` input left empty ("no file chosen") is not refused: it is left out
    (`empty-filename strip`), so every framework reads the input as absent."""
    fw, upstream, audit, page = site
    submit(chromium, page, comment="no photo", files={})
    rec = forwarded(upstream, chromium)
    assert "photo" not in rec["files"], rec
    record = wait_audit(audit, lambda r: r.get("path") == "/upload")
    assert record["decision"] == "modified" and record["status"] == 200, record
    assert {v["kind"] for v in record["violations"]} == {"anomaly_empty_filename"}, record
    assert [p["action"] for p in record["parts"] if p["name"] == "photo"] == ["strip"], record


@pytest.mark.timeout(180)
@pytest.mark.parametrize("size", [64 << 20, 1 << 30], ids=["64MiB", "1GiB-sparse"])
def test_body_over_limit_shows_the_html_error_page(chromium, site, tmp_path, size):
    """body-max is crossed by Content-Length: Formwall answers 413 before reading a body byte and closes."""
    fw, upstream, audit, page = site
    big = tmp_path / "ganz groß.bin"
    with open(big, "wb") as f:
        f.truncate(size)
    submit(chromium, with_action(page, "/small"), comment="big", files={"big": [big]})
    assert_error_page(chromium, audit, status=413, reason="body_too_large", part=None, limit=1 << 20)


# ------------------------------------------------------------------ the negotiation itself, seen on the wire

@pytest.mark.parametrize("accept,html", [
    (NAVIGATION_ACCEPT, True),
    ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", True),  # Firefox, Safari
    ("*/*", False),  # curl
    ("application/json", False),
    ("text/html;q=0", False),
    (None, False),
])
def test_error_format_follows_accept(site, accept, html):
    fw, upstream, audit, page = site
    head = f"GET /upload HTTP/1.1\r\nHost: {HOST}\r\nX-Request-Id: neg-1\r\n"
    if accept is not None:
        head += f"Accept: {accept}\r\n"
    with RawConn(fw.port) as conn:
        conn.send((head + "\r\n").encode())
        resp = conn.read_response()
    assert resp.status == 405
    assert resp.header("X-Request-Id") == "neg-1"
    assert resp.header("Connection") == "close"
    assert resp.header("Vary") == "Accept"
    if html:
        assert resp.header("Content-Type") == "text/html; charset=utf-8"
        text = resp.body.decode()
        assert text.startswith("<!DOCTYPE html>")
        assert "<dt>Reason</dt><dd>method_not_allowed</dd>" in text and "<dd>neg-1</dd>" in text
    else:
        assert resp.header("Content-Type") == "application/json"
        assert resp.json()["error"] == "method_not_allowed" and resp.json()["request_id"] == "neg-1"


def test_head_parse_error_is_json_even_for_a_browser(site):
    fw, upstream, audit, page = site
    with RawConn(fw.port) as conn:
        conn.send(f"GET /upload HTTP/1.1\r\nHost: {HOST}\r\nAccept: {NAVIGATION_ACCEPT}\r\n"
                  "Bad Header: x\r\n\r\n".encode())
        resp = conn.read_response()
    assert resp.status == 400
    assert resp.header("Content-Type") == "application/json"
    assert resp.header("Vary") is None
