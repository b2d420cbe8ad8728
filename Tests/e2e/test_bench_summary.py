"""bench/proxy/run.py's paired_summary, which tail.py and large.py report with: a target's run is compared with the
first target's run of the same round only, so a failed round must drop that round's pair and not shift every later
round onto the wrong partner. docs/performance.md quotes these ratios; they are only paired if this holds."""

import random
import statistics

import pytest

from e2e_helpers import load_bench

run = load_bench("run")


def test_a_failed_round_drops_its_pair_and_keeps_the_rest_in_step():
    runs = {
        "peer": [{"ok": True, "x": 10.0}, {"ok": False, "error": "wrk"}, {"ok": True, "x": 20.0},
                 {"ok": True, "x": 40.0}],
        "mine": [{"ok": True, "x": 5.0}, {"ok": True, "x": 100.0}, {"ok": True, "x": 30.0},
                 {"ok": False, "error": "timeout"}],
    }
    summary = run.paired_summary(runs, "peer", ["x"])
    # Rounds 1 and 3 are the only ones where both ran: 5/10 and 30/20.
    assert summary["mine"]["paired_range"]["x"] == [0.5, 1.5]
    assert summary["mine"]["paired_to_first"]["x"] == 1.0
    # Medians are over each target's own successful runs, the failed ones left out.
    assert summary["mine"]["medians"]["x"] == 30.0
    assert summary["peer"]["medians"]["x"] == 20.0
    assert summary["peer"]["paired_to_first"]["x"] == 1.0
    # Every run is kept, in round order, for the JSON record.
    assert summary["mine"]["runs"] is runs["mine"]


def test_a_target_without_a_successful_run_is_left_out_and_a_zero_is_not_divided_by():
    runs = {
        "peer": [{"ok": True, "x": 0.0, "y": 2.0}, {"ok": True, "x": 4.0, "y": 4.0}],
        "mine": [{"ok": True, "x": 1.0, "y": 1.0}, {"ok": True, "x": 2.0, "y": 8.0}],
        "down": [{"ok": False}, {"ok": False}],
    }
    summary = run.paired_summary(runs, "peer", ["x", "y"])
    assert "down" not in summary
    assert summary["mine"]["paired_range"]["x"] == [0.5, 0.5]
    assert summary["mine"]["paired_range"]["y"] == [0.5, 2.0]


def test_pairs_match_a_plain_round_by_round_computation():
    rng = random.Random(25)
    for _ in range(200):
        rounds = rng.randint(1, 12)
        runs = {name: [] for name in ("first", "second", "third")}
        for _ in range(rounds):
            for name in runs:
                if rng.random() < 0.2:
                    runs[name].append({"ok": False})
                else:
                    runs[name].append({"ok": True, "v": rng.uniform(0.5, 2.0)})
        summary = run.paired_summary(runs, "first", ["v"])
        for name in ("second", "third"):
            expected = [b["v"] / a["v"] for a, b in zip(runs["first"], runs[name]) if a["ok"] and b["ok"]]
            good = [r["v"] for r in runs[name] if r["ok"]]
            if not good:
                assert name not in summary
                continue
            assert summary[name]["medians"]["v"] == statistics.median(good)
            if expected:
                assert summary[name]["paired_to_first"]["v"] == statistics.median(expected)
                assert summary[name]["paired_range"]["v"] == [min(expected), max(expected)]
            else:
                assert "v" not in summary[name]["paired_to_first"]


def test_named_binaries_are_parsed_in_order_and_bad_ones_are_refused(tmp_path):
    """ab.py, tail.py, syscalls.py and compressed.py take formwall builds as NAME=PATH through run.named_binaries."""
    exe = tmp_path / "fw"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    plain = tmp_path / "not-executable"
    plain.write_text("")
    plain.chmod(0o644)
    assert run.named_binaries([f"b={exe}", f"a={exe}"]) == [("b", str(exe)), ("a", str(exe))]
    assert run.named_binaries([]) == []
    for bad in ([f"={exe}"], ["a="], [str(exe)], [f"a={plain}"], [f"a={tmp_path / 'missing'}"],
                [f"a={exe}", f"a={exe}"]):
        with pytest.raises(SystemExit):
            run.named_binaries(bad)
    with pytest.raises(SystemExit, match="NAME not haproxy"):
        run.named_binaries([f"haproxy={exe}"], reserved=("haproxy",))
    assert run.named_binaries([f"haproxy2={exe}"], reserved=("haproxy",)) == [("haproxy2", str(exe))]
