"""A connection's answer loop: the C twin (``take_answers``) of
RequestTable.take_answers, its Python twin, and the general path (fast
paths off) make the same of the same chunks of v3 answers -- the same
outcomes in the same order, the same requests left on the wire -- whatever
the answers are (EOK, refusals, shapes the fast path declines, answers nobody
waits for, bytes that do not decode) and whatever a callback does midway
(closing the connection)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.python.failure import Failure

from bkctl.wire import fastpath
from bkctl.wire.client import requests
from bkctl.wire.codecs import codec_twins, v3
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC
from bkctl.wire.fastpath import Twins
from tests.support import c_twins
from tests.support.connection import Harness, v3_reply, v3_requests

MASTER_KEY = b"k" * 20
#: the C twins (None: not built)
C = fastpath.build(True).codec.c

#: what each answer is: its bytes out of the request it answers
KINDS = {
    "ok": lambda r: v3_reply(r, body=b"entry %d" % r.header.txnId),
    "ok_lac": lambda r: v3_reply(r, body=b"e", max_lac=7, lac_update_ts=9),
    "empty_body": lambda r: v3_reply(r, body=b""),
    "no_body": lambda r: v3_reply(r),  # EOK without a body: declined by the fast path
    "missing": lambda r: v3_reply(r, RC.ENOENTRY),
    "fenced": lambda r: v3_reply(r, RC.EFENCED),
    "twice": lambda r: v3_reply(r, body=b"a") + v3_reply(r, body=b"b"),  # the second: nobody waits
    "garbage": lambda r: frame(b"\x0a\x03\x08\x03\x10"),  # does not decode: the connection fails
}


def _outcome(result):
    if isinstance(result, Failure):
        result = result.value
    if isinstance(result, BaseException):
        return type(result).__name__
    return result


def run(mode: str, answers: list[tuple[int, str]], close_after: int | None, reads: int = 6) -> tuple[list, int]:
    """Issue ``reads`` callback reads and an ADD (with a Deferred), answer them
    in one chunk as ``answers`` says (request index, kind), and say what came of it."""
    if mode == "python":  # the fast paths on, in Python only
        h = Harness(twins=Twins(enabled=True, codec_given=None))
    else:
        h = Harness(twins=fastpath.build(mode != "general"))
    proto, t = h.connected()
    got = []

    def on_done(ctx, slot, bookie_id, result):
        got.append((ctx, slot, _outcome(result)))
        if len(got) == close_after:
            h.conn.close()

    for e in range(reads):
        h.conn.read_with_callback(5, e, on_done, "read %d" % e, e)
    h.conn.add(5, reads, MASTER_KEY, b"body").addBoth(lambda r: got.append(("add", _outcome(r))))
    reqs = v3_requests(t)
    proto.dataReceived(b"".join(KINDS[kind](reqs[i]) for i, kind in answers))
    tables = h.conn.requests
    left = ("left", len(tables.sent), len(tables.v3_pending), h.conn.connected)
    return got + [left], len(tables.v3_fast)  # the general path has no v3_fast to leave


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.sampled_from(sorted(KINDS))), max_size=10), st.none() | st.integers(1, 4)
)
def test_the_twins_and_the_general_path_agree(answers, close_after):
    general, _ = run("general", answers, close_after)
    python = run("python", answers, close_after)
    assert python[0] == general
    if C is not None:
        assert run("c", answers, close_after) == python


def test_a_chunk_of_eok_answers_is_taken_in_one_call(monkeypatch):
    """The fast path's point: one fast_answers call per chunk, no fast_answer per answer."""
    h = Harness(twins=fastpath.build(True))
    proto, t = h.connected()
    got = []
    for e in range(5):
        h.conn.read_with_callback(5, e, lambda *a: got.append(a[3]), None, 0)
    calls = []
    monkeypatch.setattr(h.conn, "fast_answer", lambda *a: calls.append(a) or False)
    proto.dataReceived(b"".join(KINDS["ok"](r) for r in v3_requests(t)))
    assert got == [b"entry %d" % txn for txn in range(2, 7)] and calls == []
    assert len(h.conn.requests.sent) == 0


def test_sent_is_the_state_the_c_loop_takes():
    """take_answers (both twins) takes only requests whose state is 1: requests.SENT."""
    assert requests.SENT == 1 == codec_twins.REQUEST_SENT


@c_twins.needs_c(C, "bkctl.wire.codecs._fastcodec")
def test_take_answers_refuses_what_is_not_a_list_and_two_dicts():
    with pytest.raises(TypeError):
        C.take_answers((), 0, {}, {}, print)
    with pytest.raises(TypeError):
        C.take_answers([], 0, {}, [], print)
    with pytest.raises(TypeError):  # the old form, which reached into the connection
        C.take_answers([], 0, None, None, {}, {}, print)


def test_the_table_hands_the_c_loop_its_own_dicts_and_stops_when_told():
    """RequestTable.take_answers: ``answered`` returning False stops the loop after that answer."""
    for codec in ([C] if C is not None else []) + [None]:
        h = Harness(twins=Twins(enabled=True, codec_given=codec))
        proto, t = h.connected()
        for e in range(3):
            h.conn.read_with_callback(5, e, lambda *a: None, None, 0)
        payloads = [KINDS["ok"](r)[4:] for r in v3_requests(t)]
        taken = []
        table = h.conn.requests
        assert (
            table.take_answers(payloads, 0, lambda req, result, taken=taken: taken.append(result) or len(taken) < 2)
            == 2
        )
        assert taken == [b"entry 2", b"entry 3"] and len(table.v3_fast) == len(table.v3_pending) == 1


def test_read_answer_shapes_are_what_v3_builds():
    """KINDS builds real v3 answers (a guard on the generator itself)."""
    h = Harness()
    proto, t = h.connected()
    h.conn.read_with_callback(5, 1, lambda *a: None, None, 0)
    (r,) = v3_requests(t)
    for kind in ("ok", "ok_lac", "empty_body", "no_body", "missing"):
        assert v3.parse_response(KINDS[kind](r)[4:]).header.txnId == r.header.txnId
