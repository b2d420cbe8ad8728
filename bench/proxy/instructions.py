#!/usr/bin/env python3
"""User-space instructions, mallocs and retains per 10 KiB upload, counted by callgrind: exact, unlike timings here.

    python3 bench/proxy/instructions.py [--formwall PATH] [--baseline PATH] [--requests 1000,3000]

Timed runs on this 2-core machine move by 5-10 % from run to run (wrk, the sink and the proxy share the cores),
which hides any single change to the per-request path. Callgrind counts every instruction formwall executes,
the same to 0.01 % from run to run, so a change of 1 % shows. It counts `rep movsb` copies one byte per
instruction, so a large memcpy weighs more here than in time: read the figures as the per-request work, not as
a prediction of requests per second (run.py measures those).

formwall `serve --workers 1 --single-process` runs under `valgrind --tool=callgrind` in front of
bench/proxy/sink.c. One keep-alive connection sends N requests, each a multipart upload of a short text field and
a 10 KiB file (every answer must be a 200); formwall is stopped and callgrind's total read back. Two runs of
N1 and N2 requests give instructions per request = (I(N2) - I(N1)) / (N2 - N1): start-up, warm-up and shut-down
cancel out. The same difference of callgrind's call counts gives mallocs and reference-count operations (the
Swift runtime's retains and releases, atomic or not) per request.

Configurations: `bare` (no rules, no audit log), `policy` (costs.py's typical route: the parts are also
sniffed and hashed) and `browser` (bare, but each request's head also carries the 17 fields a desktop Chromium
sends with a form upload, `BROWSER_FIELDS`: wrk sends only Host, Content-Type and Content-Length). With --baseline, the same is measured for a second binary in the same run and the
ratios printed (for a before/after of one change).

Needs valgrind (Debian package `valgrind`). Valgrind 3.19 cannot read the DWARF 5 debug information the Swift
toolchain writes, so each binary is copied and stripped of it (`strip -g`) first; symbols stay.
Writes bench/out/instructions.json. Stdlib only; every process and file started or written here is removed on exit.
"""

import argparse
import datetime
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as base  # noqa: E402  (bench/proxy/run.py: PROCS, the sink, ports)
import costs  # noqa: E402  (costs.py: the typical policy)
import idle  # noqa: E402  (idle.py: read_answer)

BOUNDARY = "formwallinstructions0123456789"


# The fields a desktop Chromium sends with a form upload besides Host, Content-Type and Content-Length (what wrk
# sends): the `browser` configuration adds them, to count the per-field work a browser's request really costs.
BROWSER_FIELDS = (
    "Connection: keep-alive\r\n"
    "Cache-Control: max-age=0\r\n"
    'sec-ch-ua: "Chromium";v="120", "Not(A:Brand";v="24"\r\n'
    "sec-ch-ua-mobile: ?0\r\n"
    'sec-ch-ua-platform: "Linux"\r\n'
    "Origin: http://127.0.0.1\r\n"
    "Upgrade-Insecure-Requests: 1\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 "
    "Safari/537.36\r\n"
    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
    "application/signed-exchange;v=b3;q=0.7\r\n"
    "Sec-Fetch-Site: same-origin\r\n"
    "Sec-Fetch-Mode: navigate\r\n"
    "Sec-Fetch-User: ?1\r\n"
    "Sec-Fetch-Dest: document\r\n"
    "Referer: http://127.0.0.1/upload\r\n"
    "Accept-Encoding: gzip, deflate, br\r\n"
    "Accept-Language: en-US,en;q=0.9\r\n"
    "Cookie: sessionid=8c1f2e0a9b7d4c3e6f5a1b2c3d4e5f60; csrftoken=Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed\r\n"
)


def request_bytes(file_kib, browser=False):
    """One upload matching costs.py's route: a `caption` field and a `file` part named random.bin, its bytes
    pseudo-random (fixed seed) so that the sniffer calls them application/octet-stream as the route asks. With
    `browser`, the head also carries `BROWSER_FIELDS`."""
    body = (
        f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"caption\"\r\n\r\nhello\r\n"
        f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"random.bin\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + random.Random(1).randbytes(file_kib * 1024) + f"\r\n--{BOUNDARY}--\r\n".encode()
    head = (
        "POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {len(body)}\r\n"
        + (BROWSER_FIELDS if browser else "") + "\r\n"
    ).encode()
    return head + body


def send_requests(port, request, n, timeout):
    """Sends `n` requests on one connection, each after the previous answer; raises unless every one is a 200."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        for i in range(n):
            s.sendall(request)
            status = idle.read_answer(s)
            if status != 200:
                raise RuntimeError(f"request {i}: status {status}")


# The Swift runtime's reference-count entry points (the atomic ones, and the non-atomic ones a build with
# `-assume-single-threaded` calls), counted as one figure: retains and releases, each one operation.
BRIDGE_FUNCTIONS = frozenset(
    f"swift_{kind}bridgeObject{op}{n}"
    for kind in ("", "nonatomic_") for op in ("Retain", "Release") for n in ("", "_n"))
REFCOUNT_FUNCTIONS = frozenset(
    f"swift_{kind}{op}{n}" for kind in ("", "nonatomic_") for op in ("retain", "release") for n in ("", "_n")
) | BRIDGE_FUNCTIONS


def read_callgrind(path):
    """(total instructions, calls to malloc, reference-count operations) from a callgrind output file. A bridged
    object's retain or release (`swift_bridgeObjectRelease`) calls `swift_release` for a native object: that
    inner call is the same operation and is not counted again."""
    total = None
    names = {}
    caller = callee = None
    mallocs = refcounts = 0
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
            elif line.startswith(("fn=", "cfn=")):
                m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.strip())
                if m:
                    if m.group(2):
                        names[m.group(1)] = m.group(2)
                    if line.startswith("cfn="):
                        callee = names.get(m.group(1))
                    else:
                        caller = names.get(m.group(1))
            elif line.startswith("calls=") and callee is not None:
                calls = int(line.split("=")[1].split()[0])
                if callee == "malloc":
                    mallocs += calls
                elif callee in REFCOUNT_FUNCTIONS and caller not in BRIDGE_FUNCTIONS:
                    refcounts += calls
                callee = None
    if total is None:
        raise RuntimeError(f"no total in {path}")
    return total, mallocs, refcounts


def wait_listening(p, log, timeout):
    """Waits until formwall (process `p`, writing `log`) logs that it listens; raises RuntimeError if it exits or
    `timeout` seconds pass. Probing the port with connects while valgrind starts (seconds) can, rarely, meet a
    connection of the probe's own (a TCP self-connect on a port in the ephemeral range), so the log is read
    instead."""
    deadline = time.monotonic() + timeout
    while b'"msg":"listening"' not in open(log, "rb").read():
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"formwall under valgrind did not start; its log ends with:\n{base.tail(log)}")
        time.sleep(0.05)


def count(args, exe, extra, n, workdir, uport, label, browser=False):
    """Runs formwall under callgrind for `n` requests; returns (instructions, mallocs, reference-count operations)
    of the whole process."""
    port = base.free_port()
    out = os.path.join(workdir, f"callgrind.{label}.{n}")
    log = os.path.join(workdir, f"formwall.{label}.{n}.log")
    argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", exe, "serve",
            "--listen", f"127.0.0.1:{port}", "--upstream", f"http://127.0.0.1:{uport}",
            "--workers", "1", "--single-process"] + extra
    with open(log, "w") as logf:
        p = base.PROCS.start(argv, stdout=logf, stderr=subprocess.STDOUT)
    wait_listening(p, log, args.ready_timeout)
    try:
        send_requests(port, request_bytes(args.file_kib, browser), n, timeout=60)
    except (OSError, RuntimeError) as e:
        raise RuntimeError(f"{label}, {n} requests: {e!r}; formwall's log ends with:\n{base.tail(log, 3000)}") from e
    base.PROCS.stop(p, grace=60)
    return read_callgrind(out)


def measure(args, exe, extra, workdir, uport, label, browser=False):
    n1, n2 = args.requests
    i1, m1, r1 = count(args, exe, extra, n1, workdir, uport, label, browser)
    i2, m2, r2 = count(args, exe, extra, n2, workdir, uport, label, browser)
    return {"instructions_per_request": (i2 - i1) / (n2 - n1), "mallocs_per_request": (m2 - m1) / (n2 - n1),
            "refcounts_per_request": (r2 - r1) / (n2 - n1),
            "runs": {str(n1): {"instructions": i1, "mallocs": m1, "refcounts": r1},
                     str(n2): {"instructions": i2, "mallocs": m2, "refcounts": r2}}}


def stripped_copy(path, workdir, name):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SystemExit(f"binary not found: {path} (swift build -c release)")
    copy = os.path.join(workdir, name)
    shutil.copy2(path, copy)
    subprocess.run(["strip", "-g", copy], check=True)
    return copy


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--formwall", default=os.path.join(HERE, "..", "..", ".build", "release", "formwall"))
    ap.add_argument("--baseline", help="a second formwall binary, measured the same way in the same run")
    ap.add_argument("--requests", default="1000,3000", help="N1,N2 (default 1000,3000)")
    ap.add_argument("--file-kib", type=int, default=10)
    ap.add_argument("--ready-timeout", type=float, default=60.0)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "out", "instructions.json"))
    args = ap.parse_args()
    args.requests = [int(x) for x in args.requests.split(",")]
    if len(args.requests) != 2 or not 0 < args.requests[0] < args.requests[1]:
        raise SystemExit("--requests takes N1,N2 with 0 < N1 < N2")
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind not found (Debian package valgrind: apt-get install valgrind)")

    workdir = base.start_session("formwall-instructions-")
    uport = base.start_sink(workdir, 1)
    rules = os.path.join(workdir, "typical.rules")
    with open(rules, "w") as f:
        f.write(costs.RULES.format(body_max_mib=1, file_max_mib=1))
    # (formwall's arguments, whether the request carries a browser's fields)
    configs = {"bare": ([], False), "policy": (["--rules", rules], False), "browser": ([], True)}
    binaries = {"formwall": stripped_copy(args.formwall, workdir, "formwall")}
    if args.baseline:
        binaries["baseline"] = stripped_copy(args.baseline, workdir, "baseline")

    results = {}
    for name, exe in binaries.items():
        for config, (extra, browser) in configs.items():
            label = f"{name}-{config}"
            results[label] = measure(args, exe, extra, workdir, uport, label, browser)
            r = results[label]
            print(f"{label:20} {r['instructions_per_request']:10.0f} instructions/request "
                  f"{r['mallocs_per_request']:6.1f} mallocs/request "
                  f"{r['refcounts_per_request']:6.1f} retains+releases/request", flush=True)
    if args.baseline:
        for config in configs:
            new, old = results[f"formwall-{config}"], results[f"baseline-{config}"]
            print(f"{config:20} formwall / baseline: instructions "
                  f"{new['instructions_per_request'] / old['instructions_per_request']:.3f}, mallocs "
                  f"{new['mallocs_per_request'] / max(old['mallocs_per_request'], 1e-9):.3f}, retains+releases "
                  f"{new['refcounts_per_request'] / max(old['refcounts_per_request'], 1e-9):.3f}")
    document = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "requests": args.requests, "file_kib": args.file_kib,
                "valgrind": base.tool_version(["valgrind", "--version"]), "results": results}
    base.finish_session(os.path.abspath(args.out), document, [])


if __name__ == "__main__":
    main()
