"""The semantic anomaly flags (docs/rules.md, "Names, charsets and duplicates") through the real proxy.

Each flag is checked for status, JSON error body and audit line when it rejects, and for what the upstream
received when a route strips or logs it, for multipart and urlencoded bodies alike.
"""

import pytest

from policy_helpers import Part, formwall_with_rules, new_id, post_form, request

RULES = """
route /strict { unknown allow; }
route /named { field role; file docs { repeat 3; } field * ; }
route /strip { unknown allow; anomaly duplicate-name strip; anomaly charset-field strip; }
route /lenient { unknown allow; anomaly name-rewritten allow; anomaly percent-escape log;
                 anomaly invalid-utf8-value log; anomaly part-charset allow; }
route /narrow { unknown allow; part-charsets utf-8; }
"""

URLENCODED = "application/x-www-form-urlencoded"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    yield from formwall_with_rules(tmp_path_factory, "semantic", RULES)


def post_urlencoded(fw, path: str, body: bytes, rid: str):
    return request(fw.port, "POST", path, [("Content-Type", URLENCODED), ("X-Request-Id", rid)], body)


def check_reject(fw, resp, rid: str, kind: str):
    assert resp.status == 400, resp
    answer = resp.json()
    assert answer["error"] == kind and answer["request_id"] == rid, answer
    record = fw.wait_audit(rid)
    assert record["decision"] == "reject" and record["reason"] == kind, record
    fw.upstream.assert_no_complete_body(rid)
    return record


@pytest.mark.parametrize("parts, kind", [
    ([Part("user.role", b"admin")], "anomaly_name_rewritten"),
    ([Part(" role", b"admin")], "anomaly_name_rewritten"),
    ([Part("a[b", b"1")], "anomaly_name_rewritten"),
    ([Part("a", b"1"), Part("a[b]", b"2")], "anomaly_name_collision"),
    ([Part("role%00x", b"1")], "anomaly_percent_escape"),
    ([Part("f", b"x", "a%22b.txt", "text/plain")], "anomaly_percent_escape"),
    ([Part("_charset_", b"UTF-7")], "anomaly_charset_field"),
    ([Part("t", b"caf\xe9", content_type="text/plain; charset=UTF-7")], "anomaly_part_charset"),
    ([Part("t", b"caf\xe9")], "anomaly_invalid_utf8_value"),
], ids=["dot", "leading-space", "unbalanced", "collision", "percent-name", "percent-filename", "charset-field",
        "part-charset", "invalid-utf8"])
def test_strict_defaults_reject_multipart(env, parts, kind):
    rid = new_id()
    record = check_reject(env, post_form(env.port, "/strict", parts, rid), rid, kind)
    assert kind in [v["kind"] for v in record["violations"]]
    assert kind.removeprefix("anomaly_").replace("_", "-") in record["anomalies"], record


@pytest.mark.parametrize("body, kind", [
    (b"user.role=admin", "anomaly_name_rewritten"),
    (b"a=1&a[b]=2", "anomaly_name_collision"),
    (b"a%2541=1", "anomaly_percent_escape"),
    (b"_charset_=latin1&a=1", "anomaly_charset_field"),
    (b"a=caf%E9", "anomaly_invalid_utf8_value"),
    (b"caf%E9=1", "anomaly_invalid_utf8"),
])
def test_strict_defaults_reject_urlencoded(env, body, kind):
    rid = new_id()
    check_reject(env, post_urlencoded(env, "/strict", body, rid), rid, kind)


def test_repeated_unknown_names_pass_and_are_audited(env):
    """A checkbox group and a multiple-file input on a route with `unknown allow` keep working (default `log`)."""
    rid = new_id()
    parts = [Part("color", b"red"), Part("color", b"blue"), Part("docs", b"1", "a.txt", "text/plain"),
             Part("docs", b"2", "b.txt", "text/plain")]
    resp = post_form(env.port, "/strict", parts, rid)
    assert resp.status == 200, resp
    (seen,) = env.upstream.records(rid)
    assert seen["fields"] == {"color": ["red", "blue"]}
    assert [f["filename"] for f in seen["files"]] == ["a.txt", "b.txt"]
    record = env.wait_audit(rid)
    assert record["decision"] == "allow" and "duplicate-name" in record["anomalies"], record
    logged = [v for v in record["violations"] if v["kind"] == "anomaly_duplicate_name"]
    assert [v["outcome"] for v in logged] == ["log", "log"], record


def test_named_rules_refuse_repetition_unless_their_rule_allows_it(env):
    rid = new_id()
    resp = post_form(env.port, "/named", [Part("role", b"user"), Part("role", b"admin")], rid)
    assert resp.status == 413 and resp.json()["error"] == "too_many_repeats", resp
    rid = new_id()
    resp = post_form(env.port, "/named", [Part("docs", b"1", "a.txt", "text/plain"),
                                          Part("docs", b"2", "b.txt", "text/plain")], rid)
    assert resp.status == 200, resp
    record = env.wait_audit(rid)
    (v,) = [v for v in record["violations"] if v["kind"] == "anomaly_duplicate_name"]
    assert v["outcome"] == "log" and "allowed by repeat 3" in v["detail"], record


@pytest.mark.parametrize("kind", ["multipart", "urlencoded"])
def test_strip_keeps_the_first_value_for_every_framework(env, kind):
    rid = new_id()
    if kind == "multipart":
        resp = post_form(env.port, "/strip", [Part("role", b"user"), Part("_charset_", b"latin1"),
                                              Part("x", b"1"), Part("role", b"admin")], rid)
    else:
        resp = post_urlencoded(env, "/strip", b"role=user&_charset_=latin1&x=1&role=admin", rid)
    assert resp.status == 200, resp
    (seen,) = env.upstream.records(rid)
    assert seen["fields"] == {"role": ["user"], "x": ["1"]}, seen
    record = env.wait_audit(rid)
    assert record["decision"] == "modified", record
    assert [p["action"] for p in record["parts"]] == ["forward", "strip", "forward", "strip"], record
    assert {v["kind"] for v in record["violations"]} == {"anomaly_duplicate_name", "anomaly_charset_field"}


def test_a_route_can_loosen_each_flag_by_name(env):
    rid = new_id()
    parts = [Part("user.role", b"x"), Part("a%41", b"caf\xe9"),
             Part("t", b"x", content_type="text/plain; charset=UTF-16")]
    resp = post_form(env.port, "/lenient", parts, rid)
    assert resp.status == 200, resp
    (seen,) = env.upstream.records(rid)
    assert set(seen["fields"]) == {"user.role", "a%41", "t"}, seen
    record = env.wait_audit(rid)
    kinds = sorted(v["kind"] for v in record["violations"])
    # name-rewritten and part-charset are `allow` (silent); percent-escape and invalid-utf8-value are `log`.
    assert kinds == ["anomaly_invalid_utf8_value", "anomaly_percent_escape"], record


def test_a_body_field_named_like_a_query_parameter_is_rejected(env):
    """Go's FormValue reads the query's `role` for a multipart body; Formwall judges the body's."""
    rid = new_id()
    resp = post_form(env.port, "/strict?role=admin", [Part("role", b"user")], rid)
    check_reject(env, resp, rid, "anomaly_query_collision")
    rid = new_id()
    resp = post_form(env.port, "/strict?page=2", [Part("role", b"user")], rid)
    assert resp.status == 200, resp


def test_an_empty_multipart_body_is_malformed(env):
    rid = new_id()
    resp = request(env.port, "POST", "/strict", [("Content-Type", "multipart/form-data; boundary=x"),
                                                 ("Content-Length", "0"), ("X-Request-Id", rid)], b"")
    assert resp.status == 400 and resp.json()["error"] == "malformed_body", resp
    assert env.wait_audit(rid)["reason"] == "malformed_body"
    assert env.upstream.records(rid) == []


def test_no_file_chosen_is_left_out_by_default(env):
    rid = new_id()
    parts = [Part("avatar", b"", "", "application/octet-stream"), Part("name", b"x")]
    resp = post_form(env.port, "/strict", parts, rid)
    assert resp.status == 200, resp
    (seen,) = env.upstream.records(rid)
    assert seen["files"] == [] and seen["fields"] == {"name": ["x"]}, seen
    record = env.wait_audit(rid)
    assert [p["action"] for p in record["parts"]] == ["strip", "forward"], record
    assert record["decision"] == "modified", record


# CRS 922110's allowed charsets (tx.allowed_request_content_type_charset) and the part-charsets that narrows them.
@pytest.mark.parametrize("charset", ["utf-8", "ISO-8859-1", "iso-8859-15", "Windows-1252", "us-ascii"])
def test_crs_default_part_charsets_pass(env, charset):
    rid = new_id()
    resp = post_form(env.port, "/strict", [Part("t", b"plain", content_type=f"text/plain; charset={charset}")], rid)
    assert resp.status == 200, resp
    (seen,) = env.upstream.records(rid)
    assert seen["fields"] == {"t": ["plain"]}, seen


@pytest.mark.parametrize("charset", ["utf-7", "UTF-16", "ibm037", "shift-jis", "utf-"])
def test_other_part_charsets_are_refused(env, charset):
    rid = new_id()
    resp = post_form(env.port, "/strict", [Part("t", b"plain", content_type=f"text/plain; charset={charset}")], rid)
    check_reject(env, resp, rid, "anomaly_part_charset")


def test_a_route_narrows_the_part_charsets(env):
    rid = new_id()
    resp = post_form(env.port, "/narrow", [Part("t", b"plain", content_type="text/plain; charset=ISO-8859-1")], rid)
    check_reject(env, resp, rid, "anomaly_part_charset")
    rid = new_id()
    resp = post_form(env.port, "/narrow", [Part("_charset_", b"iso-8859-1")], rid)
    check_reject(env, resp, rid, "anomaly_charset_field")


# The HTML standard's `_charset_` field, filled in by the browser with the form's encoding (a browser's form post
# carries it as the first field when the form has one).
@pytest.mark.parametrize("value", [b"utf-8", b"UTF-8", b"windows-1252"])
def test_a_charset_field_naming_an_allowed_charset_passes(env, value):
    rid = new_id()
    resp = post_form(env.port, "/strict", [Part("_charset_", value), Part("q", b"caf\xc3\xa9")], rid)
    assert resp.status == 200, resp
    (seen,) = env.upstream.records(rid)
    assert seen["fields"] == {"_charset_": [value.decode()], "q": ["caf\u00e9"]}, seen
    rid = new_id()
    resp = post_urlencoded(env, "/strict", b"_charset_=" + value + b"&q=1", rid)
    assert resp.status == 200, resp
    (seen,) = env.upstream.records(rid)
    assert seen["fields"] == {"_charset_": [value.decode()], "q": ["1"]}, seen


@pytest.mark.parametrize("value", [b"UTF-7", b"ibm037", b"utf-", b"", b"utf-8\x00"])
def test_a_charset_field_naming_another_charset_is_refused(env, value):
    rid = new_id()
    record = check_reject(env, post_form(env.port, "/strict", [Part("_charset_", value), Part("q", b"1")], rid),
                          rid, "anomaly_charset_field")
    assert "charset-field" in record["anomalies"], record
    rid = new_id()
    check_reject(env, post_urlencoded(env, "/strict", b"_charset_=" + value.replace(b"\x00", b"%00") + b"&q=1", rid),
                 rid, "anomaly_charset_field")


def test_a_charset_field_too_long_to_judge_is_refused(env):
    rid = new_id()
    resp = post_form(env.port, "/strict", [Part("_charset_", b"utf-8" + b" " * 70_000)], rid)
    check_reject(env, resp, rid, "anomaly_charset_field")


# The benign shapes of the WAFFLED study's multipart requests (its repository, sa-akhavani/waffled, file
# `experiments/raw requests/multipart`: "Most Basic Multipart" and "Multipart With Extra Headers", here with a
# harmless value, CRLF line ends and without the Content-Transfer-Encoding header, which Formwall refuses by itself).
@pytest.mark.parametrize("first_value, field_head", [
    (b"iso-8859-1", b""),
    (b"UTF-8", b"content-type: text/plain;charset=UTF-8\r\ncontent-extra: something\r\n"),
], ids=["most-basic", "extra-headers"])
def test_the_waffled_control_request_passes(env, first_value, field_head):
    body = (b"--AaB03x\r\ncontent-disposition: form-data; name=\"_charset_\"\r\n\r\n" + first_value + b"\r\n"
            b"--AaB03x\r\ncontent-disposition: form-data; name=\"field1\"\r\n" + field_head + b"\r\nvalue1\r\n"
            b"--AaB03x--\r\n")
    rid = new_id()
    resp = request(env.port, "POST", "/strict", [("Content-Type", "multipart/form-data; boundary=AaB03x"),
                                                 ("X-Request-Id", rid)], body)
    assert resp.status == 200, resp
    (seen,) = env.upstream.records(rid)
    assert seen["fields"] == {"_charset_": [first_value.decode()], "field1": ["value1"]}, seen
