"""Archive inspection end to end: ZIP (and OOXML), gzip, tar.gz file parts built here with Python's zipfile, gzip
and tarfile, posted through the real `formwall serve` with a policy (docs/rules.md, "Archives"). The safe defaults
apply with no archive directive at all; a rule relaxes one only explicitly.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import zipfile

import pytest
import requests

from e2e_helpers import IO_TIMEOUT, new_request_id, wait_audit_record

RULES = """
route /upload {
    body-max 20MiB;
    field caption;
    file doc { max 20MiB; }
}
route /plugins {
    file bundle { max 50MiB; archive-allow executables; archive-deny-extensions php; archive-ratio-max 5000; }
}
route /tools {
    file kit { types application/zip application/x-elf; }
}
route /hold {
    upstream-body hold;
    file doc { max 50MiB; action strip; }
}
"""


@pytest.fixture
def fw(upstream, formwall_factory, tmp_path):
    rules = tmp_path / "archives.rules"
    rules.write_text(RULES)
    audit = tmp_path / "audit.log"
    f = formwall_factory(upstream.url, "--rules", str(rules), "--audit-log", str(audit))
    f.audit = audit
    return f


def zip_bytes(members: dict[str, bytes], method=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def tgz_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def post(fw, name: str, data: bytes, path="/upload", filename="a.zip") -> requests.Response:
    fw.last_request_id = new_request_id()
    return requests.post(fw.url + path, data={"caption": "x"} if path == "/upload" else {},
                         files={name: (filename, data, "application/octet-stream")},
                         headers={"X-Request-Id": fw.last_request_id}, timeout=IO_TIMEOUT)


def last(fw) -> dict:
    """The audit record of the last request `post` sent."""
    return wait_audit_record(fw.audit, fw.last_request_id, IO_TIMEOUT)


def test_an_ordinary_docx_like_archive_passes(fw):
    members = {"[Content_Types].xml": b"<Types/>" * 50, "word/document.xml": os.urandom(2000).hex().encode(),
               "docProps/core.xml": b"<core/>"}
    r = post(fw, "doc", zip_bytes(members), filename="report.docx")
    assert r.status_code == 200, r.text
    assert r.json()["files"]["doc"][0]["size"] > 0


@pytest.mark.parametrize("members,kind", [
    ({"../../etc/cron.d/x": b"* * * * * root sh"}, "archive_traversal"),
    ({"/abs/path.txt": b"x"}, "archive_traversal"),
    ({"images/shell.php.jpg": b"<?php ?>"}, "archive_forbidden_member"),
    ({"setup.exe": b"MZ" + bytes(200)}, "archive_forbidden_member"),
    ({"tool": b"\x7fELF" + bytes(200)}, "archive_executable_member"),
    ({"a.txt": b"1", "A.TXT": b"2"}, "archive_duplicate"),
])
def test_dangerous_members_are_refused_by_default(fw, upstream, members, kind):
    r = post(fw, "doc", zip_bytes(members))
    assert r.status_code in (400, 415), r.text
    rec = last(fw)
    assert rec["reason"] == kind, rec
    assert not any(q.get("files", {}).get("doc") and q.get("body_complete") for q in upstream.requests()
                   if q.get("path") == "/upload")


def test_a_zip_bomb_is_refused(fw):
    bomb = zip_bytes({"zeros.bin": bytes(300 << 20)})   # 300 MiB of zeros in about 300 KiB
    assert len(bomb) < 1 << 20
    r = post(fw, "doc", bomb)
    assert r.status_code == 413 and r.json()["error"] == "archive_bomb", r.text


def test_nested_archives_are_limited(fw):
    inner = zip_bytes({"deep.txt": b"x"})
    middle = zip_bytes({"inner.zip": inner}, method=zipfile.ZIP_STORED)
    outer = zip_bytes({"middle.zip": middle}, method=zipfile.ZIP_STORED)
    assert post(fw, "doc", zip_bytes({"inner.zip": inner})).status_code == 200
    r = post(fw, "doc", outer)
    assert r.status_code == 413 and r.json()["error"] == "archive_too_deep", r.text


def test_tar_gz_members_are_checked(fw):
    assert post(fw, "doc", tgz_bytes({"ok/readme.txt": b"hello"}), filename="a.tgz").status_code == 200
    r = post(fw, "doc", tgz_bytes({"../escape.sh": b"#!/bin/sh\n"}), filename="a.tgz")
    assert r.status_code == 400 and r.json()["error"] == "archive_traversal", r.text
    r = post(fw, "doc", gzip.compress(b"\x7fELF" + bytes(300)), filename="a.gz")
    assert r.status_code == 415 and r.json()["error"] == "archive_executable_member", r.text


def test_a_rule_relaxes_a_default_explicitly(fw):
    bundle = zip_bytes({"lib/plugin.so": b"\x7fELF" + bytes(500), "README": b"x"})
    assert post(fw, "bundle", bundle, "/plugins").status_code == 200
    r = post(fw, "bundle", zip_bytes({"admin.php": b"<?php"}), "/plugins")
    assert r.status_code == 415 and r.json()["error"] == "archive_forbidden_member"
    # The ratio is per route: 5000 here.
    assert post(fw, "bundle", zip_bytes({"zeros.bin": bytes(10 << 20)}), "/plugins").status_code == 200


def test_strip_in_hold_mode_keeps_the_archive_from_the_upstream(fw, upstream):
    r = post(fw, "doc", zip_bytes({"../x": b"y"}), "/hold")
    assert r.status_code == 200, r.text
    assert "doc" not in r.json().get("files", {})
    rec = last(fw)
    assert rec["decision"] == "modified" and rec["violations"][0]["kind"] == "archive_traversal"


def test_a_member_after_megabytes_of_data_is_still_seen(fw):
    """The inspection follows the archive across many reads: a bad member after 3 MiB of others is found, and a
    large clean archive passes."""
    big = os.urandom(3 << 20)
    assert post(fw, "doc", zip_bytes({"a.bin": big, "b.bin": big[:1000]})).status_code == 200
    r = post(fw, "doc", zip_bytes({"a.bin": big, "../../evil.sh": b"#!/bin/sh"}))
    assert r.status_code == 400 and r.json()["error"] == "archive_traversal", r.text


def test_an_office_document_with_macros_is_refused_unless_allowed(fw):
    """A .docm: OOXML whose `word/vbaProject.bin` holds VBA macros, code that runs when the document opens."""
    docm = zip_bytes({"[Content_Types].xml": b"<Types/>", "word/document.xml": b"<w:document/>",
                      "word/vbaProject.bin": b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600)})
    r = post(fw, "doc", docm, filename="invoice.docm")
    assert r.status_code == 415 and r.json()["error"] == "archive_executable_member", r.text
    assert "macro" in r.json()["detail"]
    assert post(fw, "bundle", docm, "/plugins", filename="invoice.docm").status_code == 200


def test_a_rule_whose_types_allow_executables_allows_executable_members(fw):
    kit = zip_bytes({"bin/tool": b"\x7fELF" + bytes(300)})
    assert post(fw, "kit", kit, "/tools").status_code == 200
    assert post(fw, "doc", kit).status_code == 415
