"""scripts/corpus, the harness docs/rules.md (*Against real attack files*) tells a team to test a policy with
against public attack corpora, run against the real binary. The corpora are not shipped: every file here is built
by the test, and the CRS-shaped YAML and WAFFLED-shaped raw requests are written here after the layouts of those
projects' files (coreruleset's tests/regression/tests/*/*.yaml in go-ftw's two layouts, the WAFFLED repository's
bypass-database/*.raw)."""

from __future__ import annotations

import struct
import subprocess
import sys
import zlib

import pytest

from e2e_helpers import HOST, REPO, START_TIMEOUT, Formwall, free_port, port_accepts
from policy_helpers import wait_for

SCRIPTS = REPO / "scripts" / "corpus"

RULES = """
route /api/avatar { file avatar { max 1MiB; types image/png image/gif; deny-embedded-markup; } }
route /api/notes { file doc { max 1MiB; } }
route / { unknown allow; }
"""


def png() -> bytes:
    """A real 1x1 RGB PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
            + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corpus")
    (tmp / "policy.rules").write_text(RULES)
    port = free_port()
    bodies = tmp / "bodies"
    upstream = subprocess.Popen([sys.executable, str(SCRIPTS / "upstream.py"), "--port", str(port),
                                 "--bodies", str(bodies)], stdin=subprocess.DEVNULL)
    fw = None
    try:
        wait_for(lambda: port_accepts(port) or upstream.poll() is not None, START_TIMEOUT, "the recording upstream")
        assert upstream.poll() is None, "the recording upstream exited"
        fw = Formwall(tmp, f"http://{HOST}:{port}", ["--rules", str(tmp / "policy.rules")])
        yield fw, bodies, tmp
    finally:
        if fw is not None:
            fw.terminate()
        upstream.terminate()
        upstream.wait(timeout=10)


def run(*argv) -> list[list[str]]:
    done = subprocess.run([sys.executable, *map(str, argv)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [line.split("\t") for line in done.stdout.splitlines()]


def test_the_upstream_keeps_bodies_private(harness):
    _, bodies, _ = harness
    assert bodies.stat().st_mode & 0o777 == 0o700


def test_send_reports_each_verdict_and_what_reached_the_upstream(harness):
    fw, bodies, tmp = harness
    corpus = tmp / "files"
    corpus.mkdir()
    (corpus / "pixel.png").write_bytes(png())
    (corpus / "notes.txt").write_bytes(b"hello <script>alert(1)</script>\n")
    (corpus / "polyglot.gif").write_bytes(b"GIF89a<?php system($_GET['c']); ?>")
    avatar = {row[3]: row for row in run(SCRIPTS / "send.py", "--url", fw.url + "/api/avatar", "--field", "avatar",
                                         "--bodies", bodies, corpus)}
    assert {name: row[1:3] for name, row in avatar.items()} == {
        "pixel.png": ["200", "-"], "notes.txt": ["415", "-"], "polyglot.gif": ["415", "-"]}, avatar
    assert (bodies / avatar["pixel.png"][0]).stat().st_mode & 0o777 == 0o600
    # A route that judges no content forwards the script; the line says it arrived.
    notes = {row[3]: row for row in run(SCRIPTS / "send.py", "--url", fw.url + "/api/notes", "--field", "doc",
                                        "--bodies", bodies, corpus / "notes.txt")}
    assert notes["notes.txt"][1:3] == ["200", "PAYLOAD"], notes


def test_send_tries_every_name_of_a_list(harness):
    fw, bodies, tmp = harness
    (tmp / "pixel.png").write_bytes(png())
    # An extension list (fuzzdb's are one `.ext` a line) and whole names, comments skipped.
    (tmp / "names.txt").write_text("# names\n.php5\nshell.php.png\na.asp;.png\nshell&amp;.php\n"
                                   "r&eacute;sum&eacute;.png\nphoto.png\n")
    rows = run(SCRIPTS / "send.py", "--url", fw.url + "/api/avatar", "--field", "avatar", "--bodies", bodies,
               "--names", tmp / "names.txt", "--type", "image/png", tmp / "pixel.png")
    assert [(row[3], row[1]) for row in rows] == [
        ("shell.php5", "415"), ("shell.php.png", "415"), ("a.asp;.png", "415"), ("shell&amp;.php", "415"),
        ("r&eacute;sum&eacute;.png", "200"), ("photo.png", "200")], rows


CRS_V1 = """---
meta: {author: "this test, in go-ftw 1's layout"}
tests:
  - test_title: 920120-like-1
    desc: a name with entities, which CRS 920120 lets through
    stages:
      - stage:
          input:
            dest_addr: 127.0.0.1
            method: POST
            port: 80
            uri: /crs
            headers:
              Host: localhost
              Content-Type: multipart/form-data; boundary=--------b
            data: |
              ----------b
              Content-Disposition: form-data; name="zzz&auml;&euml;zzz"; filename="test"
              Content-Type: application/octet-stream

              helloworld
              ----------b--
          output:
            no_log_contains: id "920120"
  - test_title: 920120-like-2
    stages:
      - stage:
          input:
            method: POST
            uri: /crs
            headers:
              Content-Type: multipart/form-data; boundary=--------b
            data: |
              ----------b
              Content-Disposition: form-data; name="&amp;fi;zzz"; filename="test"
              Content-Type: application/octet-stream

              helloworld
              ----------b--
          output:
            log_contains: id "920120"
"""

CRS_V2 = """---
meta: {author: "this test, in go-ftw 2's layout"}
rule_id: 922100
tests:
  - test_id: 1
    stages:
      - input:
          method: POST
          uri: /post?x=1
          headers:
            Content-Type: multipart/form-data; boundary=boundary
          data: |
            --boundary
            Content-disposition: form-data; name="_charset_"

            utf-7
            --boundary--
        output:
          log:
            expect_ids: [922100]
  - test_id: 2
    stages:
      - input:
          method: POST
          uri: /post
          headers:
            Content-Type: multipart/form-data; boundary=boundary
          data: |
            --boundary
            Content-disposition: form-data; name="_charset_"

            utf-8
            --boundary--
        output:
          log:
            no_expect_ids: [922100]
      - input:
          encoded_request: UE9TVCAvIEhUVFAvMS4xDQoNCg==
        output:
          log:
            no_expect_ids: [922100]
"""


def test_crs_replay_reads_both_go_ftw_layouts(harness):
    fw, _, tmp = harness
    (tmp / "v1.yaml").write_text(CRS_V1)
    (tmp / "v2.yaml").write_text(CRS_V2)
    rows = run(SCRIPTS / "crs_replay.py", "--target", f"{HOST}:{fw.port}", tmp / "v1.yaml", tmp / "v2.yaml")
    assert [row[1:] for row in rows] == [
        ["920120-like-1.1", "crs-passes", "200"], ["920120-like-2.1", "crs-fires", "400"],
        ["1.1", "crs-fires", "400"], ["2.1", "crs-passes", "200"], ["2.2", "crs-passes", "skipped"]], rows


def test_raw_replay_sends_the_bytes_as_written(harness):
    fw, bodies, tmp = harness
    body = (b'--real\r\ncontent-disposition: form-data; name="_charset_"\r\n\r\nutf-8\r\n--real\r\n'
            b'content-disposition: form-data; name="field1"\r\nContent-Type: text/plain;charset=UTF-8\r\n\r\n'
            b"hello\r\n--real--")
    head = (b"POST /elsewhere HTTP/1.1\r\nHost: waf.example\r\nConnection: close\r\nX-Request-Id: raw1\r\n"
            b"Content-Type: multipart/form-data; boundary=real\r\n")
    plain = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    encoded = body.replace(b'name="field1"\r\n', b'name="field1"\r\ncontent-transfer-encoding: Binary\r\n')
    with_cte = head.replace(b"raw1", b"raw2") + b"Content-Length: %d\r\n\r\n" % len(encoded) + encoded
    (tmp / "requests.raw").write_text("\n".join([repr(plain), "not a request", repr(with_cte)]) + "\n")
    rows = run(SCRIPTS / "raw_replay.py", "--target", f"{HOST}:{fw.port}", "--path", "/form", tmp / "requests.raw")
    assert rows == [["1", "HTTP/1.1 200 OK"], ["3", "HTTP/1.1 400 Bad Request"]], rows
    assert b"hello" in (bodies / "raw1").read_bytes()
    assert not (bodies / "raw2").exists()
