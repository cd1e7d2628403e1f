"""bookied's connection parts on their own: the Outbox (a chunk's answers in one write, a journal
group's add answers held per connection) and the Throttle (a connection's side of the in-progress
limits), with Twisted's StringTransport and plain callables."""

import socket

import pytest
from twisted.internet import protocol, tcp
from twisted.internet.testing import MemoryReactor, StringTransport

from bkctl.bookied.in_progress import InProgressLimit, Throttle
from bkctl.bookied.outbox import STREAMED_ANSWERS, AnswerGroups, Outbox
from bkctl.wire.codecs.framing import frame


class CountingTransport(StringTransport):
    def __init__(self):
        super().__init__()
        self.writes = 0

    def write(self, data):
        self.writes += 1
        super().write(data)

    def writeSequence(self, seq):
        self.writes += 1
        super().writeSequence(seq)


def outbox(groups=None):
    box = Outbox(groups or AnswerGroups(), fastpaths=True)
    box.transport = CountingTransport()
    return box


def test_a_chunks_answers_go_out_in_one_write_and_in_order():
    box = outbox()
    assert box.hold() and not box.hold()  # held already: an inner serve does not release
    box.send(b"a")
    box.send_framed(frame(b"bc"))
    assert box.transport.value() == b""
    box.release()
    assert box.transport.value() == frame(b"a") + frame(b"bc") and box.transport.writes == 1


def test_a_long_chunk_streams_its_answers_every_streamed_answers_bytes():
    box = outbox()
    box.hold()
    big = b"x" * (STREAMED_ANSWERS // 2)
    box.send(big)
    assert box.transport.value() == b""
    box.send(big)  # past STREAMED_ANSWERS: what is held goes out now
    assert box.transport.value() == frame(big) * 2
    box.send(b"tail")
    box.release()
    assert box.transport.value() == frame(big) * 2 + frame(b"tail")


def test_a_groups_add_answers_are_held_per_connection_and_written_once():
    groups = AnswerGroups()
    one, two = outbox(groups), outbox(groups)

    def call_all(callbacks, error):
        for cb in callbacks:
            cb()

    groups.complete(
        [lambda: one.send_add_answers(b"1"), lambda: two.send_add_answers(b"2"), lambda: one.send_add_answers(b"3")],
        None,
        call_all,
    )
    assert (one.transport.value(), one.transport.writes) == (b"13", 1)
    assert (two.transport.value(), two.transport.writes) == (b"2", 1)
    assert groups.answered == set() and not groups.grouping


def test_a_closed_outbox_writes_nothing_and_is_forgotten_by_its_group():
    groups = AnswerGroups()
    box = outbox(groups)
    groups.grouping = True
    box.send_add_answers(b"held")
    box.close()
    groups.grouping = False
    groups.send()
    box.send(b"late")
    assert box.transport.value() == b"" and groups.answered == set() and box.stopped


def test_a_throttle_waits_for_a_place_and_is_woken_first_come_first_served():
    limit = InProgressLimit(1)
    log = []
    a = Throttle(limit, None, lambda: log.append("pause a"), lambda: log.append("resume a"))
    b = Throttle(limit, None, lambda: log.append("pause b"), lambda: log.append("resume b"))
    gone = Throttle(limit, None, lambda: log.append("pause gone"), lambda: log.append("resume gone"))
    assert a.limited and a.admit(limit) and a.take_gate() is limit
    assert not gone.admit(limit) and not b.admit(limit) and b.throttled
    gone.gone = True  # its connection went while it waited: a free place passes it by
    limit.finish()
    assert log == ["pause gone", "pause b", "resume b"] and not b.throttled and limit.count == 0


def test_a_place_a_request_did_not_use_is_given_back():
    limit = InProgressLimit(1)
    t = Throttle(None, limit, lambda: None, lambda: None)
    assert t.admit(t.reads) and limit.count == 1
    t.settle()  # answered without the bookie
    assert limit.count == 0 and t.gate is None
    assert t.admit(None) and t.gate is None  # a request of no limited kind


@pytest.mark.parametrize("fastpaths", [True, False], ids=["fast", "general"])
def test_a_streamed_piece_of_a_chunk_goes_to_the_kernel_while_the_chunk_is_served(fastpaths):
    """Over TCP, the answers held past STREAMED_ANSWERS reach the client before the chunk
    ends: with fast paths on in one send, the reactor never asked to poll the socket."""
    listener = socket.create_server(("127.0.0.1", 0))
    ours = socket.create_connection(listener.getsockname())
    peer, _ = listener.accept()
    listener.close()
    polled = []

    class Reactor(MemoryReactor):
        def addWriter(self, writer):  # noqa: N802 - Twisted's name
            polled.append(writer)  # an epoll_ctl on a real reactor
            super().addWriter(writer)

    reactor = Reactor()
    transport = tcp.Connection(ours, protocol.Protocol(), reactor)
    transport.connected = 1
    peer.settimeout(5)
    box = Outbox(AnswerGroups(), fastpaths=fastpaths)
    box.transport = transport
    try:
        box.hold()
        piece = b"x" * (STREAMED_ANSWERS // 2)
        box.send(piece)
        box.send(piece)  # past STREAMED_ANSWERS: these two go now
        box.send(b"tail")  # held until the chunk's end
        want = frame(piece) * 2
        got = b""
        while len(got) < len(want):
            got += peer.recv(len(want) - len(got))
        assert got == want
        assert transport.dataBuffer == b"" and not transport._tempDataBuffer
        assert transport not in reactor.getWriters()  # pushed (general) or never queued (fast)
        assert polled == ([] if fastpaths else [transport])
        box.release()
        if not fastpaths:
            transport.doWrite()  # the chunk's end: the reactor sends it
        assert peer.recv(100) == frame(b"tail")
    finally:
        ours.close()
        peer.close()
