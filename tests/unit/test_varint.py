"""The hand-written varint codec against protobuf's own encoder."""

import pytest
from google.protobuf.internal.encoder import _VarintBytes
from hypothesis import given
from hypothesis import strategies as st

from bkctl.wire.codecs import varint


@given(st.integers(0, 2**64 - 1))
def test_encode_is_protobufs_varint_and_decodes_back(n):
    raw = varint.encode(n)
    assert raw == _VarintBytes(n)
    assert varint.decode_at(b"\xff" + raw + b"tail", 1) == (n, 1 + len(raw))


@pytest.mark.parametrize("raw", [b"", b"\x80", b"\xff\xff", b"\xff" * 11])
def test_truncated_or_overlong_varints_raise_index_error(raw):
    with pytest.raises(IndexError):
        varint.decode_at(raw, 0)


@pytest.mark.parametrize("n", [0, 127, 128, 300, 16383, 16384, 2**21 - 1, 2**21, 2**28 - 1, 2**28, 2**63, 2**64 - 1])
def test_each_length_of_varint_decodes_back_at_its_boundaries(n):
    raw = _VarintBytes(n)
    assert varint.decode_at(b"\x01" + raw + b"\x02", 1) == (n, 1 + len(raw))
