#!/usr/bin/env python3
"""The latency distribution of 10 KiB uploads behind HAProxy and one or more formwall binaries, and how the
upstream's threads shared the work.

    python3 bench/proxy/tail.py [NAME=PATH ...] [--workers 2] [--rounds 10] [--no-haproxy]

Every proxy (HAProxy with `nbthread` = --workers unless --no-haproxy, then each formwall binary, default
.build/release/formwall, with `serve --workers N`, no rules) is started in front of one bench/proxy/sink.c with
two threads, each thread with its own SO_REUSEPORT listener. Then `--rounds` rounds of wrk (run.py's 10 KiB
multipart body, `-t2 -c64`, `--wrk-duration` seconds), each round running every proxy once, the order rotated
by one each round. For each run: requests per second, wrk's p50, p90, p99 and p99.9 latencies, and the sink's
split, the CPU time of its busier thread over its other thread's (1.00: the upstream's two threads did equal
work). The report gives each proxy's medians and its ratios to the first proxy's run of the same round
(median and range): the host's speed drifts by 10-15 % within minutes here, so only paired ratios compare.

The sink's split is what separated formwall from HAProxy with two workers until the twenty-fourth session:
a pool that reused the newest idle upstream connection sent a worker's requests to the few connections freed
last, unevenly spread over the sink's threads (docs/performance.md).
Every wrk run must complete without non-2xx answers.

Writes bench/out/tail.json. Stdlib only; every process and file started or written here is removed on exit.
"""

import argparse
import datetime
import glob
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402  (bench/proxy/run.py: PROCS, the sink, wrk, the proxies)

KEYS = ("rps", "p50_us", "p90_us", "p99_us", "p999_us", "sink_split")


def thread_ticks(pid):
    """utime + stime of each thread of `pid`, in clock ticks, by thread id."""
    ticks = {}
    for path in glob.glob(f"/proc/{pid}/task/*/stat"):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2:].split()
        ticks[path] = int(fields[11]) + int(fields[12])
    return ticks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="*", metavar="NAME=PATH", help="formwall binaries, named (default: "
                    "formwall=.build/release/formwall)")
    ap.add_argument("--workers", type=base.positive_int, default=2)
    ap.add_argument("--rounds", type=base.positive_int, default=10)
    ap.add_argument("--wrk-duration", type=base.positive_int, default=5)
    ap.add_argument("--no-haproxy", action="store_true", help="formwall binaries only")
    ap.add_argument("--haproxy", default="/usr/sbin/haproxy")
    ap.add_argument("--ready-timeout", type=float, default=10.0)
    ap.add_argument("--out", default=os.path.join(base.REPO, "bench/out/tail.json"))
    args = ap.parse_args()
    binaries = base.named_binaries(args.binaries or [f"formwall={os.path.join(base.REPO, '.build/release/formwall')}"],
                                   reserved=("haproxy",))
    if args.no_haproxy and len(binaries) < 2:
        raise SystemExit("--no-haproxy needs at least two binaries to compare")

    workdir = base.start_session("formwall-tail-")
    files = base.small_upload_files(workdir, "tail")
    uport, sink_proc = base.start_sink_process(workdir, 2, args.ready_timeout)

    targets = {}
    names = []
    if not args.no_haproxy:
        options = types.SimpleNamespace(haproxy=args.haproxy, formwall_workers=args.workers,
                                        ready_timeout=args.ready_timeout)
        directory = os.path.join(workdir, "haproxy")
        os.makedirs(directory)
        try:
            targets["haproxy"] = base.start_target(options, directory, "haproxy", uport)
        except RuntimeError as e:
            raise SystemExit(f"haproxy: {e}")
        names.append("haproxy")
    for name, path in binaries:
        directory = os.path.join(workdir, name)
        os.makedirs(directory)
        options = types.SimpleNamespace(formwall=path, formwall_workers=args.workers, ready_timeout=args.ready_timeout)
        target, reason = base.start_formwall(options, directory, uport)
        if target is None:
            raise SystemExit(f"{name}: {reason}")
        targets[name] = target
        names.append(name)

    wrk = types.SimpleNamespace(wrk_threads=2, wrk_connections=64, wrk_duration=args.wrk_duration)
    warm = types.SimpleNamespace(wrk_threads=2, wrk_connections=64, wrk_duration=1)
    for target in targets.values():
        base.run_wrk(warm, target, files["lua_path"])
    runs = {name: [] for name in names}
    failures = []
    for i in range(args.rounds):
        shown = []
        for name in names[i % len(names):] + names[:i % len(names)]:
            before = thread_ticks(sink_proc.pid)
            result = base.run_wrk(wrk, targets[name], files["lua_path"])
            after = thread_ticks(sink_proc.pid)
            if not result["ok"]:
                failures.append(f"{name}, round {i + 1}: {result['error']}")
                runs[name].append(result)
                continue
            work = sorted(after[t] - before.get(t, 0) for t in after)
            result["sink_split"] = work[-1] / max(work[0], 1) if len(work) >= 2 else 1.0
            runs[name].append(result)
            shown.append(f"{name} {result['rps']:.0f} req/s p99 {result['p99_us'] / 1000:.2f} ms "
                         f"split {result['sink_split']:.2f}")
        print(f"round {i + 1}: " + ", ".join(shown), flush=True)

    first = names[0]
    summary = base.paired_summary(runs, first, KEYS)
    print(f"\n{args.workers} worker(s), {args.rounds} rounds of wrk -t2 -c64 -d{args.wrk_duration}s, 10 KiB uploads; "
          f"medians, and paired to {first} (median, range)")
    base.print_medians(summary, names, "proxy", [
        ("req/s", "rps", 9, 0, 1), ("p50 ms", "p50_us", 7, 2, 1e-3), ("p90 ms", "p90_us", 7, 2, 1e-3),
        ("p99 ms", "p99_us", 7, 2, 1e-3), ("p99.9", "p999_us", 7, 2, 1e-3), ("split", "sink_split", 6, 2, 1)])
    base.print_paired(summary, names, first, KEYS, "_us")
    document = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "workers": args.workers, "rounds": args.rounds, "wrk_duration_s": args.wrk_duration,
                "binaries": dict(binaries), "haproxy": not args.no_haproxy, "results": summary}
    base.finish_session(os.path.abspath(args.out), document, failures)


if __name__ == "__main__":
    main()
