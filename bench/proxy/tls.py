#!/usr/bin/env python3
"""TLS benchmark: formwall vs nginx terminating TLS, same certificate, same cipher, in one run.

    python3 bench/proxy/tls.py [--formwall PATH] [--runs 3] [--workers 2]

Both proxies listen with TLS 1.3 only, the same P-256 certificate (made here with the openssl CLI), and the
client pins TLS_AES_128_GCM_SHA256; both forward plain HTTP to the same sink (bench/proxy/sink.c).

Workloads:
  1. a 1 GiB multipart upload (one file part of random bytes) sent with curl over TLS, repeated --runs times;
     median throughput, peak RSS of the proxy processes (VmRSS sampled every 50 ms) and their CPU seconds.
  2. new TLS 1.3 handshakes per second (openssl s_time -new: a full handshake and one GET per connection) for
     --handshake-seconds.

Prints a table, the ratios formwall/nginx, and writes bench/out/tls-results.json. Reuses the process handling of
bench/proxy/run.py; everything started here is stopped on exit.
"""

import argparse
import atexit
import datetime
import json
import os
import re
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402  (bench/proxy/run.py: Procs, sink, body, RSS sampling)

REPO = base.REPO
CIPHER = "TLS_AES_128_GCM_SHA256"

def nginx_tls_conf(prefix, uport, port, cert, key, workers):
    """run.py's tuned nginx configuration (128k buffers, request buffering off) with a TLS 1.3 listener."""
    conf = base.NGINX_CONF.format(prefix=prefix, uport=uport, port=port, extra=base.NGINX_TUNED, workers=workers)
    listen = f"listen 127.0.0.1:{port};"
    assert listen in conf, "bench/proxy/run.py's NGINX_CONF changed"
    tls = (f"listen 127.0.0.1:{port} ssl;\n        ssl_certificate {cert};\n        ssl_certificate_key {key};\n"
           f"        ssl_protocols TLSv1.3;\n        ssl_conf_command Ciphersuites {CIPHER};\n"
           "        ssl_session_tickets off;")
    return conf.replace(listen, tls)



def make_cert(workdir):
    cert, key = os.path.join(workdir, "cert.pem"), os.path.join(workdir, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    os.chmod(key, 0o600)
    return cert, key


class TLSTarget(base.Target):
    def url(self, path="/upload"):
        return f"https://localhost:{self.port}{path}"


def start_nginx(args, workdir, uport, cert, key):
    prefix = os.path.join(workdir, "nginx")
    os.makedirs(prefix)
    os.chmod(prefix, 0o755)
    port = base.free_port()
    conf = os.path.join(prefix, "nginx.conf")
    with open(conf, "w") as f:
        f.write(nginx_tls_conf(prefix, uport, port, cert, key, args.workers))
    err = os.path.join(prefix, "error.log")
    p = base.PROCS.start([args.nginx, "-p", prefix + "/", "-c", conf, "-e", err,
                          "-g", f"daemon off; pid {prefix}/nginx.pid; error_log {err} warn;"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    why = base.wait_port(port, p, 10)
    if why:
        raise RuntimeError(f"nginx: {why}: {base.tail(err)}")
    return TLSTarget("nginx", port, p, proxy_pids_fn=lambda: base.descendants(p.pid))


def start_formwall(args, workdir, uport, cert, key):
    port = base.free_port()
    log = os.path.join(workdir, "formwall.log")
    p = base.PROCS.start([args.formwall, "serve", "--single-process", "--listen", f"127.0.0.1:{port}",
                          "--upstream", f"http://127.0.0.1:{uport}", "--workers", str(args.workers),
                          "--tls-certificate", cert, "--tls-key", key, "--tls-ciphersuites", CIPHER],
                         stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
    why = base.wait_port(port, p, 20)
    if why:
        raise RuntimeError(f"formwall: {why}: {base.tail(log)}")
    return TLSTarget("formwall", port, p, proxy_pids_fn=lambda: [p.pid])


def upload(args, target, body, body_len, boundary, cert):
    argv = ["curl", "-sS", "--max-time", "600", "-o", "/dev/null", "-X", "POST", "-T", body,
            "--cacert", cert, "--tlsv1.3", "--tls13-ciphers", CIPHER,
            "-H", f"Content-Type: multipart/form-data; boundary={boundary}", "-H", "Expect:",
            "-w", "%{speed_upload} %{http_code} %{size_upload}", target.url()]
    pids = target.proxy_pids_fn()
    ticks0 = {pid: base.cpu_ticks(pid) for pid in pids}
    client0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with base.RssSampler(pids, 0.05) as rss:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=700)
    client1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(base.cpu_ticks(pid) - t for pid, t in ticks0.items()) / base.TICK
    client_cpu = (client1.ru_utime - client0.ru_utime) + (client1.ru_stime - client0.ru_stime)
    speed, code, size = r.stdout.split()
    ok = code == "200" and int(float(size)) == body_len
    return {"ok": ok, "gbps": float(speed) / 1e9, "http_code": int(code), "proxy_cpu_s": cpu,
            "client_cpu_s": client_cpu, "client_busy": client_cpu * float(speed) / body_len,
            "peak_rss_mib": rss.max_total_kib / 1024, "error": None if ok else f"{r.stdout} {r.stderr}"}


def handshakes(args, target, cert):
    t0 = time.monotonic()
    r = subprocess.run(["openssl", "s_time", "-connect", f"127.0.0.1:{target.port}", "-new", "-tls1_3",
                        "-ciphersuites", CIPHER, "-CAfile", cert, "-time", str(args.handshake_seconds),
                        "-www", "/"], capture_output=True, text=True, timeout=args.handshake_seconds + 60)
    wall = time.monotonic() - t0
    m = re.search(r"(\d+) connections in ([\d.]+)s", r.stdout)
    if not m:
        return {"ok": False, "error": (r.stdout + r.stderr)[-400:]}
    count = int(m.group(1))
    return {"ok": True, "connections": count, "per_second": count / float(m.group(2)), "wall_s": wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--formwall", default=os.path.join(REPO, ".build", "release", "formwall"))
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--handshake-seconds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "out", "tls-results.json"))
    args = ap.parse_args()
    atexit.register(base.PROCS.cleanup)   # every process started here stops with the script

    workdir = tempfile.mkdtemp(prefix="formwall-tls-bench-")
    base.PROCS.paths.append(workdir)
    cert, key = make_cert(workdir)
    uport = base.start_sink(workdir, 2)
    boundary = "bench" + secrets.token_hex(12)
    body = os.path.join(workdir, "body.bin")
    body_len = base.write_body(body, boundary, args.size_mib << 20)

    targets = [start_nginx(args, workdir, uport, cert, key), start_formwall(args, workdir, uport, cert, key)]
    results = {}
    for t in targets:
        runs = []
        for i in range(args.runs):
            res = upload(args, t, body, body_len, boundary, cert)
            print(f"{t.name:<9} run {i + 1}: {res['gbps']:.2f} GB/s, peak RSS {res['peak_rss_mib']:.1f} MiB, "
                  f"proxy CPU {res['proxy_cpu_s']:.2f} s, curl busy {res['client_busy']:.0%}" + ("" if res["ok"] else f"  ERROR {res['error']}"),
                  flush=True)
            runs.append(res)
        hs = handshakes(args, t, cert)
        print(f"{t.name:<9} handshakes: " + (f"{hs['per_second']:.0f}/s" if hs["ok"] else hs["error"]), flush=True)
        good = [r for r in runs if r["ok"]]
        results[t.name] = {
            "runs": runs,
            "median_gbps": statistics.median(r["gbps"] for r in good) if good else None,
            "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
            "median_proxy_cpu_s": statistics.median(r["proxy_cpu_s"] for r in good) if good else None,
            "handshakes": hs,
        }
    n, f = results["nginx"], results["formwall"]
    ratios = {
        "upload_formwall_vs_nginx": f["median_gbps"] / n["median_gbps"] if f["median_gbps"] and n["median_gbps"] else None,
        "handshakes_formwall_vs_nginx": (f["handshakes"]["per_second"] / n["handshakes"]["per_second"]
                                         if f["handshakes"]["ok"] and n["handshakes"]["ok"] else None),
    }
    print(f"\n{'target':<9} {'GB/s':>6} {'CPU s':>6} {'peak RSS':>9} {'handshakes/s':>13}")
    for name, r in results.items():
        hs = r["handshakes"]
        print(f"{name:<9} {r['median_gbps'] or 0:6.2f} {r['median_proxy_cpu_s'] or 0:6.2f} "
              f"{r['peak_rss_mib']:7.1f} MiB {hs.get('per_second', 0):13.0f}")
    print(f"formwall/nginx: upload {ratios['upload_formwall_vs_nginx']:.2f}x, "
          f"handshakes {ratios['handshakes_formwall_vs_nginx']:.2f}x")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"meta": {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                            "cpus": os.cpu_count(), "cipher": CIPHER, "workers": args.workers,
                            "body_bytes": body_len, "args": vars(args)},
                   "results": results, "ratios": ratios}, fh, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
