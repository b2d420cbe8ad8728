"""bench/proxy/instructions.py's reading of a callgrind output file: docs/performance.md quotes its mallocs and
retains+releases per request, so it must count every call to those functions from any caller, name compression
included, and count a bridged object's inner `swift_release` once, not twice."""

import pytest

from e2e_helpers import load_bench

instructions = load_bench("instructions")


def write(tmp_path, text):
    path = tmp_path / "callgrind.out"
    path.write_text(text)
    return path


CALLGRIND = """\
# callgrind format
version: 1
events: Ir
fn=(1) $s5Proxy16ClientConnectionC3runyyF
0 40
cfn=(2) malloc
calls=3 0
0 90
cfn=(3) swift_retain
calls=5 0
0 25
cfn=(4) swift_bridgeObjectRelease
calls=2 0
0 12
cfn=(5) swift_nonatomic_release
calls=4 0
0 8
fn=(4)
0 10
cfn=(6) swift_release
calls=7 0
0 21
fn=(7) $s5Proxy9FormStageC4feedyyF
0 30
cfn=(2)
calls=11 0
0 300
cfn=(6)
calls=13 0
0 39
cfn=(8) swift_retain_n
calls=1 0
0 4
cfn=(9) swift_isUniquelyReferenced_nonNull_native
calls=100 0
0 200
cfn=(10) swift_bridgeObjectRetain_n
calls=3 0
0 6
fn=(10)
0 5
cfn=(8)
calls=3 0
0 6
summary: 12345
"""


def test_mallocs_and_refcount_operations_are_counted_from_every_caller_once(tmp_path):
    # Refcount operations: retain 5 + bridged release 2 + non-atomic release 4 (ClientConnection.run), release 13
    # + retain_n 1 + bridged retain_n 3 (FormStage.feed) = 28; the bridged calls' own swift_release (7 calls) and
    # swift_retain_n (3) are the same operations; uniqueness checks are not reference-count writes.
    path = write(tmp_path, CALLGRIND)
    assert instructions.read_callgrind(path) == (12345, 3 + 11, 5 + 2 + 4 + 13 + 1 + 3)


def test_a_file_without_a_total_is_an_error(tmp_path):
    path = write(tmp_path, CALLGRIND.replace("summary: 12345\n", ""))
    with pytest.raises(RuntimeError, match="no total"):
        instructions.read_callgrind(path)


def test_totals_line_is_read_when_there_is_no_summary(tmp_path):
    path = write(tmp_path, CALLGRIND.replace("summary: 12345", "totals: 999"))
    assert instructions.read_callgrind(path)[0] == 999
