"""Starts the real upstream servers in this directory on 127.0.0.1 and waits until they answer.

Used by the pytest fixtures (Tests/e2e/test_real_upstreams.py, test_django.py,
test_framework_chunked_table.py) and by measure_chunked.py. Readiness is the port accepting and a
direct ``GET /`` answering 200 (gunicorn binds before its workers have imported the app), with a
deadline; nothing sleeps.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HOST = "127.0.0.1"
START_TIMEOUT = 20.0

# name -> description (the server, the app framework, connection behaviour)
KINDS = {
    "werkzeug": "werkzeug dev server (run_simple, threaded) + Flask; closes every connection",
    "php": "php -S (PHP's built-in server) + $_POST/$_FILES; closes every connection",
    "php-content-length": "php -S, the app sets Content-Length; closes every connection",
    "gunicorn": "gunicorn sync workers + Flask (WSGI); closes every connection",
    "gunicorn-gthread": "gunicorn gthread workers + Flask (WSGI); keep-alive",
    "uvicorn": "uvicorn + Starlette (python-multipart); keep-alive (5 s idle timeout)",
    "node": "node http module + a minimal multipart parser; keep-alive (5 s idle timeout)",
    "django-gunicorn": "Django (request.POST/FILES) under gunicorn sync workers",
    "django-runserver": "Django (request.POST/FILES) under manage.py runserver",
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _argv(kind: str, port: int, keep_alive: float | None) -> list[str]:
    py = sys.executable
    addr = f"{HOST}:{port}"
    gunicorn = [py, "-m", "gunicorn", "--chdir", str(HERE), "-b", addr, "--log-level", "warning"]
    if kind == "werkzeug":
        return [py, str(HERE / "run_werkzeug.py"), str(port)]
    if kind in ("php", "php-content-length"):
        return ["php", "-d", "upload_max_filesize=64M", "-d", "post_max_size=64M",
                "-S", addr, "-t", str(HERE), str(HERE / "app.php")]
    if kind == "gunicorn":
        return [*gunicorn, "-k", "sync", "-w", "4", "wsgi_app:app"]
    if kind == "gunicorn-gthread":
        return [*gunicorn, "-k", "gthread", "-w", "1", "--threads", "8",
                "--keep-alive", str(int(keep_alive or 2)), "wsgi_app:app"]
    if kind == "uvicorn":
        argv = [py, "-m", "uvicorn", "--app-dir", str(HERE), "--host", HOST, "--port", str(port),
                "--log-level", "warning", "--no-access-log"]
        if keep_alive is not None:
            argv += ["--timeout-keep-alive", str(int(keep_alive))]
        return [*argv, "starlette_app:app"]
    if kind == "node":
        return ["node", str(HERE / "node_app.js"), str(port)]
    if kind == "django-gunicorn":
        return [*gunicorn, "-k", "sync", "-w", "4", "django_app:application"]
    if kind == "django-runserver":
        return [py, str(HERE / "django_app.py"), "runserver", addr, "--noreload", "--skip-checks"]
    raise ValueError(f"unknown upstream kind {kind!r}")


class ServerProcess:
    """A server in its own process group on a free port, with its output in `<name>.out` in the work directory,
    ready once a direct `GET /ready` answers 200 (polled with a deadline, never a fixed sleep). Subclasses build
    the argv and environment and call `launch`; `stop` kills the whole group."""

    name: str
    port: int
    start_timeout = START_TIMEOUT

    def launch(self, workdir: Path, argv: list[str], env: dict, cwd: Path) -> None:
        self.url = f"http://{HOST}:{self.port}"
        self.output_path = Path(workdir) / f"{self.name}.out"
        self._out = open(self.output_path, "wb")
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=env, cwd=str(cwd), start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {self.output()[-2000:]}")
            try:
                conn = http.client.HTTPConnection(HOST, self.port, timeout=2)
                conn.request("GET", "/ready", headers={"X-Request-Id": "ready"})
                status = conn.getresponse().status
                conn.close()
                if status == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} did not answer on port {self.port} within {self.start_timeout}s: "
                                   f"{self.output()[-2000:]}")
            try:
                self.proc.wait(timeout=0.05)  # doubles as the poll interval
            except subprocess.TimeoutExpired:
                pass

    def output(self) -> str:
        try:
            return self.output_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # our own process group (start_new_session)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._out.close()


class RealUpstream(ServerProcess):
    """One real server in its own process group, with the JSON-lines log its app appends to."""

    def __init__(self, kind: str, workdir: Path, keep_alive: float | None = None, name: str | None = None):
        self.kind = kind
        self.name = name or kind
        self.port = free_port()
        self.log_path = Path(workdir) / f"{self.name}.jsonl"
        self.log_path.touch()
        env = dict(os.environ, UPSTREAM_LOG=str(self.log_path), UPSTREAM_NAME=kind,
                   PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
        if kind == "php-content-length":
            env["PHP_SEND_CONTENT_LENGTH"] = "1"
        self.launch(workdir, _argv(kind, self.port, keep_alive), env, HERE)

    def records(self) -> list[dict]:
        out = []
        with open(self.log_path) as f:
            for line in f:
                if line.endswith("\n"):
                    out.append(json.loads(line))
        return out

    def records_for(self, request_id: str) -> list[dict]:
        return [r for r in self.records() if r.get("request_id") == request_id]

