"""Starts the eight differential backends on 127.0.0.1 and waits until each answers.

Each backend runs in its own process group on a free port, is ready when a direct `GET /ready` answers 200
(polled with a deadline, never a fixed sleep), and appends the X-Request-Id of every body it parsed to its
log file (`$UPSTREAM_LOG`). The Go backend is compiled first, with `go build`, into the work directory
(GOCACHE and GOPATH there too; stdlib only, no network).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # Tests/e2e: the upstreams package
from upstreams.servers import HOST, ServerProcess, free_port  # noqa: E402

HERE = Path(__file__).resolve().parent
START_TIMEOUT = 30.0
NODE_PATH = "/usr/share/nodejs"

# name -> what parses the body and which view `form` is
BACKENDS = {
    "werkzeug": "werkzeug dev server; request.form / request.files",
    "starlette": "uvicorn + Starlette (python-multipart); await request.form()",
    "php": "php -S; $_POST / $_FILES, flattened to bracket paths",
    "busboy": "node http + busboy 1.6 (Debian node-busboy), defParamCharset utf8; form[name] = value",
    "undici": "node http + undici's Request.formData(); formData.get(name)",
    "django": "Django runserver; request.POST / request.FILES",
    "aiohttp": "aiohttp; await request.post()",
    "go": "Go net/http; ParseMultipartForm / ParseForm, FormValue / FormFile",
}


def build_go(workdir: Path) -> Path:
    """Compiles go_app.go into workdir; returns the binary."""
    out = workdir / "go_app"
    env = {k: v for k, v in os.environ.items() if k != "GOFLAGS"}
    env.update(GOCACHE=str(workdir / "gocache"), GOPATH=str(workdir / "gopath"), GOPROXY="off",
               GO111MODULE="off", CGO_ENABLED="0")
    done = subprocess.run(["go", "build", "-o", str(out), str(HERE / "go_app.go")], cwd=str(workdir), env=env,
                          capture_output=True, timeout=240)
    if done.returncode != 0:
        raise RuntimeError(f"go build failed: {done.stderr.decode(errors='replace')[-2000:]}")
    return out


def _argv(name: str, port: int, workdir: Path) -> list[str]:
    py = sys.executable
    if name == "werkzeug":
        return [py, str(HERE / "werkzeug_app.py"), str(port)]
    if name == "starlette":
        return [py, "-m", "uvicorn", "--app-dir", str(HERE), "--host", HOST, "--port", str(port),
                "--log-level", "warning", "--no-access-log", "starlette_app:app"]
    if name == "php":
        return ["php", "-d", "upload_max_filesize=64M", "-d", "post_max_size=64M", "-d", "max_input_vars=100000",
                "-d", "max_file_uploads=1000", "-d", "display_errors=0",
                "-S", f"{HOST}:{port}", "-t", str(HERE), str(HERE / "app.php")]
    if name == "busboy":
        return ["node", str(HERE / "busboy_app.js"), str(port)]
    if name == "undici":
        return ["node", str(HERE / "undici_app.js"), str(port)]
    if name == "django":
        return [py, str(HERE / "django_app.py"), "runserver", f"{HOST}:{port}", "--noreload", "--skip-checks"]
    if name == "aiohttp":
        return [py, str(HERE / "aiohttp_app.py"), str(port)]
    if name == "go":
        return [str(build_go(workdir)), str(port)]
    raise ValueError(f"unknown backend {name!r}")


class Backend(ServerProcess):
    """One backend server in its own process group."""

    start_timeout = START_TIMEOUT

    def __init__(self, name: str, workdir: Path):
        self.name = name
        self.port = free_port()
        self.log_path = Path(workdir) / f"{name}.ids"
        self.log_path.touch()
        env = dict(os.environ, UPSTREAM_LOG=str(self.log_path), PYTHONDONTWRITEBYTECODE="1",
                   PYTHONUNBUFFERED="1", PYTHONPATH=str(HERE), NODE_PATH=NODE_PATH)
        self.launch(workdir, _argv(name, self.port, Path(workdir)), env, HERE)

    def logged_ids(self) -> set[str]:
        with open(self.log_path) as f:
            return {line.rstrip("\n") for line in f if line.endswith("\n")}
