"""Rules reload (SIGHUP) under load.

Client threads send requests continuously. The rules file is swapped for one that rejects field `b`; after
SIGHUP the answers switch from 200 to 403 `unknown_part` with no errors or failed connections. Then an
invalid rules file is installed and SIGHUP sent: the policy stays as it was and stderr names the error.
"""

import os
import threading
import time

import pytest

from policy_helpers import Formwall, Part, multipart, new_id, request, wait_for
from policy_helpers import upstream  # noqa: F401  (fixture)

THREADS = 6

ALLOW_B = """route /r {
    methods POST;
    field a;
    field b;
}
"""
REJECT_B = """route /r {
    methods POST;
    field a;
    # b is gone: an unknown part, 403
}
"""
INVALID = """route /r {
    methods POST;
    field a { max 10MB; }
    bogus-directive;
}
"""


def install(path, text):
    """Replaces the rules file atomically, as a deployment would."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class Load:
    def __init__(self, port):
        self.port = port
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.results = [[] for _ in range(THREADS)]  # (started, finished, status or error text)
        self.body, self.ctype = multipart([Part("a", b"1"), Part("b", b"2")])
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(THREADS)]

    def run(self, i):
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                resp = request(self.port, "POST", "/r", [("Content-Type", self.ctype), ("X-Request-Id", new_id("r"))],
                               self.body, timeout=10)
                outcome = resp.status
                if resp.status == 403:
                    assert resp.json()["error"] == "unknown_part" and resp.json()["part"] == "b", resp
                elif resp.status != 200:
                    outcome = f"unexpected {resp!r}"
            except Exception as e:  # noqa: BLE001 - every failure is recorded and fails the test
                outcome = f"{type(e).__name__}: {e}"
            with self.lock:
                self.results[i].append((started, time.monotonic(), outcome))

    def count(self, status, since=0.0):
        with self.lock:
            return min(sum(1 for s, _, o in r if o == status and s >= since) for r in self.results)

    def errors(self):
        with self.lock:
            return [o for r in self.results for _, _, o in r if o not in (200, 403)]


def test_reload_under_load(tmp_path, upstream):  # noqa: F811
    rules = tmp_path / "policy.rules"
    install(rules, ALLOW_B)
    fw = Formwall(tmp_path, upstream, rules)
    load = Load(fw.port)
    try:
        for t in load.threads:
            t.start()
        wait_for(lambda: load.count(200) >= 20, 30, "every client thread to get 20 answers under the old rules")

        install(rules, REJECT_B)
        hup_at = time.monotonic()
        fw.reload()
        wait_for(lambda: fw.events("rules reloaded"), 10, "the reload message on stderr")
        seen_at = time.monotonic()
        # Every worker switches right after the reload; 0.5 s of grace covers a worker busy in its event loop.
        wait_for(lambda: load.count(403, since=seen_at + 0.5) >= 20, 30,
                 "every client thread to get 20 answers under the new rules")

        # An invalid file: the reload fails, the policy stays, stderr says why.
        install(rules, INVALID)
        fw.reload()
        wait_for(lambda: fw.events("rules reload failed"), 10, "the reload failure on stderr")
        failed_at = time.monotonic()
        wait_for(lambda: load.count(403, since=failed_at) >= 20, 30,
                 "every client thread to get 20 answers after the failed reload")
    finally:
        load.stop.set()
        for t in load.threads:
            t.join(timeout=15)
        events = fw.events()
        fw.stop()

    assert load.errors() == [], f"failed requests during the reload: {load.errors()[:10]}"
    for results in load.results:
        before = [o for s, f, o in results if f < hup_at]
        assert before and set(before) == {200}, before
        # Once the reload was reported, every request that started a little later is refused.
        after = [o for s, _, o in results if s >= seen_at + 0.5]
        assert after and set(after) == {403}, after
        # The switch happens once: no 200 after a 403 except within the reload window itself.
        first_403 = next(s for s, _, o in results if o == 403)
        late_200 = [s for s, _, o in results if o == 200 and s > first_403 and s >= seen_at]
        assert late_200 == [], f"200 answers after the new rules were in force: {len(late_200)}"

    (failure,) = [e for e in events if e["msg"] == "rules reload failed"]
    assert failure["level"] == "error", failure
    assert "bogus-directive" in failure["error"] or "10MB" in failure["error"], failure
    assert str(rules) in failure["error"] or rules.name in failure["error"], failure
    assert [e["msg"] for e in events].count("rules reloaded") == 1, events
