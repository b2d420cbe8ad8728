"""bench/proxy/sharing.py's reading of `perf script`: docs/performance.md says formwall's workers write no shared
memory because this counts none, so it must count what is shared, and only that. Checked on hand-made probe output:
an object two threads of one process touch is shared; one thread's, a static object's, a null or tagged value, or
the same address in two processes is not; `swift_retain_n` counts its `n`; a value witness is named with its
caller."""

from e2e_helpers import load_bench

sharing = load_bench("sharing")
GROUP = sharing.PROBE_GROUP


def hit(pid, tid, event, obj=None, n=None, frames=("swift_retain", "$s5Rules4SiteF", "start_thread")):
    trace = f"({0x73ae40:x})" + (f" obj={obj}" if obj is not None else "") + (f" n={n}" if n is not None else "")
    head = f"{pid:>7}/{tid:<7} {GROUP}:{event}: {trace}"
    return "\n".join([head] + [f"\t{0x1000 + i:16x} {f}+0x10" for i, f in enumerate(frames)]) + "\n"


HEAP_A = 0x55AA_0000_1000
HEAP_B = 0x55AA_0000_2000
STATIC = 0x5600_0000_0100
IMAGES = {100: [(0x5600_0000_0000, 0x5600_0001_0000)], 200: [(0x5600_0000_0000, 0x5600_0001_0000)]}


def script(*hits):
    return "\n".join(hits)


def test_two_threads_of_one_process_on_one_heap_object_are_shared_and_nothing_else_is():
    text = script(
        hit(100, 101, "request"), hit(100, 102, "request"),
        # Shared: both worker threads of process 100 count references to HEAP_A (3 operations, one a retain_n).
        hit(100, 101, "swift_retain", HEAP_A),
        hit(100, 102, "swift_release", HEAP_A),
        hit(100, 102, "swift_retain_n", HEAP_A, n=1, frames=("swift_retain_n", "$s5Rules13CharacterRuleVwcp",
                                                             "$s5Rules15PolicyEvaluatorV14checkPartStartF")),
        # One thread only.
        hit(100, 101, "swift_retain", HEAP_B),
        hit(100, 101, "swift_release", HEAP_B),
        # A static (immortal) object both threads touch: inside the executable's image.
        hit(100, 101, "swift_retain", STATIC), hit(100, 102, "swift_retain", STATIC),
        # Null and tagged values.
        hit(100, 101, "swift_release", 0), hit(100, 102, "swift_release", 0),
        hit(100, 101, "swift_release", 0x8000000000000031), hit(100, 102, "swift_release", 0x8000000000000031),
        # The same address in another process (the supervisor) is another object.
        hit(200, 201, "swift_retain", HEAP_B),
        # A retain_n of 4 on the shared object counts 4.
        hit(100, 101, "swift_retain_n", HEAP_A, n=4),
    )
    samples = sharing.parse_script(text)
    assert len(samples) == 15
    result = sharing.classify(samples, IMAGES)
    assert result["requests"] == 2
    assert result["shared_objects"] == 1
    # HEAP_A: 1 + 1 + 1 + 4 operations over 2 requests.
    assert result["shared_ops_per_request"] == 3.5
    # Heap: HEAP_A's 7, HEAP_B's 2 in process 100 and 1 in process 200.
    assert result["heap_ops_per_request"] == 5.0
    # Every operation: 13 probe hits besides the requests, the retain_n of 4 counting 3 more.
    assert result["ops_per_request"] == (13 + 3) / 2
    sites = {(s["event"], s["site"]): s["per_request"] for s in result["shared_sites"]}
    assert sites == {
        ("swift_retain", "$s5Rules4SiteF"): 0.5,
        ("swift_release", "$s5Rules4SiteF"): 0.5,
        ("swift_retain_n", "$s5Rules4SiteF"): 2.0,
        ("swift_retain_n", "$s5Rules13CharacterRuleVwcp < $s5Rules15PolicyEvaluatorV14checkPartStartF"): 0.5,
    }


def test_nothing_shared_reads_zero():
    text = script(hit(100, 101, "request"), hit(100, 101, "swift_retain", HEAP_A),
                  hit(100, 102, "swift_retain", HEAP_B), hit(100, 102, "request"))
    result = sharing.classify(sharing.parse_script(text), IMAGES)
    assert result["shared_ops_per_request"] == 0 and result["shared_objects"] == 0
    assert result["heap_ops_per_request"] == 1.0
