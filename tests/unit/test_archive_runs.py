"""A data object's entries decoded a run at a time (:data:`bkctl.wire.backup.data_read.DecodeRun`):
the C twin of ``_archive`` gives what the Python one gives on any buffer -- whole archives,
truncated ones, bit-flipped ones, ids out of order, empty payloads, ids at 0 and near 2**64,
any position -- and hands its Python twin what it does not cover; :func:`read_runs` says the
same of an object read with either, damaged or not, and keeps no reference it made."""

from __future__ import annotations

import io
import os
import random
import struct
import subprocess
import sys

import pytest

from bkctl.wire.backup import data_read
from bkctl.wire.backup.archive import DataWriter
from bkctl.wire.backup.data_read import (
    PY_READER,
    RUN_BAD_CRC,
    RUN_BAD_ID,
    RUN_NEEDS_BYTES,
    EntryRun,
    py_entry_run,
    read_data,
    read_runs,
    reader_of,
)
from bkctl.wire.codecs import checksums
from bkctl.wire.errors import ArchiveDamaged
from bkctl.wire.fastpath import ARCHIVE_API, c_module
from tests.support import c_twins
from tests.support.crc_kinds import crc_kind  # noqa: F401 (a fixture)

C_MODULE = c_module("bkctl.wire.backup._archive", ARCHIVE_API)
C_READER = reader_of(C_MODULE)
pytestmark = c_twins.needs_c(C_MODULE, "bkctl.wire.backup._archive")

_HEAD = struct.Struct(">QII")


def _entries(rng: random.Random, first: int, n: int, big: bool = False) -> bytes:
    out = []
    for i in range(n):
        payload = rng.randbytes(rng.choice([0, 0, 1, 7, 100, 4096, 70_000 if big else 513]))
        out.append(_HEAD.pack((first + i) % 2**64, len(payload), checksums.crc32c(payload)) + payload)
    return b"".join(out)


def _damaged(rng: random.Random, data: bytes) -> bytes:
    """``data`` truncated, bit-flipped, or with an entry's id changed (or as it is)."""
    how = rng.randrange(4)
    if how == 0 and data:
        return data[: rng.randrange(len(data))]
    if how == 1 and data:
        at = rng.randrange(len(data))
        return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]
    if how == 2 and len(data) >= 16:
        return struct.pack(">Q", rng.randrange(2**64)) + data[8:]
    return data


def _same(buf: bytes, pos: int, expected: int) -> EntryRun:
    assert C_MODULE is not None
    got, want = C_READER.run(buf, pos, expected), py_entry_run(buf, pos, expected)
    assert tuple(got) == tuple(want)
    assert all(type(p) is bytes for p in got.payloads) and type(got.heads) is bytes
    return want


@pytest.mark.parametrize("seed", range(300))
def test_the_c_twin_gives_the_python_twins_run(seed, crc_kind):
    rng = random.Random(seed)
    first = rng.choice([0, 0, 5, 2**32, 2**63, 2**64 - 3, 2**64 - 1])
    data = _damaged(rng, _entries(rng, first, rng.randrange(0, 40), big=seed % 10 == 0))
    _same(data, 0, first)
    _same(data, rng.randrange(len(data) + 1), first)  # anywhere: a head read from the middle of one
    _same(data, 0, rng.choice([first + 1, 0, 2**64 - 1]))
    if seed % 10 == 0:  # a buffer of 64 KiB and more: walked without the GIL
        _same(data * 3, 0, first)


def test_a_run_stops_where_and_why_it_should():
    one = _HEAD.pack(0, 3, checksums.crc32c(b"abc")) + b"abc"
    two = _HEAD.pack(1, 0, checksums.crc32c(b""))
    run = _same(one + two, 0, 0)
    assert (run.payloads, run.heads, run.size) == ([b"abc", b""], one[:16] + two, 3)
    assert (run.end, run.next_id, run.stop, run.need, run.found) == (35, 2, RUN_NEEDS_BYTES, 16, 0)
    run = _same(one + two[:10], 0, 0)
    assert (run.end, run.next_id, run.stop, run.need) == (19, 1, RUN_NEEDS_BYTES, 16)
    run = _same(one[:18], 0, 0)
    assert (run.payloads, run.end, run.stop, run.need) == ([], 0, RUN_NEEDS_BYTES, 19)
    run = _same(one + _HEAD.pack(7, 0, 0), 0, 0)
    assert (run.payloads, run.next_id, run.stop, run.found) == ([b"abc"], 1, RUN_BAD_ID, 7)
    run = _same(one[:-1] + b"x" + two, 0, 0)
    assert (run.payloads, run.end, run.next_id, run.stop) == ([], 0, 0, RUN_BAD_CRC)
    last = _HEAD.pack(2**64 - 1, 0, checksums.crc32c(b""))
    run = _same(last + _HEAD.pack(0, 0, checksums.crc32c(b"")), 0, 2**64 - 1)
    assert (run.next_id, run.stop, run.found) == (2**64, RUN_BAD_ID, 0)  # no id follows 2**64 - 1


def test_what_the_c_twin_does_not_cover_is_its_python_twins():
    assert C_MODULE is not None
    calls = []

    def fallback(buf, pos, expected):
        calls.append((buf, pos, expected))
        return py_entry_run(bytes(buf), pos, expected)

    data = _HEAD.pack(2**64 - 1, 1, checksums.crc32c(b"z")) + b"z"
    C_MODULE.entry_run(fallback, data, 0, 2**64 - 1)
    assert calls == []
    for args in ((bytearray(data), 0, 2**64 - 1), (data, 0, 2**64), (data, 0, -1), (data, len(data) + 1, 0)):
        C_MODULE.entry_run(fallback, *args)
    assert [c[1:] for c in calls] == [(0, 2**64 - 1), (0, 2**64), (0, -1), (len(data) + 1, 0)]
    with pytest.raises(TypeError):
        C_MODULE.entry_run(fallback, data, 0)  # type: ignore[call-arg]


def _object(rng: random.Random, n: int) -> tuple[bytes, str]:
    out = io.BytesIO()
    w = DataWriter(out, 7)
    for i in range(n):
        w.add(i, rng.randbytes(rng.choice([0, 10, 4096, 5000])))
    return out.getvalue(), w.sha.hexdigest()


def _read(reader, data: bytes, sha: str) -> tuple[list[tuple[int, bytes]], str]:
    got: list[tuple[int, bytes]] = []
    try:
        for e in read_data(io.BytesIO(data), 7, sha, reader):
            got.append(e)
    except ArchiveDamaged as exc:
        return got, str(exc)
    return got, ""


@pytest.mark.parametrize("seed", range(60))
def test_an_object_reads_the_same_with_either_twin_damaged_or_not(seed, monkeypatch):
    rng = random.Random(seed)
    if seed % 2:
        monkeypatch.setattr(data_read, "READ_BLOCK", rng.choice([16, 100, 5000]))  # entries straddle the blocks
    n = rng.randrange(0, 60)
    data, sha = _object(rng, n)
    damaged = data if seed % 5 == 0 else data[:16] + _damaged(rng, data[16:])
    got, why = _read(C_READER, damaged, sha)
    assert (got, why) == _read(PY_READER, damaged, sha)
    if damaged == data:
        assert ([e for e, _p in got], why) == (list(range(n)), "")
    elif why:
        assert why.startswith("ledger 7")


def test_runs_are_never_empty_and_hold_the_ids_in_order():
    data, sha = _object(random.Random(1), 300)
    runs = list(read_runs(io.BytesIO(data), 7, sha, C_READER))
    assert all(r.payloads for r in runs)
    assert [r.next_id for r in runs][-1] == 300 and sum(len(r.payloads) for r in runs) == 300


_LEAKS = """
import sys, tracemalloc
from bkctl.wire.backup.archive import DataWriter
from bkctl.wire.backup.data_read import py_entry_run, reader_of
from bkctl.wire.fastpath import ARCHIVE_API, c_module
import io, random
c = c_module("bkctl.wire.backup._archive", ARCHIVE_API)
run = reader_of(c).run
rng = random.Random(3)
out = io.BytesIO(); w = DataWriter(out, 1)
for i in range(80):
    w.add(i, rng.randbytes(rng.choice([0, 100, 4096])))
good = out.getvalue()[16:]
bad = good[:-1] + bytes([good[-1] ^ 1])
bufs = [good, bad, good[:-5], good[:3000], good + good]
refs = [sys.getrefcount(b) for b in bufs] + [sys.getrefcount(py_entry_run)]
def rounds(n):
    for i in range(n):
        r = run(bufs[i % 5], 0, 0)
        r = run(bufs[i % 5], 16, 0)
rounds(1000)
tracemalloc.start()
before = tracemalloc.get_traced_memory()[0]
rounds(50_000)
grown = tracemalloc.get_traced_memory()[0] - before
assert [sys.getrefcount(b) for b in bufs] + [sys.getrefcount(py_entry_run)] == refs, "a reference kept"
assert grown < 100_000, grown
print("ok", len(good))
"""


def test_the_c_twin_keeps_no_reference_over_many_calls():
    """10**5 runs under ``python -X dev`` (its allocators' checks on): no reference to a buffer
    or the fallback kept, no memory kept."""
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", _LEAKS], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[1]) >= 64 << 10  # the walk without the GIL was taken too
