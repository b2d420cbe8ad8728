#!/usr/bin/env python3
"""System calls, CPU time and context switches per small request: formwall against HAProxy and nginx, in one run.

    python3 bench/proxy/syscalls.py [--targets formwall,haproxy,nginx-tuned] [--seconds 5] [--reps 3] [--workers 1]
    python3 bench/proxy/syscalls.py --targets haproxy BEFORE=PATH AFTER=PATH    (two formwall builds and HAProxy)

Each proxy (--workers workers or threads, 1 by default, in front of bench/proxy/sink.c, as in run.py) serves run.py's
10 KiB multipart uploads from wrk (64 connections, 2 threads) for --seconds, --reps times. During each wrk run the
proxy's processes are watched:
  - user and system CPU time, from /proc/PID/stat before and after, per request;
  - with `perf` (Debian package linux-perf), `perf stat -e raw_syscalls:sys_enter` and the tracepoints of the
    calls a proxy makes (read, recvfrom, sendmsg, sendto, writev, epoll_wait, ...), per request;
  - context switches per request: the whole machine's (`ctxt` of /proc/stat: wrk's and the sink's sleeps and
    wake-ups are most of them, and a proxy that writes its responses in a burst causes fewer), the proxy's own
    voluntary ones (it slept in epoll_wait) and involuntary ones (it was preempted, mostly by a thread its write
    woke), and the sink's voluntary ones (how often the upstream slept between requests);
  - TCP segments sent per request, by every socket of the machine (`OutSegs` of /proc/net/snmp): 4 when each
    request and response is one segment each way and every ACK rides on data.
  - where the rest of the machine's time went, per request: the sink's CPU (/proc/PID/stat), wrk's (getrusage of
    children) and the cores' idle time (`idle` and `iowait` of /proc/stat). A proxy can cost its neighbours
    more than itself: the load generator and the upstream share the cores with it.
Formwall builds given as NAME=PATH run as further targets under those names (`serve --workers N`, no rules), for
the before and after of a change; `--targets` then names only the other targets (an empty string for none).
The ratios at the end are the first formwall target's medians over each other target's.
The targets run side by side and are measured in interleaved rounds (each round runs each target once, the
order rotated), as in run.py. The medians over --reps are printed and written to bench/out/syscalls.json.
Without perf (or without access to the tracepoints) only the CPU times are reported. The figures say where a request's time goes, not how fast
the proxy is: run.py measures that.

Reuses run.py's process handling and peers; every process and file started or written here is removed on exit.
"""

import argparse
import datetime
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402  (bench/proxy/run.py: PROCS, sink, peers, wrk's Lua body)

# formwall waits with epoll_pwait (aarch64 has no epoll_wait), HAProxy and nginx with epoll_wait.
CALLS = ["read", "recvfrom", "recvmsg", "write", "writev", "sendto", "sendmsg", "epoll_wait", "epoll_pwait",
         "epoll_ctl", "accept4", "close", "splice"]


def cpu_ticks(pids):
    """(user, system) clock ticks summed over `pids` (run.py's `cpu_times`)."""
    times = [base.cpu_times(pid) for pid in pids]
    return sum(t[0] for t in times), sum(t[1] for t in times)


def switches(pids):
    """(voluntary, involuntary) context switches summed over every thread of `pids` (0, 0 for one that is gone)."""
    vol = invol = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches:"):
                            vol += int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches:"):
                            invol += int(line.split()[1])
            except OSError:
                continue
    return vol, invol


def machine_switches():
    """Context switches of the whole machine since boot (`ctxt` of /proc/stat)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("ctxt "):
                return int(line.split()[1])
    return 0


def machine_idle_ticks():
    """Clock ticks all CPUs spent idle since boot (`idle` + `iowait` of the `cpu` line of /proc/stat)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[4]) + int(fields[5]) if fields and fields[0] == "cpu" and len(fields) > 5 else 0


def children_cpu_seconds():
    """User + system CPU seconds of this process's waited-for children (wrk, once its run returns)."""
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def counters(pids, sink_pid):
    """Every counter `one_run` reports, read once: the proxy's CPU ticks and context switches, the sink's CPU
    ticks and switches, wrk's CPU time, the machine's idle ticks, switches and TCP segments sent. A run's figures
    are the differences of two readings."""
    (user, system), (vol, invol) = cpu_ticks(pids), switches(pids)
    sink = [sink_pid] if sink_pid else []
    return {"user": user, "system": system, "proxy_voluntary": vol, "proxy_involuntary": invol,
            "sink_ticks": sum(cpu_ticks(sink)), "sink_voluntary": switches(sink)[0],
            "wrk_seconds": children_cpu_seconds(), "idle_ticks": machine_idle_ticks(),
            "machine_switches": machine_switches(), "tcp_segments": base.tcp_out_segments()}


def perf_usable():
    if shutil.which("perf") is None:
        return False
    r = subprocess.run(["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "--", "true"],
                       capture_output=True, text=True)
    return r.returncode == 0 and "not supported" not in r.stderr and "<not counted>" not in r.stderr


def one_run(args, target, lua, use_perf, sink_pid=None):
    pids = target.proxy_pids_fn()
    perf = None
    if use_perf:
        events = ",".join(["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{c}" for c in CALLS])
        perf = subprocess.Popen(["perf", "stat", "-x,", "-e", events, "-p", ",".join(map(str, pids)), "--",
                                 "sleep", str(args.seconds + 1)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
    before = counters(pids, sink_pid)
    w = subprocess.run(["wrk", "-t2", "-c64", f"-d{args.seconds}s", "-s", lua, target.url()],
                       capture_output=True, text=True, timeout=args.seconds + 60)
    delta = {k: v - before[k] for k, v in counters(pids, sink_pid).items()}
    counts = {}
    if perf is not None:
        _, err = perf.communicate(timeout=60)
        for line in err.strip().splitlines():
            parts = line.split(",")
            if len(parts) > 2 and re.match(r"^[0-9.]+$", parts[0]):
                name = parts[2].replace("syscalls:sys_enter_", "").replace("raw_syscalls:sys_enter", "all")
                counts[name] = float(parts[0])
    m = re.search(r"WRK_RESULT requests=(\d+).*status=(\d+)", w.stdout)
    if not m or int(m.group(1)) == 0:
        return None, f"wrk: {w.stdout[-300:]} {w.stderr[-300:]}"
    n = int(m.group(1))
    if int(m.group(2)) != 0:
        return None, f"{m.group(2)} answers were not 2xx"
    tick_us = 1e6 / base.TICK
    result = {"requests": n, "rps": n / args.seconds,
              "user_us": delta["user"] * tick_us / n, "system_us": delta["system"] * tick_us / n}
    result["calls"] = {k: v / n for k, v in counts.items()}
    # Where the machine's time went, per request: the sink's and wrk's CPU and the cores' idle time (the proxy's
    # is user_us + system_us); with the proxy's, about the cores x seconds / requests.
    result["sink_us"] = delta["sink_ticks"] * tick_us / n
    result["wrk_us"] = delta["wrk_seconds"] * 1e6 / n
    result["idle_us"] = delta["idle_ticks"] * tick_us / n
    result.update({k: delta[k] / n for k in SCHED_KEYS})
    return result, None


MACHINE_KEYS = ("sink_us", "wrk_us", "idle_us")
SCHED_KEYS = ("machine_switches", "proxy_voluntary", "proxy_involuntary", "sink_voluntary", "tcp_segments")


def median_of(runs):
    out = {k: statistics.median(r[k] for r in runs) for k in ("rps", "user_us", "system_us") + MACHINE_KEYS + SCHED_KEYS}
    names = set().union(*(r["calls"] for r in runs))
    out["calls"] = {k: statistics.median(r["calls"].get(k, 0.0) for r in runs) for k in sorted(names)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    base.add_binary_args(ap)
    ap.add_argument("binaries", nargs="*", metavar="NAME=PATH", help="formwall builds to run as further targets")
    ap.add_argument("--targets", default="formwall,haproxy,nginx-tuned",
                    help="comma-separated subset of formwall,haproxy,nginx,nginx-tuned")
    ap.add_argument("--seconds", type=base.positive_int, default=5, help="seconds per wrk run")
    ap.add_argument("--reps", type=base.positive_int, default=3, help="wrk runs per target (medians reported)")
    ap.add_argument("--small-kib", type=int, default=10)
    ap.add_argument("--workers", type=base.positive_int, default=1,
                    help="formwall workers, HAProxy threads and nginx workers (default 1)")
    ap.add_argument("--ready-timeout", type=float, default=10.0)
    ap.add_argument("--out", default=os.path.join(base.REPO, "bench/out/syscalls.json"))
    args = ap.parse_args()
    args.formwall_workers = args.workers  # run.py's starters read the worker/thread count from here
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    binaries = dict(base.named_binaries(args.binaries, reserved=tuple(base.TARGETS)))
    targets += list(binaries)
    if not targets:
        sys.exit("no targets")
    for tool in ("gcc", "wrk"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found")
    use_perf = perf_usable()
    if not use_perf:
        print("perf with syscall tracepoints is not available: CPU times only", flush=True)

    workdir = base.start_session("formwall-syscalls-")
    files = base.small_upload_files(workdir, "syscalls", args.small_kib)
    sink_exe = base.build_sink(workdir)
    uport = base.free_port()
    sink = base.PROCS.start([sink_exe, str(uport), "2"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    if base.wait_port(uport, sink, 5):
        sys.exit("the sink did not start")

    # All targets run side by side and are measured in interleaved rounds (run.py's `rotated` order), so that
    # the machine's drift over minutes falls on all of them alike.
    results, failures = {}, []
    started = {}
    for name in targets:
        try:
            if name in binaries:
                build = argparse.Namespace(**dict(vars(args), formwall=binaries[name]))
                started[name] = base.start_target(build, tempfile.mkdtemp(dir=workdir), "formwall", uport)
            else:
                started[name] = base.start_target(args, tempfile.mkdtemp(dir=workdir), name, uport)
        except RuntimeError as e:
            failures.append(f"{name}: {e}")
    runs = {name: [] for name in started}
    for rep in range(args.reps):
        for name in base.rotated(list(started), rep):
            if name not in runs:
                continue
            r, why = one_run(args, started[name], files["lua_path"], use_perf, sink.pid)
            if r is None:
                failures.append(f"{name}: {why}")
                del runs[name]
                continue
            runs[name].append(r)
            print(f"  [{name}] {rep + 1}/{args.reps}: {r['rps']:.0f} req/s, user {r['user_us']:.1f} µs, system "
                  f"{r['system_us']:.1f} µs, {r['calls'].get('all', 0):.2f} calls, "
                  f"{r['machine_switches']:.3f} switches per request", flush=True)
    for target in started.values():
        base.PROCS.stop(target.proc)
    for name in started:
        if runs.get(name):
            results[name] = median_of(runs[name])

    print(f"\nper 10 KiB upload, {args.workers} worker(s), wrk -t2 -c64, median of {args.reps} runs of {args.seconds} s")
    print(f"{'target':12} {'req/s':>8} {'user µs':>8} {'sys µs':>8} {'calls':>6}  by call")
    for name, r in results.items():
        by = ", ".join(f"{k} {v:.2f}" for k, v in r["calls"].items() if k != "all" and v >= 0.01)
        print(f"{name:12} {r['rps']:8.0f} {r['user_us']:8.1f} {r['system_us']:8.1f} "
              f"{r['calls'].get('all', float('nan')):6.2f}  {by}")
    print("\nthe machine's time per request, µs: the proxy's CPU, the sink's, wrk's, the cores' idle time, and the rest"
          " (other processes and time not charged to a process: cores x seconds / requests less the four)")
    print(f"{'target':12} {'proxy':>8} {'sink':>8} {'wrk':>8} {'idle':>8} {'rest':>8}")
    for name, r in results.items():
        proxy = r["user_us"] + r["system_us"]
        whole = (os.cpu_count() or 1) * 1e6 / r["rps"]
        rest = whole - proxy - r["sink_us"] - r["wrk_us"] - r["idle_us"]
        print(f"{name:12} {proxy:8.1f} {r['sink_us']:8.1f} {r['wrk_us']:8.1f} {r['idle_us']:8.1f} {rest:8.1f}")
    print("\ncontext switches per request (machine: every process; proxy: voluntary / involuntary; sink: voluntary)"
          " and TCP segments sent per request")
    print(f"{'target':12} {'machine':>8} {'proxy v':>8} {'proxy i':>8} {'sink v':>8} {'segments':>8}")
    for name, r in results.items():
        print(f"{name:12} {r['machine_switches']:8.3f} {r['proxy_voluntary']:8.3f} {r['proxy_involuntary']:8.3f} "
              f"{r['sink_voluntary']:8.3f} {r['tcp_segments']:8.2f}")
    first = next((n for n in results if n == "formwall" or n in binaries), None)
    if first is not None:
        # Ratios of the medians; the rounds were interleaved, so drift falls on every target alike.
        for name in (n for n in results if n != first):
            f, p = results[first], results[name]
            line = (f"{first} / {name}: req/s {f['rps'] / p['rps']:.3f}, user+system µs "
                    f"{(f['user_us'] + f['system_us']) / (p['user_us'] + p['system_us']):.3f}")
            if p["machine_switches"] > 0:
                line += f", machine switches {f['machine_switches'] / p['machine_switches']:.3f}"
            print(line)
    base.finish_session(args.out, {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "seconds": args.seconds, "reps": args.reps, "workers": args.workers, "perf": use_perf, "binaries": binaries,
        "results": results},
        failures)


if __name__ == "__main__":
    main()
