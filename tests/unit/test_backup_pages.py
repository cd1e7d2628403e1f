"""A local archive's data object recycles its page cache as it is written
(:class:`bkctl.wire.objects.PageRecycler`): each step sent to disk as the next is written, then
waited for and dropped, never the newest step, every byte still there -- with Linux's
``sync_file_range`` and with ``POSIX_FADV_DONTNEED`` alone (its twin where there is none); a
file system that refuses is not asked again.  Durability stays the final fsync's
(tests/unit/test_backup_durable.py)."""

from __future__ import annotations

import os

import pytest

from bkctl.backup.storage import LocalStorage
from bkctl.backup.take import Selection, take_backup
from bkctl.wire.backup.archive import LedgerRecord
from bkctl.wire.backup.data_read import read_data
from bkctl.wire.objects import PageRecycler, sync_file_range
from tests.support.backup_fakes import FakeClient, closed_ledgers, payload

pytestmark = pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise here")

MIB = 1 << 20
WAITED = 1 | 2 | 4  # SYNC_FILE_RANGE_WAIT_BEFORE | WRITE | WAIT_AFTER


class Calls:
    """The recycler's calls, in order: ``("sync", offset, length, flags)``, ``("drop", offset, length)``."""

    def __init__(self, monkeypatch, refuse: bool = False):
        self.seen: list[tuple[int, ...]] = []
        self.refuse = refuse
        real = os.posix_fadvise

        def fadvise(fd: int, offset: int, length: int, advice: int) -> None:
            if advice == os.POSIX_FADV_DONTNEED and (offset, length) != (0, 0):
                self.seen.append(("drop", offset, length))
                if self.refuse:
                    raise OSError(22, "Invalid argument")
            real(fd, offset, length, advice)

        monkeypatch.setattr(os, "posix_fadvise", fadvise)
        self.real_sync = sync_file_range()

    def sync(self, fd: int, offset: int, length: int, flags: int) -> int:
        self.seen.append(("sync", offset, length, flags))
        return self.real_sync(fd, offset, length, flags) if self.real_sync is not None else 0

    def dropped(self) -> list[tuple[int, int]]:
        return [(c[1], c[2]) for c in self.seen if c[0] == "drop"]


def _write(path, recycler: PageRecycler, pieces: int) -> bytes:
    """``pieces`` pieces of 1 MiB written to ``path``, the recycler told each time; the bytes."""
    want = b""
    with open(path, "wb") as f:
        recycler.fd = f.fileno()
        for n in range(pieces):
            piece = bytes([n]) * MIB
            os.write(f.fileno(), piece)
            want += piece
            recycler.grown(len(want))
    return want


@pytest.mark.parametrize("with_sync_range", [True, False])
def test_a_file_written_drops_each_step_behind_the_newest_and_keeps_every_byte(tmp_path, monkeypatch, with_sync_range):
    calls = Calls(monkeypatch)
    recycler = PageRecycler(-1, calls.sync if with_sync_range else None, step=2 * MIB)
    want = _write(tmp_path / "object", recycler, 11)
    assert (tmp_path / "object").read_bytes() == want
    steps = [(n * 2 * MIB, 2 * MIB) for n in range(5)]  # (the last MiB not a step yet)
    if not with_sync_range:  # each step advised as it is written (its writeback begun), then dropped
        assert calls.dropped() == [steps[0], *(x for n in range(1, 5) for x in (steps[n], steps[n - 1]))]
        assert [c for c in calls.seen if c[0] == "sync"] == []
        return
    # the steps dropped in order, from the start, each the step behind the newest one
    assert calls.dropped() == steps[:4]
    for offset, length in calls.dropped():  # each drop after its step's writeback was waited for
        waited = calls.seen.index(("sync", offset, length, WAITED))
        assert waited < calls.seen.index(("drop", offset, length))
        assert ("sync", offset, length, 2) in calls.seen[:waited]  # sent a step earlier, not waited for


def test_a_file_system_that_refuses_is_not_asked_again(tmp_path, monkeypatch):
    calls = Calls(monkeypatch, refuse=True)
    recycler = PageRecycler(-1, None, step=MIB)
    want = _write(tmp_path / "object", recycler, 6)
    assert (tmp_path / "object").read_bytes() == want
    assert len(calls.dropped()) == 1 and not recycler.enabled


def test_a_local_backup_recycles_its_data_objects_pages_as_it_writes_them(tmp_path, monkeypatch):
    calls = Calls(monkeypatch)
    store, ids = closed_ledgers(entries=3072, size=4096, ledgers=2)  # 12 MiB each: three 4 MiB batches
    storage = LocalStorage(str(tmp_path / "archive"))
    manifest = take_backup(
        store, FakeClient(store, 4096), storage, Selection(ledgers=",".join(map(str, ids))), "zk://f"
    )
    first = 16 + 1024 * (16 + 4096)  # the header and the first batch's entries
    second = 1024 * (16 + 4096)  # (the third batch's, the newest step, left to the final drop)
    assert sorted(calls.dropped()) == [(0, first), (0, first), (first, second), (first, second)]
    from bkctl.backup.catalog import manifest_ledgers

    for line in manifest_ledgers(storage, manifest):
        record = LedgerRecord.decode(storage.get(line.record))
        with storage.open_read(record.data_object) as f:
            got = list(read_data(f, line.ledger_id, record.index_sha256))
        assert got == [(e, payload(line.ledger_id, e, 4096)) for e in range(3072)]
