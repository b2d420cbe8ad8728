#!/usr/bin/env python3
"""Compressed uploads: what decoding a gzip form body costs formwall, in rotated rounds.

    python3 bench/proxy/compressed.py [--rounds 10] [--size-mib 128] [--compare NAME=PATH ...] [--workers 1]

One multipart body with a file part of --size-mib MiB of CSV-like text (about 4:1 under gzip level 6) is
written to /dev/shm twice: plain, and gzipped. Each round uploads, with curl, in an order rotated by one:

  formwall-gzip    the gzipped body with Content-Encoding: gzip through formwall (--formwall): decoded with
                   zlib as it streams, parsed, re-encoded, forwarded decoded;
  formwall-plain   the plain body through the same formwall: the same parsing and re-encoding, no decoding;
  nginx-tuned      the gzipped body through nginx tuned (run.py's peer), which relays it without decoding;
  NAME             with --compare NAME=PATH (repeatable), the gzipped body through that formwall binary (an A/B
                   of builds).

For each upload: decoded GB/s (the decoded body's size over curl's total time, so that the plain and gzip
uploads of the same form compare), the proxy's CPU seconds per decoded GiB and its peak RSS. The report gives
medians and the ratios to formwall-gzip's upload of the same round. Every upload (run.py's `large_upload`) must
answer 200, nginx's upstream receiving the body as sent and formwall's the decoded form. Writes
bench/out/compressed.json. Stdlib only.
"""

import argparse
import datetime
import gzip as gziplib
import os
import random
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402

MIB = 1 << 20
GIB = 1 << 30


def csv_text(size, seed=7):
    """`size` bytes of CSV-like rows (ids, words, amounts, dates): compresses about 4:1 at level 6."""
    rng = random.Random(seed)
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
             "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"]
    rows = []
    total = 0
    i = 0
    while total < size:
        row = (f"{i},{rng.choice(words)} {rng.choice(words)},{rng.choice(words)}{rng.randrange(10**6)}@example.org,"
               f"{rng.randrange(10**7) / 100:.2f},2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}\n")
        rows.append(row)
        total += len(row)
        i += 1
    return "".join(rows).encode()[:size]


def write_bodies(files, size):
    """The plain and gzipped multipart bodies; returns (plain length, gzipped length)."""
    b = files["boundary"]
    head = (f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"rows.csv\"\r\n"
            "Content-Type: text/csv\r\n\r\n").encode()
    body = head + csv_text(size) + f"\r\n--{b}--\r\n".encode()
    with open(files["plain"], "wb") as f:
        f.write(body)
    packed = gziplib.compress(body, compresslevel=6, mtime=0)
    with open(files["gzip"], "wb") as f:
        f.write(packed)
    return len(body), len(packed)


def upload(args, target, path, length, decoded_len, encoded, boundary, sink_pid, workdir):
    """run.py's large upload of `path` (with Content-Encoding: gzip if `encoded`), its figures per decoded byte."""
    r = base.large_upload(args, target, path, length, boundary, sink_pid, workdir,
                          headers=("Content-Encoding: gzip",) if encoded else ())
    # large_upload checks what nginx relays; formwall forwards the decoded form, re-encoded (a little longer).
    if r.get("ok") and target.name == "formwall" and (r["upstream_bytes"] or 0) < decoded_len * 0.99:
        r.update(ok=False, error=f"upstream got {r['upstream_bytes']} bytes of a {decoded_len}-byte form")
    if "time_total_s" in r:
        r.update(decoded_gbps=decoded_len / r["time_total_s"] / 1e9,
                 proxy_cpu_s_per_decoded_gib=r["proxy_cpu_s"] / (decoded_len / GIB),
                 peak_rss_mib=r["peak_rss_single_mib"])
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    base.add_binary_args(ap)
    ap.add_argument("--compare", action="append", default=[], metavar="NAME=PATH",
                    help="another formwall binary, run on the gzipped body as target NAME (repeatable)")
    ap.add_argument("--rounds", type=base.positive_int, default=10)
    ap.add_argument("--size-mib", type=base.positive_int, default=128, help="decoded file part size")
    ap.add_argument("--workers", type=base.positive_int, default=1)
    ap.add_argument("--ready-timeout", type=float, default=10.0)
    args = ap.parse_args()
    args.formwall_workers = args.workers
    args.curl_timeout, args.rss_interval = 300, 0.05   # run.py's large_upload reads them
    compare = base.named_binaries(args.compare, reserved=("formwall-gzip", "formwall-plain", "nginx-tuned"))

    workdir = base.start_session("formwall-gzip-")
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else workdir
    files = {"boundary": "formwallgzip" + os.urandom(8).hex(),
             "plain": os.path.join(shm, f"formwall-gzip-{os.getpid()}-plain.body"),
             "gzip": os.path.join(shm, f"formwall-gzip-{os.getpid()}-gzip.body")}
    base.PROCS.paths += [files["plain"], files["gzip"]]
    plain_len, gzip_len = write_bodies(files, args.size_mib * MIB)
    print(f"body: {plain_len} bytes plain, {gzip_len} gzipped ({plain_len / gzip_len:.2f}:1)", flush=True)

    uport, sink = base.start_sink_process(workdir, 2)
    fw, why = base.start_formwall(args, workdir, uport)
    if fw is None:
        raise SystemExit(f"formwall: {why}")
    nginx = base.start_nginx(args, workdir, "nginx-tuned", uport, tuned=True)
    runs = {"formwall-gzip": (fw, files["gzip"], gzip_len, True),
            "formwall-plain": (fw, files["plain"], plain_len, False),
            "nginx-tuned": (nginx, files["gzip"], gzip_len, False)}
    for name, path in compare:
        other = types.SimpleNamespace(**vars(args))
        other.formwall = path
        sub = os.path.join(workdir, name)
        os.makedirs(sub)
        cmp_target, why = base.start_formwall(other, sub, uport)
        if cmp_target is None:
            raise SystemExit(f"--compare {name}: {why}")
        runs[name] = (cmp_target, files["gzip"], gzip_len, True)
    names = list(runs)
    results = {n: [] for n in names}
    failures = []
    for i in range(args.rounds):
        for name in base.rotated(names, i):
            target, path, length, encoded = runs[name]
            r = upload(args, target, path, length, plain_len, encoded, files["boundary"], sink.pid, workdir)
            results[name].append(r)
            if not r["ok"]:
                failures.append(f"{name} round {i + 1}: {r['error']}")
            shown = (f"{r['decoded_gbps']:.2f} GB/s decoded, {r['proxy_cpu_s_per_decoded_gib']:.2f} CPU s/GiB"
                     if r["ok"] else f"FAILED ({r['error']})")
            print(f"  [{name}] round {i + 1}/{args.rounds}: {shown}", flush=True)

    keys = ("decoded_gbps", "proxy_cpu_s_per_decoded_gib", "peak_rss_mib")
    summary = base.paired_summary(results, "formwall-gzip", keys)
    columns = (("GB/s", "decoded_gbps", 8, 2, 1), ("CPU s/GiB", "proxy_cpu_s_per_decoded_gib", 10, 2, 1),
               ("RSS MiB", "peak_rss_mib", 8, 1, 1))
    base.print_medians(summary, names, "medians", columns)
    base.print_paired(summary, names, "formwall-gzip", keys, "")
    document = {"script": "bench/proxy/compressed.py", "when": datetime.datetime.now().isoformat(timespec="seconds"),
                "args": vars(args), "plain_bytes": plain_len, "gzip_bytes": gzip_len, "runs": results,
                "summary": summary}
    base.finish_session(os.path.join(base.REPO, "bench/out/compressed.json"), document, failures)


if __name__ == "__main__":
    main()
