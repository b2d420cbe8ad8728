#!/usr/bin/env python3
"""Reference counts that two workers write on the same object: what would stop formwall scaling past 2 cores.

    python3 bench/proxy/sharing.py [--formwall PATH] [--configs bare,policy,audit] [--workers 2] [--seconds 0.3]

Scaling from 1 to 2 workers cannot be timed on this 2-core machine (docs/performance.md, "Scaling"): wrk and the
upstream need the cores the second worker would use. What can be measured here is what makes workers slow each
other down on a machine with more cores: writes to the same cache line from two threads. Each worker has its own
event loop, connections, pools and counters, so the only such writes left on a request's path would be
reference counts: a Swift `retain` or `release` is an atomic add on the object's header, and when two workers
touch one object (a policy's storage, a configuration string) each of them pulls that line from the other's
cache on every request.

formwall (`serve --workers N`, the repository's binary copied into a temporary directory) runs in front of
bench/proxy/sink.c under wrk's 10 KiB uploads (run.py's body, `-t2 -c64`). `perf probe` puts uprobes on the
runtime's `swift_retain`, `swift_release`, `swift_retain_n` and `swift_release_n` (bridged values and
`bridgeObjectRetain` go through them) and on `ConnectionMachine.beginExchange` (once per request), and
`perf record -g` takes every hit for `--seconds`. Each object a probe names is classified by the process's
memory map: an object inside the executable's image is static and immortal (the runtime returns without
writing), anything else is on the heap. The report gives per request: the reference-count operations, those on
heap objects, and those on heap objects that more than one worker thread touched in the window (shared), with
the call sites of the shared ones. The uprobes slow formwall a hundredfold; only the counts are meaningful.

Configurations: `bare` (no rules, no audit log, as run.py's formwall), `policy` (costs.py's typical route) and
`audit` (that policy and an audit log, which hashes every file part).
Needs root, `perf` (Debian `linux-perf`) and wrk. Writes bench/out/sharing.json; every probe, process and file
made here is removed on exit.
"""

import argparse
import collections
import datetime
import os
import re
import shutil
import subprocess
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402  (bench/proxy/run.py: PROCS, the sink, wrk's body, the formwall starter)
import costs  # noqa: E402  (costs.py: the typical policy)

RC_FUNCTIONS = ("swift_retain", "swift_release", "swift_retain_n", "swift_release_n")
REQUEST_SYMBOL = re.compile(r"ConnectionMachineV13beginExchange\w*F$")
RUNTIME_FRAME = re.compile(r"^(swift_|_swift_|swift::|bool swift::|void swift::)")
PROBE_GROUP = "probe_fwshare"
USER_SPACE_END = 1 << 47
VALUE_WITNESS = re.compile(r"(Vw[a-z]{2}|VW[A-Z][a-z]|Vwx[a-z]|WOh|WOe|WOc|WOs)$")


def symbol_address(binary, pattern):
    """The address of the one function symbol of `binary` whose name matches `pattern`."""
    out = subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout
    found = [line.split()[0] for line in out.splitlines()
             if len(line.split()) == 3 and line.split()[1] in "tT" and pattern.search(line.split()[2])]
    if len(found) != 1:
        raise SystemExit(f"expected one symbol matching {pattern.pattern} in {binary}, found {len(found)}")
    return "0x" + found[0].lstrip("0")


def add_probes(binary):
    """The uprobes on `binary` (a copy named fwshare, so the group is PROBE_GROUP); removed by remove_probes."""
    remove_probes()
    for name in RC_FUNCTIONS:
        args = ["obj=%di:u64"] + (["n=%si:u32"] if name.endswith("_n") else [])
        subprocess.run(["perf", "probe", "-q", "-x", binary, name] + args, check=True)
    subprocess.run(["perf", "probe", "-q", "-x", binary, f"request={symbol_address(binary, REQUEST_SYMBOL)}"],
                   check=True)


def remove_probes():
    subprocess.run(["perf", "probe", "-q", "-d", f"{PROBE_GROUP}:*"], capture_output=True)


def image_ranges(pid, binary):
    """The address ranges of `binary`'s image in process `pid`: its own mappings and the anonymous mapping right
    after them (.bss). Objects there are the compiler's and the runtime's static ones (the empty array, string
    literals, constant arrays), immortal; the heap ([heap], malloc's arenas) lies elsewhere."""
    ranges = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if len(fields) >= 6 and os.path.realpath(fields[5]) == os.path.realpath(binary):
                ranges.append((start, end))
            elif len(fields) == 5 and ranges and ranges[-1][1] == start:
                ranges.append((start, end))
    return ranges


def parse_script(text):
    """`perf script -F pid,tid,event,trace,ip,sym` output as (tid, event, object, count, frames) tuples; the
    object is (pid, address), or None for a probe without one (`request`)."""
    samples = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        head = re.match(r"\s*(\d+)/(\d+)\s+" + PROBE_GROUP + r":(\w+):(.*)$", lines[0])
        if not head:
            continue
        pid, tid, event, trace = int(head.group(1)), int(head.group(2)), head.group(3), head.group(4)
        obj = re.search(r"obj=(0x[0-9a-f]+|\d+)", trace)
        n = re.search(r"\bn=(0x[0-9a-f]+|\d+)", trace)
        frames = []
        for line in lines[1:]:
            parts = line.split(None, 1)
            if len(parts) == 2:
                frames.append(parts[1].split("+0x")[0].strip())
        samples.append((tid, event, (pid, int(obj.group(1), 0)) if obj else None, int(n.group(1), 0) if n else 1,
                        frames))
    return samples


def call_site(frames):
    """The first caller outside the Swift runtime; a value witness (`...Vwcp`, `...VWOh`: a copy or destroy of a
    type) is named with its own caller."""
    callers = [f for f in frames if not RUNTIME_FRAME.match(f) and not f.startswith("[")]
    if not callers:
        return frames[-1] if frames else "?"
    if VALUE_WITNESS.search(callers[0]) and len(callers) > 1:
        return f"{callers[0]} < {callers[1]}"
    return callers[0]


def classify(samples, images):
    """Per-request figures from parsed samples; `images`: each process's executable address ranges (static
    objects), by pid."""
    requests = sum(1 for s in samples if s[1] == "request")
    def is_heap(obj):
        # The runtime returns at once, without a write, for a null or tagged value (a small string's bits, a
        # bridged value's flags): only user-space addresses are objects, and those in the image are immortal.
        pid, addr = obj
        return 4096 <= addr < USER_SPACE_END and not any(a <= addr < b for a, b in images.get(pid, []))
    ops = [s for s in samples if s[1] != "request"]
    heap = [s for s in ops if s[2] and is_heap(s[2])]
    threads = collections.defaultdict(set)
    for tid, _, obj, _, _ in heap:
        threads[obj].add(tid)
    shared = [s for s in heap if len(threads[s[2]]) > 1]
    sites = collections.Counter()
    for tid, event, obj, n, frames in shared:
        sites[(event, call_site(frames))] += n
    per = (lambda xs: sum(s[3] for s in xs) / requests) if requests else (lambda xs: None)
    return {"requests": requests, "threads": len({s[0] for s in ops}),
            "ops_per_request": per(ops), "heap_ops_per_request": per(heap),
            "shared_ops_per_request": per(shared), "shared_objects": len({s[2] for s in shared}),
            "shared_sites": [{"event": e, "site": site, "per_request": n / requests}
                             for (e, site), n in sites.most_common(12)] if requests else []}


def measure(args, name, extra, workdir, uport, files, binary):
    options = types.SimpleNamespace(formwall=binary, formwall_workers=args.workers, ready_timeout=args.ready_timeout)
    directory = os.path.join(workdir, name)
    os.makedirs(directory)
    target, why = base.start_formwall(options, directory, uport, extra)
    if target is None:
        raise SystemExit(f"{name}: formwall did not start: {why}")
    base.warm_up(target, files["small_path"], files["boundary"])
    load = base.PROCS.start(["wrk", "-t2", "-c64", f"-d{int(args.seconds) + 30}s", "-s", files["lua_path"],
                             target.url()], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # wrk's connections open and its first requests are answered before the window
    pids = target.proxy_pids_fn()
    images = {pid: image_ranges(pid, binary) for pid in pids}
    data = os.path.join(directory, "perf.data")
    events = ",".join(f"{PROBE_GROUP}:{e}" for e in RC_FUNCTIONS + ("request",))
    subprocess.run(["perf", "record", "-q", "-g", "-e", events, "-o", data, "-p", ",".join(map(str, pids)),
                    "--", "sleep", str(args.seconds)], check=True)
    base.PROCS.stop(load)
    text = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,event,trace,ip,sym"],
                          capture_output=True, text=True, check=True).stdout
    base.PROCS.stop(target.proc)
    result = classify(parse_script(text), images)
    if not result["requests"]:
        raise SystemExit(f"{name}: no request began in the {args.seconds} s window")
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--formwall", default=os.path.join(base.REPO, ".build/release/formwall"))
    ap.add_argument("--configs", default="bare,policy,audit", help="comma-separated subset of bare,policy,audit")
    ap.add_argument("--workers", type=base.positive_int, default=2)
    ap.add_argument("--seconds", type=float, default=0.3, help="the recording window (every probe hit is kept)")
    ap.add_argument("--ready-timeout", type=float, default=10.0)
    ap.add_argument("--out", default=os.path.join(base.REPO, "bench/out/sharing.json"))
    args = ap.parse_args()
    configs = args.configs.split(",")
    if not set(configs) <= {"bare", "policy", "audit"}:
        raise SystemExit("--configs: a subset of bare, policy and audit")
    if os.geteuid() != 0 or not shutil.which("perf") or not shutil.which("wrk"):
        raise SystemExit("needs root, perf (Debian linux-perf) and wrk")

    workdir = base.start_session("formwall-sharing-")
    binary = os.path.join(workdir, "fwshare")
    shutil.copy(args.formwall, binary)
    add_probes(binary)
    try:
        uport = base.start_sink(workdir, 2)
        files = base.small_upload_files(workdir, "sharing")
        rules = os.path.join(workdir, "typical.rules")
        with open(rules, "w") as f:
            f.write(costs.RULES.format(body_max_mib=64, file_max_mib=32))
        results = {}
        for name in configs:
            extra = [] if name == "bare" else ["--rules", rules]
            if name == "audit":
                extra += ["--audit-log", os.path.join(workdir, "audit.log")]
            results[name] = r = measure(args, name, extra, workdir, uport, files, binary)
            print(f"{name}: {r['requests']} requests on {r['threads']} worker thread(s); per request "
                  f"{r['ops_per_request']:.1f} reference-count operations, {r['heap_ops_per_request']:.1f} on heap "
                  f"objects, {r['shared_ops_per_request']:.2f} on {r['shared_objects']} heap object(s) more than one "
                  f"worker touched", flush=True)
            for s in r["shared_sites"]:
                print(f"    {s['per_request']:6.2f}  {s['event']:14} {s['site'][:200]}")
    finally:
        remove_probes()
    document = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "workers": args.workers, "seconds": args.seconds, "binary": args.formwall, "results": results}
    base.finish_session(os.path.abspath(args.out), document, [])


if __name__ == "__main__":
    main()
