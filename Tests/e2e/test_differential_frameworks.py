"""Semantic differential suite: what eight real framework parsers read from the bodies Formwall forwards.

Every variant of differential/mutations.py (seeded; 500+ bodies in classes, plus browser-shaped controls) is
sent through one `formwall serve --rules differential/policy.rules` per backend (werkzeug, Starlette, PHP,
busboy, undici, Django, aiohttp, Go; differential/backends/). For each variant either Formwall rejected it
(its own JSON error, and no backend logged the request), or every backend read exactly the parts
`formwall inspect --rules` says Formwall forwards, and the backends' single-value `form` views agree (names
the policy lets repeat are listed apart). Results go to differential/out/results.json; docs/differential.md is
regenerated from them by differential/make_doc.py. See docs/differential.md.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from e2e_helpers import Formwall

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "differential"))
sys.path.insert(0, str(HERE / "differential" / "backends"))

import mutations  # noqa: E402
import runner  # noqa: E402
from launch import BACKENDS, Backend  # noqa: E402

pytestmark = [pytest.mark.differential, pytest.mark.timeout(300)]

SUITE_BUDGET = 240.0  # seconds for starting everything and the whole run; the suite must stay under 5 min


@pytest.fixture(scope="module")
def differential_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("differential")
    started = time.monotonic()
    backends, proxies = {}, []
    try:
        for name in BACKENDS:
            backends[name] = Backend(name, work)
        for name, be in backends.items():
            proxies.append(Formwall(work, be.url, ["--rules", str(runner.POLICY), "--upstream-body", "spool",
                                                   "--workers", "1"], name=f"formwall-{name}"))
        ports = {name: fw.port for name, fw in zip(backends, proxies)}
        variants = mutations.variants()
        records = runner.run(variants, ports, backends, work)
        probes = runner.probes(backends)
        crashed = [f"formwall-{n} exited with {fw.proc.poll()}" for n, fw in zip(backends, proxies)
                   if fw.proc.poll() is not None]
        crashed += [f"backend {n} exited with {be.proc.poll()}: {be.output()[-500:]}" for n, be in backends.items()
                    if be.proc.poll() is not None]
    finally:
        for fw in proxies:
            fw.kill()
        for be in backends.values():
            be.stop()
    elapsed = time.monotonic() - started
    runner.OUT.mkdir(exist_ok=True)
    doc = {"seed_variants": len(variants), "elapsed_s": round(elapsed, 1), "backends": BACKENDS,
           "repeat_allowed_names": sorted(runner.repeat_allowed_names()), "probes": probes, "records": records}
    (runner.OUT / "results.json").write_text(json.dumps(doc, indent=1))
    return {"records": records, "elapsed": elapsed, "crashed": crashed, "variants": variants}


def test_variants_cover_every_class():
    counts = Counter(v.cls for v in mutations.variants())
    assert set(counts) == set(mutations.CLASSES), counts
    assert sum(counts.values()) - counts["control"] >= 500, counts
    again = mutations.variants()
    assert [(v.id, v.body) for v in again] == [(v.id, v.body) for v in mutations.variants()], "not deterministic"


def test_judge_reports_a_backend_that_reads_another_value():
    """The comparison can fail: one backend reading `admin` where Formwall forwarded `user` is a disagreement."""
    user = runner._part("role", None, None, b"user")
    admin = runner._part("role", None, None, b"admin")
    insp = {"status": 200, "parts": [user]}
    ok = {"status": 200, "json": {"parts": [user], "form": {"role": {k: user[k] for k in ("size", "sha256")}}}}
    bad = {"status": 200, "json": {"parts": [admin], "form": {"role": {k: admin[k] for k in ("size", "sha256")}}}}
    v = mutations.Variant("t", "duplicates", mutations.CT, b"", "")
    verdict = runner.judge(v, insp, {"a": ok, "b": bad, "c": ok}, {"a": True, "b": True, "c": True}, set())
    assert verdict["verdict"] == "disagreed", verdict
    assert any(r.startswith("b: ") for r in verdict["reasons"]), verdict["reasons"]
    fw_error = {"status": 413, "json": {"error": "too_many_repeats", "status": 413, "request_id": "x"}}
    leaked = runner.judge(v, insp, {"a": fw_error}, {"a": True}, set())
    assert leaked["verdict"] == "disagreed", leaked


def test_nothing_crashed_and_within_budget(differential_run):
    assert not differential_run["crashed"], differential_run["crashed"]
    assert differential_run["elapsed"] < SUITE_BUDGET, f"the run took {differential_run['elapsed']:.0f} s"


def test_browser_shaped_controls_are_forwarded_and_read_alike(differential_run):
    bad = [r for r in differential_run["records"] if r["control"] and r["verdict"] != "agreed"]
    assert not bad, "\n".join(f"{r['id']} ({r['note']}): {r['verdict']} {r.get('error', '')} {r['reasons']}"
                              for r in bad)


def test_every_forwarded_variant_is_read_alike_by_every_framework(differential_run):
    bad = [r for r in differential_run["records"] if not r["control"] and r["verdict"] == "disagreed"]
    lines = [f"{r['id']} [{r['class']}] {r['note'][:60]}\n    " + "\n    ".join(x[:300] for x in r["reasons"])
             for r in bad]
    assert not bad, f"{len(bad)} forwarded variants read differently (details in " \
                    f"{runner.OUT / 'results.json'}):\n" + "\n".join(lines)
