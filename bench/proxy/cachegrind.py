#!/usr/bin/env python3
"""User-space work and cache misses per 10 KiB upload under concurrent load: formwall against HAProxy.

    python3 bench/proxy/cachegrind.py [--formwall PATH] [--targets formwall,haproxy] [--seconds 5,15]

instructions.py counts formwall's instructions with one connection sending requests one after another. This
script asks a different question: under wrk's 64 concurrent connections, how much user-space work and how many
cache misses does each proxy cause per request, and does formwall's request path touch more memory than
HAProxy's (a larger footprint would slow the sink and wrk sharing the cores, not only the proxy)?

Each proxy (formwall `serve --workers 1 --single-process`, HAProxy `nbthread 1` with run.py's configuration)
runs under `valgrind --tool=cachegrind --cache-sim=yes` with a first-level data cache of 48 KiB (12-way), an
instruction cache of 32 KiB (8-way) and a last level of 1 MiB (16-way): this machine's per-core L1 and L2. wrk
(`-t1 -c64`, run.py's 10 KiB multipart upload; every answer must be a 2xx) loads it for S1 and then, in a fresh
start, S2 seconds; the difference of cachegrind's totals over the difference of the requests served gives the
figures per request, without start-up and shut-down. Under valgrind a proxy is about 50 times slower, so a run
serves thousands of requests, not hundreds of thousands.

Reported per request: instructions (Ir), data reads and writes (Dr, Dw), first-level misses (I1mr, D1mr,
D1mw) and last-level misses (ILmr, DLmr, DLmw). Cachegrind simulates user space only: the kernel's copies and
TCP work, most of a request's time, are not in these figures. It has no prefetcher either, so its miss counts
are upper bounds on what the hardware pays. Valgrind 3.19 cannot read the DWARF 5 debug information of the Swift
toolchain, so formwall runs from a copy stripped of it (`strip -g`).

Needs valgrind and wrk. Writes bench/out/cachegrind.json. Stdlib only; every process and file started or written
here is removed on exit.
"""

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402  (bench/proxy/run.py: PROCS, the sink, ports, HAProxy's configuration)
import instructions  # noqa: E402  (instructions.py: stripped_copy, wait_listening)

CACHES = ["--D1=49152,12,64", "--I1=32768,8,64", "--LL=1048576,16,64"]
EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


def read_summary(path):
    """Cachegrind's totals, by event name."""
    events = totals = None
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("summary:"):
                totals = [int(v) for v in line.split()[1:]]
    if events is None or totals is None:
        raise RuntimeError(f"no summary in {path}")
    return dict(zip(events, totals))


def one_run(args, kind, exe, seconds, workdir, uport, lua):
    """Starts `kind` under cachegrind, loads it with wrk for `seconds`, stops it; (requests, totals)."""
    port = base.free_port()
    out = os.path.join(workdir, f"cachegrind.{kind}.{seconds}")
    argv = ["valgrind", "--tool=cachegrind", "--cache-sim=yes"] + CACHES + [f"--cachegrind-out-file={out}"]
    if kind == "haproxy":
        conf = os.path.join(workdir, "haproxy.cfg")
        with open(conf, "w") as f:
            f.write(base.HAPROXY_CONF.format(threads=1, port=port, uport=uport))
        argv += [args.haproxy, "-db", "-f", conf]
    else:
        argv += [exe, "serve", "--listen", f"127.0.0.1:{port}", "--upstream", f"http://127.0.0.1:{uport}",
                 "--workers", "1", "--single-process"]
    log = os.path.join(workdir, f"{kind}.{seconds}.log")
    with open(log, "wb") as logf:
        p = base.PROCS.start(argv, stdout=logf, stderr=subprocess.STDOUT)
    try:
        if kind == "haproxy":
            why = base.wait_port(port, p, args.ready_timeout)
            if why:
                raise RuntimeError(f"haproxy under valgrind: {why}; its log ends with:\n{base.tail(log)}")
        else:
            instructions.wait_listening(p, log, args.ready_timeout)  # not a port probe: see there
    except RuntimeError:
        base.PROCS.stop(p)
        raise
    w = subprocess.run(["wrk", "-t1", "-c64", f"-d{seconds}s", "-s", lua, f"http://127.0.0.1:{port}/upload"],
                       capture_output=True, text=True, timeout=seconds + 120)
    base.PROCS.stop(p, grace=60)
    m = re.search(r"WRK_RESULT requests=(\d+).*status=(\d+)", w.stdout)
    if not m or int(m.group(1)) == 0:
        raise RuntimeError(f"{kind}: wrk: {w.stdout[-300:]} {w.stderr[-300:]}")
    if int(m.group(2)) != 0:
        raise RuntimeError(f"{kind}: {m.group(2)} answers were not 2xx")
    return int(m.group(1)), read_summary(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    base.add_binary_args(ap)
    ap.add_argument("--targets", default="formwall,haproxy", help="comma-separated subset of formwall,haproxy")
    ap.add_argument("--seconds", default="5,15", help="the two wrk durations S1,S2 (S1 < S2)")
    ap.add_argument("--ready-timeout", type=float, default=60.0, help="seconds to wait for a proxy under valgrind")
    ap.add_argument("--out", default=os.path.join(base.REPO, "bench/out/cachegrind.json"))
    args = ap.parse_args()
    s1, s2 = (int(v) for v in args.seconds.split(","))
    if not 0 < s1 < s2:
        raise SystemExit("--seconds: two durations S1,S2 with 0 < S1 < S2")
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    for t in targets:
        if t not in ("formwall", "haproxy"):
            raise SystemExit(f"unknown target {t}")
    for tool in ("valgrind", "wrk", "gcc"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found")

    workdir = base.start_session("formwall-cachegrind-")
    files = base.small_upload_files(workdir, "cachegrind")
    exe = instructions.stripped_copy(args.formwall, workdir, "formwall") if "formwall" in targets else None
    sink_exe = base.build_sink(workdir)
    uport = base.free_port()
    sink = base.PROCS.start([sink_exe, str(uport), "1"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    if base.wait_port(uport, sink, 5):
        raise SystemExit("the sink did not start")

    results, failures = {}, []
    for kind in targets:
        try:
            n1, a = one_run(args, kind, exe, s1, workdir, uport, files["lua_path"])
            n2, b = one_run(args, kind, exe, s2, workdir, uport, files["lua_path"])
        except RuntimeError as e:
            failures.append(str(e))
            continue
        if n2 <= n1:
            failures.append(f"{kind}: the longer run served no more requests ({n1}, {n2})")
            continue
        per = {e: (b.get(e, 0) - a.get(e, 0)) / (n2 - n1) for e in EVENTS}
        results[kind] = {"per_request": per, "requests": [n1, n2]}
        print(f"  [{kind}] {n1} and {n2} requests: " + ", ".join(f"{e} {per[e]:.0f}" for e in EVENTS), flush=True)

    print(f"\nper 10 KiB upload under wrk -t1 -c64, user space only (cachegrind: D1 48 KiB, I1 32 KiB, LL 1 MiB)")
    print(f"{'target':10} " + " ".join(f"{e:>8}" for e in EVENTS))
    for kind, r in results.items():
        print(f"{kind:10} " + " ".join(f"{r['per_request'][e]:8.0f}" for e in EVENTS))
    if "formwall" in results and "haproxy" in results:
        f, h = results["formwall"]["per_request"], results["haproxy"]["per_request"]
        print("formwall / haproxy: " + ", ".join(f"{e} {f[e] / h[e]:.2f}" for e in EVENTS if h[e] > 0))
    base.finish_session(args.out, {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "seconds": [s1, s2], "caches": CACHES,
        "valgrind": base.tool_version(["valgrind", "--version"]), "results": results}, failures)


if __name__ == "__main__":
    main()
