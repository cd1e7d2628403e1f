"""A fake bookie for the ledger layer: a :class:`FakeConnection` is a
:class:`~bkctl.wire.client.channel.BookieChannel` to one in-memory bookie, and
answers as a real bookied does -- the same behavioural suite runs on both
(tests/integration/test_bookie_channel_conformance.py).  Beyond a bookie it lets
the test hold adds and answer them by hand, take the bookie down and look at
what it was sent.  A :class:`FakePool` hands out one per bookie id."""

from __future__ import annotations

import struct

from twisted.internet import defer, task

from bkctl.wire.client.cork import Cork
from bkctl.wire.client.entry_requests import check_master_key
from bkctl.wire.client.errors import (
    BatchReadUnsupported,
    BookieTimeout,
    BookieUnavailable,
    NotSupported,
    error_for,
)
from bkctl.wire.codecs import v2, v3, v3_fast
from bkctl.wire.codecs.protocol import RC, Flag

__all__ = ["FakeConnection", "FakePool", "header"]

_IDS = struct.Struct(">qq")


def header(body: bytes):
    """(ledger, entry, lac, length) of a packaged entry."""
    return struct.unpack_from(">qqqq", body)


def _lac_of(body: bytes) -> int:
    """The LAC an entry carries (bytes 16-24 of a packaged entry), as a bookie reads it."""
    return struct.unpack_from(">q", body, 16)[0] if len(body) >= 24 else -1


class FakeConnection:
    """One bookie, as bookied answers: the first master key a ledger is
    written (or fenced) with is its key, a fenced ledger takes recovery adds
    only, a read of a ledger the bookie never heard of is ENOLEDGER and of an
    entry it lacks ENOENTRY, the LAC is the highest one the entries and
    WRITE_LACs carried, a long poll waits (on ``clock``, when given) until
    the LAC passes or its time is up, and ``protocol`` limits the requests as
    the real connection does (v2: no LAC requests or long polls; v3: no
    batch reads).

    For the test: ``auto`` False holds every add until :meth:`ack` (which
    stores it, as the bookie would) or :meth:`fail`, failing it with a
    timeout after ``add_timeout`` on ``clock``; ``down`` makes every request
    fail as an unreachable bookie's does; ``sent``, ``reads``, ``lacs``,
    ``batch_reads`` and ``polls`` show what it was asked; ``no_batch`` is an
    older bookie that cannot batch-read and ``batch_limit`` caps the entries
    of a batch read (standing for a bookie's byte budget)."""

    def __init__(
        self, bookie_id: str, clock: task.Clock | None = None, add_timeout: float | None = None, protocol: str = "v3"
    ):
        self.bookie_id = bookie_id
        self.protocol = protocol
        self.auto = False
        self.down = False
        self.closed = False
        self.clock = clock
        self.add_timeout = add_timeout
        self.adds: dict[int, list[defer.Deferred]] = {}  # held adds by entry id
        self._held: dict[defer.Deferred, tuple[int, int, bytes]] = {}  # held add -> (ledger, entry, body)
        self.sent: list[tuple[int, bytes, bool]] = []  # (entry_id, body, recovery)
        self.stored: dict[tuple[int, int], bytes] = {}
        self.fenced: set[int] = set()
        self.keys: dict[int, bytes] = {}
        self.explicit_lacs: dict[int, bytes] = {}  # the last WRITE_LAC body of each ledger
        self.connects = 0  # calls of connect() (a client connecting up front)
        self.connected = False  # (never: a connection up front is not made here)
        self._written_lacs: dict[int, int] = {}  # the highest LAC a WRITE_LAC carried
        self.reads: list[tuple[int, int, bool]] = []
        self.lacs: list[tuple[int, int, bytes, bytes]] = []  # WRITE_LACs taken
        self.batch_reads: list[tuple[int, int, int]] = []  # (ledger, first, max_count)
        self.no_batch = False
        self.batch_limit = 1 << 30
        self.polls: list[tuple[int, int, defer.Deferred]] = []  # long polls waiting: (ledger, previous, d)
        self._poll_state: dict[defer.Deferred, tuple[bool, object]] = {}  # d -> (piggyback, expiry timer)

    # -- the bookie -----------------------------------------------------------

    def connect(self) -> None:
        self.connects += 1

    def _error(self, rc: int, what: str) -> defer.Deferred:
        return defer.fail(error_for(rc, self.bookie_id, what))

    def _refused(self, what: str) -> defer.Deferred | None:
        """A failed Deferred when the bookie cannot be reached, else None."""
        if self.closed:
            return defer.fail(
                BookieUnavailable(f"{what}: connection to bookie {self.bookie_id} is closed", bookie=self.bookie_id)
            )
        if self.down:
            return defer.fail(BookieUnavailable(f"{what}: bookie {self.bookie_id} is down", bookie=self.bookie_id))
        return None

    def _unsupported(self, what: str) -> defer.Deferred:
        return defer.fail(
            NotSupported(
                f"{what}: not available over protocol {self.protocol} (bookie {self.bookie_id})", bookie=self.bookie_id
            )
        )

    def _known(self, ledger_id: int) -> bool:
        """The bookie has heard of the ledger: it has its key or entries of it."""
        return ledger_id in self.keys or any(lid == ledger_id for lid, _ in self.stored)

    def _key_ok(self, ledger_id: int, master_key: bytes) -> bool:
        """True when ``master_key`` is the ledger's; a ledger new here takes it."""
        known = self.keys.setdefault(ledger_id, bytes(master_key))
        return known == master_key

    def _entries(self, ledger_id: int) -> dict[int, bytes]:
        return {e: body for (lid, e), body in self.stored.items() if lid == ledger_id}

    def _fence_and_look(
        self, ledger_id: int, fence_master_key: bytes | None, what: str
    ) -> tuple[defer.Deferred | None, dict[int, bytes]]:
        """The start of a read: fence first (with ``fence_master_key``; a ledger
        new here takes it), then the ledger's entries; a failed Deferred instead
        for a wrong key or a ledger the bookie never heard of."""
        if fence_master_key is not None:
            if not self._key_ok(ledger_id, fence_master_key):
                return self._error(RC.EUA, what), {}
            self.fenced.add(ledger_id)
        if not self._known(ledger_id):
            return self._error(RC.ENOLEDGER, what), {}
        return None, self._entries(ledger_id)

    def _store(self, ledger_id: int, entry_id: int, body: bytes) -> None:
        self.stored[(ledger_id, entry_id)] = bytes(body)
        self.answer_polls()

    def lac(self, ledger_id) -> int:
        """The highest LAC the entries stored here and the WRITE_LACs taken carried (-1: none)."""
        piggybacked = max((_lac_of(body) for (lid, _), body in self.stored.items() if lid == ledger_id), default=-1)
        return max(piggybacked, self._written_lacs.get(ledger_id, -1))

    # -- adds -----------------------------------------------------------------

    def add(self, ledger_id, entry_id, master_key, body, *, recovery=False, high_priority=False, deferred_sync=False):
        check_master_key(master_key)
        what = f"ADD ledger {ledger_id} entry {entry_id}"
        if self.protocol == "v2":
            if deferred_sync:
                return self._unsupported(f"{what} with DEFERRED_SYNC")
            if len(body) < _IDS.size or _IDS.unpack_from(body) != (ledger_id, entry_id):
                raise ValueError("a v2 ADD body must start with the same ledger and entry ids")
        self.sent.append((entry_id, body, recovery))
        refused = self._refused(what)
        if refused is not None:
            return refused
        if self.auto:
            if not self._key_ok(ledger_id, master_key):
                return self._error(RC.EUA, what)
            if ledger_id in self.fenced and not recovery:
                return self._error(RC.EFENCED, what)
            self._store(ledger_id, entry_id, body)
            return defer.succeed(None)
        d = defer.Deferred()
        self.adds.setdefault(entry_id, []).append(d)
        self._held[d] = (ledger_id, entry_id, bytes(body))
        if self.clock is not None and self.add_timeout:
            call = self.clock.callLater(self.add_timeout, self._timeout, d, entry_id)
            d.addBoth(lambda r: (call.active() and call.cancel(), r)[1])
        return d

    def _add_with_callback(self, ledger_id, entry_id, master_key, body, recovery, high_priority, on_done, ctx, slot):
        """An add reported through ``on_done`` as BookieConnection reports it."""
        d = self.add(ledger_id, entry_id, master_key, body, recovery=recovery, high_priority=high_priority)
        d.addCallbacks(
            lambda _: on_done(ctx, slot, self.bookie_id, None), lambda f: on_done(ctx, slot, self.bookie_id, f.value)
        )

    def _add_encoded(self, add, on_done, ctx, slot):
        """One add of a run: the shared bytes are taken apart as a bookie would (v3 with a
        txnId of this connection, v2 as they are), then it is an add like any other."""
        if self.protocol == "v3" and add.v3_part is not None:
            head, _answer_head = v3_fast.add_header_fields(7, add.high_priority)
            req = v3.parse_request(head + add.v3_part)
            inner = req.addRequest
            ids, key, body = (inner.ledgerId, inner.entryId), inner.masterKey, inner.body
            recovery = v3.is_recovery_add(req)
            high_priority = v3.is_high_priority(req)
        elif self.protocol == "v2" and add.v2_frame is not None:
            req = v2.decode_request(add.v2_frame[4:])
            (ids, key, body) = ((req.ledger_id, req.entry_id), req.master_key, req.body)
            recovery = bool(req.flags & Flag.RECOVERY_ADD)
            high_priority = bool(req.flags & Flag.HIGH_PRIORITY)
        else:  # encoded for the other protocol, or of its fields only: built the general way
            ids, key, body = (add.ledger_id, add.entry_id), add.master_key, add.body
            recovery, high_priority = add.recovery, add.high_priority
        assert ids == (add.ledger_id, add.entry_id) and body == add.body
        assert (recovery, high_priority) == (add.recovery, add.high_priority)
        self._add_with_callback(ids[0], ids[1], key, body, recovery, high_priority, on_done, ctx, slot)

    def add_run(self, adds, slots, on_done):
        """The one way an add enters (BookieChannel): each, in order, reported with itself as ctx."""
        for add, slot in zip(adds, slots):
            self._add_encoded(add, on_done, add, slot)

    def _timeout(self, d, entry_id):
        if not d.called:
            self._held.pop(d, None)
            d.errback(BookieTimeout(f"ADD {entry_id}: timeout", bookie=self.bookie_id))

    def ack(self, entry_id):
        """The bookie acknowledges the oldest held add of ``entry_id``: it is stored."""
        d = self.adds[entry_id].pop(0)
        held = self._held.pop(d, None)
        if held is not None and not d.called:
            self._store(*held)
        d.callback(None)

    def fail(self, entry_id, exc):
        d = self.adds[entry_id].pop(0)
        self._held.pop(d, None)
        d.errback(exc)

    def outstanding(self, entry_id) -> int:
        return sum(1 for d in self.adds.get(entry_id, []) if not d.called)

    # -- reads ----------------------------------------------------------------

    def read(self, ledger_id, entry_id, *, fence_master_key=None, high_priority=False):
        what = f"READ ledger {ledger_id} entry {entry_id}"
        if fence_master_key is not None:
            check_master_key(fence_master_key)
            what += " (fencing)"
        self.reads.append((ledger_id, entry_id, fence_master_key is not None))
        refused = self._refused(what)
        if refused is not None:
            return refused
        refused, mine = self._fence_and_look(ledger_id, fence_master_key, what)
        if refused is not None:
            return refused
        if entry_id == -1:
            entry_id = max(mine, default=None)
        if entry_id not in mine:
            return self._error(RC.ENOENTRY, what)
        return defer.succeed(mine[entry_id])

    def read_with_callback(self, ledger_id, entry_id, on_done, ctx, slot):
        """The channel's plain read as the ledger layer calls it (BookieChannel);
        the outcome goes to ``on_done`` as BookieConnection reports it."""
        d = self.read(ledger_id, entry_id)
        d.addCallbacks(
            lambda body: on_done(ctx, slot, self.bookie_id, body), lambda f: on_done(ctx, slot, self.bookie_id, f.value)
        )

    def takes_reads(self, count):
        """Never: its reads answer at once, so the reader reads one by one (BookieChannel)."""
        return False

    def read_run(self, ledger_id, entry_ids, on_done):
        """:meth:`read_with_callback` of each (BookieChannel; unused while :meth:`takes_reads` says no)."""
        for entry_id in entry_ids:
            self.read_with_callback(ledger_id, entry_id, on_done, entry_id, 0)

    def batch_read(self, ledger_id, start_entry_id, max_count, max_size, *, fence_master_key=None):
        """Consecutive stored entries from ``start_entry_id``, as a 4.17 bookie gives them:
        the first one always, then up to ``max_count`` (<= 0: no limit), ``max_size``
        bytes and ``batch_limit``."""
        if fence_master_key is not None:
            check_master_key(fence_master_key)
        first = start_entry_id
        what = f"BATCH_READ ledger {ledger_id} from entry {first}"
        if self.protocol != "v2":
            return self._unsupported(what)
        self.batch_reads.append((ledger_id, first, max_count))
        refused = self._refused(what)
        if refused is not None:
            return refused
        if self.no_batch:
            return defer.fail(BatchReadUnsupported(f"{what}: closed on BATCH_READ", bookie=self.bookie_id))
        refused, mine = self._fence_and_look(ledger_id, fence_master_key, what)
        if refused is not None:
            return refused
        if first not in mine:
            return self._error(RC.ENOENTRY, what)
        out = [mine[first]]
        used = 4 + len(out[0])
        while (max_count <= 0 or len(out) < max_count) and len(out) < self.batch_limit:
            body = mine.get(first + len(out))
            if body is None or used + 4 + len(body) > max_size:
                break
            out.append(body)
            used += 4 + len(body)
        return defer.succeed(out)

    # -- LAC ------------------------------------------------------------------

    def read_long_poll(self, ledger_id, previous_lac, timeout_ms, piggyback=True):
        """A v3 long poll: answered at once when this bookie's LAC is past
        ``previous_lac`` (or ``timeout_ms`` is 0), else once it passes it, or
        when its time is up on ``clock`` (or :meth:`answer_polls` with ``expire``);
        with ``piggyback`` the answer carries entry ``previous_lac + 1`` when stored."""
        what = f"long-poll READ ledger {ledger_id} after LAC {previous_lac}"
        if self.protocol != "v3":
            return self._unsupported(what)
        if timeout_ms < 0:
            raise ValueError("timeout_ms must not be negative")
        refused = self._refused(what)
        if refused is not None:
            return refused
        if not self._known(ledger_id):  # as a bookie that never heard of it
            return self._error(RC.ENOLEDGER, what)
        d = defer.Deferred()
        timer = None
        if self.clock is not None and timeout_ms > 0:
            timer = self.clock.callLater(timeout_ms / 1000.0, self._expire, d)
        self._poll_state[d] = (piggyback, timer)
        self.polls.append((ledger_id, previous_lac, d))
        self.answer_polls(expire=timeout_ms == 0, only=d)
        return d

    def _expire(self, d: defer.Deferred) -> None:
        self.answer_polls(expire=True, only=d)

    def answer_polls(self, expire=False, only=None):
        """Answer the polls whose LAC has passed (with ``expire``: every one; with
        ``only``: that poll alone)."""
        waiting, self.polls = self.polls, []
        for ledger_id, previous, d in waiting:
            if d.called:  # cancelled
                self._poll_state.pop(d, None)
                continue
            if only is not None and d is not only:
                self.polls.append((ledger_id, previous, d))
                continue
            lac = self.lac(ledger_id)
            if lac > previous or expire:
                piggyback, timer = self._poll_state.pop(d, (True, None))
                if timer is not None and timer.active():
                    timer.cancel()
                body = self.stored.get((ledger_id, previous + 1)) if piggyback and lac > previous else None
                d.callback((lac, None if body is None else previous + 1, body))
            else:
                self.polls.append((ledger_id, previous, d))

    def write_lac(self, ledger_id, lac, master_key, body):
        check_master_key(master_key)
        what = f"WRITE_LAC ledger {ledger_id} lac {lac}"
        if self.protocol != "v3":
            return self._unsupported(what)
        refused = self._refused(what)
        if refused is not None:
            return refused
        self.lacs.append((ledger_id, lac, master_key, body))
        if not self._key_ok(ledger_id, master_key):
            return self._error(RC.EUA, what)
        self.explicit_lacs[ledger_id] = bytes(body)
        if lac > self._written_lacs.get(ledger_id, -1):
            self._written_lacs[ledger_id] = lac
        self.answer_polls()
        return defer.succeed(None)

    def read_lac(self, ledger_id):
        """READ_LAC: ``(the last WRITE_LAC body or None, the last entry or None)``;
        ENOENTRY when the bookie has neither."""
        what = f"READ_LAC ledger {ledger_id}"
        if self.protocol != "v3":
            return self._unsupported(what)
        refused = self._refused(what)
        if refused is not None:
            return refused
        mine = self._entries(ledger_id)
        last = mine[max(mine)] if mine else None
        explicit = self.explicit_lacs.get(ledger_id)
        if explicit is None and last is None:
            return self._error(RC.ENOENTRY, what)
        return defer.succeed((explicit, last))

    def entry_availability(self, ledger_id):
        """GET_LIST_OF_ENTRIES_OF_LEDGER: the encoded runs of the entries stored here;
        ENOLEDGER for a ledger the bookie has no entry of (bookied answers from its index)."""
        from bkctl.wire.codecs.availability import encode_availability

        what = f"GET_LIST_OF_ENTRIES_OF_LEDGER ledger {ledger_id}"
        if self.protocol != "v3":
            return self._unsupported(what)
        refused = self._refused(what)
        if refused is not None:
            return refused
        mine = self._entries(ledger_id)
        if not mine:
            return self._error(RC.ENOLEDGER, what)
        return defer.succeed(encode_availability(mine))

    # -- the connection -------------------------------------------------------

    def close(self) -> defer.Deferred:
        """Every request waiting here fails as the real connection's do, and
        every later one at once; fires (with None) when closed."""
        if self.closed:
            return defer.succeed(None)
        self.closed = True
        held = [d for ds in self.adds.values() for d in ds if not d.called]
        polls, self.polls = self.polls, []
        self._held.clear()
        for _ledger, _previous, d in polls:
            _piggyback, timer = self._poll_state.pop(d, (True, None))
            if timer is not None and timer.active():
                timer.cancel()
        for d in held + [d for _l, _p, d in polls if not d.called]:
            d.errback(BookieUnavailable(f"connection to bookie {self.bookie_id} closed", bookie=self.bookie_id))
        return defer.succeed(None)


class FakePool:
    """One :class:`FakeConnection` per bookie id (``protocol`` as the client's;
    ``auto``: each acknowledges adds at once, else it holds them)."""

    def __init__(self, clock=None, add_timeout=None, protocol: str = "v3", auto: bool = False):
        self.conns: dict[str, FakeConnection] = {}
        self.auto = auto
        self.clock = clock
        self.add_timeout = add_timeout
        self.protocol = protocol
        self.closed = False
        #: the bursts of this pool's connections, as a BookiePool's (wire/client/cork.py)
        self.cork = Cork()

    def get(self, bookie_id):
        if self.closed:
            raise RuntimeError("closed")
        if bookie_id not in self.conns:
            conn = self.conns[bookie_id] = FakeConnection(bookie_id, self.clock, self.add_timeout, self.protocol)
            conn.auto = self.auto
        return self.conns[bookie_id]

    __getitem__ = get

    def close(self):
        self.closed = True
        for conn in self.conns.values():
            conn.close()
        return defer.succeed(None)

    def with_protocol(self, protocol: str) -> FakePool:
        """A pool of ``protocol`` to the same fake bookies (BookiePool.with_protocol): its
        connections hold each bookie's entries, keys and fences, and are down when it is."""
        return _SiblingPool(self, protocol)


class _SiblingPool(FakePool):
    """:meth:`FakePool.with_protocol`'s pool: connections of their own (``no_batch``,
    ``batch_limit``, what they were asked) over the first pool's bookies."""

    def __init__(self, of: FakePool, protocol: str):
        super().__init__(of.clock, of.add_timeout, protocol, of.auto)
        self.of = of

    def get(self, bookie_id):
        known = bookie_id in self.conns
        conn = super().get(bookie_id)
        bookie = self.of.get(bookie_id)
        if not known:
            conn.stored, conn.keys, conn.fenced = bookie.stored, bookie.keys, bookie.fenced
        conn.down = bookie.down
        return conn
