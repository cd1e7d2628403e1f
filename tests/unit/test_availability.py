"""wire.availability: GET_LIST_OF_ENTRIES_OF_LEDGER's encoding of the entries a bookie holds."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bkctl.wire.codecs.availability import HEADER_SIZE, decode_availability, encode_availability
from bkctl.wire.errors import CodecError


def runs_of(ids):
    runs = []
    for e in sorted(set(ids)):
        if runs and e == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], e)
        else:
            runs.append((e, e))
    return runs


@given(st.sets(st.integers(0, 5000), max_size=300))
def test_round_trip(ids):
    assert decode_availability(encode_availability(ids)) == runs_of(ids)


def test_layout_and_periodic_groups():
    data = encode_availability([0, 1, 2, 7])
    assert data[:8] == struct.pack(">ii", 0, 2) and len(data) == HEADER_SIZE + 2 * 24
    # Java also writes periodic groups: runs of 2 starting every 5 entries, from 10 to 20.
    periodic = struct.pack(">ii", 0, 1).ljust(HEADER_SIZE, b"\0") + struct.pack(">qqii", 10, 20, 2, 5)
    assert decode_availability(periodic) == [(10, 11), (15, 16), (20, 21)]
    assert decode_availability(encode_availability([])) == []


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\0" * 10,
        struct.pack(">ii", 1, 0).ljust(HEADER_SIZE, b"\0"),  # unknown version
        struct.pack(">ii", 0, 2).ljust(HEADER_SIZE, b"\0") + b"\0" * 24,  # count does not fit
        struct.pack(">ii", 0, 1).ljust(HEADER_SIZE, b"\0") + struct.pack(">qqii", 5, 4, 1, 0),  # last < first
        struct.pack(">ii", 0, 1).ljust(HEADER_SIZE, b"\0") + struct.pack(">qqii", 5, 5, 0, 0),  # empty run
        struct.pack(">ii", 0, 1).ljust(HEADER_SIZE, b"\0") + struct.pack(">qqii", 0, 1 << 40, 1, 1),  # huge
    ],
)
def test_malformed_answers_raise_codec_errors(data):
    with pytest.raises(CodecError):
        decode_availability(data)
