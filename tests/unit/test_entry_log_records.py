"""The C twin of LogWriter.append's record loop (``_records.log_records``) against its Python
twin (:func:`~bkctl.wire.bookie_disk.records.py_log_records`): the same log files byte for byte,
the same placements (so the same index rows) and the same per-log counts, across rolls to new logs (records bigger than
a log among them), write chunks, pairs the C twin hands its Python twin, and both CRC32C
implementations of the C module; and it is the loop in use when built and fast paths are on.
The same for the read side (``span_records``) against check_record.  With the C module not
built the comparisons fail (tests/support/c_twins.py)."""

from __future__ import annotations

import contextlib
import os
import random
import struct
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.bookied.storage import entry_log, scan_records
from bkctl.bookied.storage.entry_log import LOG_HEADER_SIZE, EntryLogger, LogWriter, encode_log_record
from bkctl.wire import fastpath
from bkctl.wire.bookie_disk import layout as disk_layout
from bkctl.wire.bookie_disk import records as twins
from tests.support import c_twins
from tests.support.crc_kinds import crc_kind  # noqa: F401 (a fixture)

C = fastpath.build(True).records
PY = twins.PYTHON
needs_c = c_twins.needs_c(C.c, "bkctl.wire.codecs._records")


@contextlib.contextmanager
def patched(owner, name: str, value):
    """``owner.name`` is ``value`` meanwhile (hypothesis' examples share a test's fixtures)."""
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


def as_batches(batches: list) -> list:
    """``[(ledger_id, [(entry_id, data), ...]), ...]`` as LogWriter.append takes them."""
    return [(lid, [eid for eid, _data in pairs], [data for _eid, data in pairs]) for lid, pairs in batches]


def rows_of(placed: list) -> list:
    """The index rows ``(key, location)`` of an append's placements, in order."""
    return [row for p in placed for row in p.rows()]


def appended(calls: list, limit: int, records) -> tuple[list, dict, list]:
    """Run ``calls`` (lists of batches of ``(ledger_id, pairs)``) through one LogWriter of a
    new directory with the record loop ``records``: ``(results, logs, writes)``, the results of
    the appends, each log's bytes after its header (whose time differs), and the sizes of
    the writes made."""
    writes = []
    real_write = disk_layout.write_all

    def write_all(fd, data, what):
        writes.append(len(data))
        real_write(fd, data, what)

    with patched(disk_layout, "write_all", write_all), tempfile.TemporaryDirectory() as d:
        writer = LogWriter(EntryLogger(d, limit, twins=fastpath.selected()))
        writer.log_records = records
        results = [writer.append(as_batches(batches)) for batches in calls]
        writer.close()
        logs = {}
        for log_id, path in sorted(writer.logger.on_disk().items()):
            with open(path, "rb") as f:
                logs[log_id] = f.read()[LOG_HEADER_SIZE:]
    return results, logs, writes


def both(calls: list, limit: int):
    """The C loop's and the Python loop's :func:`appended`, asserted equal; the C one."""
    fast_run = appended(calls, limit, C.log_records)
    assert fast_run == appended(calls, limit, PY.log_records)
    return fast_run


# small records, and records over the size above which the C loop lets the GIL go
datas = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda n, seed: random.Random(seed).randbytes(n), st.integers(65_000, 70_000), st.integers()),
)
ledgers = st.lists(
    st.tuples(st.integers(0, (1 << 63) - 1), st.lists(st.tuples(st.integers(-1, (1 << 63) - 1), datas), max_size=12)),
    max_size=4,
)


@needs_c
@settings(max_examples=60, deadline=None)
@given(
    calls=st.lists(ledgers, min_size=1, max_size=3),
    limit=st.sampled_from([65, 400, 2000, 100_000]),
    chunk=st.sampled_from([1, 256, entry_log._WRITE_CHUNK]),
)
def test_the_c_loop_writes_what_the_python_loop_writes(crc_kind, calls, limit, chunk):
    with patched(entry_log, "_WRITE_CHUNK", chunk):
        _results, logs, _writes = both(calls, limit)
    records = [encode_log_record(lid, eid, data) for batches in calls for lid, pairs in batches for eid, data in pairs]
    assert b"".join(logs.values()) == b"".join(records)


@needs_c
@pytest.mark.parametrize("slack", [0, -1, 50], ids=["third-ends-at-the-limit", "third-one-byte-past", "room-left"])
def test_a_roll_starts_the_next_log_with_the_record_that_did_not_fit(crc_kind, tmp_path, slack):
    pairs = [(e, bytes([e]) * 100) for e in range(10)]  # 124-byte records
    per_log = 3 if slack >= 0 else 2
    [(placed, added)], logs, writes = both([[(7, pairs)]], LOG_HEADER_SIZE + 3 * 124 + slack)
    rows = rows_of(placed)
    counts = [min(per_log, 10 - first) for first in range(0, 10, per_log)]
    assert sorted(logs) == list(range(1, len(counts) + 1))
    assert [len(body) // 124 for body in logs.values()] == counts
    assert added == {i + 1: [LOG_HEADER_SIZE + 124 * c, 124 * c, c] for i, c in enumerate(counts)}
    assert writes == [size for c in counts for size in (LOG_HEADER_SIZE, 124 * c)]  # a header, its records
    locations = [twins.LOC.unpack(loc) for _key, loc in rows]
    assert locations == [(1 + e // per_log, LOG_HEADER_SIZE + 124 * (e % per_log), 124) for e in range(10)]
    assert [twins.KEY.unpack(key) for key, _loc in rows] == [(7, e) for e in range(10)]
    # and each log reads back with the entries it was given
    for log_id, body in logs.items():
        path = tmp_path / f"{log_id}.bel"
        path.write_bytes(entry_log.encode_log_header(log_id) + body)
        got = [(lid, eid, data) for _off, _ln, lid, eid, data in scan_records(str(path))]
        first = per_log * (log_id - 1)
        assert got == [(7, e, bytes([e]) * 100) for e in range(first, min(10, first + per_log))]


@needs_c
def test_a_record_bigger_than_a_log_has_a_log_of_its_own(crc_kind):
    pairs = [(0, b"a" * 10), (1, os.urandom(200_000)), (2, b"c" * 10)]
    _results, logs, _writes = both([[(3, pairs)]], 1000)
    assert [len(body) for body in logs.values()] == [34, 200_024, 34]


@needs_c
def test_entries_the_c_loop_does_not_cover_it_hands_its_python_twin(crc_kind):
    pairs = [(0, b"x"), (1, bytearray(b"y")), (2, b"z"), (3, memoryview(b"w")), (4, b"v"), (True, b"u")]
    _results, logs, _writes = both([[(9, pairs), (10, [(0, b"t")])]], 1 << 20)
    [(_lid, ids, bodies)] = as_batches([(9, pairs)])
    handed = []

    def fallback(*args):
        handed.append(args)
        return PY.log_records(*args)

    for ledger_id, start in ((9, 1), (9, 3), (9, 5), (9, 6)):
        args = (ledger_id, ids, bodies, start, LOG_HEADER_SIZE, 1 << 20, 1 << 20)
        assert C.c.log_records(fallback, *args) == PY.log_records(*args) == C.log_records(*args)
        assert handed.pop() == args
    with pytest.raises(struct.error):
        C.log_records(1 << 63, ids, bodies, 0, LOG_HEADER_SIZE, 1 << 20, 1 << 20)
    chunk, starts = C.c.log_records(fallback, 9, ids, bodies, 2, LOG_HEADER_SIZE, 1 << 20, 1 << 20)
    assert chunk == encode_log_record(9, 2, b"z") and starts == twins.START.pack(LOG_HEADER_SIZE) and not handed
    # ids and bodies that are not two lists of one length: all the Python twin's
    args = (9, tuple(ids), bodies, 0, 64, 1 << 20, 1 << 20)
    assert C.c.log_records(fallback, *args) == PY.log_records(*args) and handed.pop() == args
    args = (9, ids, bodies[:-1], 0, 64, 1 << 20, 1 << 20)
    with pytest.raises(IndexError):
        C.c.log_records(fallback, *args)
    assert handed.pop() == args


def test_placements_give_the_rows_of_their_entries():
    placed = entry_log.Placed(4, 2, [7, 8, 10], b"".join(twins.START.pack(o) for o in (64, 100, 130, 200)))
    assert placed.locations() == [(7, 2, 64, 36), (8, 2, 100, 30), (10, 2, 130, 70)]
    assert placed.rows() == [(twins.KEY.pack(4, e), twins.LOC.pack(2, o, n)) for e, _lg, o, n in placed.locations()]


@needs_c
def test_ids_the_python_loop_refuses_it_refuses_too():
    for batches in ([(1 << 63, [(0, b"x")])], [(1, [(1 << 63, b"x")])]):
        for records in (C.log_records, PY.log_records):
            with pytest.raises(struct.error):
                appended([batches], 1 << 20, records)


def test_the_c_loop_is_in_use_when_built_and_fast_paths_are_on(tmp_path):
    for enabled in (True, False):
        record = fastpath.build(enabled)
        writer = LogWriter(EntryLogger(str(tmp_path), 1 << 20, twins=record))
        assert writer.log_records is record.records.log_records
        want = C.c if enabled else None
        assert record.records.c is want and (want is None or writer.log_records.func is want.log_records)
    assert fastpath.build(False).records is PY
    default = LogWriter(EntryLogger(str(tmp_path), 1 << 20, twins=fastpath.selected())).log_records
    assert default is fastpath.selected().records.log_records


# -- reading: the C twin of check_record over one pread's records (span_records)


def checked(span: bytes, base: int, rows: list, ledger_id: int, entry_ids: list, take) -> list:
    """What EntryStore.get_entries makes of ``rows`` in ``span`` (read from ``base``), with
    ``take`` (a twin's span_records) or with check_record alone (None): per entry its bytes,
    or the error's text."""
    out: list = [None] * len(entry_ids)
    k = 0
    while k < len(rows):
        if take is not None:
            k = take(span, base, rows, k, len(rows), ledger_id, entry_ids, out)
            if k >= len(rows):
                break
        log_id, off, length, i = rows[k]
        try:
            out[i] = entry_log.check_record(
                span[off - base : off - base + length], ledger_id, entry_ids[i], log_id, off, length
            )
        except entry_log.EntryCorrupted as e:
            out[i] = str(e)
        k += 1
    return out


damages = st.lists(st.tuples(st.integers(0, 9), st.sampled_from(["byte", "id", "length", "ledger"])), max_size=4)


@needs_c
@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 300), min_size=1, max_size=10),
    base=st.integers(64, 10_000),
    damage=damages,
    cut=st.integers(0, 40),
    seed=st.integers(),
)
def test_the_c_span_check_takes_what_check_record_passes_and_leaves_it_the_rest(
    crc_kind, sizes, base, damage, cut, seed
):
    rnd = random.Random(seed)
    ledger_id, entry_ids = 7, [100 + e for e in range(len(sizes))]
    span, rows = bytearray(), []
    for i, size in enumerate(sizes):
        record = encode_log_record(ledger_id, entry_ids[i], rnd.randbytes(size))
        rows.append((3, base + len(span), len(record), i))
        span += record
    for which, how in damage:
        if which >= len(rows):
            continue
        log_id, off, length, i = rows[which]
        if how == "byte":
            span[off - base + rnd.randrange(length)] ^= 0x5A
        elif how == "id":
            entry_ids[i] += 1
        elif how == "length":
            rows[which] = (log_id, off, length - 1, i)
        else:
            span[off - base + 8] ^= 1
    span = bytes(span[: len(span) - cut])  # a log shorter than the index says
    rows.sort()
    python = checked(span, base, rows, ledger_id, entry_ids, None)
    assert checked(span, base, rows, ledger_id, entry_ids, C.span_records) == python
    assert checked(span, base, rows, ledger_id, entry_ids, PY.span_records) == python
    # each twin stops at the first record check_record refuses
    stops = [C.span_records(span, base, rows, 0, len(rows), ledger_id, entry_ids, [None] * len(rows))]
    stops.append(PY.span_records(span, base, rows, 0, len(rows), ledger_id, entry_ids, [None] * len(rows)))
    first_bad = next((k for k, row in enumerate(rows) if not isinstance(python[row[3]], bytes)), len(rows))
    assert stops == [first_bad, first_bad]
    if not damage and not cut:
        assert all(isinstance(got, bytes) for got in python)


@needs_c
def test_the_c_span_check_leaves_rows_of_another_shape_to_python():
    record = encode_log_record(1, 5, b"abc")
    out = [None]
    for rows, ids in (
        ([(1, 64, len(record))], [5]),
        ([[1, 64, len(record), 0]], [5]),
        ([(1, 64, len(record), 3)], [5]),
        ([(1, 64, len(record), 0)], [1 << 70]),
    ):
        assert C.span_records(record, 64, rows, 0, 1, 1, ids, out) == 0 and out == [None]
    assert C.span_records(record, 64, [(1, 64, len(record), 0)], 0, 1, 1, [5], out) == 1 and out == [b"abc"]


def test_the_c_span_check_is_in_use_when_built_and_fast_paths_are_on(tmp_path):
    for enabled in (True, False):
        record = fastpath.build(enabled)
        logger = EntryLogger(str(tmp_path), 1 << 20, twins=record)
        want = C.span_records if enabled and C.c is not None else PY.span_records
        assert logger.records.span_records is want
    default = EntryLogger(str(tmp_path), 1 << 20, twins=fastpath.selected()).records
    assert default is fastpath.selected().records
