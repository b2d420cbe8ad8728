#!/usr/bin/env python3
"""Spool-mode benchmark: memory, disk and timing of one large multipart upload through
`formwall serve --upstream-body spool`, with chunked mode in the same run for comparison.

    python3 bench/proxy/spool.py [--formwall PATH] [--reps 3] [--size-mib 1024] [--spool-dir DIR]

For each repetition and each mode (spool, chunked) a fresh `formwall serve --single-process --workers 1`
is started in front of bench/proxy/sink.c (run with SINK_LOG_TIMES=1, so it logs when each request's head
and first body byte arrived), and one multipart upload is sent: one file part of `--size-mib` MiB,
generated on the fly by this script from a 16 MiB block of random bytes sent over and over (the body is
never materialised, in memory or on disk). While it runs a thread samples every `--interval` seconds:
  - formwall's VmRSS (and VmHWM at the end, the kernel's peak since the process started: one upload per
    process, so it is this upload's peak);
  - the spool file through /proc/PID/fd: the descriptor whose target is in the spool dir and starts with
    `formwall-spool-` (a named file) or `#` (an O_TMPFILE one, which never has a name): its mode (must be
    0600), its link text (must end in `(deleted)`: unlinked at creation), its size and its allocated blocks
    (disk use);
  - the free space of the spool dir's file system (statvfs).
After the response it checks that the spool fd is closed, that no `formwall-spool-*` name is left in the
spool dir, and that the sink received exactly the canonical re-encoded length (computed here from the
encoder's format: `--B\\r\\n` + canonical part head + data + `\\r\\n--B--\\r\\n`, B = 41 characters).

Reports per mode: end-to-end throughput (request start to full response, MiB/s), the client's send rate,
time to first byte at the upstream (head and first body byte as logged by the sink, from request start and
relative to the client's last byte), peak RSS, the spool file's peak size and disk use, and the checks.
Writes bench/out/spool.json. Standard library only; every process started here is stopped on exit.
"""

import argparse
import atexit
import datetime
import json
import os
import platform
import secrets
import signal
import socket
import stat
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as proxybench  # noqa: E402  (helpers: process bookkeeping, /proc, ports, sink build)

REPO = proxybench.REPO
PROCS = proxybench.PROCS
MIB = 1 << 20
GIB = 1 << 30
BLOCK = 16 * MIB
SPOOL_PREFIX = "formwall-spool-"
REENCODE_BOUNDARY_LEN = 41  # "formwall-" + 32 random alphanumerics (SecureRandom.boundary)


def part_head(boundary):
    return (f"--{boundary}\r\n"
            'Content-Disposition: form-data; name="file"; filename="random.bin"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n").encode()


def part_tail(boundary):
    return f"\r\n--{boundary}--\r\n".encode()


def canonical_length(data_len):
    """Length of the body formwall sends upstream (MultipartEncoder's canonical form)."""
    b = "x" * REENCODE_BOUNDARY_LEN
    return len(part_head(b)) + data_len + len(part_tail(b))


def random_block(boundary):
    """16 MiB of random bytes in which the delimiter occurs nowhere, also cyclically (the block repeats)."""
    delim = f"\r\n--{boundary}".encode()
    while True:
        block = os.urandom(BLOCK)
        if delim not in block + block[:len(delim) - 1]:
            return block


# ---------------------------------------------------------------------------------------


def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def cpu_user_sys(pid):
    """(utime, stime) of a process in seconds."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    fields = data[data.rindex(b")") + 2:].split()
    return int(fields[11]) / proxybench.TICK, int(fields[12]) / proxybench.TICK


def spool_fds(pid, spool_dir):
    """[(fd, link, stat)] of the process's descriptors that are spool files in spool_dir."""
    out = []
    base = f"/proc/{pid}/fd"
    try:
        names = os.listdir(base)
    except OSError:
        return out
    # A named spool file (the mkostemp fallback) links to `formwall-spool-XXXXXX (deleted)`; an O_TMPFILE one, the
    # usual kind since Reactor.TemporaryFile uses it, to `#INODE (deleted)`: it never had a name.
    prefixes = (os.path.join(spool_dir, SPOOL_PREFIX), os.path.join(spool_dir, "#"))
    for name in names:
        try:
            link = os.readlink(f"{base}/{name}")
            if not link.startswith(prefixes):
                continue
            st = os.stat(f"{base}/{name}")  # follows the magic link: the (unlinked) file itself
        except OSError:
            continue
        out.append((int(name), link, st))
    return out


class Sampler:
    def __init__(self, pid, spool_dir, interval):
        self.pid, self.spool_dir, self.interval = pid, spool_dir, interval
        self.max_rss_kib = 0
        self.samples = 0
        self.spool_seen = 0          # samples in which a spool fd was open
        self.spool_modes = set()
        self.spool_links = set()
        self.spool_max_size = 0
        self.spool_max_alloc = 0     # st_blocks * 512
        self.min_free = free_bytes(spool_dir)
        self.max_dirty_kib = 0       # system-wide Dirty (page cache not yet written back)
        self.first_spool_t = None
        self.last_spool_t = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self):
        rss = proxybench.proc_status(self.pid, "VmRSS") or 0
        self.max_rss_kib = max(self.max_rss_kib, rss)
        for _fd, link, st in spool_fds(self.pid, self.spool_dir):
            now = time.monotonic()
            self.spool_seen += 1
            self.first_spool_t = self.first_spool_t or now
            self.last_spool_t = now
            self.spool_modes.add(stat.filemode(st.st_mode))
            self.spool_links.add(link.replace(self.spool_dir, "<dir>")[:80])
            self.spool_max_size = max(self.spool_max_size, st.st_size)
            self.spool_max_alloc = max(self.spool_max_alloc, st.st_blocks * 512)
        self.min_free = min(self.min_free, free_bytes(self.spool_dir))
        self.max_dirty_kib = max(self.max_dirty_kib, meminfo("Dirty"))
        self.samples += 1

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample()


# ---------------------------------------------------------------------------------------


def upload(port, boundary, block, data_len, timeout):
    """Streams one multipart body with a Content-Length; returns timings and the response."""
    head, tail = part_head(boundary), part_tail(boundary)
    body_len = len(head) + data_len + len(tail)
    req = (f"POST /upload HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
           f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
           f"Content-Length: {body_len}\r\nConnection: close\r\n\r\n").encode()
    mv = memoryview(block)
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(req + head)
        left = data_len
        while left:
            n = min(left, BLOCK)
            s.sendall(mv[:n])
            left -= n
        s.sendall(tail)
        t_sent = time.monotonic()
        resp = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            resp += chunk
        t_resp = time.monotonic()
    finally:
        s.close()
    status_line, _, rest = resp.partition(b"\r\n")
    parts = status_line.split()
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    body = rest.partition(b"\r\n\r\n")[2].decode(errors="replace").strip()
    return dict(t0=t0, t_sent=t_sent, t_resp=t_resp, status=status, response_body=body[:200],
                body_len=body_len)


def sink_lines(path, start):
    with open(path) as f:
        f.seek(start)
        text = f.read()
    out = []
    for line in text.splitlines():
        if line.startswith("request "):
            out.append({k: v for k, v in (kv.split("=", 1) for kv in line.split()[1:])})
    return out


def one_run(args, mode, rep, sink_port, sink_log, boundary, block, workdir):
    port = proxybench.free_port()
    log = os.path.join(workdir, f"formwall-{mode}-{rep}.log")
    argv = [args.formwall, "serve", "--single-process", "--workers", "1",
            "--listen", f"127.0.0.1:{port}", "--upstream", f"http://127.0.0.1:{sink_port}",
            "--upstream-body", mode, "--spool-dir", args.spool_dir]
    out = open(log, "wb")
    p = PROCS.start(argv, stdout=out, stderr=subprocess.STDOUT)
    res = {"mode": mode, "rep": rep, "ok": False, "errors": []}
    try:
        why = proxybench.wait_port(port, p, 10)
        if why:
            res["errors"].append(f"formwall {why}: {proxybench.tail(log, 300)}")
            return res
        leftovers_before = [n for n in os.listdir(args.spool_dir) if n.startswith(SPOOL_PREFIX)]
        free_before = free_bytes(args.spool_dir)
        sink_off = os.path.getsize(sink_log)
        user0, sys0 = cpu_user_sys(p.pid)
        data_len = args.size_mib * MIB
        with Sampler(p.pid, args.spool_dir, args.interval) as smp:
            up = upload(port, boundary, block, data_len, args.timeout)
        user1, sys1 = cpu_user_sys(p.pid)
        cpu_s = (user1 - user0) + (sys1 - sys0)
        vmhwm = proxybench.proc_status(p.pid, "VmHWM") or 0
        time.sleep(0.2)
        fds_after = spool_fds(p.pid, args.spool_dir)
        leftovers_after = [n for n in os.listdir(args.spool_dir) if n.startswith(SPOOL_PREFIX)]
        free_after = free_bytes(args.spool_dir)
        time.sleep(0.05)
        lines = sink_lines(sink_log, sink_off)
        expected = canonical_length(data_len)
        res.update(
            body_bytes=up["body_len"], expected_upstream_bytes=expected, http_status=up["status"],
            response_body=up["response_body"],
            total_s=up["t_resp"] - up["t0"], send_s=up["t_sent"] - up["t0"],
            mib_s=up["body_len"] / MIB / (up["t_resp"] - up["t0"]),
            send_mib_s=up["body_len"] / MIB / (up["t_sent"] - up["t0"]),
            vmhwm_mib=vmhwm / 1024, peak_vmrss_mib=smp.max_rss_kib / 1024, rss_samples=smp.samples,
            cpu_s=cpu_s, cpu_user_s=user1 - user0, cpu_sys_s=sys1 - sys0,
            spool_samples=smp.spool_seen, spool_modes=sorted(smp.spool_modes), spool_links=sorted(smp.spool_links),
            spool_peak_size=smp.spool_max_size, spool_peak_alloc=smp.spool_max_alloc,
            spool_open_s=(smp.last_spool_t - smp.first_spool_t) if smp.first_spool_t else None,
            free_drop_mib=(free_before - smp.min_free) / MIB, free_after_vs_before_mib=(free_after - free_before) / MIB,
            max_dirty_mib=smp.max_dirty_kib / 1024,
            spool_fds_after=len(fds_after), leftovers_before=leftovers_before, leftovers_after=leftovers_after,
        )
        if len(lines) != 1:
            res["errors"].append(f"sink logged {len(lines)} requests, expected 1")
        else:
            ln = lines[0]
            head_t, first_t, done_t = float(ln["head"]), float(ln["first_body"]), float(ln["done"])
            res.update(upstream_bytes=int(ln["bytes"]), upstream_framing=ln["framing"], upstream_cl=int(ln["cl"]),
                       ttfb_upstream_s=head_t - up["t0"], first_body_s=first_t - up["t0"],
                       ttfb_after_last_client_byte_s=head_t - up["t_sent"],
                       upstream_transfer_s=done_t - head_t)
            if res["upstream_bytes"] != expected:
                res["errors"].append(f"upstream received {res['upstream_bytes']} bytes, expected {expected}")
            want = "cl" if mode == "spool" else "chunked"
            if res["upstream_framing"] != want:
                res["errors"].append(f"upstream framing {res['upstream_framing']}, expected {want}")
            if mode == "spool" and res["upstream_cl"] != expected:
                res["errors"].append(f"Content-Length {res['upstream_cl']}, expected {expected}")
        if up["status"] != 200:
            res["errors"].append(f"HTTP {up['status']}: {up['response_body']}")
        elif up["response_body"] != str(expected):
            res["errors"].append(f"response body '{up['response_body']}', expected the sink's count {expected}")
        if mode == "spool":
            if smp.spool_seen == 0:
                res["errors"].append("no spool file seen in /proc/PID/fd during the upload")
            if smp.spool_modes and smp.spool_modes != {"-rw-------"}:
                res["errors"].append(f"spool file mode {sorted(smp.spool_modes)}, expected -rw------- (0600)")
            if any(not lk.endswith("(deleted)") for lk in smp.spool_links):
                res["errors"].append(f"spool file still has a name: {sorted(smp.spool_links)}")
            if smp.spool_max_size < expected * 0.95:
                res["errors"].append(f"spool file peaked at {smp.spool_max_size} bytes (sampling missed the end?)")
        elif smp.spool_seen:
            res["errors"].append("a spool file was open in chunked mode")
        if fds_after:
            res["errors"].append(f"{len(fds_after)} spool fd(s) still open 0.2 s after the response")
        if leftovers_after:
            res["errors"].append(f"leftover names in the spool dir: {leftovers_after}")
        res["ok"] = not res["errors"]
        return res
    finally:
        PROCS.stop(p, signal.SIGTERM)


def fmt_range(vals, spec):
    return f"{format(statistics.median(vals), spec)} ({format(min(vals), spec)}–{format(max(vals), spec)})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--formwall", default=os.path.join(REPO, ".build/release/formwall"))
    ap.add_argument("--size-mib", type=int, default=1024, help="file part size (default 1024 = 1 GiB)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--modes", default="spool,chunked")
    ap.add_argument("--spool-dir", default=None,
                    help="spool dir (default: a new 0700 dir under /var/tmp, i.e. on disk, not tmpfs)")
    ap.add_argument("--interval", type=float, default=0.02, help="sampling period in seconds")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", default=os.path.join(REPO, "bench/out/spool.json"))
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not os.access(args.formwall, os.X_OK):
        sys.exit(f"formwall not found: {args.formwall} (swift build -c release)")

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, proxybench.on_signal)
    atexit.register(PROCS.cleanup)
    workdir = tempfile.mkdtemp(prefix="formwall-spoolbench-")
    PROCS.paths.append(workdir)
    if args.spool_dir is None:
        args.spool_dir = tempfile.mkdtemp(prefix="formwall-spooldir-", dir="/var/tmp")
        PROCS.paths.append(args.spool_dir)
    args.spool_dir = os.path.realpath(args.spool_dir)
    fs = subprocess.run(["df", "--output=fstype,source", args.spool_dir], capture_output=True, text=True).stdout
    fstype = fs.split()[-2] if fs.split() else "?"

    print("building sink ...", flush=True)
    sink_exe = proxybench.build_sink(workdir)
    sink_port = proxybench.free_port()
    sink_log = os.path.join(workdir, "sink.log")
    sink = PROCS.start([sink_exe, str(sink_port), "1"], stdout=open(sink_log, "wb"), stderr=subprocess.STDOUT,
                       env=dict(os.environ, SINK_LOG_TIMES="1"))
    why = proxybench.wait_port(sink_port, sink, 5)
    if why:
        sys.exit(f"sink {why}")

    boundary = "formwallbench" + secrets.token_hex(14)
    block = random_block(boundary)
    load = os.getloadavg()
    busy = proxybench.cpu_busy_fraction(1.0)
    print(f"formwall {args.formwall}; spool dir {args.spool_dir} ({fstype}); {os.cpu_count()} CPUs; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; CPU busy before: {busy * 100:.0f}%", flush=True)

    runs = []
    for rep in range(1, args.reps + 1):
        for mode in modes:
            r = one_run(args, mode, rep, sink_port, sink_log, boundary, block, workdir)
            runs.append(r)
            if "mib_s" in r:
                extra = ""
                if mode == "spool":
                    extra = (f", spool file {r['spool_peak_size'] / MIB:.0f} MiB "
                             f"({r['spool_peak_alloc'] / MIB:.0f} MiB allocated), mode {','.join(r['spool_modes'])}"
                             f", fds after {r['spool_fds_after']}, leftovers {len(r['leftovers_after'])}")
                print(f"  [{mode} {rep}/{args.reps}] {r['mib_s']:.0f} MiB/s end to end "
                      f"(client sent in {r['send_s']:.2f} s, total {r['total_s']:.2f} s), "
                      f"upstream head at +{r.get('ttfb_upstream_s', float('nan')):.2f} s "
                      f"({r.get('ttfb_after_last_client_byte_s', float('nan')):+.2f} s after the client's last byte), "
                      f"VmHWM {r['vmhwm_mib']:.1f} MiB, upstream {r.get('upstream_bytes')} bytes{extra}"
                      + ("" if r["ok"] else f"  ** FAILED: {'; '.join(r['errors'])} **"), flush=True)
            else:
                print(f"  [{mode} {rep}/{args.reps}] FAILED: {'; '.join(r['errors'])}", flush=True)
            if sink.poll() is not None:
                sys.exit("sink died")

    print()
    print(f"{args.size_mib} MiB file part, median (min–max) of {args.reps}, formwall --single-process --workers 1")
    summary = {}
    for mode in modes:
        good = [r for r in runs if r["mode"] == mode and r["ok"]]
        bad = [r for r in runs if r["mode"] == mode and not r["ok"]]
        if not good:
            print(f"{mode}: no successful run")
            continue
        summary[mode] = {
            "ok_runs": len(good), "failed_runs": len(bad),
            "mib_s": [r["mib_s"] for r in good], "send_mib_s": [r["send_mib_s"] for r in good],
            "ttfb_upstream_s": [r["ttfb_upstream_s"] for r in good],
            "ttfb_after_last_client_byte_s": [r["ttfb_after_last_client_byte_s"] for r in good],
            "vmhwm_mib": [r["vmhwm_mib"] for r in good], "cpu_s": [r["cpu_s"] for r in good],
            "cpu_sys_s": [r["cpu_sys_s"] for r in good],
            "upstream_transfer_s": [r["upstream_transfer_s"] for r in good],
            "max_dirty_mib": [r["max_dirty_mib"] for r in good],
        }
        sm = summary[mode]
        print(f"{mode}:")
        print(f"  end-to-end throughput        {fmt_range(sm['mib_s'], '.0f')} MiB/s")
        print(f"  client send rate             {fmt_range(sm['send_mib_s'], '.0f')} MiB/s")
        print(f"  upstream first byte (head)   {fmt_range(sm['ttfb_upstream_s'], '.2f')} s after the request started")
        print(f"    relative to last client byte {fmt_range(sm['ttfb_after_last_client_byte_s'], '+.2f')} s")
        print(f"  peak RSS (VmHWM)             {fmt_range(sm['vmhwm_mib'], '.1f')} MiB")
        print(f"  formwall CPU (user+sys)      {fmt_range(sm['cpu_s'], '.2f')} s, of it system "
              f"{fmt_range(sm['cpu_sys_s'], '.2f')} s")
        print(f"  upstream transfer (head to last byte) {fmt_range(sm['upstream_transfer_s'], '.2f')} s")
        print(f"  system-wide Dirty peak       {fmt_range(sm['max_dirty_mib'], '.0f')} MiB (page cache not yet "
              f"written back; not in formwall's RSS)")
        print(f"  upstream bytes               {sorted(set(r['upstream_bytes'] for r in good))} "
              f"(expected {good[0]['expected_upstream_bytes']})")
        if mode == "spool":
            print(f"  spool file peak size         {fmt_range([r['spool_peak_size'] / MIB for r in good], '.1f')} MiB, "
                  f"allocated {fmt_range([r['spool_peak_alloc'] / MIB for r in good], '.1f')} MiB")
            print(f"  spool dir free-space drop    {fmt_range([r['free_drop_mib'] for r in good], '.0f')} MiB "
                  f"(shared file system: other writers count too)")
            print(f"  spool file mode / name       {sorted(set(m for r in good for m in r['spool_modes']))}, "
                  f"{sorted(set(lk for r in good for lk in r['spool_links']))[:1]}")
            print(f"  after the response           spool fds open: {max(r['spool_fds_after'] for r in good)}, "
                  f"formwall-spool-* names in the dir: {max(len(r['leftovers_after']) for r in good)}")
        if bad:
            print(f"  FAILED runs: {[r['errors'] for r in bad]}")
    all_ok = all(r["ok"] for r in runs)
    print()
    print("checks: " + ("all passed (exact upstream byte count, 0600, unlinked, closed, no leftover)"
                        if all_ok else "SOME FAILED (see above)"))

    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": {"cpus": os.cpu_count(), "kernel": platform.release(), "loadavg_before": load,
                 "cpu_busy_before": busy,
                 "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1)},
        "spool_dir_fstype": fstype, "args": vars(args), "loadavg_after": os.getloadavg(),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "summary": summary, "runs": runs}, f, indent=2)
    print(f"wrote {args.out}")
    sys.exit(0 if all_ok else 1)


if __name__ == "__main__":
    main()
