"""The C twin of the journal's records of a run of adds (``_records.journal_entries``)
against the Python encoder (``encode_entry`` of each, joined): the same bytes, for both
CRC32C implementations of the C module and across the size where it lets the GIL go;
what it does not cover it hands its Python twin; and a journal written through it
replays the entries.  With the C module not built the comparisons fail
(tests/support/c_twins.py)."""

from __future__ import annotations

import struct
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.bookied.journal import T_ENTRY, EntryRecord, Journal, encode_entry
from bkctl.wire import fastpath
from bkctl.wire.bookie_disk import records
from tests.support import c_twins
from tests.support.crc_kinds import crc_kind  # noqa: F401 (a fixture)

C = fastpath.build(True).records
needs_c = c_twins.needs_c(C.c, "bkctl.wire.codecs._records")
i64 = st.integers(-(1 << 63), (1 << 63) - 1)


def python_records(ledger_id, entry_ids, bodies) -> bytes:
    return b"".join(encode_entry(ledger_id, e, b) for e, b in zip(entry_ids, bodies))


@needs_c
@settings(max_examples=200, deadline=None)
@given(i64, st.lists(st.tuples(i64, st.binary(max_size=300)), max_size=20))
def test_the_same_bytes_as_the_python_encoder(crc_kind, ledger_id, entries):
    entry_ids = [e for e, _ in entries]
    bodies = [b for _, b in entries]
    assert C.journal_entries(ledger_id, entry_ids, bodies, T_ENTRY) == python_records(ledger_id, entry_ids, bodies)


@needs_c
def test_the_same_bytes_where_it_lets_the_gil_go(crc_kind):
    """64 KiB of records and more: the checksums and copies are made without the GIL."""
    bodies = [bytes([i % 251]) * (4096 + i) for i in range(40)]
    entry_ids = list(range(1000, 1040))
    got = C.journal_entries(7, entry_ids, bodies, T_ENTRY)
    assert len(got) > 64 * 1024 and got == python_records(7, entry_ids, bodies)


@needs_c
def test_what_it_does_not_cover_it_hands_its_python_twin():
    handed = []

    def fallback(*args):
        handed.append(args)
        return records.py_journal_entries(*args)

    for args in (
        (1, [1, 2], [b"a"], T_ENTRY),  # lists of different lengths
        (1, [1], [bytearray(b"a")], T_ENTRY),  # a body that is not bytes
        (1, (1,), [b"a"], T_ENTRY),  # not a list
    ):
        assert C.c.journal_entries(fallback, *args) == python_records(*args[:3]) == C.journal_entries(*args)
        assert handed.pop() == args
    for args in ((1, [1 << 63], [b"a"], T_ENTRY), (1, [1], [b"a"], 256)):  # an id past int64, not a record type
        for twin in (C.journal_entries, records.PYTHON.journal_entries):
            with pytest.raises(struct.error):
                twin(*args)
    assert C.c.journal_entries(fallback, 1, [], [], T_ENTRY) == b"" and not handed


def test_the_journal_uses_it_exactly_when_fast_paths_are_on(tmp_path):
    for name, record in (("d", fastpath.selected()), ("a", fastpath.build(False)), ("b", fastpath.build(True))):
        with Journal(str(tmp_path / name), twins=record) as j:
            assert j.encode_entries is record.records.journal_entries
    assert fastpath.build(False).records.journal_entries is records.py_journal_entries
    if C.c is not None:
        assert fastpath.build(True).records.journal_entries.func is C.c.journal_entries


@pytest.mark.parametrize("fastpaths", [True, False], ids=["c", "python"])
def test_a_run_written_either_way_replays_its_entries(tmp_path, fastpaths):
    bodies = [b"entry %d" % i * (1 + i * 500) for i in range(30)]
    path = str(tmp_path / "journal")
    done: list = []
    both = threading.Event()

    def durable(error) -> None:
        done.append(error)
        if len(done) == 2:
            both.set()

    with Journal(path, max_group_wait_ms=0, twins=fastpath.build(fastpaths)) as j:
        j.start()
        j.append_entries(9, list(range(30)), bodies, durable)
        j.append_entries(9, [30], [bytearray(b"not bytes")], durable)  # the Python path, either way
        assert both.wait(30)
    assert done == [None, None]
    replayed = [r for r in Journal(path, twins=fastpath.selected()).replay() if isinstance(r, EntryRecord)]
    assert [(r.ledger_id, r.entry_id, r.data) for r in replayed] == [(9, i, b) for i, b in enumerate(bodies)] + [
        (9, 30, b"not bytes")
    ]
