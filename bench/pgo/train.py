#!/usr/bin/env python3
"""Regenerates pgo/formwall.profdata, the execution profile the release build optimizes with.

    python3 bench/pgo/train.py [--keep DIR]

1. Builds an instrumented formwall (LLVM IR-level instrumentation: `-Xfrontend -ir-profile-generate`, with
   clang's profile runtime linked in) into a scratch directory, with FORMWALL_PGO=0 so that the build does not
   read the old profile.
2. Runs the proxy benchmarks against that binary, briefly, with LLVM_PROFILE_FILE pointing into the scratch
   directory: costs.py with one and two workers (10 KiB uploads with wrk and a 16 MiB upload, bare, with the
   typical policy, with an audit log, with both), spool.py (a 256 MiB upload spooled and streamed chunked),
   tls.py (HTTPS uploads and handshakes) and archive.py (zip and tar inspection). Every formwall process writes
   its counts when it exits.
3. Merges each run's counts with the toolchain's `llvm-profdata`, then all of them, weighted (see WORKLOADS), into
   pgo/formwall.profdata, and removes this checkout's release build (.build/release's directory): the compiler
   keeps an object file whose unoptimised code has not changed, whatever the profile, so only a build from
   scratch takes the new profile in.

The training covers the paths the benchmarks measure and the features an operator turns on. A function no run
reached is treated as cold (laid out apart and optimized for size), so a feature left out of the training would
run somewhat slower, never differently. Rerun this after changing a hot path; a stale profile only loses speed
(functions whose code changed get no profile). Needs what the benchmarks need (wrk, curl, nginx, haproxy, gcc;
see bench/proxy/run.py), and takes a few minutes.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROXY_BENCH = os.path.join(ROOT, "bench", "proxy")


def toolchain_bin():
    """The directory of the `swift` driver in use, where `llvm-profdata` and clang's runtime live too."""
    swift = shutil.which("swift")
    if swift is None:
        sys.exit("swift is not on PATH")
    return os.path.dirname(os.path.realpath(swift))


def profile_runtime(bindir):
    """clang's profile runtime for x86_64 or aarch64 Linux, from the toolchain."""
    machine = os.uname().machine
    found = glob.glob(os.path.join(bindir, "..", "lib", "clang", "*", "lib", "linux", f"libclang_rt.profile-{machine}.a"))
    if not found:
        sys.exit(f"no libclang_rt.profile-{machine}.a under {bindir}/../lib/clang")
    return os.path.realpath(sorted(found)[-1])


def build_instrumented(scratch, raw_dir, runtime):
    env = dict(os.environ, FORMWALL_PGO="0")
    argv = ["swift", "build", "-c", "release", "--product", "formwall", "--scratch-path", os.path.join(scratch, "build"),
            "-Xswiftc", "-Xfrontend", "-Xswiftc", f"-ir-profile-generate={os.path.join(raw_dir, 'default.profraw')}",
            "-Xlinker", runtime, "-Xlinker", "-u__llvm_profile_runtime"]
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, cwd=ROOT, env=env, check=True)
    binary = os.path.join(scratch, "build", "release", "formwall")
    if not os.path.isfile(binary):
        sys.exit(f"instrumented build left no binary at {binary}")
    return binary


# (weight, script and options). The request path dominates the profile: branch weights follow what a run counted,
# and a large upload counts its body loops thousands of times over, which would otherwise decide how the
# per-request branches are laid out. Each workload's counts are merged on their own, then together with these
# weights (`llvm-profdata merge --weighted-input`), so the small uploads decide the request path and the other
# runs keep their code warm: not treated as never run.
WORKLOADS = [
    (8, ["costs.py", "--size-mib", "16", "--reps", "1", "--wrk-duration", "4", "--wrk-reps", "1",
         "--formwall-workers", "1"]),
    (4, ["costs.py", "--size-mib", "16", "--reps", "1", "--wrk-duration", "3", "--wrk-reps", "1",
         "--formwall-workers", "2", "--configs", "bare,policy"]),
    (1, ["spool.py", "--size-mib", "256", "--reps", "1"]),
    (1, ["tls.py", "--runs", "1", "--size-mib", "64", "--handshake-seconds", "2", "--workers", "1"]),
    (1, ["archive.py", "--runs", "1", "--size-mib", "32"]),
]


def install(merged):
    """Moves the merged profile to pgo/formwall.profdata and removes the checkout's release build directory."""
    out = os.path.join(ROOT, "pgo", "formwall.profdata")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    shutil.move(merged, out)
    release = os.path.join(ROOT, ".build", "release")  # a link to .build/<triple>/release
    if os.path.exists(release):
        shutil.rmtree(os.path.realpath(release))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", help="keep the scratch directory (build, raw profiles, bench output) here")
    args = ap.parse_args()
    bindir = toolchain_bin()
    profdata_tool = os.path.join(bindir, "llvm-profdata")
    if not os.access(profdata_tool, os.X_OK):
        sys.exit(f"{profdata_tool} not found")
    scratch = args.keep or tempfile.mkdtemp(prefix="formwall-pgo-")
    os.makedirs(scratch, exist_ok=True)
    raw_dir = os.path.join(scratch, "raw")
    shutil.rmtree(raw_dir, ignore_errors=True)
    os.makedirs(raw_dir)
    try:
        binary = build_instrumented(scratch, raw_dir, profile_runtime(bindir))
        weighted = []
        for index, (weight, workload) in enumerate(WORKLOADS):
            script, *rest = workload
            name = f"{index}-{script.replace('.py', '')}"
            run_dir = os.path.join(raw_dir, name)
            os.makedirs(run_dir)
            env = dict(os.environ, LLVM_PROFILE_FILE=os.path.join(run_dir, "formwall-%p-%m.profraw"))
            argv = [sys.executable, os.path.join(PROXY_BENCH, script), "--formwall", binary,
                    "--out", os.path.join(scratch, f"{name}.json")] + rest
            print("+", " ".join(argv), flush=True)
            # The counts are what matters here: a benchmark whose own checks fail (a sampling miss, a slow host)
            # still trained the binary, so its exit status is reported, not fatal.
            status = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL).returncode
            if status != 0:
                print(f"warning: {script} exited with {status}; its runs still count", flush=True)
            raws = sorted(glob.glob(os.path.join(run_dir, "*.profraw")))
            if not raws:
                sys.exit(f"{script} left no profile (did every formwall process exit normally?)")
            merged = os.path.join(raw_dir, f"{name}.profdata")
            subprocess.run([profdata_tool, "merge", "-o", merged] + raws, check=True)
            weighted.append(f"--weighted-input={weight},{merged}")
        merged = os.path.join(scratch, "formwall.profdata")
        subprocess.run([profdata_tool, "merge", "-o", merged] + weighted, check=True)
        out = install(merged)
        summary = subprocess.run([profdata_tool, "show", out], capture_output=True, text=True, check=True).stdout
        print(f"wrote {os.path.relpath(out, ROOT)} from {len(weighted)} workloads; build with `swift build -c release --experimental-lto-mode=full`")
        print(summary.strip())
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
