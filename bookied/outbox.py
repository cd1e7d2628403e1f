"""Where a bookie connection's answers go: the one home of bookied's write batching.

A connection's answers reach its transport in three ways, all through its :class:`Outbox`:

* while the protocol serves a chunk of requests (one ``dataReceived``), the answers it gives
  at once are held and written together at the chunk's end (:meth:`Outbox.hold`,
  :meth:`Outbox.release`), every :data:`STREAMED_ANSWERS` bytes sooner;
* while a journal group's callbacks run (:meth:`AnswerGroups.complete`), the add answers of
  each connection are held and written once per connection at the group's end;
* an answer given outside both (a long poll, a read the store answered later) is written to
  the transport as Twisted does, and handed to the kernel at once when a group's answers are.

The bytes go through the transport's own ``write``/``writeSequence`` (its buffer, its
producer's pauses), except that a write into an empty buffer is sent at once
(:func:`~bkctl.wire.send_now.send_now`, a fast path): a transport only sends when the reactor
next polls it writable, one more loop iteration per group.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import abstract

from bkctl.wire.codecs.framing import frame
from bkctl.wire.send_now import send_now

__all__ = ["STREAMED_ANSWERS", "AnswerGroups", "Outbox"]

#: Bytes of answers after which those held are handed to the kernel at once, while the
#: rest of the chunk is served: the client starts on them meanwhile, where it waited
#: for the whole chunk (a window of 1,000 pipelined reads is milliseconds of a bookie's work).
STREAMED_ANSWERS = 16 * 1024


class AnswerGroups:
    """The bookie's journal groups as its connections see them (one per server factory):
    while :meth:`complete` runs a group's callbacks, add answers are held per connection;
    :meth:`send` writes them, once per connection."""

    __slots__ = ("grouping", "answered")

    def __init__(self) -> None:
        #: True while :meth:`complete` runs a group's callbacks: add answers are held per connection.
        self.grouping = False
        #: Outboxes that were written add answers since the last :meth:`send`.
        self.answered: set[Outbox] = set()

    def complete(self, callbacks: list, error, call_all) -> None:
        """Run a journal group's callbacks (``call_all(callbacks, error)``) and send
        their answers: each connection's add answers are joined and written once
        (a transport's write costs more than the append of a small answer, and a
        group answers hundreds of adds of a few connections), then sent now."""
        was = self.grouping
        self.grouping = True
        try:
            call_all(callbacks, error)
        finally:
            self.grouping = was
        if not was:
            self.send()

    def send(self) -> None:
        """Write the add answers held by :meth:`complete`, and hand every add answer
        written since the last call to the kernel now.

        The bookie calls this once a journal group's callbacks have run.  A transport
        only sends when the reactor next polls it writable -- one more loop iteration
        (an epoll round and a dispatch) per group, which at low load is a good part of
        an add's latency.  (A drained buffer may resume the protocol as a producer from
        here: it then serves what it held back.)"""
        answered, self.answered = self.answered, set()
        for outbox in answered:
            outbox.send_group()


class Outbox:
    """One connection's answers on their way to its transport (see the module)."""

    __slots__ = ("transport", "fastpaths", "groups", "closed", "paused", "held", "_chunk", "_chunk_bytes")

    def __init__(self, groups: AnswerGroups, fastpaths: bool) -> None:
        #: the connection's transport, once connected
        self.transport: Any = None
        #: whether writes into an empty buffer are sent at once (``send_now``)
        self.fastpaths = fastpaths
        self.groups = groups
        #: True once the connection is gone or being dropped: nothing more is written
        self.closed = False
        #: True while the transport's buffer is over its size: the client does not take its answers
        self.paused = False
        #: add answers of the journal group being completed, written together at its end
        self.held: list[bytes] = []
        #: while a chunk of requests is served: the answers to write at its end
        self._chunk: list[bytes] | None = None
        self._chunk_bytes = 0

    @property
    def stopped(self) -> bool:
        """Closed, or paused: a run of answers stops here (what is left is served later)."""
        return self.closed or self.paused

    def close(self) -> None:
        """The connection is gone: forget what is held."""
        self.closed = True
        self.held.clear()
        self.groups.answered.discard(self)

    # -- the answers of a chunk of requests ------------------------------------------
    def hold(self) -> bool:
        """Hold what is sent from now on until :meth:`release`; False when held already
        (the caller must then not release)."""
        if self._chunk is not None:
            return False
        self._chunk = []
        self._chunk_bytes = 0
        return True

    def release(self) -> None:
        """Write what was held since :meth:`hold`, in one write, sent at once if it can be."""
        out, self._chunk = self._chunk, None
        if out and not self.closed:
            send_now(self.transport, out[0] if len(out) == 1 else b"".join(out), self.fastpaths)

    def write_held(self) -> None:
        """Write the answers held since :meth:`hold` now, before what comes next
        (START_TLS: the clear answers before the handshake)."""
        if self._chunk:
            self.transport.writeSequence(self._chunk)
            self._chunk.clear()
            self._chunk_bytes = 0

    def send_held(self) -> None:
        """Send the answers held since :meth:`hold` now, while the rest of the chunk is
        served: with one ``send`` when the transport has nothing queued (:func:`send_now`;
        through the transport's buffer, the reactor told to poll the socket writable and
        then not, it took two ``epoll_ctl`` more a piece), else queued there (a client
        that does not read pauses us) and handed to the kernel."""
        out = self._chunk
        if out:
            data = out[0] if len(out) == 1 else b"".join(out)
            out.clear()
            self._chunk_bytes = 0
            if not send_now(self.transport, data, self.fastpaths):
                self.push()

    def send(self, payload: bytes) -> None:
        """Send an answer (a v2 or v3 payload: framed here)."""
        self.send_framed(frame(payload))

    def send_framed(self, data: bytes) -> None:
        """:meth:`send` of an answer already framed."""
        if not self.closed:
            out = self._chunk
            if out is None:
                self.transport.write(data)
            else:  # answering a chunk of requests: written together, at its end (release) or
                out.append(data)  # every STREAMED_ANSWERS bytes, sent at once
                self._chunk_bytes += len(data)
                if self._chunk_bytes >= STREAMED_ANSWERS:
                    self.send_held()

    # -- add answers, by journal group ----------------------------------------------
    def send_add_answers(self, data: bytes) -> None:
        """Write add answer(s): during a journal group's completion they are held,
        one write per connection at its end (:meth:`AnswerGroups.complete`)."""
        groups = self.groups
        if groups.grouping:
            held = self.held
            if not held:
                groups.answered.add(self)
            held.append(data)
        else:
            groups.answered.add(self)
            self.transport.write(data)

    def send_group(self) -> None:
        """Write the add answers held during a group, and hand what was written to the kernel now."""
        held = self.held
        if held:
            data = held[0] if len(held) == 1 else b"".join(held)
            held.clear()
            if self.closed:
                return
            if send_now(self.transport, data, self.fastpaths):
                return
        self.push()

    def push(self) -> None:
        """Hand what was written to the kernel now: a transport only sends when the
        reactor next polls it writable.  A transport that is closing is left to the
        reactor (its doWrite() result must reach the reactor to finish the close); a
        failed send stays queued, and the reactor's next doWrite sees it too."""
        t = self.transport
        if not self.closed and isinstance(t, abstract.FileDescriptor) and t.connected and not t.disconnecting:
            t.doWrite()
