"""The bookie's runs of plain v3 and v2 READs taken apart and answered at once, C twins
(``bkctl.wire.codecs._plain``: ``read_run``, ``read_answers``, ``v2_read_run``,
``v2_read_answers``) against their Python twins
(:mod:`bkctl.wire.codecs.plain`), byte for byte: random runs of reads of one ledger, broken at a
random point by another ledger, a read that is not plain (fencing, a long poll, high priority),
an ADD, junk or a request cut short, over the whole range of ids; their answers for bodies read
or reads failed, from any point of the run, under any limit.  The Python twins are checked
against what the run's requests hold and what read_answer builds, so both are right, not only
alike.

These call the twins directly, so they hold with ``BKCTL_FASTPATHS=0`` too; the bookie's runs
both ways are covered by test_bookie_plain_reads.py.
"""

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.wire.codecs import plain, v2, v3
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC
from tests.unit.test_plain_add_runs_c import _plain, i64, needs_c, u64

#: what ends a run: another ledger, a read that is not plain, another request, junk
BREAKS = ["none", "ledger", "fence", "long_poll", "high", "add", "junk", "cut"]


def read(txn: int, ledger: int, entry: int, **how) -> bytes:
    return v3.serialize(v3.read_request(txn, ledger, entry, **how))


@st.composite
def read_runs(draw):
    """(payloads, i, end, ledger, reads, exact): ``reads`` the (entry, header length) of the
    run's requests, None for the break; ``exact`` False where the break might be one of the
    run's after all (junk, a request cut short of nothing)."""
    ledger = draw(i64)
    n = draw(st.integers(1, 30))
    txns = [draw(u64) for _ in range(n)]
    entries = [draw(i64) for _ in range(n)]
    payloads = [read(t, ledger, e) for t, e in zip(txns, entries)]
    # the header field: its tag, its one-byte length, then that many bytes
    reads: list = [(e, 2 + p[1]) for e, p in zip(entries, payloads)]
    at, why = draw(st.integers(0, n)), draw(st.sampled_from(BREAKS))
    t, e = draw(u64), draw(i64)
    broken = {
        "none": None,
        "ledger": read(t, ledger ^ draw(st.integers(1, 1 << 62)), e),
        "fence": read(t, ledger, e, fence_master_key=b"k" * 20),
        "long_poll": read(t, ledger, e, previous_lac=e, timeout_ms=10),
        "high": read(t, ledger, e, high_priority=True),
        "add": v3.serialize(v3.add_request(t, ledger, e, b"k" * 20, b"body")),
        "junk": draw(st.binary(max_size=60)),
        "cut": read(t, ledger, e)[: draw(st.integers(0, 20))],
    }[why]
    if broken is not None:
        payloads.insert(at, broken)
        reads.insert(at, None)  # the run never takes it (junk that parses as one of the run's is not drawn)
    i = draw(st.integers(-2, len(payloads)))
    end = draw(st.integers(-1, len(payloads) + 3))
    return payloads, i, end, ledger, reads, why not in ("junk", "cut")


def expected_run(reads, i, end):
    """What a run from ``i`` holds: the reads up to the first break or ``end``."""
    taken = []
    for r in reads[max(i, 0) : max(end, i, 0)]:
        if r is None:
            break
        taken.append(r)
    return max(i, 0) + len(taken), taken


@needs_c
@settings(max_examples=500)
@given(read_runs())
def test_read_runs(case):
    payloads, i, end, ledger, reads, exact = case
    want = plain.py_read_run(payloads, i, end, ledger)
    got = _plain.read_run(payloads, i, end, ledger)
    assert tuple(got) == tuple(want)
    assert (got.first, got.end, got.ledger_id, got.entry_ids, got.header_lens) == tuple(want)
    # the Python twin holds what the requests hold, up to the break
    stop, taken = expected_run(reads, i, end)
    n = len(want.entry_ids)
    assert (want.first, want.end, want.ledger_id) == (max(i, 0), max(i, 0) + n, ledger)
    assert list(zip(want.entry_ids, want.header_lens))[: len(taken)] == taken[:n]
    assert want.end == stop if exact else want.end >= stop


#: a read's outcome: its body, or the rc it failed with
outcomes = st.one_of(
    st.binary(max_size=200), st.binary(max_size=3), st.sampled_from([RC.ENOENTRY, RC.ENOLEDGER, RC.EIO, -101])
)


@needs_c
@settings(max_examples=400)
@given(st.lists(st.tuples(u64, i64), min_size=1, max_size=40), i64, st.data(), i64, st.integers(1, 3000))
def test_read_answers(ids, ledger, data, lac, limit):
    payloads = [b"before"] + [read(t, ledger, e) for t, e in ids]
    run = _plain.read_run(payloads, 1, len(payloads), ledger)
    assert run.end == len(payloads)
    bodies = data.draw(st.lists(outcomes, max_size=len(ids)))
    start = data.draw(st.integers(-1, len(ids) + 2))
    want = plain.py_read_answers(payloads, run, bodies, start, lac, limit)
    assert _plain.read_answers(payloads, run, bodies, start, lac, limit) == want
    assert (
        plain.py_read_answers(payloads, plain.py_read_run(payloads, 1, 99, ledger), bodies, start, lac, limit) == want
    )
    # what is answered: the reads from start on while read and under limit, each as read_answer builds it
    k, expect = max(start, 0), []
    while k < len(bodies) and isinstance(bodies[k], bytes) and sum(map(len, expect)) < limit:
        head = payloads[1 + k][: run.header_lens[k]]
        expect.append(plain.py_read_answer(head, ledger, ids[k][1], bodies[k], lac))
        k += 1
    assert want == (b"".join(expect), k)


@needs_c
def test_read_runs_take_only_lists_of_bytes():
    reads = [read(1, 5, 0), read(2, 5, 1)]
    with pytest.raises(TypeError):
        _plain.read_run(tuple(reads), 0, 2, 5)
    with pytest.raises(TypeError):
        _plain.read_run([reads[0], bytearray(reads[1])], 0, 2, 5)
    with pytest.raises(TypeError):
        _plain.read_run(reads, 0, 2)
    # what is past the run is not looked at; a ledger past int64 matches nothing
    assert _plain.read_run([*reads, None], 0, 2, 5).end == 2
    assert tuple(_plain.read_run(reads, 0, 2, 1 << 63)) == tuple(plain.py_read_run(reads, 0, 2, 1 << 63))
    assert tuple(_plain.read_run(reads, 0, 2, 1 << 63)) == (0, 0, 1 << 63, [], [])


@needs_c
def test_read_answers_take_only_a_run_of_those_payloads():
    payloads = [read(1, 5, 0), read(2, 5, 1)]
    run = _plain.read_run(payloads, 0, 2, 5)
    with pytest.raises(TypeError):
        _plain.read_answers(tuple(payloads), run, [b"x", b"y"], 0, 1, 100)
    with pytest.raises(TypeError):
        _plain.read_answers(payloads, list(run), [b"x", b"y"], 0, 1, 100)
    with pytest.raises(TypeError):
        _plain.read_answers(payloads, plain.ReadRun(0, 2, 5, [0, 1.0], [8, 8]), [b"x", b"y"], 0, 1, 100)
    with pytest.raises(ValueError):
        _plain.read_answers(payloads, plain.ReadRun(0, 2, 5, [0, 1], [8, 99]), [b"x", b"y"], 0, 1, 100)
    with pytest.raises(IndexError):
        _plain.read_answers(payloads, run, [b"x", b"y", b"z"], 0, 1, 1 << 20)
    with pytest.raises(TypeError):
        _plain.read_answers([payloads[0], bytearray(payloads[1])], run, [b"x", b"y"], 0, 1, 100)
    # a failed read (or anything that is no bytes) is not looked at: it ends the answers
    for bodies in ([b"x", RC.ENOENTRY], [b"x", bytearray(b"y")], [b"x", None]):
        got = _plain.read_answers(payloads, run, bodies, 0, 1, 1 << 20)
        assert got == plain.py_read_answers(payloads, run, bodies, 0, 1, 1 << 20) and got[1] == 1


def v2_read(ledger: int, entry: int, flags: int = 0, version: int = 2) -> bytes:
    return v2.ReadRequest(version, flags, ledger, entry).encode()


@st.composite
def v2_read_runs(draw):
    """What :func:`read_runs` gives, for version-2 READs (no header field: ``reads`` the entry ids)."""
    ledger = draw(i64)
    entries = [draw(i64) for _ in range(draw(st.integers(1, 30)))]
    payloads = [v2_read(ledger, e, draw(st.sampled_from([0, 2, 4]))) for e in entries]
    reads: list = list(entries)
    at, why = draw(st.integers(0, len(entries))), draw(st.sampled_from(["none", "ledger", "fence", "version", "cut"]))
    e = draw(i64)
    broken = {
        "none": None,
        "ledger": v2_read(ledger ^ 1, e),
        "fence": v2.ReadRequest(2, 1, ledger, e, b"k" * 20).encode(),
        "version": v2_read(ledger, e, version=3),
        "cut": v2_read(ledger, e)[: draw(st.integers(0, 19))],
    }[why]
    if broken is not None:
        payloads.insert(at, broken)
        reads.insert(at, None)
    i = draw(st.integers(-2, len(payloads)))
    end = draw(st.integers(-1, len(payloads) + 3))
    return payloads, i, end, ledger, reads


@needs_c
@settings(max_examples=500)
@given(v2_read_runs(), st.data(), st.integers(1, 3000))
def test_v2_read_runs_and_their_answers(case, data, limit):
    payloads, i, end, ledger, reads = case
    want = plain.py_v2_read_run(payloads, i, end, ledger)
    got = _plain.v2_read_run(payloads, i, end, ledger)
    assert tuple(got) == tuple(want) and got.header_lens is None
    stop, taken = expected_run(reads, i, end)
    assert (want.first, want.end, want.ledger_id, want.entry_ids) == (max(i, 0), stop, ledger, taken)
    bodies = data.draw(st.lists(outcomes, max_size=len(taken)))
    start = data.draw(st.integers(-1, len(taken) + 2))
    answers = plain.py_v2_read_answers(want, bodies, start, limit)
    assert _plain.v2_read_answers(got, bodies, start, limit) == answers
    # each as the general path answers it: frame(v2.ReadResponse(2, EOK, ledger, entry, body).encode())
    k, expect = max(start, 0), []
    while k < len(bodies) and isinstance(bodies[k], bytes) and sum(map(len, expect)) < limit:
        expect.append(frame(v2.ReadResponse(2, RC.EOK, ledger, taken[k], bodies[k]).encode()))
        k += 1
    assert answers == (b"".join(expect), k)


@needs_c
def test_v2_read_answers_take_only_a_run_and_bodies():
    run = _plain.v2_read_run([v2_read(5, 0), v2_read(5, 1)], 0, 2, 5)
    with pytest.raises(TypeError):
        _plain.v2_read_answers(list(run), [b"x"], 0, 100)
    with pytest.raises(TypeError):
        _plain.v2_read_answers(plain.ReadRun(0, 2, 5, [0, 1.0], None), [b"x", b"y"], 0, 100)
    with pytest.raises(IndexError):
        _plain.v2_read_answers(run, [b"x", b"y", b"z"], 0, 1 << 20)
    with pytest.raises(TypeError):
        _plain.v2_read_run([v2_read(5, 0), bytearray(20)], 0, 2, 5)
    with pytest.raises(TypeError):  # a version-2 run has no header fields for a v3 answer
        _plain.read_answers([v2_read(5, 0)], run, [b"x"], 0, 1, 100)
    with pytest.raises(TypeError):
        plain.py_read_answers([v2_read(5, 0)], run, [b"x"], 0, 1, 100)
    assert _plain.v2_read_answers(run, [b"x", RC.ENOENTRY], 0, 1 << 20)[1] == 1


@needs_c
def test_a_run_taken_apart_and_answered_keeps_no_reference():
    """What read_run and read_answers make is let go of (a leak here is one per read served)."""
    payloads = [read(7, 3, e) for e in range(50)]
    bodies = [b"x" * 100] * 50
    rounds = range(2000)
    refs = [sys.getrefcount(o) for o in (*payloads, bodies[0])]
    before = sys.gettotalrefcount() if hasattr(sys, "gettotalrefcount") else None
    v2s = [v2_read(3, e) for e in range(50)]
    for _ in rounds:
        run = _plain.read_run(payloads, 0, 50, 3)
        _plain.read_answers(payloads, run, bodies, 0, 5, 1 << 20)
        run = _plain.v2_read_run(v2s, 0, 50, 3)
        _plain.v2_read_answers(run, bodies, 0, 1 << 20)
    del run
    assert [sys.getrefcount(o) for o in (*payloads, bodies[0])] == refs
    if before is not None:
        assert sys.gettotalrefcount() - before < 100
