#!/usr/bin/env python3
"""Large uploads in many short rotated rounds, with what the client and the upstream spent on each.

    python3 bench/proxy/large.py [TARGET ...] [--rounds 30] [--size-mib 1024] [--workers 1]

TARGET is a peer run.py knows (nginx-tuned, nginx, haproxy, relay) or NAME=PATH, a formwall binary (default:
nginx-tuned formwall=.build/release/formwall relay). Every target is started once in front of one
bench/proxy/sink.c with two threads, then each round uploads run.py's multipart body (one file part of
--size-mib MiB, from /dev/shm) once through every target with curl, the order rotated by one each round. Here a
1 GiB upload takes about 0.4 s, so a round is short and 30 rounds cost a minute: many rounds, not long runs, are
what makes a median steady on a host whose speed drifts by 10-15 % within minutes.

For each upload: GB/s; the proxy's CPU seconds (/proc/PID/stat of its processes); the client's (curl's CPU
time and voluntary context switches, from getrusage of this script's children: how often it slept waiting for
the proxy to take bytes); the sink's CPU seconds; TCP segments sent by the whole machine (OutSegs of
/proc/net/snmp). On two cores the client, the proxy and the sink share the machine, so a proxy can be slowed
by what it makes its neighbours do: the twenty-fifth session found curl spending 1.13-1.14x the CPU per GiB behind
formwall that it spends behind nginx tuned or the byte relay (docs/performance.md).

The report gives each target's medians and its ratios to the first target's upload of the same round (median
and range). Every upload must answer 200 with the whole body sent. Writes bench/out/large.json. Stdlib only;
every process and file started or written here is removed on exit.
"""

import argparse
import datetime
import os
import resource
import shutil
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402  (bench/proxy/run.py: PROCS, the sink, the peers, the large upload)

PEERS = ("nginx", "nginx-tuned", "haproxy", "relay")
KEYS = ("gbps", "proxy_cpu_s_per_gib", "client_cpu_s_per_gib", "client_sleeps_per_gib", "sink_cpu_s_per_gib",
        "segments_per_gib")


def upload(options, target, files, body_len, sink_pid, workdir):
    """One large upload through `target`: run.py's measurement plus the client's, the sink's and the segments."""
    segments = base.tcp_out_segments()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = base.large_upload(options, target, files["large_path"], body_len, files["boundary"], sink_pid, workdir)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if not result.get("ok"):
        return result
    gib = body_len / base.GIB
    result.update(
        proxy_cpu_s_per_gib=result["proxy_cpu_s"] / gib,
        client_cpu_s_per_gib=((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) / gib,
        client_sleeps_per_gib=(after.ru_nvcsw - before.ru_nvcsw) / gib,
        sink_cpu_s_per_gib=result["sink_cpu_s"] / gib,
        segments_per_gib=(base.tcp_out_segments() - segments) / gib)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="*", metavar="TARGET",
                    help=f"one of {', '.join(PEERS)}, or NAME=PATH of a formwall binary")
    ap.add_argument("--rounds", type=base.positive_int, default=30)
    ap.add_argument("--size-mib", type=base.positive_int, default=1024)
    ap.add_argument("--workers", type=base.positive_int, default=1,
                    help="formwall's --workers, nginx's worker_processes, HAProxy's nbthread, the relay's threads")
    ap.add_argument("--relay-buffer-kib", type=base.positive_int, default=128)
    ap.add_argument("--curl-timeout", type=base.positive_int, default=300)
    ap.add_argument("--ready-timeout", type=float, default=10.0)
    ap.add_argument("--out", default=os.path.join(base.REPO, "bench/out/large.json"))
    args = ap.parse_args()
    specs = args.targets or ["nginx-tuned", f"formwall={os.path.join(base.REPO, '.build/release/formwall')}", "relay"]
    parsed = [spec.partition("=")[::2] for spec in specs]  # (name, formwall path or "")
    for spec, (name, path) in zip(specs, parsed):
        if path and not os.access(path, os.X_OK):
            raise SystemExit(f"not an executable formwall binary: {spec!r}")
        if not path and name not in PEERS:
            raise SystemExit(f"unknown target {spec!r}: expected one of {', '.join(PEERS)} or NAME=PATH")
    names = [name for name, _ in parsed]
    if len(set(names)) != len(names):
        raise SystemExit("give the targets distinct names")

    workdir = base.start_session("formwall-large-")
    files = base.body_files(workdir, "large")
    body_len = base.write_body(files["large_path"], files["boundary"], args.size_mib * base.MIB)
    uport, sink_proc = base.start_sink_process(workdir, 2, args.ready_timeout)

    targets = {}
    for name, path in parsed:
        options = types.SimpleNamespace(formwall=path, nginx=shutil.which("nginx") or "/usr/sbin/nginx",
                                        haproxy=shutil.which("haproxy") or "/usr/sbin/haproxy",
                                        formwall_workers=args.workers, relay_buffer_kib=args.relay_buffer_kib,
                                        ready_timeout=args.ready_timeout, curl_timeout=args.curl_timeout,
                                        rss_interval=0.05)
        directory = os.path.join(workdir, name)
        os.makedirs(directory)
        try:
            targets[name] = (base.start_target(options, directory, "formwall" if path else name, uport), options)
        except RuntimeError as e:
            raise SystemExit(f"{name}: {e}")
        warm = upload(options, targets[name][0], files, body_len, sink_proc.pid, workdir)
        if not warm.get("ok"):
            raise SystemExit(f"{name}: the warm-up upload failed: {warm.get('error')}")

    runs = {name: [] for name in names}
    failures = []
    for i in range(args.rounds):
        shown = []
        for name in names[i % len(names):] + names[:i % len(names)]:
            target, options = targets[name]
            result = upload(options, target, files, body_len, sink_proc.pid, workdir)
            runs[name].append(result)
            if not result.get("ok"):
                failures.append(f"{name}, round {i + 1}: {result.get('error')}")
                shown.append(f"{name} FAILED")
                continue
            shown.append(f"{name} {result['gbps']:.2f}")
        print(f"round {i + 1}: " + ", ".join(shown) + " GB/s", flush=True)

    first = names[0]
    summary = base.paired_summary(runs, first, KEYS)
    print(f"\n{args.size_mib} MiB uploads, {args.workers} worker(s), {args.rounds} rotated rounds; medians per GiB, "
          f"and paired to {first} (median, range)")
    base.print_medians(summary, names, "target", [
        ("GB/s", "gbps", 6, 2, 1), ("proxy s", "proxy_cpu_s_per_gib", 8, 3, 1),
        ("client s", "client_cpu_s_per_gib", 9, 3, 1), ("sleeps", "client_sleeps_per_gib", 7, 0, 1),
        ("sink s", "sink_cpu_s_per_gib", 7, 3, 1), ("segments", "segments_per_gib", 9, 0, 1)])
    base.print_paired(summary, names, first, KEYS, "_per_gib")
    document = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "workers": args.workers, "rounds": args.rounds, "size_mib": args.size_mib,
                "targets": dict(zip(names, specs)), "results": summary}
    base.finish_session(os.path.abspath(args.out), document, failures)


if __name__ == "__main__":
    main()
