"""Archive members are judged like uploaded filenames (docs/rules.md, "Archives"): every extension of a member's
name against the dangerous list, restricted names and dotfiles, with the rule's own allowances; ZIP symbolic
links whose target escapes are `archive_traversal` as in tar; under `deny-embedded-markup` member content is
scanned for markup. ZIPs built here with Python's zipfile (deflated), through the real `formwall serve`.
"""

from __future__ import annotations

import io
import stat
import zipfile

import pytest
import requests

from e2e_helpers import IO_TIMEOUT, new_request_id, wait_audit_record

RULES = """
route /docs { file doc { max 20MiB; } }
route /scan { file doc { max 20MiB; deny-embedded-markup; } }
route /site { file bundle { allow-filename dangerous-extension restricted-name; } }
"""

SCRIPT_HTML = b"<html><body><script>fetch('/admin').then(r => r.text())</script></body></html>"
SCRIPT_SVG = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(document.domain)</script></svg>'
SHELL = b"<?php system($_GET['c']); ?>"


@pytest.fixture
def fw(upstream, formwall_factory, tmp_path):
    rules = tmp_path / "members.rules"
    rules.write_text(RULES)
    audit = tmp_path / "audit.log"
    f = formwall_factory(upstream.url, "--rules", str(rules), "--audit-log", str(audit))
    f.audit = audit
    return f


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def zip_with_link(name: str, target: str) -> bytes:
    """A ZIP holding a Unix symbolic link, as `zip -y` writes one: mode S_IFLNK in the external attributes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("readme.txt", b"see the link")
        info = zipfile.ZipInfo(name)
        info.create_system = 3
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(info, target.encode())
    return buf.getvalue()


DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def post(fw, path: str, name: str, data: bytes, filename="a.zip", ctype="application/zip") -> requests.Response:
    fw.last_request_id = new_request_id()
    return requests.post(fw.url + path, files={name: (filename, data, ctype)},
                         headers={"X-Request-Id": fw.last_request_id}, timeout=IO_TIMEOUT)


MEMBERS = ["shell.php5", "x.php7", "x.pht", "x.phps", "config.inc", "x.asp", "x.aspx", "x.jsp", "x.jspx",
           "x.cfm", "x.shtml", "x.php8", "x.phtm", "x.pgif", "x.cer", "x.asa", "images/a.php.jpg",
           ".htaccess", "conf/.user.ini", "web.config"]


@pytest.mark.parametrize("member", MEMBERS)
def test_a_member_named_like_a_refused_upload_is_refused(fw, member):
    r = post(fw, "/docs", "doc", zip_bytes({"readme.txt": b"hello", member: SHELL}))
    assert r.status_code == 415, (member, r.text)
    assert r.json()["error"] == "archive_forbidden_member", r.text
    detail = wait_audit_record(fw.audit, fw.last_request_id, IO_TIMEOUT)["violations"][0]["detail"]
    assert member.split("/")[-1] in detail or "dangerous extension" in detail, detail


@pytest.mark.parametrize("member,data", [("index.html", SCRIPT_HTML), ("image.svg", SCRIPT_SVG)])
def test_markup_members_are_refused_by_name(fw, member, data):
    r = post(fw, "/docs", "doc", zip_bytes({member: data}))
    assert r.status_code == 415 and r.json()["error"] == "archive_forbidden_member", r.text


def test_nested_zip_and_docx_members_are_judged(fw):
    nested = zip_bytes({"inner.zip": zip_bytes({"shell.php5": SHELL})})
    r = post(fw, "/docs", "doc", nested)
    assert r.status_code == 415 and r.json()["error"] == "archive_forbidden_member", r.text
    rec = wait_audit_record(fw.audit, fw.last_request_id, IO_TIMEOUT)
    assert "inner.zip!/shell.php5" in rec["violations"][0]["detail"], rec["violations"]
    docx = zip_bytes({"[Content_Types].xml": b'<?xml version="1.0"?><Types/>',
                      "word/document.xml": b'<?xml version="1.0"?><w:document/>', "word/shell.php5": SHELL})
    r = post(fw, "/docs", "doc", docx, filename="report.docx", ctype=DOCX)
    assert r.status_code == 415 and r.json()["error"] == "archive_forbidden_member", r.text


def test_a_rule_that_allows_the_names_allows_the_members(fw):
    bundle = zip_bytes({"shell.php5": b"x", ".htaccess": b"Options -Indexes\n", "index.html": b"<p>hi</p>"})
    assert post(fw, "/site", "bundle", bundle).status_code == 200
    plain = zip_bytes({"photos/cat.jpg": b"\xff\xd8\xff", "notes.txt": b"x"})
    assert post(fw, "/docs", "doc", plain).status_code == 200


@pytest.mark.parametrize("target", ["/etc/passwd", "../../../../etc/passwd", "/var/www/html"])
def test_escaping_zip_symlinks_are_traversal(fw, target):
    r = post(fw, "/docs", "doc", zip_with_link("link", target))
    assert r.status_code == 400 and r.json()["error"] == "archive_traversal", (target, r.text)
    rec = wait_audit_record(fw.audit, fw.last_request_id, IO_TIMEOUT)
    assert "link target escapes" in rec["violations"][0]["detail"], rec["violations"]


def test_a_symlink_inside_the_archive_passes(fw):
    assert post(fw, "/docs", "doc", zip_with_link("latest", "v2/readme.txt")).status_code == 200


def test_member_content_is_scanned_under_deny_embedded_markup(fw):
    asp = b"Meeting notes\n" * 400 + b'<% eval request("c") %>\n' + b"end\n" * 100
    jsp_txt = zip_bytes({"notes.txt": asp})
    assert post(fw, "/docs", "doc", jsp_txt).status_code == 200
    r = post(fw, "/scan", "doc", jsp_txt)
    assert r.status_code == 415 and r.json()["error"] == "archive_forbidden_member", r.text
    rec = wait_audit_record(fw.audit, fw.last_request_id, IO_TIMEOUT)
    assert "member carries ASP/JSP code (<%)" in rec["violations"][0]["detail"], rec["violations"]
    # A text member with script is refused too; an XML member's own tags are not embedded markup.
    r = post(fw, "/scan", "doc", zip_bytes({"readme.txt": b"x" * 5000 + b"<script>alert(1)</script>"}))
    assert r.status_code == 415, r.text
    docx = zip_bytes({"[Content_Types].xml": b'<?xml version="1.0"?><Types/>',
                      "word/document.xml": b'<?xml version="1.0"?><w:document><w:body/></w:document>'})
    assert post(fw, "/scan", "doc", docx, filename="r.docx", ctype=DOCX).status_code == 200
