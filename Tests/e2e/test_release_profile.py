"""The execution profile the release build is optimised with (pgo/formwall.profdata, Package.swift,
bench/pgo/train.py): readable by this toolchain, recorded from the request path, and never shipped as
instrumentation. $FORMWALL_BIN is the binary under test (scripts/test.sh: .build/release/formwall)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("FORMWALL_BIN", str(ROOT / ".build/debug/formwall"))
PROFILE = ROOT / "pgo" / "formwall.profdata"


def llvm_profdata():
    swift = shutil.which("swift")
    if swift is None:
        pytest.skip("no swift toolchain on PATH")
    tool = Path(os.path.realpath(swift)).parent / "llvm-profdata"
    assert tool.exists(), f"{tool} missing: the toolchain that builds Formwall ships llvm-profdata"
    return str(tool)


def test_the_profile_is_readable_and_counts_the_request_path():
    assert PROFILE.is_file(), "pgo/formwall.profdata is part of the repository (bench/pgo/train.py writes it)"
    shown = subprocess.run([llvm_profdata(), "show", "--all-functions", "--counts", str(PROFILE)],
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "Instrumentation level: IR" in shown.stdout
    # Functions of the per-request path, by their mangled names' module and type prefixes, and the most any of
    # their blocks ran.
    counted = {}
    name = None
    for line in shown.stdout.splitlines():
        stripped = line.strip()
        if line.startswith("  ") and not line.startswith("    ") and stripped.endswith(":"):
            name = stripped[:-1].split(";")[-1]
        elif stripped.startswith("Block counts: [") and name is not None:
            counts = [int(c) for c in stripped[len("Block counts: ["):-1].split(",") if c.strip()]
            counted[name] = max(counts, default=0)
    for prefix in ("$s5Proxy17ConnectionMachineV", "$s9Multipart0A6ParserC", "$s5HTTP121HTTPRequestHeadParserV",
                   "$s7Reactor13EpollSelectorC"):
        hot = [n for n, c in counted.items() if n.startswith(prefix) and c > 10_000]
        assert hot, f"no function of {prefix}… ran more than 10,000 times in the profile"


def test_the_binary_under_test_is_not_instrumented():
    binary = Path(BIN)
    if not binary.exists():
        pytest.skip(f"{binary} not built")
    data = binary.read_bytes()
    # An instrumented build (bench/pgo/train.py's) links clang's profile runtime and writes .profraw files on exit.
    assert b"__llvm_profile_runtime" not in data
    assert b"__llvm_profile_write_file" not in data
