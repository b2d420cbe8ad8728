"""Fixtures for the Formwall end-to-end suite.

* ``upstream`` / ``upstream_factory``: the werkzeug upstream (upstream_app.py), started on a free
  port it picks itself and reports with a ``READY <port>`` line; killed on teardown.
* ``formwall_factory`` / ``proxy``: ``$FORMWALL_BIN serve`` on a free port, ready when the port
  accepts; stderr goes to a file that is attached to the report of a failing test; stopped on
  teardown. A formwall that exited on its own during a test (a crash) fails that test at teardown.
"""

from __future__ import annotations

import signal
import subprocess

import pytest

from e2e_helpers import Formwall, Upstream


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: big uploads (hundreds of MiB or more)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for label, path in getattr(item, "_e2e_logs", []):
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            if text:
                report.sections.append((f"{label} ({path})", text[-8000:]))


def _attach(request, label, path):
    if not hasattr(request.node, "_e2e_logs"):
        request.node._e2e_logs = []
    request.node._e2e_logs.append((label, path))


@pytest.fixture
def upstream_factory(tmp_path, request):
    started: list[Upstream] = []

    def start(mode: str = "echo", delay: float = 5.0, extra: list[str] = ()) -> Upstream:
        up = Upstream(tmp_path, mode=mode, delay=delay, name=f"upstream{len(started)}", extra=list(extra))
        started.append(up)
        _attach(request, f"upstream stderr [{mode}]", up.stderr_path)
        _attach(request, "upstream log", up.log_path)
        return up

    yield start
    for up in started:
        up.stop()


@pytest.fixture
def upstream(upstream_factory) -> Upstream:
    return upstream_factory("echo")


@pytest.fixture
def formwall_factory(tmp_path, request):
    started: list[Formwall] = []

    def start(upstream_url: str | None, *args: str, port: int | None = None,
              env: dict[str, str | None] | None = None, preexec=None) -> Formwall:
        name = f"formwall{len(started)}"
        _attach(request, "formwall stderr", tmp_path / f"{name}.stderr")
        fw = Formwall(tmp_path, upstream_url, list(args), name=name, port=port, env=env, preexec=preexec)
        started.append(fw)
        return fw

    yield start
    crashed = []
    for fw in started:
        code = fw.proc.poll()
        if code is not None and not fw.stopped_by_test:
            crashed.append(f"formwall exited on its own with code {code} (argv {' '.join(fw.argv)})")
        if fw.proc.poll() is None:
            fw.proc.send_signal(signal.SIGTERM)
            try:
                fw.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                fw.kill()
        fw._close_files()
    if crashed:
        pytest.fail("; ".join(crashed))


@pytest.fixture
def proxy(upstream, formwall_factory) -> Formwall:
    """Formwall with default options in front of an echo upstream."""
    return formwall_factory(upstream.url)


@pytest.fixture
def real_upstream_factory(tmp_path, request):
    """Real servers from Tests/e2e/upstreams/servers.py (werkzeug, php, gunicorn, uvicorn, node,
    django-*), on a free port, ready when a direct GET answers; killed (process group) on teardown.
    Their output and the app's JSON-lines log are attached to a failing test's report."""
    from upstreams.servers import RealUpstream

    started = []

    def start(kind: str, keep_alive: float | None = None):
        up = RealUpstream(kind, tmp_path, keep_alive=keep_alive, name=f"{kind}{len(started)}")
        started.append(up)
        _attach(request, f"{kind} output", up.output_path)
        _attach(request, f"{kind} app log", up.log_path)
        return up

    yield start
    for up in started:
        up.stop()
