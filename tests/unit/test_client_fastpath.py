"""The connection's fast path for v3 add answers behaves like full parsing."""
import itertools

from tests.unit.test_client_connection import Harness, KEY, entry, v3_requests, v3_reply, result_of, failure_of, no_result, sent_frames
from bkctl.wire.client import errors as E
from bkctl.wire import v3
from bkctl.wire.framing import frame
from bkctl.wire.protocol import RC
import pytest


@pytest.fixture(autouse=True)
def fast_paths_on(monkeypatch):
    """These tests look inside the fast path itself, so it is on even in the
    suite's BKCTL_FASTPATHS=0 run (which checks the behaviour without it)."""
    from bkctl.wire import fastpath
    monkeypatch.setattr(fastpath, "ENABLED", True)


def test_fast_ok_and_error_and_timeout():
    h = Harness(add_timeout=1.0)
    proto, t = h.connected()
    d1 = h.conn.add(1, 0, KEY, entry(1, 0))
    d2 = h.conn.add(1, 1, KEY, entry(1, 1))
    d3 = h.conn.add(1, 2, KEY, entry(1, 2))
    r1, r2, r3 = v3_requests(t)
    assert len(h.conn._v3_ok) == 3
    proto.dataReceived(v3_reply(r2, RC.EFENCED) + v3_reply(r1))
    assert result_of(d1) is None
    failure_of(d2, E.LedgerFencedError)
    assert len(h.conn._v3_ok) == 1
    h.reactor.advance(1.0)
    failure_of(d3, E.BookieTimeout)
    assert h.conn._v3_ok == {} and h.delayed() == []
    proto.dataReceived(v3_reply(r3))  # late: dropped
    assert h.conn.connected

def test_repeating_txn_ids_newest_wins_like_before():
    h = Harness(txn_ids=itertools.repeat(5))
    proto, t = h.connected()  # bookie_info takes txn 5 too
    d1 = h.conn.add(1, 0, KEY, entry(1, 0))
    d2 = h.conn.add(1, 1, KEY, entry(1, 1))
    r1, r2 = v3_requests(t)
    # answer to the first (same txn, same op): matched by (txn, op) to the newest, as before
    proto.dataReceived(v3_reply(r1))
    assert result_of(d2) is None
    no_result(d1)

def test_cancel_removes_ok():
    h = Harness()
    proto, t = h.connected()
    d = h.conn.add(1, 0, KEY, entry(1, 0))
    (r,) = v3_requests(t)
    d.cancel(); failure_of(d)
    assert h.conn._v3_ok == {}
    proto.dataReceived(v3_reply(r))
    assert h.conn.connected


def test_switched_off_sends_the_same_bytes_and_parses_every_answer():
    frames = []
    for on in (True, False):
        h = Harness()
        h.conn.fastpaths = on
        proto, t = h.connected()
        d = h.conn.add(1, 0, KEY, entry(1, 0))
        d2 = h.conn.read(1, 0)
        assert len(h.conn._v3_ok) == (1 if on else 0)  # off: no answer is matched unparsed
        r1, = v3_requests(t)[:1]
        frames.append(sent_frames(t))
        proto.dataReceived(v3_reply(r1))
        assert result_of(d) is None
        no_result(d2)
    assert frames[0] == frames[1]
