"""The method and path a backend reads, not only the request line's, against Symfony's own Request.

Symfony's `Request::getMethod()` (Debian php-symfony-http-foundation, under `php -S`; paths/symfony_method.php)
reads `X-HTTP-Method-Override` on a POST as the method, and, with `enableHttpMethodParameterOverride()` (which
Laravel turns on), `_method` from the query or the body. Laravel and Rack's MethodOverride (Rails, Sinatra) do the
same. So `methods POST PUT;` would let a DELETE through as a POST. Formwall judges each such method against
`methods` (405 `method_not_allowed`, and the app never sees the request) and drops `X-Original-URL` and
`X-Rewrite-URL`, which older Symfony and Zend releases read as the path.

The app is first asked directly, to show it really reads each override; a route without `methods` shows the
same overrides arrive through Formwall when nothing forbids them.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest
import requests

from e2e_helpers import Formwall, wait_until

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from upstreams.servers import HOST, ServerProcess, free_port  # noqa: E402

pytestmark = pytest.mark.timeout(120)

RULES = """\
route /form { methods POST PUT; content-types */*; unknown allow; }
route / { content-types */*; unknown allow; }
"""


class Symfony(ServerProcess):
    def __init__(self, workdir: Path):
        self.name = "symfony"
        self.port = free_port()
        self.log_path = workdir / "symfony.jsonl"
        self.log_path.touch()
        env = dict(os.environ, UPSTREAM_LOG=str(self.log_path))
        self.launch(workdir, ["php", "-S", f"{HOST}:{self.port}", str(HERE / "paths" / "symfony_method.php")], env,
                    HERE / "paths")

    def seen(self, request_id: str) -> list[dict]:
        lines = self.log_path.read_text().splitlines()
        return [r for r in map(json.loads, lines) if r.get("request_id") == request_id]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    work = tmp_path_factory.mktemp("override")
    app = Symfony(work)
    rules = work / "override.rules"
    rules.write_text(RULES)
    fw = None
    try:
        fw = Formwall(work, app.url, ["--rules", str(rules), "--upstream-body", "spool", "--workers", "1"])
        yield app, fw
    finally:
        if fw:
            fw.kill()
        app.stop()


# (name, path, extra headers, body: None, ("urlencoded", dict) or ("multipart", dict), the method Symfony reads)
CASES = [
    ("header", "/form", {"X-HTTP-Method-Override": "DELETE"}, None, "DELETE"),
    ("header-lowercase-value", "/form", {"X-HTTP-Method-Override": "patch"}, None, "PATCH"),
    ("query", "/form?_method=delete", {}, None, "DELETE"),
    ("urlencoded-field", "/form", {}, ("urlencoded", {"a": "1", "_method": "DELETE"}), "DELETE"),
    ("multipart-field", "/form", {}, ("multipart", {"a": "1", "_method": "DELETE"}), "DELETE"),
]


def post(url: str, path: str, headers: dict, body, request_id: str) -> requests.Response:
    headers = {**headers, "X-Request-Id": request_id}
    if body is None:
        return requests.post(url + path, headers={**headers, "Content-Type": "text/plain"}, data=b"x", timeout=10)
    kind, fields = body
    if kind == "urlencoded":
        return requests.post(url + path, headers=headers, data=fields, timeout=10)
    return requests.post(url + path, headers=headers, files={k: (None, v) for k, v in fields.items()}, timeout=10)


@pytest.mark.parametrize("name,path,headers,body,method", CASES, ids=[c[0] for c in CASES])
def test_symfony_reads_the_override_directly(stack, name, path, headers, body, method):
    app, _ = stack
    r = post(app.url, path, headers, body, uuid.uuid4().hex)
    assert r.status_code == 200 and r.json()["method"] == method and r.json()["real"] == "POST", r.text


@pytest.mark.parametrize("name,path,headers,body,method", CASES, ids=[c[0] for c in CASES])
def test_an_override_methods_do_not_list_is_refused(stack, name, path, headers, body, method):
    app, fw = stack
    request_id = uuid.uuid4().hex
    r = post(fw.url, path, headers, body, request_id)
    assert r.status_code == 405, r.text
    assert r.json()["error"] == "method_not_allowed" and method in r.json()["detail"], r.text
    # Without `methods` the same request reaches the app, which reads the override.
    other = uuid.uuid4().hex
    r = post(fw.url, path.replace("/form", "/other"), headers, body, other)
    assert r.status_code == 200 and r.json()["method"] == method, r.text
    wait_until(lambda: app.seen(other), 5, what="the app's log line")
    assert app.seen(request_id) == []


@pytest.mark.parametrize("headers,path,body,method", [
    ({"X-HTTP-Method-Override": "put"}, "/form", None, "PUT"),
    ({}, "/form?_method=PUT", None, "PUT"),
    ({}, "/form", ("multipart", {"_method": "put", "a": "1"}), "PUT"),
    ({}, "/form", ("urlencoded", {"a": "b"}), "POST"),
])
def test_listed_methods_pass(stack, headers, path, body, method):
    _, fw = stack
    r = post(fw.url, path, headers, body, uuid.uuid4().hex)
    assert r.status_code == 200 and r.json()["method"] == method, r.text


def test_underscore_spellings(stack, tmp_path):
    """PHP reads `X_HTTP_Method_Override` as `X-HTTP-Method-Override` (both are HTTP_X_HTTP_METHOD_OVERRIDE), and
    `X_Original_URL` as `X-Original-URL`: the override is judged in any spelling, and fields holding a `_` are
    dropped by default (`--underscore-headers drop`) or, with `forward`, kept unless read as one Formwall drops."""
    app, fw = stack
    direct = post(app.url, "/form", {"X_HTTP_Method_Override": "DELETE", "X_Original_URL": "/admin"}, None, "u")
    assert direct.json()["method"] == "DELETE" and direct.json()["original_url"] == "/admin", direct.text
    r = post(fw.url, "/form", {"X_HTTP_Method_Override": "DELETE"}, None, uuid.uuid4().hex)
    assert r.status_code == 405 and "X_HTTP_Method_Override" in r.json()["detail"], r.text
    r = post(fw.url, "/form", {"X_HTTP_Method_Override": "put", "X_Original_URL": "/admin", "X_Custom": "1"}, None,
             uuid.uuid4().hex)
    assert r.status_code == 200 and r.json()["method"] == "POST" and r.json()["underscored"] == [], r.text
    rules = tmp_path / "override.rules"
    rules.write_text(RULES)
    forwarding = Formwall(tmp_path, app.url, ["--rules", str(rules), "--upstream-body", "spool", "--workers", "1",
                                              "--underscore-headers", "forward"], name="formwall-forward")
    try:
        r = post(forwarding.url, "/form", {"X_HTTP_Method_Override": "put", "X_Original_URL": "/admin",
                                           "X_Forwarded_Host": "evil", "X_Custom": "1"}, None, uuid.uuid4().hex)
        assert r.status_code == 200, r.text
        assert r.json()["method"] == "PUT" and r.json()["original_url"] is None, r.text
        assert sorted(r.json()["underscored"]) == ["X_Custom", "X_HTTP_Method_Override"], r.text
        r = post(forwarding.url, "/form", {"X_HTTP_Method_Override": "DELETE"}, None, uuid.uuid4().hex)
        assert r.status_code == 405, r.text
    finally:
        forwarding.kill()


def test_path_override_fields_are_dropped(stack):
    app, fw = stack
    direct = post(app.url, "/form", {"X-Original-URL": "/admin", "X-Rewrite-URL": "/admin"}, None, "d")
    assert direct.json()["original_url"] == "/admin" and direct.json()["rewrite_url"] == "/admin"
    r = post(fw.url, "/form", {"X-Original-URL": "/admin", "X-Rewrite-URL": "/admin"}, None, uuid.uuid4().hex)
    assert r.status_code == 200, r.text
    assert r.json()["original_url"] is None and r.json()["rewrite_url"] is None, r.text
