#!/usr/bin/env python3
"""Cost of a typical policy, the audit log and SHA-256 in formwall, as ratios to the bare proxy, in one run.

    python3 bench/proxy/costs.py [--reps 3] [--wrk-duration 10] [--formwall PATH]

formwall `serve --workers 2` in front of bench/proxy/sink.c, in four configurations, each in its own process,
all started first and measured in interleaved rounds (run.py's `measure_interleaved`; before 2026-12-03 one
configuration after the other):
  bare           no rules, no audit log: parts are parsed and re-encoded, nothing is sniffed or hashed;
  policy         --rules FILE: a route for /upload with a `field` rule and a `file` rule (size max, allowed
                 types and extensions) that accepts the bodies sent here;
  audit          --audit-log FILE (a temp dir): one JSON line per request;
  policy+audit   both.
With a policy or an audit log, every file part is also sniffed (FormStage's `observe`: `config.audit != nil ||
evaluator != nil`). Only the audit log hashes: its records list a SHA-256 for each file part (FormStage's
`hashing: .files`), and a policy alone hashes nothing (`.none`, since 2026-12-03; before, every part was hashed
with a policy too). So the two audit rows include the hash and the policy row does not; the audit records'
`sha256` field is checked to say so from the run itself.

Workloads per configuration (run.py's, unchanged): the 1 GiB multipart upload with curl, median of --reps, and
proxy CPU s/GiB; then 10 KiB multipart uploads with wrk (run.py's Lua body, --wrk-reps runs, default 3) for
req/s and p99. Besides the ratios of the medians it prints the paired ratios to bare: each configuration's run
over bare's run of the same round, their median (JSON `paired_to_bare`).
Every upload must be accepted: the 1 GiB upload must get HTTP 200 with the sink having received at least the
file's bytes, and wrk must report no non-2xx answers. The rule file is checked with `formwall check FILE` first (the script stops if it does not pass).
Prints a table with each configuration's ratio to bare and writes bench/out/costs.json. Stdlib only; every
process and temp file started or written here is removed on exit (run.py's PROCS).
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402  (bench/proxy/run.py: PROCS, sink, bodies, measure_interleaved)

# The bodies are run.py's: one file part named "file", filename "random.bin", declared application/octet-stream.
RULES = """\
# costs.py's typical policy: an upload route with one optional text field and one file.
route /upload {{
    methods POST;
    content-types multipart/form-data;
    body-max {body_max_mib}MiB;
    parts-max 4;
    files-max 1;
    fields-max 2;
    unknown reject;

    field caption {{
        max 1KiB;
    }}
    file file {{
        max {file_max_mib}MiB;
        required;
        types application/octet-stream;
        extensions .bin;
    }}
}}
"""

CONFIGS = ("bare", "policy", "audit", "policy+audit")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--formwall", default=os.path.join(base.REPO, ".build/release/formwall"))
    ap.add_argument("--formwall-workers", type=int, default=2)
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset of " + ",".join(CONFIGS))
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    base.add_small_upload_args(ap, wrk_reps=3)
    ap.add_argument("--rss-interval", type=float, default=0.05)
    ap.add_argument("--curl-timeout", type=int, default=300)
    ap.add_argument("--out", default=os.path.join(base.REPO, "bench/out/costs.json"))
    args = ap.parse_args()
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    for c in configs:
        if c not in CONFIGS:
            sys.exit(f"unknown configuration {c}")
    if "bare" not in configs:
        sys.exit("bare is needed: every ratio is to it")
    for tool in ("gcc", "curl", "wrk"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found")
    if not os.access(args.formwall, os.X_OK):
        sys.exit(f"formwall binary not found: {args.formwall}")

    workdir = base.start_session("formwall-costs-")
    files = base.body_files(workdir, "costs")
    boundary = files["boundary"]

    rules_path = os.path.join(workdir, "typical.rules")
    with open(rules_path, "w") as f:
        f.write(RULES.format(body_max_mib=args.size_mib + 16, file_max_mib=args.size_mib + 8))
    r = subprocess.run([args.formwall, "check", rules_path], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        sys.exit(f"formwall check failed (exit {r.returncode}): {r.stdout} {r.stderr}")
    print(f"formwall check: {(r.stdout + r.stderr).strip().splitlines()[-1:]}", flush=True)

    print("building sink ...", flush=True)
    sink_exe = base.build_sink(workdir)
    print(f"writing {args.size_mib} MiB multipart body ...", flush=True)
    files["large_len"] = base.write_body(files["large_path"], boundary, args.size_mib * base.MIB)
    files["small_len"] = base.write_body(files["small_path"], boundary, args.small_kib * 1024)
    with open(files["lua_path"], "w") as f:
        f.write(base.WRK_LUA.format(body=files["small_path"], boundary=boundary))
    uport = base.free_port()
    sink_log = open(os.path.join(workdir, "sink.log"), "wb")
    sink = base.PROCS.start([sink_exe, str(uport), str(args.sink_threads)], stdout=sink_log,
                            stderr=subprocess.STDOUT)
    why = base.wait_port(uport, sink, 5)
    if why:
        sys.exit(f"sink {why}")

    load = os.getloadavg()
    busy = base.cpu_busy_fraction(1.0)
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, CPU {busy * 100:.0f}% busy before the run",
          flush=True)

    # Every configuration runs in its own formwall process, all started first and measured in interleaved
    # rounds (run.py's `measure_interleaved`): the host's drift over minutes moves all of one round alike.
    results = {}
    failures = []
    targets, extras, audit_paths = {}, {}, {}
    for name in configs:
        cdir = os.path.join(workdir, name.replace("+", "-"))
        os.makedirs(cdir)
        extra = []
        if "policy" in name:
            extra += ["--rules", rules_path]
        if "audit" in name:
            audit_paths[name] = os.path.join(cdir, "audit.log")
            extra += ["--audit-log", audit_paths[name]]
        extras[name] = extra
        target, reason = base.start_formwall(args, cdir, uport, extra)
        if target is None:
            failures.append(f"{name}: {reason}")
            results[name] = {"status": "n/a", "reason": reason}
            continue
        target.name = name
        targets[name] = target
    measured = base.measure_interleaved(args, targets, files, sink.pid, workdir)
    for target in targets.values():
        base.PROCS.stop(target.proc, signal.SIGTERM)
    for name in configs:
        if name not in measured:
            continue
        res = measured[name]
        res["argv_extra"] = extras[name]
        audit_path = audit_paths.get(name)
        # Every upload accepted: 200 with the sink having received the whole file part (formwall re-encodes
        # the multipart framing, so the count is the file plus new heads, not the original length).
        large = res.get("large", {})
        for rep in large.get("reps", []):
            if not rep.get("ok") or rep.get("http_code") != 200:
                failures.append(f"{name}: 1 GiB upload {rep.get('http_code')} {rep.get('error')}")
            elif (rep.get("upstream_bytes") or 0) < args.size_mib * base.MIB:
                failures.append(f"{name}: sink received {rep.get('upstream_bytes')} bytes")
        small = res.get("small", {})
        if args.wrk_duration > 0 and (not small.get("ok") or small.get("status", 1) != 0):
            failures.append(f"{name}: wrk {small.get('error') or ''} non-2xx {small.get('status')}")
        if audit_path:
            try:
                with open(audit_path, "rb") as f:
                    first = json.loads(f.readline())
                    lines = 1 + sum(1 for _ in f)
                parts = first.get("parts") or []
                res["audit"] = {"records": lines, "bytes": os.path.getsize(audit_path),
                                "first_record_decision": first.get("decision"),
                                "file_sha256_present": any(p.get("sha256") for p in parts)}
            except (OSError, ValueError) as e:
                res["audit"] = {"error": str(e)}
                failures.append(f"{name}: audit log unreadable: {e}")
        results[name] = res
        if sink.poll() is not None:
            sys.exit(f"sink died: {base.tail(sink_log.name)}")

    # Ratios to bare.
    def fig(n, workload, key):
        r = results.get(n, {})
        w = r.get(workload) or {}
        if workload == "small" and not w.get("ok"):
            return None
        return w.get(key)

    rows = [(f"{base.size_label(args)} GB/s", "large", "median_gbps", ".2f"), ("CPU s/GiB", "large", "proxy_cpu_s_per_gib", ".2f"),
            ("peak RSS MiB", "large", "peak_rss_mib", ".1f"), ("10 KiB req/s", "small", "rps", ".0f"),
            ("p99 ms", "small", "p99_us", None)]
    for n in configs:
        results.setdefault(n, {})["ratios_to_bare"] = {
            key: base.ratio(fig(n, w, key), fig("bare", w, key)) for _, w, key, _ in rows}
        if n != "bare" and results[n].get("status") == "ok" and results["bare"].get("status") == "ok":
            results[n]["paired_to_bare"] = base.paired_ratios(results, ["bare"], mine=n)
    print()
    print(f"formwall --workers {args.formwall_workers}: {base.size_label(args)} upload median of {args.reps}, "
          f"{args.small_kib} KiB wrk -t{args.wrk_threads} -c{args.wrk_connections} -d{args.wrk_duration}s")
    print(f"{'':14}" + "".join(f"{c:>22}" for c in configs))
    for label, w, key, spec in rows:
        cells = []
        for c in configs:
            v = fig(c, w, key)
            if v is not None and key == "p99_us":
                shown = f"{v / 1000:.2f}"
            else:
                shown = base.fmt(v, spec)
            rr = results[c]["ratios_to_bare"][key]
            cells.append(shown + ("" if c == "bare" else f" ({base.fmt(rr, '.2f')}x)"))
        print(f"{label:14}" + "".join(f"{x:>22}" for x in cells))
    errs = []
    for c in configs:
        s = results[c].get("small") or {}
        errs.append(str(sum(s.get("errors", {}).values())) if s else "n/a")
    print(f"{'wrk errors':14}" + "".join(f"{x:>22}" for x in errs))
    print("paired by round (each configuration's run over bare's of the same round, median):")
    for c in configs:
        paired = results[c].get("paired_to_bare")
        if paired:
            cells = [f"{label} {paired[base.vs(key, 'bare')]['median']:.2f}x" for key, (_, _, label) in base.PAIRED.items()
                     if base.vs(key, "bare") in paired]
            print(f"  {c}: " + ", ".join(cells))
    for c in configs:
        a = results[c].get("audit")
        if a:
            print(f"{c}: audit log {a.get('records')} records, {a.get('bytes', 0) / base.MIB:.1f} MiB, "
                  f"file sha256 in the first record: {a.get('file_sha256_present')}")

    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "loadavg_before": load, "cpu_busy_before": busy, "cpus": os.cpu_count(),
            "args": vars(args), "rules": open(rules_path).read(),
            "large_body_bytes": files["large_len"], "small_body_bytes": files["small_len"],
            "failures": failures}
    base.finish_session(args.out, {"meta": meta, "results": results}, failures)


if __name__ == "__main__":
    main()
