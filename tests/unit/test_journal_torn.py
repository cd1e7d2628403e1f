"""A journal torn or corrupted in its last records, at every byte offset and every
bit: replay gives exactly the records before the damage (those a crash can have
acknowledged), repairs the file so the next replay is clean, and the journal
starts and takes new records after them."""

from __future__ import annotations

import os
import threading

import pytest

from bkctl.bookied import journal as jmod
from bkctl.bookied.journal import EntryRecord, ExplicitLacRecord, FenceRecord, Journal, MasterKeyRecord
from bkctl.wire import fastpath

#: the records in the file; the damage is done to the last ``TAIL`` of them
RECORDS = (
    [MasterKeyRecord(7, b"k" * 20)]
    + [EntryRecord(7, i, bytes([i]) * (5 + 9 * i)) for i in range(5)]
    + [ExplicitLacRecord(7, b"\x00" * 7 + b"\x03" + b"d" * 8), FenceRecord(7), EntryRecord(7, 5, b"last")]
)
TAIL = 3


def written(tmp_path) -> tuple[str, bytes, list[int]]:
    """A journal holding RECORDS, fsynced by the journal itself: its file, the file's
    bytes and the offset of each record."""
    d = str(tmp_path / "journal")
    done = threading.Semaphore(0)
    with Journal(d, max_group_wait_ms=0, preallocate_mb=0.0625, twins=fastpath.selected()) as j:
        j.start()
        for rec in RECORDS:
            j.append(rec, lambda err: done.release())
        for _ in RECORDS:
            assert done.acquire(timeout=10)
    (name,) = os.listdir(os.path.join(d, "current"))
    path = os.path.join(d, "current", name)
    with open(path, "rb") as f:
        data = f.read()
    offsets = [off for off, _ in jmod.scan_file(path)]
    assert len(offsets) == len(RECORDS)
    return d, data, offsets


def replayed(d: str, path: str, data: bytes, repair: bool = True) -> list:
    fd = os.open(path, os.O_WRONLY)  # rewritten in place: opening with O_TRUNC costs more
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)
    return list(Journal(d, twins=fastpath.selected()).replay(repair=repair))


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    d, data, offsets = written(tmp_path_factory.mktemp("torn"))
    path = os.path.join(d, "current", os.listdir(os.path.join(d, "current"))[0])
    end = offsets[-1] + len(jmod.encode_record(RECORDS[-1]))
    return d, path, data, offsets, end


def test_a_tail_cut_at_every_byte_replays_the_records_before_the_cut(journal):
    d, path, data, offsets, end = journal
    ends = [off + len(jmod.encode_record(rec)) for off, rec in zip(offsets, RECORDS)]
    data = data[: end + 64]
    for cut in range(offsets[-TAIL], end + 1):
        whole = sum(1 for e in ends if e <= cut)
        assert replayed(d, path, data[:cut]) == RECORDS[:whole], cut
        assert os.path.getsize(path) == ends[whole - 1], cut  # repaired: cut after the last whole record
        assert list(Journal(d, twins=fastpath.selected()).replay()) == RECORDS[:whole], cut


def test_a_flipped_bit_anywhere_in_the_last_records_replays_the_records_before_it(journal):
    d, path, data, offsets, end = journal
    data = data[: end + 64]  # and a little of the preallocated zeros
    for pos in range(offsets[-TAIL], end):
        record = max(i for i, off in enumerate(offsets) if off <= pos)
        for bit in range(8):
            damaged = bytearray(data)
            damaged[pos] ^= 1 << bit
            assert replayed(d, path, bytes(damaged), repair=False) == RECORDS[:record], (pos, bit)
    # the repair cuts the file at the damaged record (fsyncs: a few offsets only)
    for pos in (offsets[-TAIL], offsets[-1] + 5, end - 1):
        record = max(i for i, off in enumerate(offsets) if off <= pos)
        damaged = bytearray(data)
        damaged[pos] ^= 0x80
        assert replayed(d, path, bytes(damaged)) == RECORDS[:record]
        assert os.path.getsize(path) == offsets[record]


def test_a_flipped_bit_in_the_preallocated_tail_loses_nothing(journal):
    d, path, data, offsets, end = journal
    for pos in (end, end + 1, end + 8, len(data) - 1):
        damaged = bytearray(data)
        damaged[pos] ^= 0x40
        assert replayed(d, path, bytes(damaged)) == RECORDS, pos


@pytest.mark.parametrize("damage", ["cut", "flip"])
def test_after_a_damaged_tail_the_journal_starts_and_its_new_records_follow_the_prefix(tmp_path, damage):
    d, data, offsets = written(tmp_path)
    path = os.path.join(d, "current", os.listdir(os.path.join(d, "current"))[0])
    at = offsets[-2] + 13
    if damage == "cut":
        data = data[:at]
    else:
        data = data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]
    assert replayed(d, path, data) == RECORDS[:-2]
    done = threading.Semaphore(0)
    j = Journal(d, max_group_wait_ms=0, preallocate_mb=0.0625, twins=fastpath.selected())
    assert list(j.replay()) == RECORDS[:-2]  # as the bookie replays before it starts
    j.start()
    j.append(EntryRecord(7, 6, b"after"), lambda err: done.release())
    assert done.acquire(timeout=10)
    j.close()
    assert list(Journal(d, twins=fastpath.selected()).replay()) == RECORDS[:-2] + [EntryRecord(7, 6, b"after")]
