"""The pure parts of the benchmarks' side-by-side mode (bench/java_peer.py): its
options, the alternation, the reading of ``bktool bench``'s output and the CPU
cut to a phase.  The Java peer itself is never needed here."""

import argparse
import importlib.util
import os
import sys
import threading
import time
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "java_peer.py"
_spec = importlib.util.spec_from_file_location("bench_java_peer", _PATH)
jp = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = jp  # dataclasses look their module up
_spec.loader.exec_module(jp)


def _parser():
    parser = argparse.ArgumentParser()
    jp.add_java_peer_options(parser)
    return parser


def test_sizes_take_bytes_and_kibibytes():
    assert jp.parse_sizes("100,4k,64KiB") == [100, 4096, 65536]
    assert _parser().parse_args(["--sizes", "100, 4kb"]).sizes == [100, 4096]


@pytest.mark.parametrize("bad", ["0", "4m", "x", "100,,4k", "-1"])
def test_a_bad_size_is_refused_with_its_text(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["--sizes", bad])
    assert exc.value.code == 2
    assert "bad entry size" in capsys.readouterr().err


def test_defaults_and_bad_counts():
    args = _parser().parse_args([])
    assert (args.java_peer, args.sizes, args.entries, args.warmup, args.rounds) == (None, [100], None, 1_000_000, 3)
    for option, value in (("--rounds", "0"), ("--entries", "-5"), ("--warmup", "x")):
        with pytest.raises(SystemExit):
            _parser().parse_args([option, value])
    assert _parser().parse_args(["--warmup", "0"]).warmup == 0


def test_larger_entries_run_as_many_bytes_within_bounds():
    assert jp.entries_for(100, 200_000) == 200_000
    assert jp.entries_for(4096, 200_000) == 50_000
    assert jp.entries_for(65536, 200_000) == 3125
    assert jp.entries_for(65536, 10_000) == 2000  # the floor
    assert jp.entries_for(65536, 1000) == 1000  # never more than asked
    assert jp.entries_for(65536, 10_000, 0) == 156


def test_alternation_swaps_who_goes_first_each_round():
    assert jp.alternate(["ours", "java"], 3) == [
        (0, "ours"),
        (0, "java"),
        (1, "java"),
        (1, "ours"),
        (2, "ours"),
        (2, "java"),
    ]


def test_bench_output_gives_rates_and_the_phases_windows():
    lines = [
        (1.0, "created something"),
        (10.0, "added 200000 entries in 4000 ms, failures=0, LAC=199999"),
        (13.0, "read back 200000 entries in 2000 ms"),
        (13.1, "ledger 5"),
    ]
    res = jp.parse_bench_output(lines)
    assert (res.adds_per_s, res.reads_per_s, res.failures) == (50_000, 100_000, 0)
    assert res.add_window == (6.0, 10.0) and res.read_window == (11.0, 13.0)
    with pytest.raises(RuntimeError, match="no result"):
        jp.parse_bench_output(lines[:2])


def test_cpu_between_interpolates_the_samples():
    samples = [(0.0, 1.0), (1.0, 2.0), (3.0, 2.0), (4.0, 6.0)]
    assert jp.cpu_between(samples, 0.5, 3.5) == pytest.approx(4.0 - 1.5)
    assert jp.cpu_between(samples, -5, 0.0) == 0.0
    assert jp.cpu_between(samples, 3.5, 99) == pytest.approx(2.0)


def test_ratio_and_median():
    assert "ratio 0.75x" in jp.ratio_line("adds", 75, 100, "adds/s")
    assert "ratio nanx" in jp.ratio_line("adds", 75, 0, "adds/s")
    assert jp.median([3, 1, 2]) == 2 and jp.median([4, 1, 2, 3]) == 2.5 and jp.median([]) != jp.median([])


def _named_thread(name: bytes, burn_s: float, go: "threading.Event", done: "threading.Event"):
    """A thread called ``name`` (as a JVM's compiler thread is) that burns ``burn_s`` of CPU, says so
    and waits for ``go`` before it exits."""
    import ctypes
    import threading

    def run():
        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME
        t0 = time.thread_time()
        while time.thread_time() - t0 < burn_s:
            pass
        done.set()
        go.wait(30)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_jit_watch_counts_compiler_threads_and_keeps_what_an_exited_one_used():
    import threading

    go, burnt, other_burnt = threading.Event(), threading.Event(), threading.Event()
    compiler = _named_thread(b"C2 CompilerThre", 0.3, go, burnt)
    other = _named_thread(b"bookkeeper-io", 0.3, go, other_burnt)
    assert burnt.wait(30) and other_burnt.wait(30)
    watch = jp.JitWatch()
    used = watch.sample(os.getpid(), now=0.0, rescan=1.0)
    assert 0.2 <= used < 0.45  # the compiler thread's CPU from its start; the other thread's is not counted
    go.set()
    compiler.join(30)
    other.join(30)
    # join() returns when the thread's Python side is done; the kernel task goes a moment later
    gone = f"/proc/self/task/{compiler.native_id}"
    deadline = time.monotonic() + 30
    while os.path.exists(gone) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert watch.sample(os.getpid(), now=0.5, rescan=1.0) == used  # gone: what it used still counts
    assert watch.last == {}


def test_ceiling_of_a_free_bookie_is_the_cores_or_the_clients_busiest_thread():
    # a client of 4 us per op, a bookie of 1 us, on 2 cores: the pair does <= 400,000/s;
    # a free bookie leaves the client 2 cores, 500,000/s, unless a thread of 3 us bounds it
    c = jp.ceiling(2, 4.0, 1.0, 1.5)
    assert c.pair_bound == pytest.approx(400_000)
    assert c.free_bookie == pytest.approx(500_000) and c.bound_by == "the cores"
    c = jp.ceiling(2, 4.0, 1.0, 3.0)
    assert c.free_bookie == pytest.approx(1e6 / 3) and c.bound_by == "its busiest thread"
    unknown = jp.ceiling(2, 4.0, 1.0, float("nan"))  # no thread measured: the cores alone
    assert unknown.free_bookie == pytest.approx(500_000)
    assert jp.ceiling(2, 0.0, 0.0, 0.0).free_bookie != jp.ceiling(2, 0.0, 0.0, 0.0).free_bookie


def test_thread_watch_finds_the_busiest_thread_in_a_window_and_leaves_the_jit_out():
    import threading

    go, burnt, jit_burnt = threading.Event(), threading.Event(), threading.Event()
    watch = jp.ThreadWatch()
    watch.sample(os.getpid(), 0.0)
    worker = _named_thread(b"bk-worker", 0.3, go, burnt)
    jit = _named_thread(b"C2 CompilerThre", 0.6, go, jit_burnt)
    assert burnt.wait(30) and jit_burnt.wait(30)
    watch.sample(os.getpid(), 1.0)
    go.set()
    worker.join(30)
    jit.join(30)
    name, used = watch.busiest((0.0, 1.0))
    assert name == "bk-worker" and 0.2 <= used < 0.45
    assert watch.busiest((5.0, 6.0)) == ("", 0.0)  # after the last sample: nothing used
