"""A writer's ADD copies: the C twin (``_addpath``: copies built, registered and answered
in C) and the Python path (``Request``s, ``RequestTable``'s loops) make the same of the
same run of adds and the same chunk of answers -- the same bytes on the wire, the same
outcomes in the same order, the same requests and deadlines left -- whatever the answers
are (EOK, refusals, duplicates, bytes that do not decode) and whatever a callback does
midway (closing the connection, raising, adding more)."""

import logging
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.wire import fastpath
from bkctl.wire.codecs import codec_twins
from bkctl.wire.codecs.add_frames import AddEncoder, EncodedAdd
from bkctl.wire.codecs.protocol import RC
from bkctl.wire.fastpath import Twins
from tests.support import c_twins
from tests.support.connection import KEY, Harness, entry, v3_reply, v3_requests

C = fastpath.build(True).adds.c
#: the twins of the client's codecs in use
CODEC = fastpath.build(True).codec
#: the writer's side (Entries), whose entries the connection's copies are made of
WRITER = fastpath.build(True).entries.c
MODES = ["python"] + (["c"] if C is not None else [])
KINDS = {
    "ok": lambda r: v3_reply(r),
    "fenced": lambda r: v3_reply(r, RC.EFENCED),
    "twice": lambda r: v3_reply(r) + v3_reply(r),  # the second: nobody waits
    "garbage": lambda r: b"\x00\x00\x00\x05\x0a\x03\x08\x03\x10",  # does not decode: the connection fails
}


def _harness(mode: str, **kw) -> Harness:
    return Harness(twins=Twins(enabled=True, adds_given=C if mode == "c" else None), **kw)


def _encoded(entry_ids, high_priority=False):
    encoder = AddEncoder("v3", codec=fastpath.selected().codec)
    return [encoder.encode(9, e, KEY, entry(9, e, b"p%d" % e), high_priority=high_priority) for e in entry_ids]


def _outcome(result):
    return result if result is None else type(result).__name__


def run(mode: str, answers, close_after, raise_at, n: int = 5):
    h = _harness(mode, add_timeout=3.0)
    proto, t = h.connected()
    got = []

    def on_done(ctx, slot, bookie_id, error):
        got.append((ctx.entry_id, slot, bookie_id, _outcome(error)))  # ctx: the add
        if len(got) == close_after:
            h.conn.close()
        if len(got) == raise_at:
            raise RuntimeError("a callback's bug")

    adds = _encoded(range(n))
    h.conn.add_run(adds, [e % 2 for e in range(n)], on_done)
    wire = t.value()
    reqs = v3_requests(t)
    proto.dataReceived(b"".join(KINDS[kind](reqs[i]) for i, kind in answers))
    tables = h.conn.requests
    left = (
        [(r.key, r.ids, r.state, r.what) for r in tables.sent],
        sorted(tables.v3_pending),
        len(tables.v3_fast),
        h.conn.connected,
        [d.getTime() for d in h.delayed_but_close_grace()],
    )
    h.reactor.advance(3.0)  # what is left times out alike
    return wire, got, left


@c_twins.needs_c(C, "bkctl.wire.client._addpath")
@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.sampled_from(sorted(KINDS))), max_size=8),
    st.none() | st.integers(1, 4),
    st.none() | st.integers(1, 4),
)
def test_the_c_twin_and_the_python_path_agree(answers, close_after, raise_at):
    assert run("c", answers, close_after, raise_at) == run("python", answers, close_after, raise_at)


@pytest.mark.parametrize("mode", MODES)
def test_a_run_of_copies_is_answered_in_order_and_leaves_nothing(mode):
    h = _harness(mode)
    proto, t = h.connected()
    got = []
    adds = _encoded(range(4))
    h.conn.add_run(adds, [0] * 4, lambda *a: got.append(a))
    assert h.conn.outstanding == 4 and len(h.delayed_but_close_grace()) == 1
    proto.dataReceived(b"".join(v3_reply(r) for r in v3_requests(t)))
    assert got == [(adds[e], 0, h.conn.bookie_id, None) for e in range(4)]  # each reported with itself
    tables = h.conn.requests
    assert not tables.sent and not tables.v3_pending and not tables.v3_fast
    assert h.delayed_but_close_grace() == []  # the deadline's timer went with the last answer


@pytest.mark.parametrize("mode", MODES)
def test_a_raising_callback_is_logged_and_the_chunk_goes_on(mode, caplog):
    h = _harness(mode)
    proto, t = h.connected()
    got = []

    def on_done(ctx, slot, bookie_id, error):
        got.append(ctx.entry_id)
        if ctx.entry_id == 1:
            raise ValueError("boom")

    h.conn.add_run(_encoded(range(3)), [0] * 3, on_done)
    with caplog.at_level(logging.ERROR, logger="bkctl.wire.client.requests"):
        proto.dataReceived(b"".join(v3_reply(r) for r in v3_requests(t)))
    assert got == [0, 1, 2]
    (record,) = caplog.records
    assert "completion of ADD ledger 9 entry 1 raised" in record.getMessage() and record.exc_info[0] is ValueError


@pytest.mark.parametrize("mode", MODES)
def test_queued_requests_get_the_room_an_answer_frees_before_its_callback(mode):
    """An answer frees a slot on the wire: what waits in the queue goes out before the
    callback adds more (which then queue behind it), as the general path orders them."""
    h = _harness(mode, max_outstanding=2)
    proto, t = h.connected()
    order = []
    first = _encoded((0, 1))
    h.conn.add_run(first, [0, 0], lambda ctx, *a: order.append(("done", ctx.entry_id)))
    waiting = _encoded((2,))[0]
    h.conn.add_run([waiting], [0], lambda ctx, *a: order.append(("done", ctx.entry_id)))
    assert h.conn.queued == 1
    reqs = v3_requests(t)
    proto.dataReceived(v3_reply(reqs[0]))
    assert order == [("done", 0)] and h.conn.queued == 0
    sent = v3_requests(t)
    assert [r.addRequest.entryId for r in sent] == [0, 1, 2]


@pytest.mark.parametrize("mode", MODES)
def test_a_high_priority_or_a_v2_encoding_is_built_the_general_way_in_the_run(mode):
    """Copies the C twin does not write (high priority, an encoding for v2) come from the
    Python builder, in their place in the run, with the same bytes as sent one by one."""
    one, run_h = _harness(mode), _harness(mode)
    (_p1, t1), (_p2, t2) = one.connected(), run_h.connected()
    adds = (
        _encoded((1,))
        + _encoded((2,), high_priority=True)
        + [AddEncoder("v2", codec=fastpath.selected().codec).encode(9, 3, KEY, entry(9, 3))]
    )
    adds += _encoded((4,))
    for add in adds:
        one.conn.add_run([add], [0], lambda *a: None)
    run_h.conn.add_run(adds, [0] * 4, lambda *a: None)
    assert t1.value() == t2.value()
    assert [r.key for r in run_h.conn.requests.sent] == [2, 3, 4, 5]


@c_twins.needs_c(C, "bkctl.wire.client._addpath")
def test_the_c_copy_keeps_to_the_request_interface():
    h = _harness("c")
    h.connected()
    (add,) = _encoded((7,))
    h.conn.add_run([add], [1], lambda *a: None)
    (req,) = h.conn.requests.sent
    assert (req.ctx, req.slot) == (add, 1)  # the add is its copy's ctx
    assert type(req).__name__ == "AddCopy"
    assert (req.ids, req.what, req.verb, req.is_batch, req.deferred, req.frame) == (
        (9, 7),
        "ADD ledger 9 entry 7",
        "ADD",
        False,
        None,
        b"",
    )
    with pytest.raises(TypeError):
        req.deferred = object()
    got = []
    req.complete("b", RuntimeError("x"))
    req.callback_to(lambda *a: got.append(a), "c2", 0)
    req.complete("b", None)
    assert got == [("c2", 0, "b", None)]
    with pytest.raises(TypeError):
        C.add_copies((), [], None, iter(()), None, None)
    with pytest.raises(TypeError):
        C.take_adds([], 0, {}, {}, [], None, deque(), print, "b")


@pytest.mark.parametrize("mode", MODES)
def test_an_add_queued_behind_a_full_wire_keeps_its_encoding(mode):
    """A copy that waits for room goes out with the bytes it would have had at once, and
    its answer is matched as any fast-path copy's (no general request built for it)."""
    queued, direct = _harness(mode, max_outstanding=1), _harness(mode, max_outstanding=2)
    (p1, t1), (_p2, t2) = queued.connected(), direct.connected()
    adds = _encoded((0, 1))
    got = []
    queued.conn.add_run(adds, [0, 0], lambda ctx, *a: got.append(ctx.entry_id))  # room for one: the other waits
    assert queued.conn.queued == 1
    direct.conn.add_run(adds, [0, 0], lambda *a: None)
    (first,) = v3_requests(t1)
    p1.dataReceived(v3_reply(first))
    assert t1.value() == t2.value()  # the queued copy went out as the direct one did
    second = v3_requests(t1)[1]
    p1.dataReceived(v3_reply(second))
    assert got == [0, 1] and not queued.conn.requests.sent and not queued.conn.requests.v3_fast


@c_twins.needs_c(WRITER, "bkctl.wire.client._addentries")
@c_twins.needs_c(CODEC.c, "bkctl.wire.codecs._fastcodec")
@pytest.mark.parametrize("recovery", [False, True])
def test_an_entry_is_its_pending_add_and_its_encoded_add(recovery):
    """_addentries.Entry (made by Entries) reads as PendingAdd and EncodedAdd do, and reassigns a copy as
    PendingAdd does."""
    from bkctl.wire.client.pending_add import PendingAdd

    body = CODEC.crc32c_package(9, 4, 3, 17, b"p")  # entry 4 of ledger 9, LAC 3, length 17
    d = object()
    e = WRITER.Entries(CODEC.crc32c_package, CODEC.add_part, 9, KEY, recovery)(4, 3, 17, b"p", d)
    p = PendingAdd(9, 4, KEY, body, recovery, 17, d)  # type: ignore[arg-type]
    encoded = AddEncoder("v3", codec=fastpath.selected().codec).encode(9, 4, KEY, body, recovery, recovery)
    assert (e.bookies, e.acked, e.acks) == (None, 0, 0) and e.deferred is d
    for name in ("entry_id", "body", "length", "deferred"):
        assert getattr(e, name) == getattr(p, name)
    for name in ("ledger_id", "entry_id", "master_key", "body", "recovery", "high_priority", "v3_part", "v3_tail"):
        assert getattr(e, name) == getattr(encoded, name), name
    assert e.v2_frame is None
    for x in (e, p):
        x.bookies = ("a", "b", "c")
        x.acked, x.acks = 0b101, 2
        x.reassign(2, "d")
        x.reassign(1, "e")
    assert (e.bookies, e.acked, e.acks) == (p.bookies, p.acked, p.acks) == (["a", "e", "d"], 0b001, 1)
    e.deferred = None
    assert e.deferred is None


@c_twins.needs_c(WRITER, "bkctl.wire.client._addentries")
@c_twins.needs_c(CODEC.c, "bkctl.wire.codecs._fastcodec")
def test_entries_pass_the_errors_of_package_and_add_part_on():
    """Entries (both twins) make an entry of what package and add_part give, whole (the twins of
    the client's codecs hand what their C ones do not cover to their Python ones), and pass their
    errors on."""
    from bkctl.wire.client.pending_add import Entries

    def refuse(*args):
        raise ValueError("refused")

    packaged = lambda *args: b"body"  # noqa: E731
    for twin in (WRITER.Entries, Entries):
        with pytest.raises(ValueError, match="refused"):
            twin(refuse, CODEC.add_part, 9, KEY, False)(4, 3, 17, b"p", None)
        with pytest.raises(ValueError, match="refused"):
            twin(packaged, refuse, 9, KEY, False)(4, 3, 17, b"p", None)
        with pytest.raises((TypeError, ValueError)):
            twin(packaged, lambda *args: b"not parts", 9, KEY, False)(4, 3, 17, b"p", None)
    # a key the C codecs do not write by hand (128 bytes and more): their Python twins take it, alike
    long_key = b"k" * 130
    e = WRITER.Entries(CODEC.crc32c_package, CODEC.add_part, 9, long_key, False)(4, 3, 17, b"p", None)
    python = codec_twins.PYTHON
    p = Entries(python.crc32c_package, python.add_part, 9, long_key, False)(4, 3, 17, b"p", None)
    assert (e.body, e.v3_part, e.v3_tail) == (p.body, p.v3_part, p.v3_tail)


@pytest.mark.parametrize("recovery", [False, True])
def test_the_python_entries_are_pending_adds_encoded_at_once(recovery):
    """pending_add.Entries, the Python twin of _addentries.Entries: a PendingAdd packaged by
    package, its own EncodedAdd as the writer's encoder makes it."""
    from bkctl.wire.client.pending_add import Entries

    python = codec_twins.PYTHON
    body = python.crc32c_package(9, 4, 3, 17, b"p")
    d = object()
    p = Entries(python.crc32c_package, python.add_part, 9, KEY, recovery)(4, 3, 17, b"p", d)
    encoded = AddEncoder("v3", codec=python).encode(9, 4, KEY, body, recovery, recovery)
    assert (p.entry_id, p.body, p.length, p.deferred, p.bookies, p.acked, p.acks) == (4, body, 17, d, None, 0, 0)
    for name in ("ledger_id", "entry_id", "master_key", "body", "recovery", "high_priority", "v3_part", "v3_tail"):
        assert getattr(p, name) == getattr(encoded, name), name
    assert p.v2_frame is None and isinstance(p, EncodedAdd)
