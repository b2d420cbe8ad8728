"""Upstream health on the admin listener: /readyz, /upstreams and the per-server series of /metrics.

Two upstream groups behind one Formwall: `app`, a live echo upstream, and `media`, a port nothing listens on.
One application's outage must not make the replica unready (a Kubernetes readiness probe would take every
replica out of the Service, and `app` would go down with `media`): /readyz stays 200 and the outage shows on
/upstreams and /metrics instead. A group that says `readiness required;` opts into /readyz again.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import requests

from e2e_helpers import HOST, IO_TIMEOUT, START_TIMEOUT, formwall_binary, free_port, wait_until
from test_admin import admin_get, by_label, scrape

RULES = """route /media {
    upstream media;
}
"""


def two_groups(tmp_path: Path, listen: int, app_port: int, media_port: int, admin: int,
               media_extra: str = "") -> Path:
    (tmp_path / "media.rules").write_text(RULES)
    conf = tmp_path / "formwall.conf"
    conf.write_text(f"""listen {HOST}:{listen};
admin {HOST}:{admin};
workers 2;
upstream app;
upstream app {{
    server {HOST}:{app_port};
}}
upstream media {{
    server {HOST}:{media_port};
{media_extra}}}
include media.rules;
""")
    return conf


def start(formwall_factory, tmp_path: Path, app_port: int, media_extra: str = "") -> tuple:
    listen, admin, media = free_port(), free_port(), free_port()
    conf = two_groups(tmp_path, listen, app_port, media, admin, media_extra)
    fw = formwall_factory(None, "--config", str(conf), port=listen)

    def answered():
        # A list, since a 503 response is falsy.
        try:
            return [admin_get(admin, "/readyz")]
        except requests.RequestException:
            return None

    [ready] = wait_until(answered, START_TIMEOUT, what="/readyz answering")
    return fw, admin, media, ready


def test_one_groups_outage_leaves_the_replica_ready(tmp_path, upstream, formwall_factory):
    fw, admin, media, ready = start(formwall_factory, tmp_path, upstream.port)
    # Readiness is Formwall's own: no upstream check, whatever the groups' state.
    assert ready.status_code == 200, ready.text
    assert not [name for name in ready.json()["checks"] if name.startswith("upstream")], ready.text
    for _ in range(3):
        assert requests.get(fw.url + "/app", timeout=IO_TIMEOUT).status_code == 200
    for _ in range(3):
        r = requests.get(fw.url + "/media", timeout=IO_TIMEOUT)
        assert r.status_code == 502 and r.json()["error"] == "upstream_unreachable"
    # Still ready with media's only server down.
    r = admin_get(admin, "/readyz")
    assert r.status_code == 200 and r.json()["status"] == "ready", r.text

    r = admin_get(admin, "/upstreams")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json", r.text
    groups = {g["name"]: g for g in r.json()["groups"]}
    assert list(groups) == ["app", "media"]
    app, dead = groups["app"], groups["media"]
    assert app["default"] is True and dead["default"] is False
    assert app["readiness"] == dead["readiness"] == "optional"
    assert app["up"] is True and dead["up"] is False
    [live] = app["servers"]
    assert live == {"server": f"{HOST}:{upstream.port}", "up": True, "requests": 3, "failures": 0,
                    "last_failure": None}, live
    [down] = dead["servers"]
    assert down["server"] == f"{HOST}:{media}" and down["up"] is False, down
    assert down["requests"] == 3 and down["failures"] == 3, down
    assert down["last_failure"]["reason"] == "upstream_unreachable", down
    assert "refused" in down["last_failure"]["error"].lower(), down
    assert down["last_failure"]["at"].endswith("Z"), down

    # The same figures on /metrics, one series per group and server, summed over both workers.
    m = scrape(admin)
    servers = ("group", "server")
    live_key, dead_key = ("app", f"{HOST}:{upstream.port}"), ("media", f"{HOST}:{media}")
    assert by_label(m, "formwall_upstream_server_up", *servers) == {live_key: 1, dead_key: 0}
    assert by_label(m, "formwall_upstream_server_requests_total", *servers) == {live_key: 3, dead_key: 3}
    assert by_label(m, "formwall_upstream_server_failures_total", *servers) == {live_key: 0, dead_key: 3}
    assert by_label(m, "formwall_upstream_group_up", "group") == {"app": 1, "media": 0}
    # The admin listener answers GET only, here as elsewhere.
    r = requests.head(f"http://{HOST}:{admin}/upstreams", timeout=IO_TIMEOUT)
    assert r.status_code == 405 and r.headers["Allow"] == "GET"


def test_a_group_that_requires_readiness_makes_readyz_fail(tmp_path, upstream, formwall_factory):
    fw, admin, media, ready = start(formwall_factory, tmp_path, upstream.port, "    readiness required;\n")
    assert ready.status_code == 503, ready.text
    body = ready.json()
    assert body["status"] == "not_ready"
    # Only the group that opted in is probed; its check is named after it.
    assert [name for name in body["checks"] if name.startswith("upstream")] == ["upstream:media"], body
    check = body["checks"]["upstream:media"]
    assert check["ok"] is False and f"{HOST}:{media}" in check["error"] and "refused" in check["error"].lower()
    r = admin_get(admin, "/upstreams")
    assert [g["readiness"] for g in r.json()["groups"]] == ["optional", "required"]
    # The live group keeps serving meanwhile.
    assert requests.get(fw.url + "/app", timeout=IO_TIMEOUT).status_code == 200


def test_check_validates_the_readiness_directive(tmp_path):
    conf = two_groups(tmp_path, free_port(), free_port(), free_port(), free_port(), "    readiness always;\n")
    out = subprocess.run([str(formwall_binary()), "check", "--config", str(conf)], capture_output=True, text=True,
                         timeout=IO_TIMEOUT)
    assert out.returncode == 1, out
    lines = conf.read_text().splitlines()
    line = next(i for i, text in enumerate(lines) if "readiness" in text) + 1
    column = lines[line - 1].index("always") + 1
    assert (f"{conf}:{line}:{column}: error: readiness must be required or optional, got 'always'"
            in out.stderr), out.stderr
    conf.write_text(conf.read_text().replace("readiness always;", "readiness required;"))
    out = subprocess.run([str(formwall_binary()), "check", "--config", str(conf)], capture_output=True, text=True,
                         timeout=IO_TIMEOUT)
    assert out.returncode == 0, out.stderr
