#!/usr/bin/env python3
"""Memory under uploads that an upstream holds up, and what `--max-connections` does to it, against nginx tuned.

    python3 bench/proxy/limit.py [--connections 2000] [--limits 256,100000] [--workers 1] [--targets formwall,nginx-tuned]

The upstream (a thread here) accepts every connection and never reads, so no upload can finish: each client
connection sends a multipart head announcing --body-mib MiB and then writes body bytes, non-blocking, for as long
as anything takes them (until no socket took a byte for --quiet seconds, at most --pump-limit seconds). What the
proxy then holds in user space is its buffers per stuck upload; the kernel's socket buffers are not in its RSS.

Targets, one after the other in the same run, each in front of a fresh stalled upstream:
  formwall@L   `serve --workers W --max-connections L` (supervisor + proxy process), for each L in --limits
  nginx-tuned  `proxy_request_buffering off`, 128k buffers, `worker_processes W` (run.py's configuration), with
               `worker_connections` raised to admit every client and upstream connection
For each: connections that reached the upstream, body MiB the clients' kernel took in all, the peak RSS summed over
the proxy's processes (sampled every 0.1 s) and once it settled with the uploads still held up (formwall shrinks
the buffers of a body held up for a second), and RSS per connection that reached the upstream above the proxy's
RSS at rest. Writes bench/out/limit.json. Stdlib only; every process and socket is closed on
exit.
"""

import argparse
import atexit
import datetime
import json
import os
import resource
import selectors
import signal
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402  (bench/proxy/run.py: PROCS, starters, /proc helpers)
from soak import settle  # noqa: E402  (bench/proxy/soak.py: RSS polled until it stops falling)


class StalledUpstream:
    """Accepts connections on 127.0.0.1 and keeps them open without reading a byte."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4096)
        self.port = self.listener.getsockname()[1]
        self.held = []
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        self.listener.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.held.append(conn)

    def close(self):
        self._stop = True
        self._thread.join(2)
        for conn in self.held:
            conn.close()
        self.listener.close()


def pump(port, n, head, quiet, limit):
    """n non-blocking connections: each sends `head`, then body bytes while its socket takes them. Stops when no
    socket took a byte for `quiet` seconds, or after `limit`. Returns (bytes taken, sockets)."""
    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))   # past the proxy's backlog the handshake waits; that is fine
        socks.append(s)
        sel.register(s, selectors.EVENT_WRITE, [head, 0])
    chunk = b"x" * 65536
    taken = 0
    start = last = time.monotonic()
    while time.monotonic() - last < quiet and time.monotonic() - start < limit:
        for key, _ in sel.select(timeout=0.2):
            s, state = key.fileobj, key.data
            try:
                while True:
                    data = state[0] if state[0] else chunk
                    sent = s.send(data)
                    if state[0]:
                        state[0] = state[0][sent:]
                    else:
                        taken += sent
                    last = time.monotonic()
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                sel.unregister(s)   # refused or reset: counted as not reaching the upstream
    sel.close()
    return taken, socks


def measure(args, target, upstream):
    pids = sorted(set([target.proc.pid] + target.proxy_pids_fn()))
    time.sleep(0.5)
    rest = sum(base.proc_status(p, "VmRSS") or 0 for p in pids)
    head = (f"POST /upload HTTP/1.1\r\nHost: limit\r\nContent-Type: multipart/form-data; boundary=b\r\n"
            f"Content-Length: {args.body_mib << 20}\r\n\r\n--b\r\nContent-Disposition: form-data; name=\"f\"; "
            f"filename=\"f.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
    with base.RssSampler(pids, 0.1) as sampler:
        t0 = time.monotonic()
        taken, socks = pump(target.port, args.connections, head, args.quiet, args.pump_limit)
        took = time.monotonic() - t0
        # Still held up: RSS polled every 0.2 s until it made no new low for 1.5 s, at most --settle s.
        _, _, _, low, _ = settle(lambda: pids, 0, args.settle)
    reached = len(upstream.held)
    for s in socks:
        s.close()
    peak = sampler.max_total_kib
    return {"rest_rss_mib": rest / 1024, "peak_rss_mib": peak / 1024, "settled_rss_mib": low / 1024,
            "reached_upstream": reached, "client_mib_taken": taken / (1 << 20), "pump_s": took,
            "peak_kib_per_reached": (peak - rest) / reached if reached else None,
            "settled_kib_per_reached": (low - rest) / reached if reached else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    base.add_binary_args(ap)
    ap.add_argument("--targets", default="formwall,nginx-tuned")
    ap.add_argument("--limits", default="256,100000", help="formwall --max-connections values, one run each")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--body-mib", type=int, default=64, help="body size each upload announces")
    ap.add_argument("--quiet", type=float, default=1.5, help="seconds without progress that end the pumping")
    ap.add_argument("--pump-limit", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=6.0,
                    help="seconds at most, after the pumping, to wait for RSS to stop falling (still held up)")
    ap.add_argument("--ready-timeout", type=float, default=10.0)
    ap.add_argument("--out", default=os.path.join(base.REPO, "bench/out/limit.json"))
    args = ap.parse_args()
    args.formwall_workers = args.workers
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, base.on_signal)
    atexit.register(base.PROCS.cleanup)
    need = 4 * args.connections + 1024   # clients here, the proxy's two per client, the upstream's
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    cap = 2 * args.connections + 64
    assert "worker_connections 4096;" in base.NGINX_CONF, "bench/proxy/run.py's nginx configuration changed"
    base.NGINX_CONF = base.NGINX_CONF.replace("worker_connections 4096;", f"worker_connections {cap};").replace(
        "worker_processes {workers};", f"worker_processes {{workers}};\nworker_rlimit_nofile {cap + 64};")
    workdir = tempfile.mkdtemp(prefix="formwall-limit-")
    os.chmod(workdir, 0o755)
    base.PROCS.paths.append(workdir)

    runs = []
    for name in [t for t in args.targets.split(",") if t]:
        for limit in ([int(x) for x in args.limits.split(",")] if name == "formwall" else [None]):
            label = f"formwall@{limit}" if limit else name
            upstream = StalledUpstream()
            target = None
            try:
                args.formwall_extra = ["--max-connections", str(limit)] if limit else []
                target = base.start_target(args, tempfile.mkdtemp(dir=workdir), name, upstream.port)
                r = measure(args, target, upstream)
            finally:
                if target is not None:
                    base.PROCS.stop(target.proc, signal.SIGTERM)
                upstream.close()
            r["target"] = label
            runs.append(r)
            per = " / ".join(f"{r[k]:.0f}" if r[k] is not None else "n/a"
                             for k in ("peak_kib_per_reached", "settled_kib_per_reached"))
            print(f"{label:18} reached upstream {r['reached_upstream']:5d}, clients' kernel took "
                  f"{r['client_mib_taken']:6.0f} MiB in {r['pump_s']:.1f} s; RSS at rest {r['rest_rss_mib']:.1f}, "
                  f"peak {r['peak_rss_mib']:.1f}, settled {r['settled_rss_mib']:.1f} MiB; {per} KiB per reached "
                  f"(peak / settled)", flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   "args": {k: v for k, v in vars(args).items() if k != "formwall_extra"}, "runs": runs}, f,
                  indent=2)


if __name__ == "__main__":
    main()
