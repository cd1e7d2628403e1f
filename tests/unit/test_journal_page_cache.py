"""bookied.journal drops what it has fsynced from the page cache (journalRemovePagesFromCache)."""

from __future__ import annotations

import errno
import logging
import os
import threading

import pytest

from bkctl.bookied import journal as jmod
from bkctl.bookied import page_cache
from bkctl.bookied.journal import EntryRecord, Journal
from bkctl.wire import fastpath

WAIT = 10.0
MB = 1024 * 1024


class Drops:
    """Records each drop as (file name, offset, length, the file's size then) and passes it on."""

    def __init__(self, real=page_cache.drop_from_page_cache):
        self.real = real
        self.calls: list[tuple[str, int, int, int]] = []

    def __call__(self, fd: int, offset: int, length: int) -> None:
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        self.calls.append((name, offset, length, os.fstat(fd).st_size))
        self.real(fd, offset, length)


def write_groups(j: Journal, groups: int, records: int, size: int) -> None:
    """``groups`` groups of ``records`` records of ``size`` bytes, each acknowledged before the next."""
    for g in range(groups):
        done = threading.Semaphore(0)
        for i in range(records):
            j.append(EntryRecord(1, g * records + i, bytes([g % 251]) * size), lambda err, done=done: done.release())
        for _ in range(records):
            assert done.acquire(timeout=WAIT)


@pytest.fixture
def drops(monkeypatch):
    recorder = Drops()
    monkeypatch.setattr(page_cache, "drop_from_page_cache", recorder)
    return recorder


def test_drops_only_synced_bytes_behind_the_lag_in_steps(tmp_path, drops):
    # preallocation off: the file's size is what was written, all of it fsynced when a drop is asked
    with Journal(str(tmp_path), max_group_wait_ms=0, preallocate_mb=0, twins=fastpath.selected()) as j:
        j.start()
        write_groups(j, 40, 64, 8 * 1024)  # 40 groups of 512 KiB: 20 MiB
    assert drops.calls, "20 MiB were fsynced and nothing was dropped"
    expected_start = 0
    for _name, offset, length, size in drops.calls:
        assert offset == expected_start  # one contiguous dropped prefix, never a byte twice
        assert length >= page_cache.PAGE_CACHE_DROP_STEP
        assert offset + length <= size - page_cache.PAGE_CACHE_LAG  # the last 8 MB stay cached
        expected_start = offset + length
    assert {name for name, *_ in drops.calls} == {jmod.file_name(1)}
    # all but the lag and less than a step went
    size = os.path.getsize(os.path.join(tmp_path, "current", jmod.file_name(1)))
    assert expected_start > size - page_cache.PAGE_CACHE_LAG - page_cache.PAGE_CACHE_DROP_STEP


def test_a_rolled_file_is_dropped_whole(tmp_path, drops):
    with Journal(str(tmp_path), max_group_wait_ms=0, preallocate_mb=0, max_size_mb=2, twins=fastpath.selected()) as j:
        j.start()
        write_groups(j, 12, 64, 8 * 1024)  # 6 MiB over 2 MiB files: at least two rolls
        assert j.stats.files_created >= 3
    rolled = sorted({name for name, *_ in drops.calls})
    assert len(rolled) >= 2
    for name in rolled:
        covered = sum(length for n, _o, length, _s in drops.calls if n == name)
        assert covered == os.path.getsize(os.path.join(tmp_path, "current", name))
    # the file being written when the journal closed keeps its pages (under the lag)
    current = jmod.file_name(max(jmod.list_file_ids(os.path.join(tmp_path, "current"))))
    assert current not in rolled
    # and replay still reads every record: the pages were dropped, not the bytes
    assert len(list(Journal(str(tmp_path), twins=fastpath.selected()).replay())) == 12 * 64


def test_off_drops_nothing(tmp_path, drops):
    with Journal(
        str(tmp_path),
        max_group_wait_ms=0,
        preallocate_mb=0,
        max_size_mb=2,
        drop_synced_pages=False,
        twins=fastpath.selected(),
    ) as j:
        j.start()
        write_groups(j, 40, 64, 8 * 1024)
    assert drops.calls == []


def test_a_file_system_that_refuses_is_asked_once(tmp_path, monkeypatch, caplog):
    asked = []

    def refuse(fd, offset, length):
        asked.append((offset, length))
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(page_cache, "drop_from_page_cache", refuse)
    with (
        caplog.at_level(logging.WARNING, logger="bookied.journal"),
        Journal(str(tmp_path), max_group_wait_ms=0, preallocate_mb=0, twins=fastpath.selected()) as j,
    ):
        j.start()
        write_groups(j, 40, 64, 8 * 1024)  # every record still acknowledged without an error
        assert j.failed is None
        assert not j.drop_synced_pages
    assert len(asked) == 1
    assert sum("journalRemovePagesFromCache is off" in r.getMessage() for r in caplog.records) == 1
    assert len(list(Journal(str(tmp_path), twins=fastpath.selected()).replay())) == 40 * 64
