#!/usr/bin/env python3
"""Soak test: does the proxy's memory come back after bursts of connections and aborted uploads?

    python3 bench/proxy/soak.py [--rounds 8] [--connections 10000] [--aborts 2000] [--targets formwall]

The target (performance issue): RSS back to within 2x the baseline after the connections close. (Formerly
formwall's RSS climbed 163 -> 533 MB over 8 rounds of 10,000 connections with no plateau, and stayed at 260 MB
after 2,000 aborted uploads, from a 25 MB baseline.)

formwall runs as `serve --workers 2` (supervisor + proxy process) in front of bench/proxy/sink.c; RSS is VmRSS
summed over formwall and all its descendants (as run.py does), PSS (smaps_rollup) likewise. Steps:
  baseline  RSS at rest right after start ("cold"), then after one request and --settle-max seconds at most of
            settling ("baseline", the figure the ratio uses; both are reported);
  rounds    --rounds times: open --connections concurrent connections, send one small multipart POST on each
            (all are open together before the first answer is read), read every answer (each must be 200),
            close them all; then poll RSS every 0.2 s until it stops falling (no new low for 1.5 s, at least
            --settle-min 3 s after the close: pooled upstream connections time out after 1.5 s and workers call
            malloc_trim a second after a burst; RSS can sit on a plateau for a second before the trim), at most
            --settle-max 6 s, and record it. A sampler thread keeps the
            peak RSS over all rounds (every 0.1 s);
  aborts    --aborts connections, all open together, each sending a request head with a Content-Length of
            --abort-length bytes and --abort-sent-kib KiB of the multipart body, then closing: half with a
            reset (SO_LINGER 0), half with a normal close; then the same settling, and RSS is recorded;
            --long-wait seconds later it is read once more (reported, not judged: late versus never).
PASS when RSS after every round and after the aborts is within 2x the baseline; the process set must not have
changed (a restarted proxy would hide growth). Exits 1 on FAIL (of formwall; nginx and HAProxy, if listed in
--targets, are only shown for comparison, with `worker_processes 2` / `nbthread 2`). Everything is bounded in
time (--time-limit, socket timeouts). Writes bench/out/soak.json. Stdlib only; reuses run.py's process handling,
and every process and temp file started or written here is removed on exit.
"""

import argparse
import atexit
import datetime
import json
import os
import resource
import secrets
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402  (bench/proxy/run.py: PROCS, sink, starters, /proc helpers)
from idle import read_answer  # noqa: E402  (bench/proxy/idle.py: one HTTP/1.1 answer, its status)


def mem_kib(pids):
    rss = sum(base.proc_status(p, "VmRSS") or 0 for p in pids)
    pss = sum(base.proc_pss(p) or 0 for p in pids)
    return rss, pss


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def check(self, what):
        if time.monotonic() > self.end:
            raise TimeoutError(f"time limit reached during {what}")


def multipart(boundary, data):
    return (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"random.bin\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()


def burst(port, n, request, timeout, limit):
    """n concurrent connections, one request each, every answer read, then all closed; `limit` seconds at most
    for the reads (answers still missing then count as TimeoutError). Returns status counts."""
    socks = []
    counts = {}
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
            s.sendall(request)
            socks.append(s)
        end = time.monotonic() + limit
        for s in socks:
            s.settimeout(min(timeout, max(0.01, end - time.monotonic())))
            try:
                st = read_answer(s)
            except (OSError, ValueError, IndexError) as e:
                st = type(e).__name__
            counts[st] = counts.get(st, 0) + 1
    finally:
        for s in socks:
            s.close()
    return counts


def aborted_uploads(port, n, head, partial, timeout):
    """n connections open together, each sends `head` + `partial` of a longer body, then half reset, half close."""
    socks = []
    sent = 0
    try:
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
            try:
                s.sendall(head + partial)
                sent += 1
            except OSError:
                pass
            socks.append(s)
    finally:
        for i, s in enumerate(socks):
            if i % 2 == 0:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
    return sent


def settle(pids_fn, settle_min, settle_max):
    """Polls RSS every 0.2 s until it has not reached a new low for 1.5 s (and at least settle_min s have passed),
    at most settle_max s. Returns (rss, pss, seconds waited, min rss seen, every sample in MiB)."""
    t0 = time.monotonic()
    low, low_t = None, t0
    trace = []
    while True:
        rss, pss = mem_kib(pids_fn())
        now = time.monotonic()
        trace.append(round(rss / 1024, 1))
        if low is None or rss < low:
            low, low_t = rss, now
        if now - t0 >= settle_max or (now - t0 >= settle_min and now - low_t >= 1.5):
            return rss, pss, now - t0, low, trace
        time.sleep(0.2)


def soak(args, target, boundary, deadline):
    pids_fn = lambda: [target.proc.pid] + [p for p in target.proxy_pids_fn() if p != target.proc.pid]  # noqa: E731
    pids0 = sorted(pids_fn())
    time.sleep(0.5)
    cold_rss, cold_pss = mem_kib(pids0)
    body = multipart(boundary, os.urandom(args.body_bytes))
    request = (f"POST /upload HTTP/1.1\r\nHost: soak\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    one = burst(target.port, 1, request, args.socket_timeout, args.burst_limit)
    if one != {200: 1}:
        raise RuntimeError(f"the first request got {one}")
    base_rss, base_pss, waited, _, _ = settle(pids_fn, args.settle_min, args.settle_max)
    out = {"pids": pids0, "cold_rss_mib": cold_rss / 1024, "cold_pss_mib": cold_pss / 1024,
           "baseline_rss_mib": base_rss / 1024, "baseline_pss_mib": base_pss / 1024, "rounds": []}
    print(f"  [{target.name}] baseline RSS {base_rss / 1024:.1f} MiB (cold {cold_rss / 1024:.1f}), "
          f"PSS {base_pss / 1024:.1f} MiB", flush=True)
    with base.RssSampler(pids0, 0.1) as sampler:
        for i in range(args.rounds):
            deadline.check(f"round {i + 1}")
            t0 = time.monotonic()
            counts = burst(target.port, args.connections, request, args.socket_timeout, args.burst_limit)
            took = time.monotonic() - t0
            rss, pss, waited, low, trace = settle(pids_fn, args.settle_min, args.settle_max)
            r = {"answers": {str(k): v for k, v in counts.items()}, "burst_s": took, "rss_mib": rss / 1024,
                 "pss_mib": pss / 1024, "settle_s": waited, "min_rss_mib": low / 1024,
                 "settle_trace_mib": trace}
            out["rounds"].append(r)
            print(f"  [{target.name}] round {i + 1}: answers {counts}, {took:.1f} s; after {waited:.1f} s RSS "
                  f"{rss / 1024:.1f} MiB, PSS {pss / 1024:.1f} MiB", flush=True)
    out["peak_rss_mib"] = sampler.max_total_kib / 1024
    out["peak_pss_mib"] = sampler.max_pss_kib / 1024
    deadline.check("aborted uploads")
    head = (f"POST /upload HTTP/1.1\r\nHost: soak\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
            f"Content-Length: {args.abort_length}\r\n\r\n--{boundary}\r\nContent-Disposition: form-data; "
            f"name=\"file\"; filename=\"big.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
    with base.RssSampler(pids0, 0.1) as sampler:
        t0 = time.monotonic()
        sent = aborted_uploads(target.port, args.aborts, head, os.urandom(args.abort_sent_kib * 1024),
                               args.socket_timeout)
        took = time.monotonic() - t0
        rss, pss, waited, low, trace = settle(pids_fn, args.settle_min, args.settle_max)
    out["aborts"] = {"connections": args.aborts, "sent_fully": sent, "burst_s": took, "rss_mib": rss / 1024,
                     "pss_mib": pss / 1024, "settle_s": waited, "peak_rss_mib": sampler.max_total_kib / 1024,
                     "settle_trace_mib": trace}
    print(f"  [{target.name}] {args.aborts} aborted uploads ({sent} sent their {args.abort_sent_kib} KiB), "
          f"{took:.1f} s; after {waited:.1f} s RSS {rss / 1024:.1f} MiB, PSS {pss / 1024:.1f} MiB "
          f"(peak {sampler.max_total_kib / 1024:.1f})", flush=True)
    if args.long_wait > 0:
        # Not part of the verdict: tells memory that comes back late from memory that stays.
        time.sleep(args.long_wait)
        rss, pss = mem_kib(pids_fn())
        out["aborts"]["rss_after_long_wait_mib"] = rss / 1024
        out["aborts"]["pss_after_long_wait_mib"] = pss / 1024
        print(f"  [{target.name}] {args.long_wait:.0f} s later: RSS {rss / 1024:.1f} MiB, PSS {pss / 1024:.1f} MiB",
              flush=True)
    out["pids_after"] = sorted(pids_fn())
    out["alive"] = target.proc.poll() is None
    after = [r["rss_mib"] for r in out["rounds"]] + [out["aborts"]["rss_mib"]]
    out["max_after_ratio"] = max(after) / out["baseline_rss_mib"]
    out["max_after_ratio_to_cold"] = max(after) / out["cold_rss_mib"]
    bad_answers = sum(v for r in out["rounds"] for k, v in r["answers"].items() if k != "200")
    out["non_200_answers"] = bad_answers
    out["pass"] = (out["max_after_ratio"] <= 2.0 and out["alive"] and out["pids_after"] == pids0
                   and bad_answers == 0)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    base.add_binary_args(ap)
    ap.add_argument("--targets", default="formwall", help="comma-separated: formwall,nginx,haproxy")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--body-bytes", type=int, default=1024, help="file part size of each round's POST")
    ap.add_argument("--aborts", type=int, default=2000)
    ap.add_argument("--abort-length", type=int, default=100 * 1024 * 1024, help="Content-Length they announce")
    ap.add_argument("--abort-sent-kib", type=int, default=256, help="body KiB each sends before closing")
    ap.add_argument("--settle-min", type=float, default=3.0)
    ap.add_argument("--settle-max", type=float, default=6.0)
    ap.add_argument("--long-wait", type=float, default=20.0,
                    help="seconds after the aborts' settling to read RSS once more (shown, not judged; 0 = skip)")
    ap.add_argument("--socket-timeout", type=float, default=10.0)
    ap.add_argument("--burst-limit", type=float, default=60.0, help="seconds at most to read a round's answers")
    ap.add_argument("--time-limit", type=float, default=900.0, help="seconds for the whole run")
    ap.add_argument("--ready-timeout", type=float, default=10.0)
    ap.add_argument("--out", default=os.path.join(base.REPO, "bench/out/soak.json"))
    args = ap.parse_args()
    args.formwall_workers = args.workers
    targets = [t for t in args.targets.split(",") if t]
    deadline = Deadline(args.time_limit)

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, base.on_signal)
    atexit.register(base.PROCS.cleanup)
    # Client sockets here, client + upstream sockets in the proxy and upstream sockets in the sink: raise the
    # descriptor limit (as root, the hard one too) before anything starts, so every child inherits it.
    need = 3 * args.connections + 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, max(need, hard)))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    if nofile[0] < need:
        print(f"note: RLIMIT_NOFILE is {nofile[0]} (hard limit, could not raise it), below the {need} wanted: a proxy "
              f"holding {args.connections} client and as many upstream connections can run out of descriptors")
    cap = 2 * args.connections + 64
    assert "worker_connections 4096;" in base.NGINX_CONF and "maxconn 4096" in base.HAPROXY_CONF, \
        "bench/proxy/run.py's peer configurations changed"
    base.NGINX_CONF = base.NGINX_CONF.replace("worker_connections 4096;", f"worker_connections {cap};").replace(
        "worker_processes {workers};", f"worker_processes {{workers}};\nworker_rlimit_nofile {cap + 64};")
    base.HAPROXY_CONF = base.HAPROXY_CONF.replace("maxconn 4096", f"maxconn {min(cap, (nofile[1] - 256) // 2)}")
    args.formwall_extra = ["--max-connections", str(cap)]   # per worker, as nginx's worker_connections

    workdir = tempfile.mkdtemp(prefix="formwall-soak-")
    os.chmod(workdir, 0o755)
    base.PROCS.paths.append(workdir)
    sink_exe = base.build_sink(workdir)
    uport = base.free_port()
    sink = base.PROCS.start([sink_exe, str(uport), "2"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    why = base.wait_port(uport, sink, 5)
    if why:
        sys.exit(f"sink {why}")
    boundary = "formwallsoak" + secrets.token_hex(14)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; RLIMIT_NOFILE {nofile}", flush=True)

    results = {}
    for name in targets:
        print(f"{name}:", flush=True)
        d = tempfile.mkdtemp(dir=workdir)
        target = None
        try:
            target = base.start_target(args, d, name, uport)
            results[name] = soak(args, target, boundary, deadline)
        except (RuntimeError, OSError, TimeoutError) as e:
            print(f"  {name}: FAILED: {e!r}", flush=True)
            results[name] = {"pass": False, "error": repr(e),
                             "log_tail": base.tail(os.path.join(d, "formwall.log"), 3000) if name == "formwall" else None,
                             "exit_status": target.proc.poll() if target is not None else None}
            if results[name]["log_tail"]:
                print("  formwall's output ends with:\n    " + results[name]["log_tail"].replace("\n", "\n    "))
        finally:
            if target is not None:
                base.PROCS.stop(target.proc, signal.SIGTERM)
        if sink.poll() is not None:
            sys.exit("sink died")

    print()
    print(f"RSS (MiB, summed over the proxy's processes) after each of {args.rounds} rounds of {args.connections} "
          f"connections and after {args.aborts} aborted uploads")
    for name, r in results.items():
        if "rounds" not in r:
            print(f"{name}: {r.get('error')}")
            continue
        rounds = " ".join(f"{x['rss_mib']:.0f}" for x in r["rounds"])
        verdict = "PASS" if r["pass"] else "FAIL"
        print(f"{name}: baseline {r['baseline_rss_mib']:.1f} (cold {r['cold_rss_mib']:.1f}), peak {r['peak_rss_mib']:.1f}, "
              f"rounds {rounds}, after aborts {r['aborts']['rss_mib']:.1f}; max after / baseline "
              f"{r['max_after_ratio']:.2f}x (/ cold {r['max_after_ratio_to_cold']:.2f}x): {verdict} (within 2x)")
        prounds = " ".join(f"{x['pss_mib']:.0f}" for x in r["rounds"])
        print(f"{'':{len(name) + 2}}PSS baseline {r['baseline_pss_mib']:.1f}, peak {r['peak_pss_mib']:.1f}, "
              f"rounds {prounds}, after aborts {r['aborts']['pss_mib']:.1f}")
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "loadavg_before": load, "cpus": os.cpu_count(), "rlimit_nofile": nofile, "args": vars(args)}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2)
    print(f"\nwrote {args.out}")
    if "formwall" in results and not results["formwall"].get("pass"):
        sys.exit(1)


if __name__ == "__main__":
    main()
