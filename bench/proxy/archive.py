#!/usr/bin/env python3
"""Archive inspection benchmark: a 1 GiB ZIP uploaded through formwall with inspection on and off, in one run.

    python3 bench/proxy/archive.py [--formwall PATH] [--runs 3] [--size-mib 1024]

The ZIP holds 64 MiB entries of random bytes, deflated (level 1), made here with Python's zipfile. formwall runs
with `--workers 2 --single-process` and a policy whose route takes the file part, once with the default archive
inspection (every entry inflated with zlib, names and contents checked) and once with `archive-inspect off`,
in front of bench/proxy/sink.c. Reports the median throughput, proxy CPU seconds and peak RSS for each, and the
ratio. Writes bench/out/archive-results.json. Reuses the helpers of bench/proxy/run.py.
"""

import argparse
import atexit
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402

RULES = """route /upload {{
    body-max 4GiB;
    file doc {{ max 4GiB; archive-size-max 4GiB; archive-entries-max 100000; {extra} }}
}}
"""


def make_zip(path, size_mib):
    entry = 64
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for i in range(max(1, size_mib // entry)):
            with z.open(f"data/part{i:03}.bin", "w") as f:
                for _ in range(entry):
                    f.write(os.urandom(1 << 20))


def write_body(path, zip_path, boundary):
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"big.zip\"\r\n"
            "Content-Type: application/zip\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    with open(path, "wb") as out, open(zip_path, "rb") as src:
        out.write(head)
        while True:
            chunk = src.read(16 << 20)
            if not chunk:
                break
            out.write(chunk)
        out.write(tail)
    return os.path.getsize(path)


def start(args, workdir, uport, name, extra):
    rules = os.path.join(workdir, f"{name}.rules")
    with open(rules, "w") as f:
        f.write(RULES.format(extra=extra))
    port = base.free_port()
    log = os.path.join(workdir, f"{name}.log")
    p = base.PROCS.start([args.formwall, "serve", "--single-process", "--workers", "2",
                          "--listen", f"127.0.0.1:{port}", "--upstream", f"http://127.0.0.1:{uport}",
                          "--rules", rules], stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
    why = base.wait_port(port, p, 20)
    if why:
        raise RuntimeError(f"{name}: {why}: {base.tail(log)}")
    return base.Target(name, port, p, proxy_pids_fn=lambda: [p.pid])


def upload(target, body, body_len, boundary):
    pids = target.proxy_pids_fn()
    ticks0 = {pid: base.cpu_ticks(pid) for pid in pids}
    with base.RssSampler(pids, 0.05) as rss:
        r = subprocess.run(["curl", "-sS", "-o", body + ".response", "-X", "POST", "-T", body, "-H", "Expect:",
                            "-H", f"Content-Type: multipart/form-data; boundary={boundary}",
                            "-w", "%{speed_upload} %{http_code} %{size_upload}", target.url()],
                           capture_output=True, text=True, timeout=900)
    cpu = sum(base.cpu_ticks(pid) - t for pid, t in ticks0.items()) / base.TICK
    speed, code, size = r.stdout.split()
    answer = open(body + ".response", "rb").read()[:300].decode(errors="replace") if code != "200" else None
    return {"ok": code == "200" and int(float(size)) == body_len, "http_code": int(code), "answer": answer,
            "gbps": float(speed) / 1e9, "proxy_cpu_s": cpu, "peak_rss_mib": rss.max_total_kib / 1024}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--formwall", default=os.path.join(base.REPO, ".build", "release", "formwall"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--out", default=os.path.join(base.REPO, "bench", "out", "archive-results.json"))
    args = ap.parse_args()
    atexit.register(base.PROCS.cleanup)   # every process started here stops with the script
    workdir = tempfile.mkdtemp(prefix="formwall-archive-bench-")
    base.PROCS.paths.append(workdir)
    zip_path = os.path.join(workdir, "big.zip")
    make_zip(zip_path, args.size_mib)
    boundary = "bench" + secrets.token_hex(12)
    body = os.path.join(workdir, "body.bin")
    body_len = write_body(body, zip_path, boundary)
    os.unlink(zip_path)
    uport = base.start_sink(workdir, 2)
    results = {}
    for name, extra in (("inspect", ""), ("no-inspect", "archive-inspect off;")):
        target = start(args, workdir, uport, name, extra)
        runs = [upload(target, body, body_len, boundary) for _ in range(args.runs)]
        for i, r in enumerate(runs):
            print(f"{name:<10} run {i + 1}: {r['gbps']:.2f} GB/s, CPU {r['proxy_cpu_s']:.2f} s, "
                  f"peak RSS {r['peak_rss_mib']:.1f} MiB, HTTP {r['http_code']}" + (f" {r['answer']}" if r["answer"] else ""),
                  flush=True)
        good = [r for r in runs if r["ok"]]
        results[name] = {"runs": runs,
                         "median_gbps": statistics.median(r["gbps"] for r in good) if good else None,
                         "median_cpu_s": statistics.median(r["proxy_cpu_s"] for r in good) if good else None,
                         "peak_rss_mib": max(r["peak_rss_mib"] for r in runs)}
        base.PROCS.stop(target.proc)
    i, n = results["inspect"], results["no-inspect"]
    ratio = i["median_gbps"] / n["median_gbps"] if i["median_gbps"] and n["median_gbps"] else None
    print(f"\n{'':<10} {'GB/s':>6} {'CPU s':>6} {'peak RSS':>9}")
    for name, r in results.items():
        print(f"{name:<10} {r['median_gbps'] or 0:6.2f} {r['median_cpu_s'] or 0:6.2f} {r['peak_rss_mib']:7.1f} MiB")
    print(f"inspection on / off: {ratio:.2f}x" if ratio else "inspection on / off: n/a")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"body_bytes": body_len, "results": results, "ratio": ratio}, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
