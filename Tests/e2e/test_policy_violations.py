"""Every violation kind through the real proxy: status, JSON error body, audit line, and what the upstream got.

Rules: Tests/e2e/rules/violations.rules (one route per kind). A rejected request must never reach the upstream
with a complete body; requests refused from the head alone (405, 415, 413 by Content-Length) must not reach it
at all.
"""

import hashlib

import pytest

from policy_helpers import (JPEG, PDF, PHP, PNG, RULES, Formwall, Part, Upstream, multipart, new_id, post_form,
                            request)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("violations")
    up = Upstream(tmp / "upstream.jsonl")
    fw = Formwall(tmp, up, RULES / "violations.rules")
    yield fw
    fw.stop()
    up.close()


def check_reject(fw: Formwall, resp, rid: str, status: int, kind: str, part=..., limit=..., reached_upstream=None):
    """The documented rejection: status, JSON body, X-Request-Id, audit line; upstream got no complete body."""
    assert resp.status == status, resp
    body = resp.json()
    assert body["error"] == kind, resp
    assert body["status"] == status
    assert body["request_id"] == rid
    assert resp.header("x-request-id") == rid
    assert resp.header("content-type") == "application/json"
    assert set(body) >= {"error", "status", "part", "limit", "detail", "request_id"}, body
    if part is not ...:
        assert body["part"] == part, body
    if limit is not ...:
        assert body["limit"] == limit, body
    record = fw.wait_audit(rid)
    assert record["decision"] == "reject", record
    assert record["status"] == status
    assert record["reason"] == kind
    assert kind in [v["kind"] for v in record["violations"]], record
    seen = fw.upstream.assert_no_complete_body(rid)
    if reached_upstream is False:
        assert seen == [], f"a request refused from its head reached the upstream: {seen}"
    return body, record


def check_ok(fw: Formwall, resp, rid: str):
    assert resp.status == 200, resp
    (seen,) = fw.upstream.records(rid)
    assert seen["body_complete"] and seen["multipart_error"] is None, seen
    record = fw.wait_audit(rid)
    assert record["decision"] == "allow" and record["status"] == 200, record
    return seen


# ---------------------------------------------------------------------------------------------- refused from the head

@pytest.mark.parametrize("method", ["GET", "DELETE", "PATCH"])
def test_method_not_allowed(env, method):
    rid = new_id()
    body, ctype = multipart([Part("a", b"1")])
    resp = request(env.port, method, "/v/method", [("Content-Type", ctype), ("X-Request-Id", rid)], body)
    check_reject(env, resp, rid, 405, "method_not_allowed", part=None, limit=None, reached_upstream=False)


def test_allowed_method_passes(env):
    rid = new_id()
    resp = post_form(env.port, "/v/method", [Part("a", b"1")], rid, method="PUT")
    seen = check_ok(env, resp, rid)
    assert seen["method"] == "PUT" and seen["fields"] == {"a": ["1"]}


@pytest.mark.parametrize("ctype", ["application/x-www-form-urlencoded", "application/json", None])
def test_content_type_not_allowed(env, ctype):
    rid = new_id()
    headers = [("X-Request-Id", rid)] + ([("Content-Type", ctype)] if ctype else [])
    resp = request(env.port, "POST", "/v/ctype", headers, b"a=1")
    check_reject(env, resp, rid, 415, "content_type_not_allowed", part=None, reached_upstream=False)


def test_body_too_large_by_content_length(env):
    rid = new_id()
    body, ctype = multipart([Part("a", b"x" * 2000)])
    resp = request(env.port, "POST", "/v/body", [("Content-Type", ctype), ("X-Request-Id", rid)], body)
    _, record = check_reject(env, resp, rid, 413, "body_too_large", part=None, limit=1024, reached_upstream=False)
    assert record["bytes_upstream"] == 0


def test_body_within_limit_passes(env):
    rid = new_id()
    resp = post_form(env.port, "/v/body", [Part("a", b"x" * 500)], rid)
    check_ok(env, resp, rid)


def test_body_too_large_chunked_is_cut_at_the_limit(env):
    rid = new_id()
    body, ctype = multipart([Part("a", b"x" * 64000)])
    pieces = [body[i:i + 100] for i in range(0, len(body), 100)]
    resp = request(env.port, "POST", "/v/body", [("Content-Type", ctype), ("X-Request-Id", rid)], pieces,
                   chunked=True)
    _, record = check_reject(env, resp, rid, 413, "body_too_large", part=None, limit=1024)
    # Nothing past the limit went upstream: at most the first 1 KiB of client data, re-encoded. The bytes up to
    # the limit are parsed (and forwarded) before the limit is judged, whatever the reads (docs/fuzzing.md), and
    # the re-encoding's delimiter, "formwall-" and 32 symbols, is longer than this client's.
    client_boundary = ctype.split("boundary=", 1)[1]
    assert record["bytes_upstream"] <= 1024 + max(0, len("formwall-") + 32 - len(client_boundary)), record
    for seen in env.upstream.records(rid):
        assert seen["body_bytes"] <= 1024 + 256, seen


# ---------------------------------------------------------------------------------------------- sizes and counts

def test_file_max_boundary_exact(env):
    rid = new_id()
    resp = post_form(env.port, "/v/file", [Part("f", b"12345", "a.txt", "text/plain")], rid)
    seen = check_ok(env, resp, rid)
    (f,) = seen["files"]
    assert f["size"] == 5 and f["sha256"] == hashlib.sha256(b"12345").hexdigest()

    rid = new_id()
    resp = post_form(env.port, "/v/file", [Part("f", b"123456", "a.txt", "text/plain")], rid)
    check_reject(env, resp, rid, 413, "file_too_large", part="f", limit=5)


def test_file_too_large_after_other_parts_chunked(env):
    rid = new_id()
    resp = post_form(env.port, "/v/file", [Part("note", b"hello"), Part("f", b"x" * 100000, "a.txt")], rid,
                     chunked=True)
    check_reject(env, resp, rid, 413, "file_too_large", part="f", limit=5)


def test_field_max_boundary(env):
    rid = new_id()
    assert post_form(env.port, "/v/field", [Part("a", b"12345678")], rid).status == 200
    rid = new_id()
    resp = post_form(env.port, "/v/field", [Part("a", b"123456789")], rid)
    check_reject(env, resp, rid, 413, "field_too_large", part="a", limit=8)


def test_too_many_parts(env):
    rid = new_id()
    assert post_form(env.port, "/v/parts", [Part(f"p{i}", b"v") for i in range(3)], rid).status == 200
    rid = new_id()
    resp = post_form(env.port, "/v/parts", [Part(f"p{i}", b"v") for i in range(4)], rid)
    check_reject(env, resp, rid, 413, "too_many_parts", limit=3)


def test_too_many_files(env):
    files = [Part("f", b"data", f"f{i}.txt", "text/plain") for i in range(3)]
    rid = new_id()
    assert post_form(env.port, "/v/files", files[:2], rid).status == 200
    rid = new_id()
    resp = post_form(env.port, "/v/files", files, rid)
    check_reject(env, resp, rid, 413, "too_many_files", limit=2)


def test_too_many_fields(env):
    rid = new_id()
    assert post_form(env.port, "/v/fields", [Part("x", b"1"), Part("y", b"2")], rid).status == 200
    rid = new_id()
    resp = post_form(env.port, "/v/fields", [Part("x", b"1"), Part("y", b"2"), Part("z", b"3")], rid)
    check_reject(env, resp, rid, 413, "too_many_fields", part="z", limit=2)


def test_too_many_repeats(env):
    rid = new_id()
    resp = post_form(env.port, "/v/repeat", [Part("a", b"1"), Part("a", b"2")], rid)
    assert check_ok(env, resp, rid)["fields"] == {"a": ["1", "2"]}
    rid = new_id()
    resp = post_form(env.port, "/v/repeat", [Part("a", b"1"), Part("a", b"2"), Part("a", b"3")], rid)
    check_reject(env, resp, rid, 413, "too_many_repeats", part="a", limit=2)


# ---------------------------------------------------------------------------------------------- types and names

def test_type_allowed_by_sniffing(env):
    rid = new_id()
    resp = post_form(env.port, "/v/type", [Part("f", PNG, "a.png", "image/png")], rid)
    check_ok(env, resp, rid)
    assert env.wait_audit(rid)["parts"][0]["sniffed_type"] == "image/png"


def test_type_not_allowed_sniffed(env):
    # Declared octet-stream says nothing: only the sniffed type (PDF) decides.
    rid = new_id()
    resp = post_form(env.port, "/v/type", [Part("f", PDF, "a.png", "application/octet-stream")], rid)
    body, _ = check_reject(env, resp, rid, 415, "type_not_allowed", part="f")
    assert "application/pdf" in body["detail"]


def test_type_not_allowed_declared(env):
    rid = new_id()
    resp = post_form(env.port, "/v/type", [Part("f", PNG, "a.png", "image/gif")], rid)
    check_reject(env, resp, rid, 415, "type_not_allowed", part="f")


def test_type_mismatch_php_named_jpg(env):
    rid = new_id()
    resp = post_form(env.port, "/v/mismatch", [Part("f", PHP, "cat.jpg", "image/jpeg")], rid)
    check_reject(env, resp, rid, 415, "type_mismatch", part="f")
    rid = new_id()
    resp = post_form(env.port, "/v/mismatch", [Part("f", JPEG, "cat.jpg", "image/jpeg")], rid)
    check_ok(env, resp, rid)


def test_extension_not_allowed(env):
    rid = new_id()
    resp = post_form(env.port, "/v/ext", [Part("f", PNG, "a.gif")], rid)
    check_reject(env, resp, rid, 415, "extension_not_allowed", part="f")
    rid = new_id()
    resp = post_form(env.port, "/v/ext", [Part("f", PNG, "A.PNG")], rid)  # case-insensitive
    check_ok(env, resp, rid)


FILENAMES = [
    ("dir/evil.txt", 400, "filename_path_separators"),
    ("..\\..\\boot.ini", 400, "filename_path_separators"),
    ("..", 400, "filename_dot_dot"),
    ("invoice\u202efdp.txt", 400, "filename_bidi_controls"),
    ("shell.txt.", 400, "filename_trailing_dots_spaces"),
    ("a" * 300 + ".txt", 400, "filename_too_long"),
    ("nul.txt", 400, "filename_reserved_name"),
    ("invoice.pdf.exe", 415, "filename_dangerous_extension"),
    ("shell.php::$DATA", 415, "filename_dangerous_extension"),
]


@pytest.mark.parametrize("filename,status,kind", FILENAMES, ids=[k for _, _, k in FILENAMES])
def test_filename_problems(env, filename, status, kind):
    rid = new_id()
    resp = post_form(env.port, "/v/filename", [Part("f", b"plain text", filename, "text/plain")], rid)
    check_reject(env, resp, rid, status, kind, part="f")


@pytest.mark.parametrize("raw_name", [b"filename=\"a\x01b.txt\"", b"filename*=UTF-8''a%01b.txt"])
def test_filename_control_characters(env, raw_name):
    # A control character in a part header is first a parser anomaly (400 anomaly_control_characters) ...
    raw = b'Content-Disposition: form-data; name="f"; ' + raw_name + b"\r\nContent-Type: text/plain\r\n\r\n"
    rid = new_id()
    resp = post_form(env.port, "/v/filename", [Part("f", b"x", raw_headers=raw)], rid)
    check_reject(env, resp, rid, 400, "anomaly_control_characters", part="f")
    # ... and with that anomaly allowed, the filename check reports it.
    rid = new_id()
    resp = post_form(env.port, "/v/filename-controls", [Part("f", b"x", raw_headers=raw)], rid)
    check_reject(env, resp, rid, 400, "filename_control_characters", part="f")


def test_plain_filename_passes(env):
    rid = new_id()
    resp = post_form(env.port, "/v/filename", [Part("f", b"plain", "report 2024.txt", "text/plain")], rid)
    assert check_ok(env, resp, rid)["files"][0]["filename"] == "report 2024.txt"


# ---------------------------------------------------------------------------------------------- rules on names

def test_unknown_part(env):
    rid = new_id()
    resp = post_form(env.port, "/v/unknown", [Part("a", b"1"), Part("b", b"2")], rid)
    check_reject(env, resp, rid, 403, "unknown_part", part="b")


def test_missing_required(env):
    rid = new_id()
    resp = post_form(env.port, "/v/required", [Part("other", b"1")], rid)
    check_reject(env, resp, rid, 422, "missing_required", part="user_id")


def test_missing_required_bodyless_post(env):
    rid = new_id()
    resp = request(env.port, "POST", "/v/required", [("X-Request-Id", rid), ("Content-Length", "0")])
    check_reject(env, resp, rid, 422, "missing_required", part="user_id")


def test_required_present(env):
    rid = new_id()
    resp = post_form(env.port, "/v/required", [Part("user_id", b"42")], rid)
    assert check_ok(env, resp, rid)["fields"] == {"user_id": ["42"]}


@pytest.mark.parametrize("value", [b"abc", b"12a", b"123\n", b""])
def test_pattern_mismatch(env, value):
    rid = new_id()
    resp = post_form(env.port, "/v/pattern", [Part("user_id", value)], rid)
    check_reject(env, resp, rid, 422, "pattern_mismatch", part="user_id")


def test_a_value_that_is_not_utf8_fails_before_its_pattern(env):
    """docs/rules.md: `invalid-utf8-value` is judged on the whole value, ahead of `pattern`."""
    rid = new_id()
    resp = post_form(env.port, "/v/pattern", [Part("user_id", b"\xff1")], rid)
    check_reject(env, resp, rid, 400, "anomaly_invalid_utf8_value", part="user_id")


def test_pattern_match(env):
    rid = new_id()
    resp = post_form(env.port, "/v/pattern", [Part("user_id", b"0123456789")], rid)
    assert check_ok(env, resp, rid)["fields"] == {"user_id": ["0123456789"]}


# ---------------------------------------------------------------------------------------------- anomalies, malformed

def raw_post(env, path, body: bytes, rid: str, boundary=b"XyZ"):
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nX-Request-Id: {rid}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary.decode()}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return request(env.port, raw_head=head, body=body)


def test_anomaly_header_folding(env):
    rid = new_id()
    body = (b"--XyZ\r\nContent-Disposition: form-data;\r\n name=\"a\"\r\n\r\nvalue\r\n--XyZ--\r\n")
    resp = raw_post(env, "/v/anomaly", body, rid)
    check_reject(env, resp, rid, 400, "anomaly_header_folding", part="a")


def test_anomaly_bare_lf(env):
    rid = new_id()
    body = b"--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nvalue\n--XyZ--\n"
    resp = raw_post(env, "/v/anomaly", body, rid)
    _, record = check_reject(env, resp, rid, 400, "anomaly_lf_line")
    assert record["anomalies"] == ["lf-line"], record


def test_anomaly_duplicate_parameter(env):
    rid = new_id()
    body = b'--XyZ\r\nContent-Disposition: form-data; name="a"; name="b"\r\n\r\nv\r\n--XyZ--\r\n'
    resp = raw_post(env, "/v/anomaly", body, rid)
    check_reject(env, resp, rid, 400, "anomaly_duplicate_parameter")


def test_malformed_body_without_close_delimiter(env):
    rid = new_id()
    body = b'--XyZ\r\nContent-Disposition: form-data; name="a"\r\n\r\nvalue'
    resp = raw_post(env, "/v/anomaly", body, rid)
    assert resp.status == 400 and resp.json()["error"] == "malformed_body", resp
    assert resp.json()["request_id"] == rid
    record = env.wait_audit(rid)
    assert record["decision"] == "reject" and record["status"] == 400 and record["reason"] == "malformed_body"
    env.upstream.assert_no_complete_body(rid)


def test_malformed_body_answer_has_the_rejection_shape(env):
    """Every rejection answers {error, status, part, limit, detail, request_id}; malformed_body too."""
    rid = new_id()
    body = b'--XyZ\r\nContent-Disposition: form-data; name="a"\r\n\r\nvalue'
    resp = raw_post(env, "/v/anomaly", body, rid)
    check_reject(env, resp, rid, 400, "malformed_body", part=None, limit=None)


def test_malformed_body_missing_boundary(env):
    rid = new_id()
    resp = request(env.port, "POST", "/v/anomaly", [("Content-Type", "multipart/form-data"), ("X-Request-Id", rid)],
                   b"--XyZ--\r\n")
    assert resp.status == 400, resp
    assert resp.json()["error"] == "malformed_body"
    record = env.wait_audit(rid)
    assert record["decision"] == "reject" and record["status"] == 400
    assert env.upstream.assert_no_complete_body(rid) == []


# ---------------------------------------------------------------------------------------------- urlencoded forms
# docs/rules.md: "Urlencoded bodies feed each decoded field as a part without a filename", and the implicit
# fallback rejects every form part (multipart or urlencoded) with 403 unknown_part.

URLENCODED = [
    ("/v/unknown", b"a=1&b=2", 403, "unknown_part"),
    ("/v/field", b"a=123456789", 413, "field_too_large"),
    ("/v/pattern", b"user_id=abc", 422, "pattern_mismatch"),
    ("/v/repeat", b"a=1&a=2&a=3", 413, "too_many_repeats"),
    ("/v/required", b"other=1", 422, "missing_required"),
    ("/no/route/here", b"x=1", 403, "unknown_part"),
]


@pytest.mark.parametrize("path,body,status,kind", URLENCODED, ids=[k + ":" + p for p, _, _, k in URLENCODED])
def test_urlencoded_fields_are_enforced(env, path, body, status, kind):
    rid = new_id()
    resp = request(env.port, "POST", path, [("Content-Type", "application/x-www-form-urlencoded"),
                                            ("X-Request-Id", rid)], body)
    check_reject(env, resp, rid, status, kind)


def test_urlencoded_within_rules_passes(env):
    rid = new_id()
    resp = request(env.port, "POST", "/v/pattern", [("Content-Type", "application/x-www-form-urlencoded"),
                                                    ("X-Request-Id", rid)], b"user_id=42")
    assert resp.status == 200, resp
    assert env.upstream.records(rid)[0]["fields"] == {"user_id": ["42"]}


def test_multipart_to_the_implicit_fallback_is_rejected(env):
    rid = new_id()
    resp = post_form(env.port, "/no/route/here", [Part("x", b"1")], rid)
    check_reject(env, resp, rid, 403, "unknown_part", part="x")


def test_the_upstream_check_can_fail(env):
    """Guard for the helper every rejection test relies on: a request that did reach the upstream whole is
    caught by `assert_no_complete_body`."""
    rid = new_id()
    assert post_form(env.port, "/v/field", [Part("a", b"1")], rid).status == 200
    with pytest.raises(AssertionError, match="complete body"):
        env.upstream.assert_no_complete_body(rid)
