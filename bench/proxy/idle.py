#!/usr/bin/env python3
"""Memory per idle keep-alive connection: formwall against nginx and HAProxy, in one run.

    python3 bench/proxy/idle.py [--connections 10000] [--formwall PATH] [--workers 1]

For each proxy (1 worker or thread each, in front of bench/proxy/sink.c), two phases, each on a fresh proxy:
  idle    open N connections and send nothing;
  served  open N connections, send one `GET /` on each and read the whole answer, keeping them open.
Then wait --settle seconds (pooled upstream connections time out, workers give freed pages back) and report the
growth of the proxy processes' RSS (VmRSS, summed over the process and its children) divided by N. The kernel's
socket buffers are not in RSS, so the figure is the proxy's own memory per connection. Writes
bench/out/idle-results.json. Reuses bench/proxy/run.py's process handling; everything started here stops on exit.
"""

import argparse
import atexit
import json
import os
import resource
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402  (bench/proxy/run.py: PROCS, sink, peers, RSS)


def rss_kib(pids):
    total = 0
    for pid in pids:
        total += base.proc_status(pid, "VmRSS") or 0
    return total


def read_answer(sock):
    """Reads one HTTP/1.1 answer (Content-Length framed, as the sink and the proxies send) and returns its status;
    ConnectionError if the peer closes first. soak.py uses it too."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed before the answer")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed inside the answer")
        rest += chunk
    return int(lines[0].split()[1])


def phase(target, n, served, settle):
    pids = [target.proc.pid] + target.proxy_pids_fn()
    before = rss_kib(pids)
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", target.port), timeout=30)
            if served:
                s.sendall(b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
            socks.append(s)
        if served:
            for s in socks:
                read_answer(s)
        time.sleep(settle)  # the proxies' own timers run meanwhile (pool timeouts, trims): nothing to poll
        after = rss_kib([target.proc.pid] + target.proxy_pids_fn())
    finally:
        for s in socks:
            s.close()
    return {"before_kib": before, "after_kib": after, "kib_per_connection": (after - before) / n}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    base.add_binary_args(ap)
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--workers", type=int, default=1, help="workers / worker_processes / nbthread (default 1)")
    ap.add_argument("--settle", type=float, default=4.0,
                    help="seconds between the last answer and the measurement (default 4: formwall's pooled "
                         "upstream connections time out after 1.5 s, and workers trim within a second after)")
    ap.add_argument("--targets", default="nginx,haproxy,formwall")
    ap.add_argument("--ready-timeout", type=float, default=10)
    args = ap.parse_args()
    args.formwall_workers = args.workers
    atexit.register(base.PROCS.cleanup)  # every process started here stops with the script
    need = 2 * args.connections + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    # The peers' connection caps (4096 in run.py's configurations) must admit every client and upstream connection.
    cap = 2 * args.connections + 64
    assert "worker_connections 4096;" in base.NGINX_CONF and "maxconn 4096" in base.HAPROXY_CONF, \
        "bench/proxy/run.py's peer configurations changed"
    base.NGINX_CONF = base.NGINX_CONF.replace("worker_connections 4096;", f"worker_connections {cap};").replace(
        "worker_processes {workers};", f"worker_processes {{workers}};\nworker_rlimit_nofile {cap + 64};")
    # HAProxy wants about two descriptors per maxconn and will not start beyond the hard limit.
    haproxy_cap = min(cap, (resource.getrlimit(resource.RLIMIT_NOFILE)[1] - 256) // 2)
    if haproxy_cap < cap:
        print(f"note: HAProxy's maxconn is {haproxy_cap} (the descriptor hard limit), below the {cap} needed")
    base.HAPROXY_CONF = base.HAPROXY_CONF.replace("maxconn 4096", f"maxconn {haproxy_cap}")
    workdir = tempfile.mkdtemp(prefix="formwall-idle-")
    sink_exe = base.build_sink(workdir)
    uport = base.free_port()
    sink = base.PROCS.start([sink_exe, str(uport), "2"], stdout=subprocess_devnull(), stderr=subprocess_devnull())
    why = base.wait_port(uport, sink, args.ready_timeout)
    if why:
        sys.exit(f"sink: {why}")

    def start(name):
        if name == "formwall":
            exe = args.formwall
            port = base.free_port()
            p = base.PROCS.start([exe, "serve", "--single-process", "--listen", f"127.0.0.1:{port}",
                                  "--upstream", f"http://127.0.0.1:{uport}", "--workers", str(args.workers),
                                  "--max-connections", str(cap)],
                                 stdout=subprocess_devnull(), stderr=subprocess_devnull())
            why = base.wait_port(port, p, args.ready_timeout)
            if why:
                raise RuntimeError(f"formwall: {why}")
            return base.Target("formwall", port, p)
        if name == "nginx":
            return base.start_nginx(args, tempfile.mkdtemp(dir=workdir), "nginx", uport, tuned=False)
        if name == "haproxy":
            return base.start_haproxy(args, tempfile.mkdtemp(dir=workdir), uport)
        raise SystemExit(f"unknown target {name}")

    results = {}
    for name in args.targets.split(","):
        results[name] = {}
        for mode in ("idle", "served"):
            try:
                target = start(name)
            except RuntimeError as e:
                print(f"{name}: skipped: {e}")
                break
            try:
                results[name][mode] = phase(target, args.connections, mode == "served", args.settle)
            except OSError as e:  # a peer that cannot hold this many connections (see the note above)
                print(f"{name} {mode}: failed: {e!r}")
            base.PROCS.stop(target.proc)
    print(f"memory per keep-alive connection, {args.connections} connections, {args.workers} worker(s), "
          f"settle {args.settle} s")
    print(f"{'proxy':10} {'idle (no request)':>18} {'after one request':>18}")
    for name, r in results.items():
        cells = [f"{r[m]['kib_per_connection']:.2f} KiB" if m in r else "n/a" for m in ("idle", "served")]
        print(f"{name:10} {cells[0]:>18} {cells[1]:>18}")
    out = os.path.join(base.REPO, "bench", "out")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "idle-results.json"), "w") as f:
        json.dump({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "connections": args.connections,
                   "workers": args.workers, "settle_s": args.settle, "results": results}, f, indent=2)


def subprocess_devnull():
    return open(os.devnull, "wb")


if __name__ == "__main__":
    main()
