"""Which entries a bookie holds: the answer to GET_LIST_OF_ENTRIES_OF_LEDGER
(Java's ``AvailabilityOfEntriesOfLedger``).  Pure codec, no I/O.

Layout (big-endian): a 64-byte header whose first two int32s are the format
version (0) and the number of sequence groups, then 24 bytes per group:
``firstSequenceStart`` (int64), ``lastSequenceStart`` (int64),
``sequenceSize`` (int32), ``sequencePeriod`` (int32).  A group stands for the
runs ``[s, s + sequenceSize)`` for ``s`` from ``firstSequenceStart`` to
``lastSequenceStart`` in steps of ``sequencePeriod`` (a single run when the
period is 0).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from bkctl.wire.errors import CodecError

__all__ = ["HEADER_SIZE", "decode_availability", "encode_availability"]

HEADER_SIZE = 64
_HEADER = struct.Struct(">ii")
_GROUP = struct.Struct(">qqii")
#: Runs a decoder expands at most (a hostile answer must not exhaust memory).
MAX_RUNS = 1 << 22


def encode_availability(entry_ids: Iterable[int]) -> bytes:
    """One group per run of consecutive entry ids (ids need not be sorted)."""
    groups = []
    run_start: int | None = None  # the run under way's first id, its last in previous
    previous = 0
    for entry_id in sorted(set(entry_ids)):
        if run_start is not None and entry_id == previous + 1:
            previous = entry_id
            continue
        if run_start is not None:
            groups.append(_GROUP.pack(run_start, run_start, previous - run_start + 1, 0))
        run_start = previous = entry_id
    if run_start is not None:
        groups.append(_GROUP.pack(run_start, run_start, previous - run_start + 1, 0))
    return _HEADER.pack(0, len(groups)).ljust(HEADER_SIZE, b"\0") + b"".join(groups)


def decode_availability(data: bytes) -> list[tuple[int, int]]:
    """The runs held, as ``(first, last)`` entry ids, sorted and merged."""
    data = bytes(data)
    if len(data) < HEADER_SIZE:
        raise CodecError(f"entry availability: {len(data)} bytes, shorter than its {HEADER_SIZE}-byte header")
    version, count = _HEADER.unpack_from(data)
    if version != 0:
        raise CodecError(f"entry availability: unknown format version {version}")
    if count < 0 or len(data) != HEADER_SIZE + count * _GROUP.size:
        raise CodecError(f"entry availability: {count} groups do not fit {len(data)} bytes")
    runs: list[tuple[int, int]] = []
    for i in range(count):
        first, last, size, period = _GROUP.unpack_from(data, HEADER_SIZE + i * _GROUP.size)
        if size <= 0 or first < 0 or last < first or period < 0 or (period == 0 and last != first):
            raise CodecError(f"entry availability: malformed group {i}: {(first, last, size, period)}")
        starts = range(first, last + 1, period) if period else (first,)
        if len(runs) + len(starts) > MAX_RUNS:
            raise CodecError("entry availability: too many runs")
        runs.extend((s, s + size - 1) for s in starts)
    runs.sort()
    merged: list[tuple[int, int]] = []
    for first, last in runs:
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged
