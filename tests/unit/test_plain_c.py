"""The bookie's C twins (``bkctl.wire.codecs._plain``) against their Python twins
(:func:`v3_fast.plain_add_request`, :func:`v3_fast.plain_read_request`,
:func:`v2.plain_add_request`, :func:`plain.py_add_answer`, :func:`plain.py_read_answer`): the same value, or
both None, for every input -- captured Java frames, built requests over the
whole range of ids, bytes near a request, junk -- and the choice between them
(:mod:`bkctl.wire.codecs.plain`) follows ``BKCTL_FASTPATHS``.

These call the twins directly, so they hold with ``BKCTL_FASTPATHS=0`` too; the
server's behaviour both ways is covered by test_bookie_server.py.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.wire import fastpath
from bkctl.wire.codecs import plain, v2, v3, v3_fast
from bkctl.wire.proto import bookkeeper_pb2 as pb
from tests.support import c_twins
from tests.support.golden import frames
from tests.unit.test_v3_plain_requests import _varint, near_adds, often_broken

try:
    from bkctl.wire.codecs import _plain
except ImportError:
    _plain = None

i64 = st.integers(-(1 << 63), (1 << 63) - 1)
u64 = st.integers(0, (1 << 64) - 1)
STATUSES = sorted(pb.StatusCode.values())


def test_the_extension_is_built_and_current():
    assert _plain is not None, "bkctl.wire.codecs._plain is missing: ./dev setup builds it (gcc, Python headers)"
    assert _plain.API == fastpath.PLAIN_API, "bkctl.wire.codecs._plain is older than its sources: run ./dev setup"


def test_the_c_twins_are_in_use_exactly_when_fast_paths_are_on():
    for enabled in (True, False):
        twins = fastpath.build(enabled).plain
        in_use = enabled and _plain is not None
        assert (twins.c is _plain) == in_use and (twins.c is None) == (not in_use)
        assert twins.add_request is (_plain.plain_add_request if in_use else v3_fast.plain_add_request)
        assert twins.read_request is (_plain.plain_read_request if in_use else v3_fast.plain_read_request)
        assert twins.v2_add_request is (_plain.v2_add_request if in_use else v2.plain_add_request)
        assert twins.add_answer is (_plain.add_answer if in_use else plain.py_add_answer)
        assert twins.read_answer is (_plain.read_answer if in_use else plain.py_read_answer)
        assert twins.read_answers is (_plain.read_answers if in_use else plain.py_read_answers)
        assert twins.read_run is (_plain.read_run if in_use else plain.py_read_run)
        assert twins.v2_read_run is (_plain.v2_read_run if in_use else plain.py_v2_read_run)
        assert twins.v2_read_answers is (_plain.v2_read_answers if in_use else plain.py_v2_read_answers)
        assert twins.add_run is (_plain.add_run if in_use else plain.py_add_run)
        assert twins.v2_add_run is (_plain.v2_add_run if in_use else plain.py_v2_add_run)
        assert twins.add_answers is (_plain.add_answers if in_use else plain.py_add_answers)
        assert twins.v2_add_answers is (_plain.v2_add_answers if in_use else plain.py_v2_add_answers)
    assert fastpath.selected().plain.c is (_plain if fastpath.selected().enabled else None)


needs_c = c_twins.needs_c(_plain, "bkctl.wire.codecs._plain")


def _same(b: bytes) -> tuple:
    """Every parser twin on ``b``: the C value is the Python one; returns the Python ones."""
    got = (v3_fast.plain_add_request(b), v3_fast.plain_read_request(b), v2.plain_add_request(b))
    assert (_plain.plain_add_request(b), _plain.plain_read_request(b), _plain.v2_add_request(b)) == got
    return got


@needs_c
def test_every_captured_frame_is_taken_apart_the_same_way():
    taken = 0
    for f in frames():
        for b in (f["raw"][4:], f["raw"]):
            taken += sum(x is not None for x in _same(b))
    assert taken >= 15, taken


@needs_c
@settings(max_examples=400)
@given(u64, i64, i64, st.binary(max_size=140), st.binary(max_size=300), st.booleans(), st.booleans(), st.booleans())
def test_built_adds(txn, ledger, entry, key, body, recovery, high, deferred):
    b = v3.serialize(
        v3.add_request(txn, ledger, entry, key, body, recovery=recovery, high_priority=high, deferred_sync=deferred)
    )
    add, _, _ = _same(b)
    assert (add is not None) == (not deferred and len(key) < 0x80)
    assert add is None or add[6] == recovery


@needs_c
@settings(max_examples=400)
@given(u64, i64, i64, st.booleans(), st.booleans(), st.booleans())
def test_built_reads(txn, ledger, entry, fence, high, poll):
    b = v3.serialize(
        v3.read_request(
            txn,
            ledger,
            entry,
            fence_master_key=b"k" * 20 if fence else None,
            high_priority=high,
            previous_lac=3 if poll else None,
            timeout_ms=10 if poll else None,
        )
    )
    _, read, _ = _same(b)
    assert (read is not None) == (not (fence or high or poll))
    if read is not None:
        assert read[3] is b  # the payload itself, as the Python twin returns it


@needs_c
@settings(max_examples=600, database=None)
@given(near_adds())
def test_bytes_near_an_add(b):
    _same(b)


@st.composite
def near_reads(draw):
    """Bytes close to a plain v3 READ (varints padded, ten-byte ones, values past 64 bits), often broken."""
    pad = st.integers(0, 9)
    big = st.integers(0, (1 << 70) - 1)
    header = b"\x08\x03\x10\x01\x18" + _varint(draw(st.one_of(u64, big)), draw(pad))
    read = b"\x08" + _varint(draw(st.one_of(u64, big)), draw(pad)) + b"\x10" + _varint(draw(u64), draw(pad))
    return often_broken(draw, b"\x0a" + _varint(len(header)) + header + v3_fast.READ_FIELD + _varint(len(read)) + read)


@needs_c
@settings(max_examples=600, database=None)
@given(near_reads())
def test_bytes_near_a_read(b):
    _same(b)


@needs_c
def test_varints_at_the_edge_of_64_bits():
    """Ten-byte varints: 2^64 - 1 is taken, 2^64 and eleven bytes are not, by both twins."""
    for txn in (_varint((1 << 64) - 1), b"\xff" * 9 + b"\x02", b"\xff" * 10 + b"\x01", _varint(5, 9)):
        header = b"\x08\x03\x10\x01\x18" + txn
        read = b"\x08\x05\x10\x06"
        b = b"\x0a" + bytes((len(header),)) + header + v3_fast.READ_FIELD + bytes((len(read),)) + read
        _same(b)
    assert _plain.plain_read_request(
        b"\x0a\x0f\x08\x03\x10\x01\x18" + _varint((1 << 64) - 1) + b"\xa2\x06\x04\x08\x05\x10\x06"
    )[:2] == (5, 6)


@needs_c
@settings(max_examples=400)
@given(st.binary(max_size=60))
def test_junk(b):
    _same(b)


@needs_c
@settings(max_examples=300)
@given(
    st.integers(0, 0xFF),
    st.integers(0, 0xFF),
    st.integers(0, 0xFFFF),
    i64,
    i64,
    st.binary(max_size=40),
    st.integers(-2, 2),
)
def test_v2_frames(version, op, flags, ledger, entry, tail, trim):
    b = (
        bytes((version, op))
        + flags.to_bytes(2, "big")
        + b"k" * 20
        + ledger.to_bytes(8, "big", signed=True)
        + entry.to_bytes(8, "big", signed=True)
        + tail
    )
    b = b[: len(b) + min(trim, 0)] + b"x" * max(trim, 0)
    got = _same(b)[2]
    if (version, op) == (2, 1) and len(b) >= 40:
        req = v2.decode_request(b)
        assert got == (req.flags, req.ledger_id, req.entry_id, req.master_key, req.body)
    else:
        assert got is None


@needs_c
@settings(max_examples=400)
@given(u64, st.sampled_from(STATUSES), i64, i64)
def test_add_answer(txn, status, ledger, entry):
    want = plain.py_add_answer(txn, status, ledger, entry)
    assert _plain.add_answer(txn, status, ledger, entry) == want
    msg = v3.parse_response(want[4:])
    assert (msg.header.txnId, msg.status, msg.addResponse.ledgerId, msg.addResponse.entryId) == (
        txn,
        status,
        ledger,
        entry,
    )


@needs_c
@settings(max_examples=400)
@given(u64, i64, i64, st.binary(max_size=300), i64)
def test_read_answer(txn, ledger, entry, body, lac):
    header_field = v3.serialize(v3.read_request(txn, ledger, entry))[: 2 + 5 + len(_varint(txn))]
    want = plain.py_read_answer(header_field, ledger, entry, body, lac)
    assert _plain.read_answer(header_field, ledger, entry, body, lac) == want
    msg = v3.parse_response(want[4:])
    assert int.from_bytes(want[:4], "big") == len(want) - 4
    read = msg.readResponse
    assert (msg.header.txnId, msg.status, read.status, read.ledgerId, read.entryId, read.body, read.maxLAC) == (
        txn,
        0,
        0,
        ledger,
        entry,
        body,
        lac,
    )


@needs_c
def test_only_bytes_and_numbers_in_range_are_taken():
    for fn in (_plain.plain_add_request, _plain.plain_read_request, _plain.v2_add_request):
        with pytest.raises(TypeError):
            fn(bytearray(b"\x0a"))
    with pytest.raises(OverflowError):
        _plain.add_answer(1 << 64, 0, 1, 1)
    with pytest.raises(OverflowError):
        _plain.add_answer(1, 0, 1 << 63, 1)
    with pytest.raises(TypeError):
        _plain.add_answer(1, 0, 1)
    with pytest.raises(TypeError):
        _plain.read_answer(bytearray(b"\x0a\x00"), 1, 1, b"", 0)
    with pytest.raises(OverflowError):
        _plain.read_answer(b"\x0a\x00", 1 << 63, 1, b"", 0)
