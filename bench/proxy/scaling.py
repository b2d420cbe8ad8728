#!/usr/bin/env python3
"""Scaling from 1 to 2 workers on small requests: formwall, nginx and HAProxy, in one run.

    python3 bench/proxy/scaling.py [--wrk-duration 10] [--reps 1] [--formwall PATH]

Each proxy runs in front of bench/proxy/sink.c with 1 and then 2 workers (formwall `serve --workers N`,
nginx `worker_processes N`, HAProxy `nbthread N`; run.py's starters and configurations, each start fresh), and
wrk sends run.py's 10 KiB multipart upload from 64 keep-alive connections (-t2) for --wrk-duration seconds.
Two placements, both measured:
  pinned    wrk runs under `taskset -c 1` and every thread of the sink is pinned to CPU 1
            (sched_setaffinity on each /proc/SINK/task/TID); the proxy is not pinned and may use both CPUs.
  unpinned  nothing is pinned: wrk, sink and proxy share both CPUs as the scheduler likes.
On a 2-core machine there is no placement where the load generator is not a competitor: pinned, the proxy's
first worker has CPU 0 to itself, and a second worker can only use what wrk and the sink leave of CPU 1. The
CPU time of wrk (getrusage of children) and of the proxy (/proc/PID/stat) during each wrk run is recorded, in
cores, so it shows who had the CPU.

For each proxy and placement: req/s with 1 and 2 workers (median of --reps) and the ratio 2/1. Non-2xx answers
and socket errors are counted; a run with non-2xx answers counts as failed. Writes bench/out/scaling.json.
Stdlib only; reuses run.py's process handling, and every process and temp file is removed on exit.
"""

import argparse
import datetime
import os
import resource
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402  (bench/proxy/run.py: PROCS, sink, starters, wrk)

PROXIES = ("formwall", "nginx", "haproxy")
PLACEMENTS = ("pinned", "unpinned")


def pin_all_threads(pid, cpus):
    """Sets the CPU affinity of every thread of pid (sched_setaffinity is per thread)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(tid), cpus)


def start_proxy(args, workdir, name, workers, uport):
    args.formwall_workers = workers  # run.py's starters read the worker/thread count from here
    return base.start_target(args, tempfile.mkdtemp(dir=workdir), name, uport)


def one_run(args, workdir, name, workers, uport, lua, small_path, boundary, placement):
    target = start_proxy(args, workdir, name, workers, uport)
    try:
        base.warm_up(target, small_path, boundary)
        pids = [target.proc.pid] + [p for p in target.proxy_pids_fn() if p != target.proc.pid]
        ticks0 = {p: base.cpu_ticks(p) for p in pids}
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        prefix = ["taskset", "-c", "1"] if placement == "pinned" else []
        w = base.run_wrk(args, target, lua, prefix=prefix)
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        proxy_s = sum(base.cpu_ticks(p) - t for p, t in ticks0.items()) / base.TICK
        if w.get("ok"):
            secs = w["duration_us"] / 1e6
            w["proxy_cores"] = proxy_s / secs
            w["wrk_cores"] = ((ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)) / secs
        return w
    finally:
        base.PROCS.stop(target.proc, signal.SIGTERM)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--formwall", default=os.path.join(base.REPO, ".build/release/formwall"))
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--haproxy", default=shutil.which("haproxy") or "/usr/sbin/haproxy")
    ap.add_argument("--proxies", default=",".join(PROXIES))
    ap.add_argument("--placements", default=",".join(PLACEMENTS))
    ap.add_argument("--reps", type=int, default=1, help="wrk runs per proxy, worker count and placement")
    base.add_small_upload_args(ap)
    ap.add_argument("--out", default=os.path.join(base.REPO, "bench/out/scaling.json"))
    args = ap.parse_args()
    proxies = [p for p in args.proxies.split(",") if p]
    placements = [p for p in args.placements.split(",") if p]
    for tool in ("gcc", "wrk", "curl", "taskset"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found")
    if os.cpu_count() < 2:
        sys.exit("needs at least 2 CPUs")

    workdir = base.start_session("formwall-scaling-")
    boundary = "formwallbench" + secrets.token_hex(14)
    small_path = os.path.join(workdir, "small.body")
    base.write_body(small_path, boundary, args.small_kib * 1024)
    lua = os.path.join(workdir, "upload.lua")
    with open(lua, "w") as f:
        f.write(base.WRK_LUA.format(body=small_path, boundary=boundary))
    sink_exe = base.build_sink(workdir)
    uport = base.free_port()
    sink = base.PROCS.start([sink_exe, str(uport), str(args.sink_threads)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    why = base.wait_port(uport, sink, 5)
    if why:
        sys.exit(f"sink {why}")
    all_cpus = set(range(os.cpu_count()))
    load = os.getloadavg()
    busy = base.cpu_busy_fraction(1.0)
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, CPU {busy * 100:.0f}% busy before the run",
          flush=True)

    runs = {}  # (placement, proxy, workers) -> [wrk results]
    failures = []
    for rep in range(args.reps):
        for placement in placements:
            pin_all_threads(sink.pid, {1} if placement == "pinned" else all_cpus)
            for name in proxies:
                for workers in (1, 2):
                    try:
                        w = one_run(args, workdir, name, workers, uport, lua, small_path, boundary, placement)
                    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
                        w = {"ok": False, "error": str(e)}
                    runs.setdefault(f"{placement}/{name}/{workers}", []).append(w)
                    if w.get("ok"):
                        print(f"  {placement:8} {name:8} {workers} worker(s): {w['rps']:8.0f} req/s, "
                              f"p99 {w['p99_us'] / 1000:.2f} ms, proxy {w['proxy_cores']:.2f} cores, "
                              f"wrk {w['wrk_cores']:.2f} cores, errors {w['errors'] or 0}", flush=True)
                    else:
                        failures.append(f"{placement}/{name}/{workers}: {w.get('error')}")
                        print(f"  {placement:8} {name:8} {workers} worker(s): FAILED {w.get('error')}", flush=True)
                    if sink.poll() is not None:
                        sys.exit("sink died")

    summary = {}
    print()
    print(f"{args.small_kib} KiB multipart uploads, wrk -t{args.wrk_threads} -c{args.wrk_connections} "
          f"-d{args.wrk_duration}s, median of {args.reps}; pinned = wrk and sink on CPU 1, proxy free")
    print(f"{'placement':10} {'proxy':9} {'1 worker':>10} {'2 workers':>10} {'2/1':>6} "
          f"{'proxy cores 1/2':>16} {'wrk cores 1/2':>14}")
    for placement in placements:
        for name in proxies:
            med = {}
            cores = {}
            for workers in (1, 2):
                good = [w for w in runs.get(f"{placement}/{name}/{workers}", []) if w.get("ok")]
                med[workers] = statistics.median(w["rps"] for w in good) if good else None
                cores[workers] = ((statistics.median(w["proxy_cores"] for w in good),
                                   statistics.median(w["wrk_cores"] for w in good)) if good else (None, None))
            r = base.ratio(med[2], med[1])
            summary[f"{placement}/{name}"] = {"rps_1": med[1], "rps_2": med[2], "ratio": r,
                                              "proxy_cores_1": cores[1][0], "proxy_cores_2": cores[2][0],
                                              "wrk_cores_1": cores[1][1], "wrk_cores_2": cores[2][1]}
            print(f"{placement:10} {name:9} {base.fmt(med[1], '10.0f'):>10} {base.fmt(med[2], '10.0f'):>10} "
                  f"{base.fmt(r, '6.2f'):>6} "
                  f"{base.fmt(cores[1][0], '.2f') + ' / ' + base.fmt(cores[2][0], '.2f'):>16} "
                  f"{base.fmt(cores[1][1], '.2f') + ' / ' + base.fmt(cores[2][1], '.2f'):>14}")

    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "loadavg_before": load, "cpu_busy_before": busy, "cpus": os.cpu_count(), "args": vars(args),
            "pinning": {"pinned": "wrk under taskset -c 1; sink threads sched_setaffinity {1}; proxy unpinned",
                        "unpinned": "no affinity set"},
            "failures": failures}
    base.finish_session(args.out, {"meta": meta, "summary": summary, "runs": runs}, failures)


if __name__ == "__main__":
    main()
