"""The checks a team migrating from ModSecurity + OWASP CRS expects, through the real binary (docs/rules.md,
*Compared with OWASP CRS*): every extension judged, restricted filenames, name and filename characters.

Each refusal is checked end to end: status, JSON error body, the audit record's violation kind, and that the
upstream never got a complete body.
"""

import urllib.parse

import pytest

from policy_helpers import Formwall, Part, formwall_with_rules, multipart, new_id, post_form, request

RULES = """
route /crs {
    restricted-filenames "*.bak";
    file doc { max 64KiB; }
    field note;
    field *;
}
route /legacy {
    filename-deny-chars none;
    name-deny-chars none;
    allow-filename restricted-name;
    file doc { max 64KiB; extensions .png; }
    field *;
}
route /strict {
    name-allow-chars "a-z_";
    field *;
}
route /no-references {
    character-references reject;
    file doc { max 64KiB; }
    field *;
}
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    yield from formwall_with_rules(tmp_path_factory, "crs", RULES)


def refused(fw: Formwall, resp, rid: str, status: int, kind: str, detail: str | None = None):
    assert resp.status == status, resp
    body = resp.json()
    assert body["error"] == kind and body["status"] == status and body["request_id"] == rid, body
    if detail is not None:
        assert body["detail"] == detail, body
    record = fw.wait_audit(rid)
    assert record["decision"] == "reject" and record["reason"] == kind, record
    assert kind in [v["kind"] for v in record["violations"]], record
    fw.upstream.assert_no_complete_body(rid)
    return body


def passed(fw: Formwall, resp, rid: str):
    assert resp.status == 200, resp
    (seen,) = fw.upstream.records(rid)
    assert seen["body_complete"], seen
    return seen


@pytest.mark.parametrize("filename", ["shell.php.jpg", "photo. php", "a.asp;.jpg", "shell.pHp", "a.php::$DATA"])
def test_every_extension_is_judged(env, filename):
    rid = new_id()
    resp = post_form(env.port, "/crs", [Part("doc", b"GIF89a", filename=filename)], rid)
    refused(env, resp, rid, 415, "filename_dangerous_extension")


def test_the_stem_is_not_an_extension(env):
    rid = new_id()
    seen = passed(env, post_form(env.port, "/crs", [Part("doc", b"hello", filename="php.txt")], rid), rid)
    assert [f["filename"] for f in seen["files"]] == ["php.txt"], seen


@pytest.mark.parametrize("filename,detail", [
    (".htaccess", None),
    ("web.config", "restricted filename 'web.config'"),
    ("sess_abc", "restricted filename 'sess_abc' (a session file)"),
    ("DB.BAK", "restricted filename 'db.bak' matches \"*.bak\""),
])
def test_restricted_filenames(env, filename, detail):
    rid = new_id()
    resp = post_form(env.port, "/crs", [Part("doc", b"x", filename=filename)], rid)
    if filename == ".htaccess":
        # `.htaccess` is also a dangerous extension, which comes first.
        refused(env, resp, rid, 415, "filename_dangerous_extension")
        record = env.wait_audit(rid)
        assert [v["kind"] for v in record["violations"]] == ["filename_dangerous_extension"], record
    else:
        refused(env, resp, rid, 403, "filename_restricted_name", detail)


def test_filename_characters(env):
    rid = new_id()
    resp = post_form(env.port, "/crs", [Part("doc", b"x", filename="a;b.txt")], rid)
    refused(env, resp, rid, 400, "filename_character", "filename character U+003B ';' at position 2 is denied")
    rid = new_id()
    passed(env, post_form(env.port, "/crs", [Part("doc", b"x", filename="John's CV.txt")], rid), rid)


def test_multipart_name_characters(env):
    rid = new_id()
    resp = post_form(env.port, "/crs", [Part("no'te", b"x")], rid)
    refused(env, resp, rid, 400, "name_character", "name character U+0027 ''' at position 3 is denied")


def test_urlencoded_name_characters(env):
    rid = new_id()
    body = urllib.parse.urlencode({"ok": "1", "a=b": "2"}).encode()
    resp = request(env.port, "POST", "/legacy", [("Content-Type", "application/x-www-form-urlencoded"),
                                                 ("X-Request-Id", rid)], body)
    passed(env, resp, rid)
    rid = new_id()
    resp = request(env.port, "POST", "/strict", [("Content-Type", "application/x-www-form-urlencoded"),
                                                 ("X-Request-Id", rid)], b"user_id=1&User=2")
    refused(env, resp, rid, 400, "name_character",
            "name character U+0055 'U' at position 1 is not in the allowed characters")


def test_a_route_can_relax_everything(env):
    rid = new_id()
    parts = [Part("a;b", b"1"), Part("doc", b"\x89PNG\r\n\x1a\n", filename="x;y.png", content_type="image/png")]
    seen = passed(env, post_form(env.port, "/legacy", parts, rid), rid)
    assert seen["fields"] == {"a;b": ["1"]}, seen


# Part names CRS 920120 lets through (its regression tests 920120-18, -34 and -38, in the coreruleset repository's
# tests/regression/tests/REQUEST-920-PROTOCOL-ENFORCEMENT/920120.yaml), and numeric references.
REFERENCE_NAMES = ["zzz&auml;&euml;&iuml;&ouml;&uuml;&yuml;&Auml;&Euml;&Iuml;&Ouml;&Uuml;&Yuml;zzz",
                   "zzz&oslash;&Oslash;&amp;&AMP;&nbsp;&apos;zzz", "zzz&amp;zzz", "caf&#233;", "caf&#xE9;"]


@pytest.mark.parametrize("name", REFERENCE_NAMES)
def test_character_references_pass_in_names_and_filenames(env, name):
    rid = new_id()
    parts = [Part(name, b"1"), Part("doc", b"hello", filename=name + ".txt", content_type="text/plain")]
    seen = passed(env, post_form(env.port, "/crs", parts, rid), rid)
    assert seen["fields"] == {name: ["1"]}, seen
    assert [f["filename"] for f in seen["files"]] == [name + ".txt"], seen


@pytest.mark.parametrize("name,position", [("a;b", 2), ("&;", 2), ("&#;", 3), ("&#x;", 4), ("& amp;", 6),
                                           ("&amp;fi;zzz", 8)])
def test_a_semicolon_that_ends_no_reference_is_refused(env, name, position):
    rid = new_id()
    resp = post_form(env.port, "/crs", [Part(name, b"1")], rid)
    refused(env, resp, rid, 400, "name_character", f"name character U+003B ';' at position {position} is denied")
    rid = new_id()
    resp = post_form(env.port, "/crs", [Part("doc", b"x", filename=name + ".txt")], rid)
    refused(env, resp, rid, 400, "filename_character",
            f"filename character U+003B ';' at position {position} is denied")


def test_a_reference_does_not_hide_an_extension(env):
    rid = new_id()
    resp = post_form(env.port, "/crs", [Part("doc", b"<?php ?>", filename="shell&amp;.php")], rid)
    refused(env, resp, rid, 415, "filename_dangerous_extension", "dangerous extension .php")


def test_character_references_reject_judges_every_semicolon(env):
    rid = new_id()
    resp = post_form(env.port, "/no-references", [Part("zzz&auml;zzz", b"1")], rid)
    refused(env, resp, rid, 400, "name_character", "name character U+003B ';' at position 9 is denied")
    rid = new_id()
    resp = post_form(env.port, "/no-references", [Part("doc", b"x", filename="caf&#233;.txt")], rid)
    refused(env, resp, rid, 400, "filename_character", "filename character U+003B ';' at position 9 is denied")
