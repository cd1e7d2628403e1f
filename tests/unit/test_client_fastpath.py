"""The connection's fast path for v3 add answers behaves like full parsing."""

import itertools

import pytest
from twisted.internet import defer

from bkctl.wire import fastpath
from bkctl.wire.client import errors as E
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC
from tests.support.connection import KEY, Harness, entry, sent_frames, v3_reply, v3_requests
from tests.support.deferreds import assertNoResult, failureResultOf, successResultOf


@pytest.fixture(autouse=True)
def fast_paths_on(monkeypatch):
    """These tests look inside the fast path itself, so it is on even in the
    suite's BKCTL_FASTPATHS=0 run (which checks the behaviour without it)."""
    from bkctl.wire import fastpath

    monkeypatch.setattr(fastpath, "selected", lambda: fastpath.build(True))


def test_fast_ok_and_error_and_timeout():
    h = Harness(add_timeout=1.0)
    proto, t = h.connected()
    d1 = h.conn.add(1, 0, KEY, entry(1, 0))
    d2 = h.conn.add(1, 1, KEY, entry(1, 1))
    d3 = h.conn.add(1, 2, KEY, entry(1, 2))
    r1, r2, r3 = v3_requests(t)
    assert len(h.conn.requests.v3_fast) == 3
    proto.dataReceived(v3_reply(r2, RC.EFENCED) + v3_reply(r1))
    assert successResultOf(d1) is None
    failureResultOf(d2, E.LedgerFencedError)
    assert len(h.conn.requests.v3_fast) == 1
    h.reactor.advance(1.0)
    failureResultOf(d3, E.BookieTimeout)
    assert h.conn.requests.v3_fast == {} and h.delayed() == []
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
    assert successResultOf(d2) is None
    assertNoResult(d1)


def test_cancel_removes_ok():
    h = Harness()
    proto, t = h.connected()
    d = h.conn.add(1, 0, KEY, entry(1, 0))
    (r,) = v3_requests(t)
    d.cancel()
    failureResultOf(d, defer.CancelledError)
    assert h.conn.requests.v3_fast == {}
    proto.dataReceived(v3_reply(r))
    assert h.conn.connected


def test_switched_off_sends_the_same_bytes_and_parses_every_answer():
    frames = []
    for on in (True, False):
        h = Harness(twins=fastpath.build(on))
        proto, t = h.connected()
        d = h.conn.add(1, 0, KEY, entry(1, 0))
        d2 = h.conn.read(1, 0)
        assert len(h.conn.requests.v3_fast) == (2 if on else 0)  # off: no answer is matched unparsed
        (r1,) = v3_requests(t)[:1]
        frames.append(sent_frames(t))
        proto.dataReceived(v3_reply(r1))
        assert successResultOf(d) is None
        assertNoResult(d2)
    assert frames[0] == frames[1]


class _Parsed:
    """The answers the general parser (``v3.parse_response``, ``v2.decode_response``: the
    protocol takes it when it is made) parsed since :meth:`clear`; ``refuse``: one more fails."""

    def __init__(self, monkeypatch, module, name: str):
        self.payloads: list[bytes] = []
        self.refuse = False
        general = getattr(module, name)

        def parse(payload):
            assert not self.refuse, "parsed an answer the fast path should take"
            self.payloads.append(payload)
            return general(payload)

        monkeypatch.setattr(module, name, parse)

    def clear(self) -> None:
        self.payloads.clear()


def test_eok_read_answers_are_taken_without_the_parser(monkeypatch):
    parsed = _Parsed(monkeypatch, v3, "parse_response")
    h = Harness()
    proto, t = h.connected()
    got = []
    d = h.conn.read(1, 2)
    h.conn.read_with_callback(1, 3, lambda *a: got.append(a), "ctx", 1)
    r2, r3 = v3_requests(t)
    assert len(h.conn.requests.v3_fast) == 2
    parsed.refuse = True
    proto.dataReceived(v3_reply(r3, body=b"three", max_lac=2) + v3_reply(r2, body=b"two"))
    assert got == [("ctx", 1, h.conn.bookie_id, b"three")]
    assert successResultOf(d) == b"two"
    assert h.conn.requests.v3_fast == {} and h.conn.outstanding == 0


def test_error_read_answers_go_through_the_parser():
    h = Harness()
    proto, t = h.connected()
    d = h.conn.read(1, 2)
    (r,) = v3_requests(t)
    proto.dataReceived(v3_reply(r, RC.ENOENTRY))
    failureResultOf(d, E.NoSuchEntry)
    assert h.conn.requests.v3_fast == {}


def test_fencing_and_priority_reads_are_not_on_the_fast_path():
    h = Harness()
    proto, t = h.connected()
    d1 = h.conn.read(1, 2, fence_master_key=KEY)
    d2 = h.conn.read(1, 3, high_priority=True)
    assert h.conn.requests.v3_fast == {}
    r1, r2 = v3_requests(t)
    proto.dataReceived(v3_reply(r1, body=b"f") + v3_reply(r2, body=b"p"))
    assert successResultOf(d1) == b"f" and successResultOf(d2) == b"p"


def test_switched_off_reads_send_the_same_bytes_and_get_the_same_results():
    seen = []
    for on in (True, False):
        for protocol in ("v3", "v2"):
            h = Harness(protocol, twins=fastpath.build(on))
            proto, t = h.connected()
            got = []
            h.conn.read_with_callback(5, 6, lambda *a, got=got: got.append(a), None, 0)
            d = h.conn.read(5, 7)
            frames_sent = sent_frames(t)
            if protocol == "v3":
                r6, r7 = v3_requests(t)
                proto.dataReceived(v3_reply(r6, body=b"six") + v3_reply(r7, RC.ENOENTRY))
            else:
                proto.dataReceived(
                    frame(v2.ReadResponse(2, RC.EOK, 5, 6, b"six").encode())
                    + frame(v2.ReadResponse(2, RC.ENOENTRY, 5, 7).encode())
                )
            seen.append((protocol, frames_sent, got[0][3], type(failureResultOf(d, E.NoSuchEntry).value)))
    assert seen[:2] == seen[2:]


def test_v2_eok_read_answers_are_cut_without_the_decoder_errors_are_decoded(monkeypatch):
    parsed = _Parsed(monkeypatch, v2, "decode_response")
    h = Harness("v2")
    proto, t = h.connected()
    got = []
    h.conn.read_with_callback(1, 2, lambda *a: got.append(a[3]), None, 0)
    d = h.conn.read(1, 3)
    d2 = h.conn.read(1, 4)
    parsed.clear()  # (the first request's answer, which connected() gave)
    proto.dataReceived(
        frame(v2.ReadResponse(2, RC.EOK, 1, 3, b"three").encode())
        + frame(v2.ReadResponse(2, RC.EOK, 1, 2, b"two").encode())
        + frame(v2.ReadResponse(2, RC.ENOENTRY, 1, 4).encode())
        + frame(v2.ReadResponse(2, RC.EOK, 1, 9, b"nobody").encode())
    )
    assert got == [b"two"] and successResultOf(d) == b"three"
    failureResultOf(d2, E.NoSuchEntry)
    assert len(parsed.payloads) == 2  # the error and the answer nobody waits for
    assert h.conn.outstanding == 0 and h.conn.requests.v2_pending == {}
