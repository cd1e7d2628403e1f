"""The reader's fast paths: hand-written v3 read frames, callback reads
registered in one call, the digest checker of a window of reads, and the
write sets a window keeps per segment.  Each must do exactly what the
general path does (tests/unit/test_client_ledger.py checks reads end to end,
both with and without fast paths)."""

import itertools
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.wire import fastpath
from bkctl.wire.client import errors as E
from bkctl.wire.client.entry_reads import EntryReads
from bkctl.wire.client.read_handle import ReadHandle
from bkctl.wire.codecs import codec_twins, v3, v3_fast
from bkctl.wire.codecs.digest import DigestManager, DigestType
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC
from bkctl.wire.errors import DigestError
from bkctl.wire.metadata.ledger import LedgerMetadata, LedgerState
from tests.support.connection import Harness, v3_reply, v3_requests

i64 = st.integers(-(1 << 63), (1 << 63) - 1)


@pytest.fixture(autouse=True)
def fast_paths_on(monkeypatch):
    """These tests look at the fast paths themselves, so they are on even in
    the suite's BKCTL_FASTPATHS=0 run."""
    from bkctl.wire import fastpath

    monkeypatch.setattr(fastpath, "selected", lambda: fastpath.build(True))


# -- v3 read frames ---------------------------------------------------------

ENC = v3_fast.RequestEncoder()


@settings(max_examples=500)
@given(st.integers(0, (1 << 64) - 1), i64, i64)
def test_read_frame_is_the_framed_read_request_and_its_header_field(txn, ledger, entry):
    payload = v3.serialize(v3.read_request(txn, ledger, entry))
    data, head = ENC.read_frame(txn, ledger, entry)
    assert data == frame(payload)
    assert head == payload[: 2 + payload[1]]
    assert v3.parse_request(payload).header.txnId == txn


def test_read_frame_keeps_one_ledger_field_and_notices_another():
    for txn, ledger in zip(range(1, 40), itertools.cycle((7, 7, 300, 1 << 40, 7))):
        assert ENC.read_frame(txn, ledger, txn * 1000)[0] == frame(
            v3.serialize(v3.read_request(txn, ledger, txn * 1000))
        )


# -- callback reads registered in one call ------------------------------------


def test_callback_reads_time_out_fail_and_succeed_like_general_ones():
    h = Harness(read_timeout=2.0)
    proto, t = h.connected()
    got = []
    for e in (1, 2, 3):
        h.conn.read_with_callback(9, e, lambda *a: got.append(a), "c%d" % e, e)
    r1, r2, r3 = v3_requests(t)
    assert [r.readRequest.entryId for r in (r1, r2, r3)] == [1, 2, 3]
    assert len(h.conn.requests.v3_fast) == 3 and h.conn.outstanding == 3
    proto.dataReceived(v3_reply(r2, RC.ENOENTRY) + v3_reply(r1, body=b"one"))
    assert got[0][:3] == ("c2", 2, h.conn.bookie_id) and isinstance(got[0][3], E.NoSuchEntry)
    assert got[1] == ("c1", 1, h.conn.bookie_id, b"one")
    h.reactor.advance(2.0)
    assert got[2][:2] == ("c3", 3) and isinstance(got[2][3], E.BookieTimeout)
    assert h.conn.requests.v3_fast == {} and h.conn.outstanding == 0 and h.delayed() == []
    proto.dataReceived(v3_reply(r3, body=b"late"))  # dropped
    assert len(got) == 3 and h.conn.connected


def test_callback_reads_beyond_max_outstanding_wait_in_the_queue():
    h = Harness(max_outstanding=1)
    proto, t = h.connected()
    got = []
    h.conn.read_with_callback(9, 1, lambda *a: got.append(a), None, 0)
    h.conn.read_with_callback(9, 2, lambda *a: got.append(a), None, 0)
    (r1,) = v3_requests(t)
    assert h.conn.queued == 1
    t.clear()
    proto.dataReceived(v3_reply(r1, body=b"one"))
    (r2,) = v3_requests(t)
    proto.dataReceived(v3_reply(r2, body=b"two"))
    assert [g[3] for g in got] == [b"one", b"two"]


def test_callback_reads_with_a_repeating_txn_id_match_the_newest_as_before():
    h = Harness(txn_ids=itertools.repeat(5))
    proto, t = h.connected()
    got = []
    h.conn.read_with_callback(9, 1, lambda *a: got.append(a), "first", 0)
    h.conn.read_with_callback(9, 2, lambda *a: got.append(a), "second", 0)
    r1, r2 = v3_requests(t)
    proto.dataReceived(v3_reply(r2, body=b"two"))
    assert got == [("second", 0, h.conn.bookie_id, b"two")]


# -- the digest checker of a window -------------------------------------------


def _outcome(check, entry, entry_id):
    try:
        return ("ok", check(entry, entry_id))
    except DigestError as exc:
        return ("error", str(exc))


@pytest.mark.parametrize("codec", ["python", "in use"])
@pytest.mark.parametrize("digest_type", list(DigestType))
def test_payload_checker_agrees_with_payload(digest_type, codec):
    dm = DigestManager(42, digest_type, b"pw")
    check = dm.payload_checker(codec_twins.PYTHON if codec == "python" else fastpath.build(True).codec, True)
    good = dm.package(3, 2, 100, b"payload")
    other_ledger = DigestManager(43, digest_type, b"pw").package(3, 2, 100, b"payload")
    flipped = bytearray(good)
    flipped[-1] ^= 1
    cases = [
        (good, 3),
        (good, 4),
        (other_ledger, 3),
        (bytes(flipped), 3),
        (good[:20], 3),
        (bytearray(good), 3),
        (memoryview(good), 3),
        (good, None),
        (dm.package(0, -1, 0, b""), 0),
    ]
    for entry, entry_id in cases:
        assert _outcome(check, entry, entry_id) == _outcome(dm.payload, entry, entry_id)
    assert check(good, 3) == b"payload"


# -- write sets kept per segment ------------------------------------------------


def _handle(md):
    client = types.SimpleNamespace(pool=None, protocol="v3", read_window=256, twins=fastpath.selected())
    return ReadHandle(client, 1, md, 0, b"", DigestType.CRC32C)


def test_window_write_sets_follow_segments_and_metadata_changes():
    segments = (
        (0, ("a", "b", "c", "d")),
        (7, ("a", "e", "c", "d")),
        (8, ("f", "e", "c", "d")),
        (20, ("f", "e", "g", "d")),
    )
    md = LedgerMetadata(4, 3, 2, LedgerState.CLOSED, 40, 4000, segments)
    h = _handle(md)
    reads = EntryReads(h, None)
    order = list(range(0, 41)) + [25, 3, 7, 8, 19, 20, 6, (1 << 31) - 3, (1 << 31) + 5]
    for e in order:
        assert reads._write_set(e) == tuple(md.write_set(e)), e
    reads._write_set(25)  # the last segment is kept
    changed = LedgerMetadata(
        4, 3, 2, LedgerState.CLOSED, 40, 4000, ((0, ("a", "b", "c", "d")), (7, ("x", "y", "z", "w")))
    )
    h.metadata = changed
    for e in (30, 8, 9, 3, 40):
        assert reads._write_set(e) == tuple(changed.write_set(e)), e
