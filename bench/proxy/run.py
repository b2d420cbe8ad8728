#!/usr/bin/env python3
"""Proxy benchmark: formwall vs nginx vs HAProxy vs a direct connection, in one run.

    python3 bench/proxy/run.py [--formwall PATH]

Targets, all in front of the same upstream sink (bench/proxy/sink.c, built here with gcc -O2):
  direct       client -> sink
  relay        client -> bench/proxy/relay.c -> sink: bytes copied both ways unread, one upstream connection per
               client connection (threads = --formwall-workers, --relay-buffer-kib per direction). The least a
               proxy can do here, so an upper bound for every proxy that reads bytes into user space
  nginx        client -> nginx (streaming proxy, default buffers, --formwall-workers workers) -> sink
  nginx-tuned  the same with client_body_buffer_size 128k and proxy_buffer_size 128k
  haproxy      client -> HAProxy (mode http, streaming, nbthread = --formwall-workers) -> sink
  formwall     client -> formwall serve --workers 2 -> sink

HAProxy is optional: without the binary (--haproxy) its column prints n/a with the reason.

Workloads:
  1. one 1 GiB multipart upload (one file part of random bytes), sent with curl, repeated
     (default 3 times); median throughput, plus the peak RSS of the proxy processes sampled
     every 50 ms from /proc/PID/status, and the CPU time spent by proxy and sink.
  2. 10 KiB multipart uploads from 64 keep-alive connections for 10 s with wrk, repeated (default 5 times,
     --wrk-reps); the medians of requests/s and of the latency percentiles (printed by a Lua done() hook).

All targets are started first and measured in interleaved rounds: round i runs each target once, the order
rotated by one each round (large uploads first, then wrk). The load on this kind of machine drifts by 10-15 %
over minutes, so besides the ratios of the medians the report gives the paired ratios: formwall's run over the
peer's run of the same round, their median and range ("paired by round"; JSON "paired").

Prints a table and writes bench/out/results.json. Only the standard library is used. Every
process started here is stopped on exit, including on Ctrl-C. Run as root (nginx is started
as root with a private prefix; its workers run as the default unprivileged user).
"""

import argparse
import atexit
import datetime
import json
import os
import platform
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

GIB = 1 << 30
MIB = 1 << 20

# ---------------------------------------------------------------------------------------
# process bookkeeping and cleanup


class Procs:
    """Every process started by this script. Each one leads its own process group, so
    stopping it also stops whatever it spawned (nginx workers, formwall workers)."""

    def __init__(self):
        self.live = []
        self.paths = []

    def start(self, argv, **kw):
        p = subprocess.Popen(argv, start_new_session=True, **kw)
        self.live.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM, grace=5.0):
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(5)
        # Reap stragglers in the group (workers that outlived their parent).
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if p in self.live:
            self.live.remove(p)

    def cleanup(self):
        for p in list(self.live):
            self.stop(p, grace=2.0)
        for path in self.paths:
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.exists(path):
                os.unlink(path)


PROCS = Procs()


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)


# ---------------------------------------------------------------------------------------
# /proc helpers


def proc_status(pid, key):
    """Value in KiB of a `key:` line of /proc/PID/status, or None if the process is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(key.encode() + b":"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return None
    return 0


def proc_pss(pid):
    """Proportional set size in KiB (/proc/PID/smaps_rollup): each shared page counted once over the processes
    that map it, so a sum over processes that share libraries counts those libraries once. None if gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return None
    return 0


def cpu_times(pid):
    """(utime, stime) of a process in clock ticks, or (0, 0) if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return 0, 0
    fields = data[data.rindex(b")") + 2:].split()
    return int(fields[11]), int(fields[12])


def cpu_ticks(pid):
    """utime + stime of a process in clock ticks, or 0 if it is gone."""
    return sum(cpu_times(pid))


TICK = os.sysconf("SC_CLK_TCK")


def cpu_busy_fraction(seconds):
    """Fraction of all CPU time that was not idle/iowait over `seconds` (from /proc/stat)."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    t0, i0 = snap()
    time.sleep(seconds)
    t1, i1 = snap()
    return 1 - (i1 - i0) / max(t1 - t0, 1)


def descendants(root):
    """PIDs of all descendants of root (scan of /proc/*/stat)."""
    parent = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        ppid = int(data[data.rindex(b")") + 2:].split()[1])
        parent.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        for child in parent.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class RssSampler:
    """Samples VmRSS and PSS of a fixed set of PIDs every `interval` seconds in a thread.
    Keeps the maximum of the RSS sum over the set, the maximum of any single PID, and the maximum of the
    PSS sum (the set's memory with shared library pages counted once)."""

    def __init__(self, pids, interval=0.05):
        self.pids = list(pids)
        self.interval = interval
        self.max_total_kib = 0
        self.max_single_kib = 0
        self.max_pss_kib = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        total = 0
        for pid in self.pids:
            v = proc_status(pid, "VmRSS") or 0
            total += v
            self.max_single_kib = max(self.max_single_kib, v)
        self.max_total_kib = max(self.max_total_kib, total)
        self.max_pss_kib = max(self.max_pss_kib, sum(proc_pss(pid) or 0 for pid in self.pids))
        self.samples += 1

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self):
        if self.pids:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self.pids:
            self._stop.set()
            self._thread.join()
            self._sample()


# ---------------------------------------------------------------------------------------
# setup


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout):
    """Waits until 127.0.0.1:port accepts. Returns None when ready, else the reason."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return f"exited with status {proc.returncode} before accepting"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return None
        except OSError:
            time.sleep(0.02)
    return f"did not accept on port {port} within {timeout:.0f} s"


def tail(path, n=600):
    try:
        with open(path, "rb") as f:
            data = f.read()
        return data[-n:].decode(errors="replace").strip()
    except OSError:
        return ""


def build_sink(workdir):
    exe = os.path.join(workdir, "sink")
    cmd = ["gcc", "-O2", "-Wall", "-pthread", "-o", exe, os.path.join(HERE, "sink.c")]
    subprocess.run(cmd, check=True)
    return exe


def start_sink_process(workdir, threads, timeout=10):
    """Builds the sink into workdir and starts it with `threads` threads on a free port, output discarded;
    returns (port, process) once it accepts. Exits the script if it does not come up."""
    exe = build_sink(workdir)
    port = free_port()
    proc = PROCS.start([exe, str(port), str(threads)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    problem = wait_port(port, proc, timeout)
    if problem:
        raise SystemExit(f"sink {problem}")
    return port, proc


def start_sink(workdir, threads, timeout=10):
    """`start_sink_process`'s port."""
    return start_sink_process(workdir, threads, timeout)[0]


def write_body(path, boundary, size):
    """Multipart body: one file part of `size` random bytes. Returns the total length."""
    head = (
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="file"; filename="random.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    tail_ = f"\r\n--{boundary}--\r\n".encode()
    delim = f"--{boundary}".encode()
    step = 64 * MIB
    with open(path, "wb") as f:
        f.write(head)
        left = size
        prev = b""
        while left:
            chunk = os.urandom(min(step, left))
            # A random 40-character boundary practically never occurs, but check anyway,
            # including across chunk edges.
            if delim in prev[-len(delim):] + chunk:
                raise RuntimeError("boundary occurs in random data; run again")
            f.write(chunk)
            prev = chunk
            left -= len(chunk)
        f.write(tail_)
    return len(head) + size + len(tail_)


NGINX_CONF = """\
worker_processes {workers};
events {{
    worker_connections 4096;
}}
http {{
    access_log off;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;

    upstream sink {{
        server 127.0.0.1:{uport};
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 0;
        location / {{
            proxy_pass http://sink;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_request_buffering off;
{extra}        }}
    }}
}}
"""

# proxy_buffer_size 128k alone is rejected ("proxy_busy_buffers_size must be less than the size of
# all proxy_buffers minus one buffer" with the default 8 x 4k), so proxy_buffers is raised with it.
# Both only concern the (tiny) upstream response; client_body_buffer_size is what the upload uses.
NGINX_TUNED = ("            client_body_buffer_size 128k;\n"
               "            proxy_buffer_size 128k;\n"
               "            proxy_buffers 4 128k;\n")

# No `log` line, so nothing is logged. `option http-buffer-request` is off (the default, written out):
# the request body is streamed to the sink as it arrives, like nginx's proxy_request_buffering off.
HAPROXY_CONF = """\
global
    nbthread {threads}
    maxconn 4096

defaults
    mode http
    http-reuse always
    no option http-buffer-request
    timeout connect 10s
    timeout client 300s
    timeout server 300s
    timeout http-keep-alive 300s

frontend bench
    bind 127.0.0.1:{port}
    default_backend sink

backend sink
    server sink 127.0.0.1:{uport}
"""

WRK_LUA = """\
local f = assert(io.open("{body}", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "multipart/form-data; boundary={boundary}"

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "WRK_RESULT requests=%d duration_us=%d bytes=%d connect=%d read=%d write=%d status=%d timeout=%d "
        .. "p50_us=%d p90_us=%d p99_us=%d p999_us=%d mean_us=%.1f max_us=%d\\n",
        summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
        latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
        latency.mean, latency.max))
end
"""

# ---------------------------------------------------------------------------------------
# targets


class Target:
    def __init__(self, name, port, proc=None, proxy_pids_fn=None):
        self.name = name
        self.port = port
        self.proc = proc
        self.proxy_pids_fn = proxy_pids_fn or (lambda: [])

    def url(self, path="/upload"):
        return f"http://127.0.0.1:{self.port}{path}"


def start_peer(args, workdir, name, conf_name, conf_fn, argv_fn):
    """Starts a peer proxy (nginx, HAProxy) from a config file written into its own directory under
    workdir: conf_fn(prefix, port) returns the config text, argv_fn(prefix, conf) the command line.
    Returns (process, port) once it accepts on 127.0.0.1:port; raises RuntimeError otherwise."""
    prefix = os.path.join(workdir, name)
    os.makedirs(prefix)
    os.chmod(prefix, 0o755)  # nginx's workers run unprivileged and need the temp paths
    port = free_port()
    conf = os.path.join(prefix, conf_name)
    with open(conf, "w") as f:
        f.write(conf_fn(prefix, port))
    out = open(os.path.join(prefix, "stdout.log"), "wb")
    p = PROCS.start(argv_fn(prefix, conf), stdout=out, stderr=subprocess.STDOUT)
    why = wait_port(port, p, args.ready_timeout)
    if why:
        raise RuntimeError(f"{name}: {why}: {tail(os.path.join(prefix, 'error.log'))} {tail(out.name)}")
    return p, port


def start_nginx(args, workdir, name, uport, tuned):
    def conf(prefix, port):
        return NGINX_CONF.format(workers=args.formwall_workers, prefix=prefix, uport=uport, port=port,
                                 extra=NGINX_TUNED if tuned else "")

    def argv(prefix, conf_path):
        err = os.path.join(prefix, "error.log")
        return [args.nginx, "-p", prefix + "/", "-c", conf_path, "-e", err,
                "-g", f"daemon off; pid {prefix}/nginx.pid; error_log {err} warn;"]

    p, port = start_peer(args, workdir, name, "nginx.conf", conf, argv)
    # Workers are the master's children; wait until all of them exist.
    deadline = time.monotonic() + 5
    while len(descendants(p.pid)) < args.formwall_workers and time.monotonic() < deadline:
        time.sleep(0.02)
    return Target(name, port, p, proxy_pids_fn=lambda: descendants(p.pid))


def start_haproxy(args, workdir, uport):
    if not os.access(args.haproxy, os.X_OK):
        raise RuntimeError(f"binary not found: {args.haproxy} (Debian package haproxy); the haproxy column is skipped")

    def conf(_prefix, port):
        return HAPROXY_CONF.format(threads=args.formwall_workers, port=port, uport=uport)

    def argv(_prefix, conf_path):
        return [args.haproxy, "-db", "-f", conf_path]  # -db: foreground, one process with nbthread threads

    p, port = start_peer(args, workdir, "haproxy", "haproxy.cfg", conf, argv)
    return Target("haproxy", port, p, proxy_pids_fn=lambda: [p.pid])


def start_relay(args, workdir, uport):
    """Builds bench/proxy/relay.c into workdir and starts it with --formwall-workers threads."""
    exe = os.path.join(workdir, "relay")
    subprocess.run(["gcc", "-O2", "-Wall", "-pthread", "-o", exe, os.path.join(HERE, "relay.c")], check=True)
    port = free_port()
    p = PROCS.start([exe, str(port), str(uport), str(args.formwall_workers),
                     str(getattr(args, "relay_buffer_kib", 128))],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    why = wait_port(port, p, args.ready_timeout)
    if why:
        PROCS.stop(p)
        raise RuntimeError(f"relay {why}")
    return Target("relay", port, p, proxy_pids_fn=lambda: [p.pid])


def start_formwall(args, workdir, uport, extra=()):
    """Returns (target, None) or (None, reason). `extra`: more `serve` options (--rules, --audit-log, ...)."""
    exe = args.formwall
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        return None, f"binary not found: {exe}"
    port = free_port()
    log = os.path.join(workdir, "formwall.log")
    argv = [exe, "serve", "--listen", f"127.0.0.1:{port}", "--upstream", f"http://127.0.0.1:{uport}",
            "--workers", str(args.formwall_workers)] + list(extra)
    out = open(log, "wb")
    p = PROCS.start(argv, stdout=out, stderr=subprocess.STDOUT)
    why = wait_port(port, p, args.ready_timeout)
    if why:
        PROCS.stop(p)
        msg = tail(log, 300).replace("\n", " | ")
        return None, f"{why}" + (f": {msg}" if msg else "")
    return Target("formwall", port, p, proxy_pids_fn=lambda: [p.pid] + descendants(p.pid)), None


def start_target(args, directory, name, uport):
    """Starts proxy `name` (formwall, nginx, nginx-tuned, haproxy or relay) with its files in `directory`, in front of
    the sink on `uport`. Raises RuntimeError when it does not come up, SystemExit for an unknown name."""
    if name == "formwall":
        # `args.formwall_extra`: more `serve` options a script gives every formwall it starts (soak.py's limit).
        target, reason = start_formwall(args, directory, uport, extra=getattr(args, "formwall_extra", ()))
        if target is None:
            raise RuntimeError(reason)
        return target
    if name in ("nginx", "nginx-tuned"):
        return start_nginx(args, directory, name, uport, tuned=name == "nginx-tuned")
    if name == "haproxy":
        return start_haproxy(args, directory, uport)
    if name == "relay":
        return start_relay(args, directory, uport)
    raise SystemExit(f"unknown target {name}")


# ---------------------------------------------------------------------------------------
# measurements


def warm_up(target, small_path, boundary):
    r = subprocess.run(
        ["curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Expect:",
         "-H", f"Content-Type: multipart/form-data; boundary={boundary}",
         "--data-binary", f"@{small_path}", target.url()],
        capture_output=True, text=True, timeout=20)
    if r.stdout.strip() != "200":
        raise RuntimeError(f"warm-up request got '{r.stdout.strip()}' {r.stderr.strip()}")


def large_upload(args, target, body_path, body_len, boundary, sink_pid, workdir, headers=()):
    """One curl upload of the large body (with `headers`, more request header lines). Returns a dict."""
    resp = os.path.join(workdir, "response.txt")
    # curl 7.88 refuses to load files of 1 GiB or more for --data-binary ("out of memory":
    # its file-to-memory limit is 1 GiB), so the body is streamed from the file with -T and
    # the method forced to POST. Content-Length is still sent (the file size is known).
    argv = ["curl", "-sS", "--max-time", str(args.curl_timeout), "-o", resp, "-X", "POST",
            "-T", body_path, "-H", f"Content-Type: multipart/form-data; boundary={boundary}",
            "-H", "Expect:", "-w", "%{speed_upload} %{time_total} %{http_code} %{size_upload}"]
    for line in headers:
        argv += ["-H", line]
    argv.append(target.url())
    proxy_pids = target.proxy_pids_fn()
    ticks0 = {pid: cpu_ticks(pid) for pid in proxy_pids}
    sink0 = cpu_ticks(sink_pid)
    with RssSampler(proxy_pids, args.rss_interval) as rss:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=args.curl_timeout + 30)
    sink_cpu = (cpu_ticks(sink_pid) - sink0) / TICK
    proxy_cpu = sum(cpu_ticks(pid) - t for pid, t in ticks0.items()) / TICK
    res = {"ok": False}
    try:
        speed, total, code, size = r.stdout.split()
        res.update(speed_upload_Bps=float(speed), time_total_s=float(total), http_code=int(code),
                   size_upload=int(float(size)))
    except ValueError:
        res["error"] = f"curl: {r.stdout.strip()} {r.stderr.strip()}"
        return res
    try:
        with open(resp) as f:
            upstream = f.read().strip()
        res["upstream_bytes"] = int(upstream)
    except (OSError, ValueError):
        res["upstream_bytes"] = None
    res.update(gbps=res["speed_upload_Bps"] / 1e9, sink_cpu_s=sink_cpu,
               proxy_cpu_s=proxy_cpu if proxy_pids else None,
               peak_rss_mib=rss.max_total_kib / 1024 if proxy_pids else None,
               peak_rss_single_mib=rss.max_single_kib / 1024 if proxy_pids else None,
               peak_pss_mib=rss.max_pss_kib / 1024 if proxy_pids else None,
               rss_samples=rss.samples)
    if res["http_code"] != 200:
        res["error"] = f"HTTP {res['http_code']}"
    elif res["size_upload"] != body_len:
        res["error"] = f"uploaded {res['size_upload']} of {body_len} bytes"
    elif target.name != "formwall" and res["upstream_bytes"] != body_len:
        # direct, the relay, nginx and HAProxy forward the body unchanged; formwall re-encodes it, so its count
        # (the decoded chunked body it sent upstream) is recorded but not compared.
        res["error"] = f"sink received {res['upstream_bytes']} of {body_len} bytes"
    else:
        res["ok"] = True
    return res


def run_wrk(args, target, lua_path, prefix=()):
    """`prefix`: a command wrk runs under (e.g. taskset -c 1)."""
    argv = list(prefix) + ["wrk", f"-t{args.wrk_threads}", f"-c{args.wrk_connections}", f"-d{args.wrk_duration}s",
            "--latency", "-s", lua_path, target.url()]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=args.wrk_duration + 30)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "wrk timed out"}
    line = next((l for l in r.stdout.splitlines() if l.startswith("WRK_RESULT ")), None)
    if line is None:
        return {"ok": False, "error": f"wrk: {r.stdout[-300:]} {r.stderr[-300:]}".strip()}
    kv = dict(item.split("=", 1) for item in line.split()[1:])
    res = {k: float(v) if "." in v else int(v) for k, v in kv.items()}
    res["rps"] = res["requests"] / (res["duration_us"] / 1e6)
    errors = {k: res[k] for k in ("connect", "read", "write", "status", "timeout") if res[k]}
    res["errors"] = errors
    res["ok"] = res["requests"] > 0 and not errors.get("status")
    if not res["ok"]:
        res["error"] = f"errors: {errors}" if errors else "no requests completed"
    return res


def one_large(args, target, files, sink_pid, workdir, i):
    r = large_upload(args, target, files["large_path"], files["large_len"], files["boundary"], sink_pid, workdir)
    shown = f"{r['gbps']:.2f} GB/s" if r.get("ok") else f"FAILED ({r.get('error')})"
    print(f"  [{target.name}] {size_label(args)} upload {i + 1}/{args.reps}: {shown}", flush=True)
    return r


def one_wrk(args, target, files, i):
    w = run_wrk(args, target, files["lua_path"])
    shown = (f"{w['rps']:.0f} req/s, p50 {w['p50_us'] / 1000:.2f} ms, p99 {w['p99_us'] / 1000:.2f} ms"
             if w.get("ok") else f"FAILED ({w.get('error')})")
    print(f"  [{target.name}] wrk {args.small_kib} KiB x {args.wrk_connections} conns "
          f"{i + 1}/{args.wrk_reps}: {shown}", flush=True)
    return w


def rotated(names, i):
    """The targets' order in round `i`: each round starts one further along, so no target always runs first
    (after an idle pause) or right after the same neighbour."""
    k = i % len(names) if names else 0
    return names[k:] + names[:k]


def measure_interleaved(args, targets, files, sink_pid, workdir):
    """Every target's runs, round by round: round i runs each target once (large uploads first, then wrk), in
    the order `rotated` gives. The machine's load drifts by 10-15 % over minutes here; run back to back, the
    targets of one round see the same drift, so their ratios (`paired_ratios`) are steadier than ratios of
    medians taken minutes apart. Returns {name: result}: status, "large" (`summarize_large`) and "small"
    (`median_wrk`), each with its runs in round order."""
    # A target that fails to warm up, or whose run raises (a timeout), is reported n/a and left out of the
    # later rounds, as when the targets were measured one after the other; the others go on.
    failed = {}

    def attempt(name, work):
        try:
            return work()
        except (RuntimeError, subprocess.SubprocessError, OSError) as e:
            print(f"  [{name}] n/a: {e}", flush=True)
            failed[name] = {"status": "n/a", "reason": str(e)}
            return None

    for name in targets:
        attempt(name, lambda: warm_up(targets[name], files["small_path"], files["boundary"]))
    names = [name for name in targets if name not in failed]
    large = {name: [] for name in names}
    for i in range(args.reps):
        for name in rotated([n for n in names if n not in failed], i):
            r = attempt(name, lambda: one_large(args, targets[name], files, sink_pid, workdir, i))
            if r is not None:
                large[name].append(r)
    if args.wrk_duration > 0:
        small = {name: [] for name in names}
        for i in range(args.wrk_reps):
            for name in rotated([n for n in names if n not in failed], i):
                w = attempt(name, lambda: one_wrk(args, targets[name], files, i))
                if w is not None:
                    small[name].append(w)
    results = dict(failed)
    for name in names:
        if name in failed:
            continue
        results[name] = {"status": "ok", "large": summarize_large(targets[name], large[name])}
        if args.wrk_duration > 0:
            results[name]["small"] = median_wrk(small[name])
    return results


def summarize_large(target, reps):
    good = [r for r in reps if r.get("ok")]
    large = {"reps": reps}
    if good:
        large["median_gbps"] = statistics.median(r["gbps"] for r in good)
        large["median_time_s"] = statistics.median(r["time_total_s"] for r in good)
        large["sink_gbps_per_cpu_s"] = (
            sum(r["size_upload"] for r in good) / 1e9 / max(sum(r["sink_cpu_s"] for r in good), 1e-9))
        if target.proxy_pids_fn():
            large["proxy_cpu_s_per_gib"] = statistics.median(
                r["proxy_cpu_s"] / (r["size_upload"] / GIB) for r in good)
        if any(r["peak_rss_mib"] is not None for r in good):
            large["peak_rss_mib"] = max(r["peak_rss_mib"] for r in good)
            large["peak_rss_single_process_mib"] = max(r["peak_rss_single_mib"] for r in good)
            large["peak_pss_mib"] = max(r["peak_pss_mib"] for r in good)
        large["upstream_bytes"] = [r.get("upstream_bytes") for r in good]
    else:
        large["error"] = reps[-1].get("error") if reps else "no repetitions"
    pids = target.proxy_pids_fn()
    if pids:
        large["vmhwm_mib"] = sum((proc_status(pid, "VmHWM") or 0) for pid in pids) / 1024
    return large


WRK_ERRORS = ("connect", "read", "write", "status", "timeout")


def positive_int(text):
    """argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def median_wrk(runs):
    """One figure from several wrk runs: the median of requests/s, p50 and p99 (each taken on its own), error
    counts summed, every run kept under "runs". A failed run makes the whole a failure."""
    failed = [r for r in runs if not r.get("ok")]
    if failed:
        return dict(failed[0], runs=runs)
    out = dict(sorted(runs, key=lambda r: r["rps"])[len(runs) // 2], runs=runs)
    for key in ("rps", "p50_us", "p99_us"):
        out[key] = statistics.median(r[key] for r in runs)
    for key in WRK_ERRORS:
        out[key] = sum(r[key] for r in runs)
    out["errors"] = {key: out[key] for key in WRK_ERRORS if out[key]}
    return out


# ---------------------------------------------------------------------------------------
# report


def size_label(args):
    return "1 GiB" if args.size_mib == 1024 else f"{args.size_mib} MiB"


def fmt(v, spec, na="n/a"):
    return na if v is None else format(v, spec)


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


# The rows the others are divided by, with their column labels, and every target in report order.
PEERS = {"direct": "x direct", "relay": "x relay", "nginx": "x nginx", "nginx-tuned": "x tuned", "haproxy": "x haproxy"}
TARGETS = list(PEERS) + ["formwall"]


def vs(key, peer):
    """JSON key of a ratio to a peer: vs("large", "nginx-tuned") == "large_vs_nginx_tuned"."""
    return f"{key}_vs_{peer.replace('-', '_')}"

# Figures compared between formwall and each proxy peer: JSON ratio key -> (workload, key, label).
COMPARED = {"large": ("large", "median_gbps", "GB/s"),
            "cpu_per_gib": ("large", "proxy_cpu_s_per_gib", "CPU s/GiB"),
            "peak_rss": ("large", "peak_rss_mib", "peak RSS"),
            "peak_pss": ("large", "peak_pss_mib", "peak PSS"),
            "small_rps": ("small", "rps", "10 KiB req/s"),
            "small_p99": ("small", "p99_us", "p99")}


# Figures also compared round by round (formwall's run over the peer's run of the same round, interleaved):
# JSON key -> (workload, per-run figure, label).
PAIRED = {"large": ("large", lambda r: r["gbps"], "GB/s"),
          "cpu_per_gib": ("large", lambda r: r["proxy_cpu_s"] / (r["size_upload"] / GIB), "CPU s/GiB"),
          "small_rps": ("small", lambda r: r["rps"], "10 KiB req/s"),
          "small_p99": ("small", lambda r: r["p99_us"], "p99")}


def paired_ratios(results, peers, mine="formwall"):
    """For each peer and PAIRED figure: `mine`'s figure (formwall's; costs.py passes a configuration) over the
    peer's in each round where both runs succeeded, and the median of those ratios.
    {vs(key, peer): {"median": m, "rounds": [...]}}."""
    def runs(name, workload):
        w = results[name].get(workload) or {}
        return w.get("reps" if workload == "large" else "runs") or []

    out = {}
    for peer in peers:
        for key, (workload, figure, _) in PAIRED.items():
            ratios = []
            for ours, theirs in zip(runs(mine, workload), runs(peer, workload)):
                if not (ours.get("ok") and theirs.get("ok")):
                    continue
                try:
                    a, b = figure(ours), figure(theirs)
                except (KeyError, TypeError, ZeroDivisionError):
                    continue
                if a is not None and b:
                    ratios.append(a / b)
            if ratios:
                out[vs(key, peer)] = {"median": statistics.median(ratios), "rounds": ratios}
    return out


def report(results, args):
    names = [n for n in TARGETS if n in results]

    def ok(n):
        return results.get(n, {}).get("status") == "ok"

    def large(n, k):
        return results[n].get("large", {}).get(k) if ok(n) else None

    def small(n, k):
        s = results[n].get("small") if ok(n) else None
        return s.get(k) if s and s.get("ok") else None

    def figure(n, workload, k):
        return (large if workload == "large" else small)(n, k) if n in results else None

    # Every ratio key is written for every peer (None when the peer did not run or failed), e.g.
    # large_vs_nginx, small_rps_vs_haproxy, peak_rss_vs_nginx_tuned.
    for n in names:
        ratios = results[n].setdefault("ratios", {})
        for peer in PEERS:
            for key, (workload, k, _) in COMPARED.items():
                ratios[vs(key, peer)] = ratio(figure(n, workload, k), figure(peer, workload, k))
    peers = [p for p in PEERS if ok(p)]  # a peer that did not run gets no column
    if ok("formwall"):
        results["formwall"]["paired"] = paired_ratios(results, [p for p in peers if p != "direct"])

    def row(cells):
        return " ".join(format(c, w) for c, w in cells)

    print()
    print(f"{size_label(args)} multipart upload, curl, median of {args.reps} (GB = 10^9 bytes)")
    print(row([("target", "<12"), ("GB/s", ">6")] + [(PEERS[p], ">9") for p in peers]
              + [("peak RSS", ">9"), ("peak PSS", ">9"), ("VmHWM", ">8"), ("proxy CPU", ">10")]))
    print(row([("", "<12"), ("", ">6")] + [("", ">9") for _ in peers]
              + [("MiB", ">9"), ("MiB", ">9"), ("MiB", ">8"), ("s/GiB", ">10")]))
    for n in names:
        r = results[n]["ratios"]
        na = "-" if n == "direct" else "n/a"
        print(row([(n, "<12"), (fmt(large(n, "median_gbps"), "6.2f"), ">6")]
                  + [(fmt(r[vs("large", p)], "8.2f"), ">9") for p in peers]
                  + [(fmt(large(n, "peak_rss_mib"), "9.1f", na), ">9"), (fmt(large(n, "peak_pss_mib"), "9.1f", na), ">9"),
                     (fmt(large(n, "vmhwm_mib"), "8.1f", na), ">8"),
                     (fmt(large(n, "proxy_cpu_s_per_gib"), "10.2f", na), ">10")]))
    if args.wrk_duration > 0:
        print()
        print(f"{args.small_kib} KiB multipart uploads, {args.wrk_connections} connections, {args.wrk_duration} s "
              f"(wrk -t{args.wrk_threads}), median of {args.wrk_reps}")
        print(row([("target", "<12"), ("req/s", ">9")] + [(PEERS[p], ">9") for p in peers]
                  + [("p50 ms", ">8"), ("p99 ms", ">8"), ("errors", ">8")]))
        for n in names:
            r = results[n]["ratios"]
            p50, p99 = small(n, "p50_us"), small(n, "p99_us")
            s = results[n].get("small") or {}
            errs = sum(s.get("errors", {}).values()) if s.get("errors") is not None else None
            print(row([(n, "<12"), (fmt(small(n, "rps"), "9.0f"), ">9")]
                      + [(fmt(r[vs("small_rps", p)], "8.2f"), ">9") for p in peers]
                      + [(fmt(p50 and p50 / 1000, "8.2f"), ">8"), (fmt(p99 and p99 / 1000, "8.2f"), ">8"),
                         (fmt(errs, "d"), ">8")]))
    if ok("formwall"):
        print()
        for p in peers:
            if p == "direct":
                continue
            r = results["formwall"]["ratios"]
            parts = [f"{label} {fmt(r[vs(key, p)], '.2f')}x"
                     for key, (_, _, label) in COMPARED.items()]
            print(f"formwall / {p + ':':<12} " + ", ".join(parts))
            paired = results["formwall"]["paired"]
            parts = []
            for key, (_, _, label) in PAIRED.items():
                q = paired.get(vs(key, p))
                if q:
                    parts.append(f"{label} {q['median']:.2f}x ({min(q['rounds']):.2f}-{max(q['rounds']):.2f})")
            if parts:
                print(f"  {'paired by round:':<22} " + ", ".join(parts))
    print()
    for n in names:
        if not ok(n):
            print(f"{n}: n/a ({results[n].get('reason')})")
    d = results.get("direct", {}).get("large", {}).get("sink_gbps_per_cpu_s")
    if d:
        print(f"sink capacity (direct run, bytes per sink CPU-second): {d:.2f} GB/s"
              + ("" if d > 2 else "  ** below 2 GB/s: the sink may limit the results **"))


# ---------------------------------------------------------------------------------------


def tool_version(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (r.stdout + r.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None


def named_binaries(items, reserved=()):
    """Parses NAME=PATH arguments naming formwall builds (ab.py, tail.py, syscalls.py, compressed.py's --compare):
    a list of (name, path).
    Exits with a message for an item without both parts, a path that is not executable, a name in `reserved` (the
    peers the script also runs) or a name given twice."""
    binaries = []
    for item in items:
        name, _, path = item.partition("=")
        if not name or not path or not os.access(path, os.X_OK) or name in reserved:
            extra = f" (NAME not {', '.join(reserved)})" if reserved else ""
            raise SystemExit(f"expected NAME=PATH of an executable formwall{extra}, got {item!r}")
        binaries.append((name, path))
    if len({n for n, _ in binaries}) != len(binaries):
        raise SystemExit("give the binaries distinct names")
    return binaries


def add_binary_args(ap):
    """--formwall, --nginx and --haproxy: the binaries the scripts start (shared with idle.py, soak.py and
    syscalls.py)."""
    ap.add_argument("--formwall", default=os.path.join(REPO, ".build/release/formwall"),
                    help="formwall binary (default: .build/release/formwall of this checkout)")
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--haproxy", default=shutil.which("haproxy") or "/usr/sbin/haproxy",
                    help="HAProxy binary; if it is missing the haproxy target is skipped with a message")


def add_small_upload_args(ap, wrk_reps=None):
    """The wrk workload's options, shared with costs.py and scaling.py. With `wrk_reps` (the default count),
    also --wrk-reps for `measure_interleaved`'s medians (scaling.py runs wrk itself and has its own --reps)."""
    ap.add_argument("--small-kib", type=int, default=10, help="file part size of the wrk uploads")
    ap.add_argument("--wrk-duration", type=int, default=10, help="seconds per wrk run (0 = skip)")
    if wrk_reps is not None:
        ap.add_argument("--wrk-reps", type=positive_int, default=wrk_reps,
                        help=f"wrk runs per target; requests/s, p50 and p99 are the medians of the runs "
                             f"(default {wrk_reps})")
    ap.add_argument("--wrk-connections", type=int, default=64)
    ap.add_argument("--wrk-threads", type=int, default=2)
    ap.add_argument("--sink-threads", type=int, default=2)
    ap.add_argument("--ready-timeout", type=float, default=10.0)


def body_files(workdir, label):
    """A fresh boundary and the paths of the large and small bodies (in /dev/shm when there is one; removed on
    exit) and of wrk's Lua script."""
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else workdir
    files = {"boundary": "formwallbench" + secrets.token_hex(14),
             "large_path": os.path.join(shm, f"formwall-{label}-{os.getpid()}-large.body"),
             "small_path": os.path.join(shm, f"formwall-{label}-{os.getpid()}-small.body"),
             "lua_path": os.path.join(workdir, "upload.lua")}
    PROCS.paths += [files["large_path"], files["small_path"]]
    return files


def small_upload_files(workdir, label, kib=10):
    """body_files, with the small body (one file part of `kib` KiB) and wrk's Lua script that posts it written."""
    files = body_files(workdir, label)
    write_body(files["small_path"], files["boundary"], kib * 1024)
    with open(files["lua_path"], "w") as f:
        f.write(WRK_LUA.format(body=files["small_path"], boundary=files["boundary"]))
    return files


def tcp_out_segments():
    """TCP segments the machine has sent since boot (`OutSegs` of the `Tcp:` lines of /proc/net/snmp)."""
    with open("/proc/net/snmp") as f:
        lines = [line.split() for line in f if line.startswith("Tcp:")]
    if len(lines) < 2 or "OutSegs" not in lines[0]:
        return 0
    return int(lines[1][lines[0].index("OutSegs")])


def paired_summary(runs, first, keys):
    """Each target's medians of `keys` over its successful runs, and its ratios to `first`'s run of the same round
    (median and range). `runs`: target name -> its results in round order, a failed one marked `ok` False."""
    summary = {}
    for name, results in runs.items():
        good = [r for r in results if r.get("ok", True)]
        if not good:
            continue
        pairs = [(a, b) for a, b in zip(runs[first], results) if a.get("ok", True) and b.get("ok", True)]
        paired = {k: [b[k] / a[k] for a, b in pairs if a[k]] for k in keys}
        summary[name] = {"runs": results, "medians": {k: statistics.median(r[k] for r in good) for k in keys},
                         "paired_to_first": {k: statistics.median(v) for k, v in paired.items() if v},
                         "paired_range": {k: [min(v), max(v)] for k, v in paired.items() if v}}
    return summary


def print_medians(summary, names, label, columns):
    """Prints a table of each target's `paired_summary` medians: `columns` are (title, key, width, decimals, scale)."""
    print(f"  {label:12} " + " ".join(f"{title:>{width}}" for title, _, width, _, _ in columns))
    for name in names:
        if name in summary:
            medians = summary[name]["medians"]
            print(f"  {name:12} " + " ".join(f"{medians[key] * scale:{width}.{decimals}f}"
                                             for _, key, width, decimals, scale in columns))


def print_paired(summary, names, first, keys, unit_suffix):
    """Prints each target's `paired_summary` ratios to `first`, a line each; `unit_suffix` is cut from the keys."""
    for name in names:
        if name == first or name not in summary:
            continue
        p, r = summary[name]["paired_to_first"], summary[name]["paired_range"]
        print(f"  {name} / {first}: " + ", ".join(
            f"{k.replace(unit_suffix, '')} {p[k]:.3f} ({r[k][0]:.2f}-{r[k][1]:.2f})" for k in keys if k in p))


def finish_session(path, document, failures):
    """Writes `document` as JSON to `path`, says so, and exits 1 after listing `failures` if there are any."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(document, f, indent=2)
    print(f"\nwrote {path}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)


def start_session(prefix):
    """Every process started through PROCS is stopped on exit and on SIGINT/SIGTERM/SIGHUP; returns a fresh
    work directory (readable by nginx's unprivileged workers), removed on exit."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    atexit.register(PROCS.cleanup)
    workdir = tempfile.mkdtemp(prefix=prefix)
    os.chmod(workdir, 0o755)
    PROCS.paths.append(workdir)
    return workdir


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_binary_args(ap)
    ap.add_argument("--formwall-workers", type=int, default=2,
                    help="formwall's --workers, also nginx's worker_processes and HAProxy's nbthread (default: 2)")
    ap.add_argument("--targets", default="direct,relay,nginx,nginx-tuned,haproxy,formwall",
                    help="comma-separated subset of direct,relay,nginx,nginx-tuned,haproxy,formwall")
    ap.add_argument("--relay-buffer-kib", type=int, default=128,
                    help="the relay's buffer per direction, its most bytes per read (default 128, nginx tuned's)")
    ap.add_argument("--size-mib", type=int, default=1024, help="file part size of the large upload")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of the large upload")
    # The proxy issue's targets are medians of at least 5 runs.
    add_small_upload_args(ap, wrk_reps=5)
    ap.add_argument("--rss-interval", type=float, default=0.05)
    ap.add_argument("--wait-idle", type=float, default=60,
                    help="seconds to wait for other CPU load to stop before measuring (0 = don't)")
    ap.add_argument("--curl-timeout", type=int, default=300)
    ap.add_argument("--out", default=os.path.join(REPO, "bench/out/results.json"))
    args = ap.parse_args()
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]

    for tool in ("gcc", "curl", "wrk"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found")
    if ("nginx" in targets or "nginx-tuned" in targets) and not os.access(args.nginx, os.X_OK):
        sys.exit(f"nginx not found at {args.nginx}")

    workdir = start_session("formwall-bench-")
    files = body_files(workdir, "bench")
    boundary = files["boundary"]

    print("building sink ...", flush=True)
    sink_exe = build_sink(workdir)
    print(f"writing {args.size_mib} MiB multipart body to {files['large_path']} ...", flush=True)
    files["large_len"] = write_body(files["large_path"], boundary, args.size_mib * MIB)
    files["small_len"] = write_body(files["small_path"], boundary, args.small_kib * 1024)
    with open(files["lua_path"], "w") as f:
        f.write(WRK_LUA.format(body=files["small_path"], boundary=boundary))

    uport = free_port()
    sink_log = open(os.path.join(workdir, "sink.log"), "wb")
    sink = PROCS.start([sink_exe, str(uport), str(args.sink_threads)], stdout=sink_log, stderr=subprocess.STDOUT)
    why = wait_port(uport, sink, 5)
    if why:
        sys.exit(f"sink {why}: {tail(sink_log.name)}")

    load = os.getloadavg()
    busy = cpu_busy_fraction(1.0)
    deadline = time.monotonic() + args.wait_idle
    while busy > 0.05 and time.monotonic() < deadline:
        print(f"CPU {busy * 100:.0f}% busy, waiting for an idle machine (up to {args.wait_idle:.0f} s) ...",
              flush=True)
        time.sleep(4)
        busy = cpu_busy_fraction(1.0)
    print(f"CPU busy before the run (1 s sample, all cores): {busy * 100:.0f}%"
          + ("  ** other load on the machine: figures will be low and noisy **" if busy > 0.05 else ""),
          flush=True)
    # Every target is started first and measured in interleaved rounds (`measure_interleaved`); an idle proxy
    # waiting for its turn costs nothing measurable.
    results = {}
    started = {}
    for name in targets:
        try:
            if name == "direct":
                started[name] = Target("direct", uport)
            elif name in ("nginx", "nginx-tuned"):
                started[name] = start_nginx(args, workdir, name, uport, tuned=(name == "nginx-tuned"))
            elif name == "haproxy":
                started[name] = start_haproxy(args, workdir, uport)
            elif name == "relay":
                started[name] = start_relay(args, workdir, uport)
            elif name == "formwall":
                target, reason = start_formwall(args, workdir, uport)
                if target is None:
                    raise RuntimeError(reason)
                started[name] = target
            else:
                sys.exit(f"unknown target {name}")
        except (RuntimeError, subprocess.SubprocessError, OSError) as e:
            print(f"{name}: n/a: {e}", flush=True)
            results[name] = {"status": "n/a", "reason": str(e)}
    print(f"interleaved rounds over {', '.join(started)}", flush=True)
    try:
        results.update(measure_interleaved(args, started, files, sink.pid, workdir))
    finally:
        for target in started.values():
            if target.proc is not None:
                PROCS.stop(target.proc, signal.SIGTERM)
    if sink.poll() is not None:
        sys.exit(f"sink died: {tail(sink_log.name)}")

    report(results, args)

    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": {"cpus": os.cpu_count(), "kernel": platform.release(), "loadavg_before": load, "cpu_busy_before": busy,
                 "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1)},
        "tools": {"nginx": tool_version([args.nginx, "-v"]),
                  "haproxy": tool_version([args.haproxy, "-v"]), "curl": tool_version(["curl", "--version"]),
                  "wrk": tool_version(["wrk", "-v"]), "gcc": tool_version(["gcc", "--version"])},
        "formwall": args.formwall,
        "args": vars(args),
        "large_body_bytes": files["large_len"],
        "small_body_bytes": files["small_len"],
        "units": {"gbps": "10^9 bytes per second (curl speed_upload)", "rss": "MiB", "latency": "microseconds"},
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
