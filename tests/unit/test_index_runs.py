"""bookied's LMDB index stores runs of entries (format 2): it answers as a row per entry would."""

from __future__ import annotations

import os
import random
import struct

import lmdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bkctl.bookied.storage import EntryStore
from bkctl.bookied.storage import index as ix
from bkctl.bookied.storage.entry_log import Placed
from bkctl.bookied.storage.offline import OfflineIndex
from bkctl.wire import fastpath


@pytest.fixture
def index(tmp_path):
    idx = ix.EntryLocationIndex(str(tmp_path), 1 << 26)
    idx.load()
    yield idx
    idx.close()


def lay_out(entries: list[int], log: int, start: int, rng: random.Random) -> list[ix.Entry]:
    """Entries written back to back in ``log`` from ``start``, as a flush writes a ledger's."""
    out, pos = [], start
    for eid in entries:
        length = rng.randrange(30, 300)
        out.append((eid, log, pos, length))
        pos += length
    return out


def placed_of(ledger_id: int, entries: list[ix.Entry]) -> Placed:
    """``entries`` (back to back in one log, :func:`lay_out`'s) as an append places them."""
    ends = [off for _e, _lg, off, _n in entries] + [entries[-1][2] + entries[-1][3]]
    return Placed(ledger_id, entries[0][1], [e[0] for e in entries], struct.pack(f">{len(ends)}I", *ends))


def check(index: ix.EntryLocationIndex, model: dict) -> None:
    top = max((e for _l, e in model), default=0) + 2
    keys = [ix.KEY.pack(l, e) for l in range(4) for e in range(-1, top)]
    want = [None if (l, e) not in model else ix.LOC.pack(*model[l, e]) for l, e in map(ix.KEY.unpack, keys)]
    assert index.get_many(keys) == want
    assert [index.get(k) for k in keys[::37]] == want[::37]
    for l in range(4):
        assert index.entry_ids(l) == sorted(e for ll, e in model if ll == l)
        for first, count in ((0, top), (1, 5), (top // 2, 300), (top - 3, 10)):  # runs of reads: as one by one
            ids = zip([l] * count, range(first, first + count), range(count))
            assert index.locate_range(l, first, count) == index.locate(ids), (l, first, count)
    assert sorted(index.rows()) == sorted((ix.KEY.pack(*k), ix.LOC.pack(*v)) for k, v in model.items())


def test_puts_switches_and_deletes_answer_as_rows_per_entry(index):
    """Random flushes (fresh, re-put, gaps, runs past RUN_MAX), compaction switches (some
    stale) and deletions against a dict of rows; the dead bytes each change counts too."""
    rng = random.Random(56)
    model: dict[tuple[int, int], tuple[int, int, int]] = {}
    next_eid = [0] * 4
    log = 1
    for step in range(60):
        dead: dict = {}
        want_dead: dict = {}
        with index.write() as txn:
            op = rng.random()
            if op < 0.55:  # a flush: every ledger's new entries, some re-put ones, back to back in one log
                log += 1
                pos = 100
                for l in rng.sample(range(4), rng.randrange(1, 5)):
                    n = rng.choice([1, 3, 80, 300])
                    fresh = list(range(next_eid[l], next_eid[l] + n))
                    if rng.random() < 0.3:
                        fresh = [e for e in fresh if e % 3]  # a striped ledger: gaps
                    next_eid[l] += n
                    again = sorted(rng.sample(range(next_eid[l]), min(next_eid[l], rng.randrange(0, 4))))
                    eids = sorted(set(again) | set(fresh))
                    entries = lay_out(eids, log, pos, rng)
                    pos = entries[-1][2] + entries[-1][3] if entries else pos
                    for eid, lg, off, length in entries:
                        old = model.get((l, eid))
                        if old is not None:
                            acc = want_dead.setdefault(old[0], [0, 0])
                            acc[0] += old[2]
                            acc[1] += 1
                        model[l, eid] = (lg, off, length)
                    if entries and rng.random() < 0.5:  # as a flush puts them (re-puts: put_entries)
                        index.put_placed(txn, placed_of(l, entries), dead)
                    else:
                        index.put_entries(txn, l, entries, dead)
            elif op < 0.85 and model:  # compaction of one log: its rows to a new log, in batches
                old_log = rng.choice(sorted({v[0] for v in model.values()}))
                log += 1
                rows = sorted((k, v) for k, v in model.items() if v[0] == old_log)
                batch = rows[: rng.randrange(1, len(rows) + 1)]
                moves, pos, switched = [], 100, 0
                for (l, e), (lg, off, length) in batch:
                    stale = rng.random() < 0.1
                    old = (lg, off + 1, length) if stale else (lg, off, length)
                    new = None if rng.random() < 0.05 else (log, pos, length)
                    pos += length
                    moves.append((ix.KEY.pack(l, e), ix.LOC.pack(*old), None if new is None else ix.LOC.pack(*new)))
                    gone = old if not stale else new
                    if gone is not None:
                        acc = want_dead.setdefault(gone[0], [0, 0])
                        acc[0] += gone[2]
                        acc[1] += 1
                    if not stale:
                        switched += 1
                        if new is None:
                            del model[l, e]
                        else:
                            model[l, e] = new
                assert index.switch(txn, moves, dead) == switched
            else:  # a ledger deleted
                l = rng.randrange(4)
                for (ll, e), (lg, _off, length) in list(model.items()):
                    if ll == l:
                        acc = want_dead.setdefault(lg, [0, 0])
                        acc[0] += length
                        acc[1] += 1
                        del model[ll, e]
                index.delete_ledger_rows(txn, l, dead)
        assert dead == want_dead, step
        check(index, model)


@given(
    steps=st.lists(st.sampled_from([1, 1, 1, 1, 1, 1, 1, 2, 9]), min_size=1, max_size=700),  # mostly back to back
    first=st.integers(0, 1 << 40),
    seed=st.integers(0, 1 << 30),
)
def test_placed_runs_are_the_runs_of_their_entries(steps, first, seed):
    """The runs made a window at a time from an append's placement are encode_runs' of its
    entries, row for row: ids that skip (by one or more, anywhere in a window) end a run."""
    ids, eid = [], first
    for step in steps:
        eid += step
        ids.append(eid)
    entries = lay_out(ids, 9, 64, random.Random(seed))
    assert ix.placed_runs(placed_of(5, entries)) == ix.encode_runs(5, entries)


def test_a_flush_of_a_ledger_is_one_row_per_run_max_entries(index):
    rng = random.Random(1)
    with index.write() as txn:
        index.put_entries(txn, 7, lay_out(list(range(600)), 3, 100, rng), {})
    with index.env.begin(db=index.runs) as txn:
        assert txn.stat(index.runs)["entries"] == 3  # 256 + 256 + 88
        assert [ix.KEY.unpack(k)[1] for k in txn.cursor().iternext(values=False)] == [0, 256, 512]


def test_a_format_1_index_is_rewritten_as_runs_when_opened(tmp_path, monkeypatch):
    """A store written by the row-per-entry bookied opens with every entry readable (rewritten
    a few ledgers per transaction), and an offline look reads both formats."""
    d = tmp_path / "ledgers"
    s = EntryStore(str(d), twins=fastpath.selected())
    ids = [(l, e) for l in (5, 6, 9) for e in range(40)]
    for l, e in ids:
        s.put_entry(l, e, b"x%d/%d" % (l, e))
    s.flush()
    s.close()
    path = os.path.join(d, "current", ix.INDEX_DIR)
    env = lmdb.open(path, max_dbs=5, subdir=True)
    with env.begin(write=True) as txn:  # back to format 1: the same entries as rows of one entry
        runs = env.open_db(b"runs", txn=txn)
        rows = [
            (ix.KEY.pack(lid, eid), ix.LOC.pack(lg, off, ln))
            for lid, f, v in ix.ledger_runs(txn.cursor(db=runs))
            for eid, lg, off, ln in ix.decode_run(f, v)
        ]
        txn.drop(runs, delete=True)
        txn.cursor(db=env.open_db(b"idx", txn=txn)).putmulti(rows)
        txn.put(b"format", struct.pack(">I", ix.FORMAT_ROWS), db=env.open_db(b"meta", txn=txn))
    env.close()
    offline = OfflineIndex(str(d))
    assert [(l, e) for l, e, _loc in offline.rows()] == ids
    assert offline.location(9, 39) == ix.Location(*ix.LOC.unpack(rows[-1][1]))
    offline.close()
    monkeypatch.setattr(ix, "REWRITE_ROWS", 50)  # two ledgers in the first transaction, one in the second
    s = EntryStore(str(d), twins=fastpath.selected())
    assert [s.get_entry(l, e) for l, e in ids] == [b"x%d/%d" % (l, e) for l, e in ids]
    s.close()
    offline = OfflineIndex(str(d))
    assert [(l, e) for l, e, _loc in offline.rows()] == ids
    assert offline.location(9, 39) == ix.Location(*ix.LOC.unpack(rows[-1][1])) and offline.location(9, 40) is None
    offline.close()


def test_a_compaction_switch_keeps_whole_runs_whole(index):
    """A log's entries moved back to back into a new log stay one row per run: the index does
    not grow with compaction (a batch boundary inside a run leaves it two rows)."""
    rng = random.Random(2)
    entries = lay_out(list(range(600)), 3, 100, rng)
    with index.write() as txn:
        index.put_entries(txn, 7, entries, {})
    moves, pos = [], 100
    for eid, lg, off, length in entries:
        moves.append((ix.KEY.pack(7, eid), ix.LOC.pack(lg, off, length), ix.LOC.pack(9, pos, length)))
        pos += length
    with index.write() as txn:
        assert index.switch(txn, moves[:300], {}) == 300
    with index.write() as txn:
        assert index.switch(txn, moves[300:], {}) == 300
    with index.env.begin(db=index.runs) as txn:
        assert [ix.KEY.unpack(k)[1] for k in txn.cursor().iternext(values=False)] == [0, 256, 300, 512]
    assert index.rows() == [(k, new) for k, _old, new in moves]
