#!/usr/bin/env python3
"""Two or more formwall binaries side by side on 10 KiB uploads, for the before and after of one change.

    python3 bench/proxy/ab.py BEFORE=PATH AFTER=PATH [--config policy|bare] [--rounds 8] [--workers 1]

Each binary runs `formwall serve --workers N` (default 1: the proxy is then the bottleneck, so its own cost is
what the rate shows) in front of one bench/proxy/sink.c, all started first. With `--config policy` (the default)
each loads costs.py's typical route; with `bare`, no rules. Then `--rounds` rounds of wrk (run.py's 10 KiB
multipart body, `-t2 -c64`, `--wrk-duration` seconds), each round running every binary once, the order rotated by
one each round. The host's speed drifts by 10-15 % within minutes here, so the report gives each binary's median
and its paired ratio to the first binary: its run over the first's run of the same round, median and range;
and the same for wrk's p99 latency.
Every wrk run must complete without non-2xx answers.

Writes bench/out/ab.json. Stdlib only; every process and file started or written here is removed on exit.
"""

import argparse
import datetime
import os
import statistics
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402  (bench/proxy/run.py: PROCS, the sink, wrk)
import costs  # noqa: E402  (costs.py: the typical policy)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+", metavar="NAME=PATH", help="two or more formwall binaries, named")
    ap.add_argument("--config", choices=("policy", "bare"), default="policy")
    ap.add_argument("--rounds", type=base.positive_int, default=8)
    ap.add_argument("--workers", type=base.positive_int, default=1)
    ap.add_argument("--wrk-duration", type=base.positive_int, default=5)
    ap.add_argument("--ready-timeout", type=float, default=10.0)
    ap.add_argument("--out", default=os.path.join(base.REPO, "bench/out/ab.json"))
    args = ap.parse_args()
    binaries = base.named_binaries(args.binaries)
    if len(binaries) < 2:
        raise SystemExit("give at least two binaries")

    workdir = base.start_session("formwall-ab-")
    files = base.small_upload_files(workdir, "ab")
    uport = base.start_sink(workdir, 2)
    extra = []
    if args.config == "policy":
        rules = os.path.join(workdir, "typical.rules")
        with open(rules, "w") as f:
            f.write(costs.RULES.format(body_max_mib=1, file_max_mib=1))
        extra = ["--rules", rules]

    targets = {}
    for name, path in binaries:
        directory = os.path.join(workdir, name)
        os.makedirs(directory)
        options = types.SimpleNamespace(formwall=path, formwall_workers=args.workers, ready_timeout=args.ready_timeout)
        target, reason = base.start_formwall(options, directory, uport, extra)
        if target is None:
            raise SystemExit(f"{name}: {reason}")
        targets[name] = target

    wrk = types.SimpleNamespace(wrk_threads=2, wrk_connections=64, wrk_duration=args.wrk_duration)
    warm = types.SimpleNamespace(wrk_threads=2, wrk_connections=64, wrk_duration=1)
    for target in targets.values():
        base.run_wrk(warm, target, files["lua_path"])
    names = [name for name, _ in binaries]
    rates = {name: [] for name in names}
    tails = {name: [] for name in names}
    failures = []
    for i in range(args.rounds):
        for name in names[i % len(names):] + names[:i % len(names)]:
            result = base.run_wrk(wrk, targets[name], files["lua_path"])
            if not result["ok"]:
                failures.append(f"{name}, round {i + 1}: {result['error']}")
                continue
            rates[name].append(result["rps"])
            tails[name].append(result["p99_us"] / 1000)
        print(f"round {i + 1}: " + ", ".join(f"{n} {rates[n][-1]:.0f}" for n in names if rates[n]), flush=True)

    first = names[0]
    summary = {}
    print(f"\n{args.config}, {args.workers} worker(s), {args.rounds} rounds of wrk -t2 -c64 -d{args.wrk_duration}s, "
          "10 KiB uploads")
    for name in names:
        if not rates[name]:
            continue
        paired = [b / a for a, b in zip(rates[first], rates[name])]
        paired_p99 = [b / a for a, b in zip(tails[first], tails[name])]
        summary[name] = {"rps": rates[name], "median_rps": statistics.median(rates[name]),
                         "paired_to_first": statistics.median(paired), "paired_range": [min(paired), max(paired)],
                         "p99_ms": tails[name], "median_p99_ms": statistics.median(tails[name]),
                         "p99_paired_to_first": statistics.median(paired_p99)}
        print(f"  {name:12} {summary[name]['median_rps']:9.0f} req/s   paired to {first}: "
              f"{summary[name]['paired_to_first']:.3f} ({min(paired):.3f}-{max(paired):.3f})   "
              f"p99 {summary[name]['median_p99_ms']:.2f} ms, paired {summary[name]['p99_paired_to_first']:.3f}")
    document = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "config": args.config, "workers": args.workers, "rounds": args.rounds,
                "binaries": dict(binaries), "results": summary}
    base.finish_session(os.path.abspath(args.out), document, failures)


if __name__ == "__main__":
    main()
