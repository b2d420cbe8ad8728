"""Request paths that real routers read as another route's path than Formwall does (`ambiguous-paths`).

Six real routers stand behind Formwall (Tests/e2e/paths/): Flask under werkzeug's dev server, Starlette under
uvicorn, Go's ServeMux, a PHP front controller under `php -S`, and node's http module routing on
`new URL(req.url)` and on the raw target. Each serves `/api` and everything below it with its "api" handler
and answers which handler ran. The rules (rules/ambiguous_paths.rules) guard `/api` with a route that needs a
header the test never sends; every other path falls under a route that lets anything through.

The property: no request reaches a router's api handler without having been judged by Formwall's `/api` route.
Every path of a seeded mix of escapes, dot segments, `;` parameters, backslashes, capitals and leading `//` is
sent through Formwall to every router. Formwall either refuses it (400 `header_required`: judged as `/api`;
400 `ambiguous_path`; or another 400 for a target it refuses outright) or forwards it, and then the router must
not have run its api handler. With `ambiguous-paths pass;` the same paths do reach each router's api handler
(the routers really read them so), which shows the property is Formwall's doing. Plain paths, escapes inside a
segment included, must still be forwarded.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from e2e_helpers import Formwall, PeerClosed, RawConn

HERE = Path(__file__).resolve().parent
PATHS = HERE / "paths"
sys.path.insert(0, str(HERE))
from upstreams.servers import HOST, ServerProcess, free_port  # noqa: E402

pytestmark = pytest.mark.timeout(240)

RULES = """\
ambiguous-paths {setting};
route /api {{ require-header X-Api-Token; content-types */*; }}
route / {{ unknown allow; content-types */*; }}
"""

ROUTERS = ["flask", "starlette", "go", "php", "node-url", "node-raw"]

# Hand-picked: one or more per reading (docs/rules.md, *Ambiguous paths*).
TRICKY = [
    "/api%2Fupload", "/api%2fupload", "/x/..%2Fapi/upload", "/API/upload", "/Api", "/%41PI/upload",
    "/api;jsessionid=1/upload", "/x/..;/api/upload", "/api\\upload", "/x\\..\\api\\upload", "//h/api/upload",
    "//api", "/x/%2e%2e/api/upload", "/x/%2E%2E/api", "/api/../x", "/api/%2e%2e/x", "/%61pi/upload",
    "/x/../api", "/./api", "/a%5C..%5Capi/x", "/x%2F..%2Fapi", "/ap%69/upload", "/api%00/x", "/%2Fapi/upload",
]

# Forwarded to the routers' other handler whatever the setting: every reading agrees.
PLAIN = ["/", "/upload", "/static/My%20File.txt", "/files/a%20b/c", "/index.html?next=%2Fapi%2Fx",
         "/apix", "/x/api", "/search?q=..%2F..", "/a-b_c~d.e/f"]

TOKENS = ["api", "API", "Api", "%61pi", "%41PI", "x", "upload", "..", ".", "%2e%2e", "%2E", "%2F", "%2f", "%5C",
          "\\", ";p=1", "..;", "", "%20", "a%2Fb"]


def generated(count: int, seed: int = 20261205) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        segments = [rng.choice(TOKENS) for _ in range(rng.randint(1, 4))]
        joiners = [rng.choice(["/", "/", "/", "", "\\"]) for _ in segments]
        path = "".join(j + s for j, s in zip(joiners, segments))
        path = ("/" if not path.startswith(("/", "\\")) else "") + path
        if rng.random() < 0.15:
            path = "/" + path
        out.append(path)
    return out


def build_go(workdir: Path) -> Path:
    out = workdir / "go_router"
    env = {k: v for k, v in os.environ.items() if k != "GOFLAGS"}
    env.update(GOCACHE=str(workdir / "gocache"), GOPATH=str(workdir / "gopath"), GOPROXY="off",
               GO111MODULE="off", CGO_ENABLED="0")
    done = subprocess.run(["go", "build", "-o", str(out), str(PATHS / "go_router.go")], cwd=str(workdir),
                          env=env, capture_output=True, timeout=240)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return out


class Router(ServerProcess):
    def __init__(self, name: str, workdir: Path):
        self.name = name
        self.port = free_port()
        py = sys.executable
        argv = {
            "flask": lambda: [py, str(PATHS / "flask_router.py"), str(self.port)],
            "starlette": lambda: [py, "-m", "uvicorn", "--app-dir", str(PATHS), "--host", HOST, "--port",
                                  str(self.port), "--log-level", "warning", "--no-access-log",
                                  "starlette_router:app"],
            "go": lambda: [str(build_go(workdir)), str(self.port)],
            "php": lambda: ["php", "-S", f"{HOST}:{self.port}", str(PATHS / "php_router.php")],
            "node-url": lambda: ["node", str(PATHS / "node_router.js"), str(self.port), "url"],
            "node-raw": lambda: ["node", str(PATHS / "node_router.js"), str(self.port), "raw"],
        }[name]()
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        self.launch(workdir, argv, env, PATHS)


def ask(port: int, target: str) -> tuple[int, dict | None]:
    """Sends `GET target` verbatim; the status and, for JSON answers, the body."""
    with RawConn(port) as conn:
        conn.send(f"GET {target} HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n".encode("latin-1"))
        try:
            response = conn.read_response()
        except PeerClosed:
            return 0, None
    try:
        return response.status, json.loads(response.body)
    except ValueError:
        return response.status, None


@pytest.fixture(scope="module")
def routers(tmp_path_factory):
    work = tmp_path_factory.mktemp("paths")
    started = {}
    try:
        for name in ROUTERS:
            started[name] = Router(name, work)
        yield work, started
    finally:
        for router in started.values():
            router.stop()


def run_through(work: Path, routers: dict, setting: str, targets: list[str]) -> dict:
    """{router: {target: (status, answer)}} through one Formwall per router."""
    rules = work / f"ambiguous-{setting}.rules"
    rules.write_text(RULES.format(setting=setting))
    results = {}
    for name, router in routers.items():
        fw = Formwall(work, router.url, ["--rules", str(rules), "--workers", "1"], name=f"formwall-{setting}-{name}")
        try:
            results[name] = {target: ask(fw.port, target) for target in targets}
            assert fw.proc.poll() is None, fw.stderr_text()[-2000:]
        finally:
            fw.kill()
    return results


def test_no_path_reaches_an_api_handler_unjudged(routers):
    work, started = routers
    targets = TRICKY + generated(160)
    guarded = run_through(work, started, "reject", targets)
    open_ = run_through(work, started, "pass", targets)
    for name in ROUTERS:
        leaks = [(t, answer) for t, (status, answer) in guarded[name].items()
                 if status == 200 and answer and answer.get("handler") == "api"]
        assert not leaks, f"{name}: forwarded to its api handler without the /api route's rules: {leaks[:5]}"
        reasons = {answer.get("error") for status, answer in guarded[name].values() if status == 400 and answer}
        assert "ambiguous_path" in reasons, f"{name}: {reasons}"
        # Without the check, some of these paths do reach this router's api handler: the readings are real.
        bypass = [t for t, (status, answer) in open_[name].items()
                  if status == 200 and answer and answer.get("handler") == "api"]
        assert bypass, f"{name}: no path reached its api handler with ambiguous-paths pass"


def test_plain_paths_are_forwarded(routers):
    work, started = routers
    results = run_through(work, started, "reject", PLAIN)
    for name in ROUTERS:
        for target, (status, answer) in results[name].items():
            assert status in (200, 301, 307, 308), f"{name} {target}: {status} {answer}"
            if status == 200:
                assert answer["handler"] == "other", f"{name} {target}: {answer}"
