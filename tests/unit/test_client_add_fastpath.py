"""The writer's add fast path: an ADD encoded once for its write set
(EncodedAdd) writes the bytes the request builders write, and through the one way an add
enters a connection (add_run) behaves as an ADD of its fields only, with fast paths on and off."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bkctl.wire import fastpath
from bkctl.wire.client import errors as E
from bkctl.wire.codecs import v2, v3, v3_fast
from bkctl.wire.codecs.add_frames import AddEncoder, EncodedAdd
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC, V2_CURRENT_VERSION, Flag
from tests.support.connection import KEY, Harness, entry, sent_frames, v2_requests, v3_reply, v3_requests

I64 = st.integers(-(1 << 63), (1 << 63) - 1)


@given(
    txn=st.integers(0, (1 << 64) - 1),
    ledger_id=I64,
    entry_id=I64,
    body=st.binary(max_size=300),
    recovery=st.booleans(),
    high_priority=st.booleans(),
)
def test_v3_bytes_are_the_builders(txn, ledger_id, entry_id, body, recovery, high_priority):
    add = AddEncoder("v3", codec=fastpath.selected().codec).encode(
        ledger_id, entry_id, KEY, body, recovery, high_priority
    )
    head, answer_head = v3_fast.add_header_fields(txn, high_priority)
    request = v3.add_request(txn, ledger_id, entry_id, KEY, body, recovery=recovery, high_priority=high_priority)
    assert head + add.v3_part == v3.serialize(request)
    assert answer_head + add.v3_tail == v3.serialize(v3.add_response(request, RC.EOK))


@given(
    ledger_id=I64, entry_id=I64, payload=st.binary(max_size=100), recovery=st.booleans(), high_priority=st.booleans()
)
def test_v2_bytes_are_the_builders(ledger_id, entry_id, payload, recovery, high_priority):
    body = entry(ledger_id, entry_id, payload) if entry_id > -(1 << 63) else entry(ledger_id, 0, payload)
    add = AddEncoder("v2", codec=fastpath.selected().codec).encode(
        ledger_id, entry_id, KEY, body, recovery, high_priority
    )
    flags = (Flag.RECOVERY_ADD if recovery else 0) | (Flag.HIGH_PRIORITY if high_priority else 0)
    assert add.v2_frame == frame(v2.AddRequest(V2_CURRENT_VERSION, int(flags), KEY, body, ledger_id, entry_id).encode())


@pytest.mark.parametrize("txn", [-1, 1 << 64, 1.5])
def test_a_txn_id_upb_would_refuse_has_no_hand_made_header(txn):
    assert v3_fast.add_header_fields(txn) is None


@pytest.fixture(params=[True, False], ids=["fast", "general"])
def fast(request, monkeypatch):
    monkeypatch.setattr(fastpath, "selected", lambda: fastpath.build(request.param))
    return request.param


def outcomes():
    got = []
    return got, lambda add, slot, bookie, error: got.append((f"e{add.entry_id}", slot, bookie, error))


@pytest.mark.parametrize("protocol", ["v3", "v2"])
@pytest.mark.parametrize("flags", [(False, False), (True, True)])
def test_an_encoded_add_writes_what_an_add_of_its_fields_writes(fast, protocol, flags):
    recovery, high = flags
    one, two = Harness(protocol), Harness(protocol)
    _p1, t1 = one.connected()
    _p2, t2 = two.connected()
    add = AddEncoder(protocol, codec=fastpath.selected().codec).encode(3, 7, KEY, entry(3, 7), recovery, high)
    _got, on_done = outcomes()
    one.conn.add_run([add], [0], on_done)
    two.conn.add_run([EncodedAdd(3, 7, KEY, entry(3, 7), recovery, high)], [0], on_done)
    assert sent_frames(t1) == sent_frames(t2) and len(sent_frames(t1)) == 1


@pytest.mark.parametrize("protocol", ["v3", "v2"])
def test_an_encoded_add_completes_on_ok_and_on_errors(fast, protocol):
    h = Harness(protocol, add_timeout=1.0)
    proto, t = h.connected()
    enc = AddEncoder(protocol, codec=fastpath.selected().codec)
    got, on_done = outcomes()
    for e in range(3):
        h.conn.add_run([enc.encode(1, e, KEY, entry(1, e))], [e], on_done)
    if protocol == "v3":
        r0, r1, _r2 = v3_requests(t)
        proto.dataReceived(v3_reply(r1, RC.EFENCED) + v3_reply(r0))
    else:
        r0, r1, _r2 = v2_requests(t)
        proto.dataReceived(frame(v2.add_response_for(r1, RC.EFENCED)) + frame(v2.add_response_for(r0, RC.EOK)))
    assert [(ctx, slot, error) for ctx, slot, _b, error in got[1:]] == [("e0", 0, None)]
    assert got[0][:2] == ("e1", 1) and isinstance(got[0][3], E.LedgerFencedError)
    h.reactor.advance(1.0)
    assert got[2][:2] == ("e2", 2) and isinstance(got[2][3], E.BookieTimeout)
    assert h.conn.outstanding == 0 and h.delayed() == []


@pytest.mark.parametrize("protocol", ["v3", "v2"])
def test_an_answer_for_other_ids_is_not_taken_for_the_add(fast, protocol):
    h = Harness(protocol)
    proto, t = h.connected()
    got, on_done = outcomes()
    h.conn.add_run([AddEncoder(protocol, codec=fastpath.selected().codec).encode(1, 0, KEY, entry(1, 0))], [0], on_done)
    if protocol == "v3":
        (r,) = v3_requests(t)
        r.addRequest.entryId = 1  # same txnId, other entry: the general parser decides
        proto.dataReceived(v3_reply(r))
        assert got and got[0][3] is None  # v3 matches by txnId, as Java does
    else:
        (r,) = v2_requests(t)
        proto.dataReceived(frame(v2.add_response_for(r._replace(entry_id=1), RC.EOK)))
        assert got == [] and h.conn.outstanding == 1  # v2 matches by ids: not this one


def test_an_encoded_add_while_connecting_is_queued_and_sent_once_connected(fast):
    h = Harness()
    got, on_done = outcomes()
    h.conn.add_run([AddEncoder("v3", codec=fastpath.selected().codec).encode(1, 0, KEY, entry(1, 0))], [0], on_done)
    proto, t = h.accept()
    (r,) = v3_requests(t)
    assert (r.addRequest.ledgerId, r.addRequest.entryId, r.addRequest.body) == (1, 0, entry(1, 0))
    proto.dataReceived(v3_reply(r))
    assert got[0][3] is None


def test_an_add_encoded_for_v2_goes_the_general_way_on_a_v3_connection(fast):
    h = Harness()
    proto, t = h.connected()
    got, on_done = outcomes()
    h.conn.add_run([AddEncoder("v2", codec=fastpath.selected().codec).encode(1, 0, KEY, entry(1, 0))], [0], on_done)
    (r,) = v3_requests(t)
    proto.dataReceived(v3_reply(r))
    assert got[0][3] is None and r.addRequest.body == entry(1, 0)
