"""The bookie's runs of plain ADDs taken apart and answered at once, C twins
(``bkctl.wire.codecs._plain``: ``add_run``, ``v2_add_run``, ``add_answers``, ``v2_add_answers``)
against their Python twins (:mod:`bkctl.wire.codecs.plain`), byte for byte: random runs of one
ledger, one key and the same flags, broken at a random point by another ledger, key or flag, a
request that is no plain ADD or junk, over the whole range of ids.  The Python twins are checked
against what the run's requests hold, so both are right, not only alike.

These call the twins directly, so they hold with ``BKCTL_FASTPATHS=0`` too; the bookie's runs
both ways are covered by test_bookie_add_runs.py.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.wire.codecs import plain, v2, v3
from bkctl.wire.codecs.protocol import RC, Flag
from bkctl.wire.proto import bookkeeper_pb2 as pb
from tests.support import c_twins

try:
    from bkctl.wire.codecs import _plain
except ImportError:
    _plain = None

needs_c = c_twins.needs_c(_plain, "bkctl.wire.codecs._plain")

EDGES = [0, 1, 127, 128, (1 << 63) - 1]
i64 = st.one_of(st.sampled_from(EDGES + [-1, -(1 << 63)]), st.integers(-(1 << 63), (1 << 63) - 1))
u64 = st.one_of(st.sampled_from(EDGES + [(1 << 64) - 1]), st.integers(0, (1 << 64) - 1))
non_negative = st.one_of(st.sampled_from(EDGES), st.integers(0, (1 << 63) - 1))
STATUSES = sorted(pb.StatusCode.values())
#: what ends a run: another ledger, key or flag, a request that is not a plain ADD, junk
BREAKS = ["none", "ledger", "key", "high", "recovery", "deferred", "read", "junk", "cut"]


def v3_add(txn, ledger, entry, key, body, high, recovery, deferred=False) -> bytes:
    req = v3.add_request(txn, ledger, entry, key, body, recovery=recovery, high_priority=high, deferred_sync=deferred)
    return v3.serialize(req)


@st.composite
def v3_runs(draw):
    """(payloads, i, end, ledger, key, high, recovery, adds, exact): ``adds`` the (txn, entry, body)
    of the run's requests, None for the break; ``exact`` False where the break might be one of the
    run's after all (junk, a request cut short of nothing)."""
    ledger, key = draw(i64), draw(st.binary(max_size=30))
    high, recovery = draw(st.booleans()), draw(st.booleans())
    n = draw(st.integers(1, 30))
    adds = [(draw(u64), draw(i64), draw(st.binary(max_size=150))) for _ in range(n)]
    payloads = [v3_add(t, ledger, e, key, b, high, recovery) for t, e, b in adds]
    at, why = draw(st.integers(0, n)), draw(st.sampled_from(BREAKS))
    t, e, b = draw(u64), draw(i64), draw(st.binary(max_size=40))
    broken = {
        "none": None,
        "ledger": v3_add(t, ledger ^ draw(st.integers(1, (1 << 62))), e, key, b, high, recovery),
        "key": v3_add(t, ledger, e, key + b"x", b, high, recovery),
        "high": v3_add(t, ledger, e, key, b, not high, recovery),
        "recovery": v3_add(t, ledger, e, key, b, high, not recovery),
        "deferred": v3_add(t, ledger, e, key, b, high, recovery, deferred=True),
        "read": v3.serialize(v3.read_request(t, ledger, e)),
        "junk": draw(st.binary(max_size=60)),
        "cut": v3_add(t, ledger, e, key, b, high, recovery)[: draw(st.integers(0, 20))],
    }[why]
    if broken is not None:
        payloads.insert(at, broken)
        adds.insert(at, None)  # the run never takes it (junk that parses as one of the run's is not drawn)
    i = draw(st.integers(0, len(payloads)))
    end = draw(st.integers(-1, len(payloads) + 3))
    return payloads, i, end, ledger, key, high, recovery, adds, why not in ("junk", "cut")


def expected_run(adds, i, end):
    """What a run from ``i`` holds: the adds up to the first break or ``end``."""
    taken = []
    for add in adds[i : max(end, i)]:
        if add is None:
            break
        taken.append(add)
    return i + len(taken), taken


@needs_c
@settings(max_examples=500)
@given(v3_runs())
def test_v3_runs(case):
    payloads, i, end, ledger, key, high, recovery, adds, exact = case
    want = plain.py_add_run(payloads, i, end, ledger, key, high, recovery)
    got = _plain.add_run(payloads, i, end, ledger, key, high, recovery)
    assert tuple(got) == tuple(want)
    assert (got.end, got.txn_ids, got.entry_ids, got.bodies, got.lac, got.size) == tuple(want)
    # the Python twin holds what the requests hold, up to the break
    stop, taken = expected_run(adds, i, end)
    n = len(want.entry_ids)
    assert want.end == i + n
    assert list(zip(want.txn_ids, want.entry_ids, want.bodies))[: len(taken)] == taken[:n]
    assert want.end == stop if exact else want.end >= stop
    assert (want.lac, want.size) == bodies_seen(want.bodies)


def bodies_seen(bodies: list[bytes]) -> tuple[int, int]:
    """What a run says of its bodies, worked out apart: the largest LAC they carry (the
    signed big-endian 8 bytes at 16 of a body that long, -1 for a shorter one; -1 for none),
    and their bytes."""
    lacs = [int.from_bytes(b[16:24], "big", signed=True) if len(b) >= 24 else -1 for b in bodies]
    return max(lacs, default=-1), sum(len(b) for b in bodies)


def v2_add(flags, key, ledger, entry, tail, version=2) -> bytes:
    """A version-2 ADD: its body (the packaged entry) starts with the ids."""
    body = ledger.to_bytes(8, "big", signed=True) + entry.to_bytes(8, "big", signed=True) + tail
    return v2.AddRequest(version, flags, key, body, ledger, entry).encode()


@st.composite
def v2_runs(draw):
    """What :func:`v3_runs` gives, for version-2 ADDs (``flags`` for high and recovery)."""
    ledger, key = draw(i64), draw(st.binary(min_size=20, max_size=20))
    flags = draw(st.sampled_from([0, int(Flag.RECOVERY_ADD), int(Flag.HIGH_PRIORITY), 3, 0xFFFF]))
    n = draw(st.integers(1, 30))
    entries = [(draw(i64), draw(st.binary(max_size=150))) for _ in range(n)]
    payloads = [v2_add(flags, key, ledger, e, t) for e, t in entries]
    adds = [(None, e, p[24:]) for (e, _), p in zip(entries, payloads)]
    at, why = draw(st.integers(0, n)), draw(st.sampled_from(["none", "ledger", "key", "flags", "version", "cut"]))
    e, b = draw(i64), draw(st.binary(max_size=40))
    broken = {
        "none": None,
        "ledger": v2_add(flags, key, ledger ^ 1, e, b),
        "key": v2_add(flags, bytes([key[0] ^ 1]) + key[1:], ledger, e, b),
        "flags": v2_add(flags ^ 2, key, ledger, e, b),
        "version": v2_add(flags, key, ledger, e, b, version=3),
        "cut": v2_add(flags, key, ledger, e, b)[: draw(st.integers(0, 39))],
    }[why]
    if broken is not None:
        payloads.insert(at, broken)
        adds.insert(at, None)
    i = draw(st.integers(0, len(payloads)))
    end = draw(st.integers(-1, len(payloads) + 3))
    return payloads, i, end, ledger, key, flags, adds


@needs_c
@settings(max_examples=500)
@given(v2_runs())
def test_v2_runs(case):
    payloads, i, end, ledger, key, flags, adds = case
    want = plain.py_v2_add_run(payloads, i, end, ledger, key, flags)
    got = _plain.v2_add_run(payloads, i, end, ledger, key, flags)
    assert tuple(got) == tuple(want) and got.txn_ids is None
    stop, taken = expected_run(adds, i, end)
    assert (want.end, [(None, e, b) for e, b in zip(want.entry_ids, want.bodies)]) == (stop, taken)
    assert (want.lac, want.size) == bodies_seen(want.bodies)


@needs_c
def test_runs_of_nothing_the_run_could_hold():
    """A ledger past int64, a v2 key of another length, flags past 16 bits: no request matches
    (the Python twins' comparisons), so the run is empty, not an error."""
    key = b"k" * 20
    v3s = [v3_add(1, 5, 0, key, b"x", False, False)] * 3
    v2s = [v2.AddRequest(2, 0, key, b"y" * 16, 5, 0).encode()] * 3
    for args in (
        (v3s, 0, 3, 1 << 63, key, False, False),
        (v3s, 5, 9, 5, key, False, False),
        (v3s, -4, 3, 5, key, 0, 0),
    ):
        assert tuple(_plain.add_run(*args)) == tuple(plain.py_add_run(*args))
    for args in (
        (v2s, 0, 3, 5, key[:19], 0),
        (v2s, 0, 3, 5, key, 1 << 16),
        (v2s, 0, 3, 5, key, -1),
        (v2s, 1, 9, 5, key, 0),
    ):
        assert tuple(_plain.v2_add_run(*args)) == tuple(plain.py_v2_add_run(*args))
    assert _plain.add_run(v3s, -4, 3, 5, key, 0, 0).end == 3


@needs_c
def test_runs_take_only_lists_of_bytes():
    key = b"k" * 20
    v3s = [v3_add(1, 5, 0, key, b"x", False, False)] * 2
    with pytest.raises(TypeError):
        _plain.add_run(tuple(v3s), 0, 2, 5, key, False, False)
    with pytest.raises(TypeError):
        _plain.add_run([v3s[0], bytearray(v3s[1])], 0, 2, 5, key, False, False)
    with pytest.raises(TypeError):
        _plain.add_run(v3s, 0, 2, 5, bytearray(key), False, False)
    with pytest.raises(TypeError):
        _plain.v2_add_run([bytearray(40)], 0, 1, 5, key, 0)
    with pytest.raises(TypeError):
        _plain.add_run(v3s, 0, 2, 5, key, False)
    # what is past the run is not looked at
    assert _plain.add_run([*v3s, None], 0, 2, 5, key, False, False).end == 2


ids = st.lists(st.tuples(u64, i64), max_size=40)


@needs_c
@settings(max_examples=400)
@given(ids, st.sampled_from(STATUSES), i64, st.integers(-2, 2))
def test_add_answers(pairs, status, ledger, uneven):
    txn_ids, entry_ids = [t for t, _ in pairs], [e for _, e in pairs]
    if uneven > 0:
        txn_ids = txn_ids[:-uneven]
    elif uneven < 0:
        entry_ids = entry_ids[:uneven]
    want = plain.py_add_answers(txn_ids, status, ledger, entry_ids)
    assert _plain.add_answers(txn_ids, status, ledger, entry_ids) == want
    assert want == b"".join(plain.py_add_answer(t, status, ledger, e) for t, e in zip(txn_ids, entry_ids))


@needs_c
@settings(max_examples=400)
@given(st.lists(i64, max_size=40), st.sampled_from([0, RC.EIO, RC.EFENCED, RC.ETOOMANYREQUESTS, -(1 << 31)]), i64)
def test_v2_add_answers(entry_ids, rc, ledger):
    want = plain.py_v2_add_answers(rc, ledger, entry_ids)
    assert _plain.v2_add_answers(rc, ledger, entry_ids) == want
    assert want == b"".join(
        v2.FRAMED_ANSWER.pack(24, v2.ADD_ANSWER_HEADER, rc, ledger, e) for e in entry_ids
    )  # = frame(v2.add_response_for(req, rc)) of each


@needs_c
def test_answers_take_only_lists_of_ids_in_range():
    with pytest.raises(OverflowError):
        _plain.add_answers([1 << 64], 0, 1, [1])
    with pytest.raises(OverflowError):
        _plain.add_answers([1], 0, 1, [1 << 63])
    with pytest.raises(OverflowError):
        _plain.add_answers([1], 1 << 31, 1, [1])
    with pytest.raises(TypeError):
        _plain.add_answers((1,), 0, 1, [1])
    with pytest.raises(TypeError):
        _plain.add_answers([1.0], 0, 1, [1])
    with pytest.raises(OverflowError):
        _plain.v2_add_answers(0, 1, [1 << 63])
    with pytest.raises(OverflowError):
        _plain.v2_add_answers(1 << 31, 1, [1])
    with pytest.raises(TypeError):
        _plain.v2_add_answers(0, 1, (1,))
    assert _plain.add_answers([], 0, 1, []) == _plain.v2_add_answers(0, 1, []) == b""
