"""A fake bookie for the ledger layer: a :class:`FakeConnection` implements the
client's BookieChannel (checked against it by tests/unit/test_client_channel.py)
with Deferreds the test fires by hand, or from an in-memory entry map; a
:class:`FakePool` hands one out per bookie id."""
from __future__ import annotations

import struct

from twisted.internet import defer, task

from bkctl.wire.client.errors import (
    BatchReadUnsupported,
    BookieTimeout,
    BookieUnavailable,
    LedgerFencedError,
    NoSuchEntry,
    NoSuchLedgerOnBookie,
    Unauthorized,
)
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.protocol import Flag


def header(body: bytes):
    """(ledger, entry, lac, length) of a packaged entry."""
    return struct.unpack_from(">qqqq", body)


class FakeConnection:
    """One bookie.  ``auto``: adds are stored and acknowledged at once and
    reads answer from the store; otherwise every add waits for the test."""

    def __init__(self, bookie_id: str, clock: task.Clock | None = None, add_timeout: float | None = None):
        self.bookie_id = bookie_id
        self.auto = False
        self.down = False
        self.clock = clock
        self.add_timeout = add_timeout
        self.adds: dict[int, list[defer.Deferred]] = {}
        self.sent: list[tuple[int, bytes, bool]] = []  # (entry_id, body, recovery)
        self.stored: dict[tuple[int, int], bytes] = {}
        self.fenced: set[int] = set()
        self.keys: dict[int, bytes] = {}
        self.reads: list[tuple[int, int, bool]] = []
        self.lacs: list[tuple[int, int, bytes, bytes]] = []  # WRITE_LACs taken
        self.batch_reads: list[tuple[int, int, int]] = []  # (ledger, first, max_count)
        self.no_batch = False
        self.batch_limit = 1 << 30
        self.polls: list[tuple[int, int, defer.Deferred]] = []  # long polls waiting: (ledger, previous, d)

    def _unavailable(self, what):
        return defer.fail(BookieUnavailable(f"{what}: bookie {self.bookie_id} is down", bookie=self.bookie_id))

    def add(self, ledger_id, entry_id, master_key, body, *, recovery=False, high_priority=False,
            deferred_sync=False):
        self.sent.append((entry_id, body, recovery))
        if self.down:
            return self._unavailable(f"ADD {entry_id}")
        if self.auto:
            if ledger_id in self.keys and self.keys[ledger_id] != master_key:
                return defer.fail(Unauthorized("EUA", bookie=self.bookie_id))
            if ledger_id in self.fenced and not recovery:
                return defer.fail(LedgerFencedError("EFENCED", bookie=self.bookie_id))
            self.keys.setdefault(ledger_id, master_key)
            self.stored[(ledger_id, entry_id)] = body
            self.answer_polls()
            return defer.succeed(None)
        d = defer.Deferred()
        self.adds.setdefault(entry_id, []).append(d)
        if self.clock is not None and self.add_timeout:
            call = self.clock.callLater(self.add_timeout, self._timeout, d, entry_id)
            d.addBoth(lambda r: (call.active() and call.cancel(), r)[1])
        return d

    def add_with_callback(self, ledger_id, entry_id, master_key, body, recovery, high_priority, on_done, ctx,
                          slot):
        """The channel's add as the ledger layer calls it (BookieChannel); the
        outcome goes to ``on_done`` as BookieConnection reports it."""
        d = self.add(ledger_id, entry_id, master_key, body, recovery=recovery, high_priority=high_priority)
        d.addCallbacks(lambda _: on_done(ctx, slot, self.bookie_id, None),
                       lambda f: on_done(ctx, slot, self.bookie_id, f.value))

    def add_encoded(self, add, on_done, ctx, slot):
        """The writer's fast-path add (BookieChannel): the shared bytes are
        taken apart as a bookie would (v3 with a txnId of this connection,
        v2 as they are), then it is an add like any other."""
        if add.v3_part is not None:
            head, _answer_head = v3.add_header_fields(7, add.high_priority)
            req = v3.parse_request(head + add.v3_part)
            inner = req.addRequest
            ids, key, body = (inner.ledgerId, inner.entryId), inner.masterKey, inner.body
            recovery = v3.is_recovery_add(req)
            high_priority = v3.is_high_priority(req)
        else:
            req = v2.decode_request(add.v2_frame[4:])
            (ids, key, body) = ((req.ledger_id, req.entry_id), req.master_key, req.body)
            recovery = bool(req.flags & Flag.RECOVERY_ADD)
            high_priority = bool(req.flags & Flag.HIGH_PRIORITY)
        assert ids == (add.ledger_id, add.entry_id) and body == add.body
        assert (recovery, high_priority) == (add.recovery, add.high_priority)
        self.add_with_callback(ids[0], ids[1], key, body, recovery, high_priority, on_done, ctx, slot)

    def _timeout(self, d, entry_id):
        if not d.called:
            d.errback(BookieTimeout(f"ADD {entry_id}: timeout", bookie=self.bookie_id))

    def ack(self, entry_id):
        self.adds[entry_id].pop(0).callback(None)

    def fail(self, entry_id, exc):
        self.adds[entry_id].pop(0).errback(exc)

    def outstanding(self, entry_id) -> int:
        return sum(1 for d in self.adds.get(entry_id, []) if not d.called)

    def read(self, ledger_id, entry_id, *, fence_master_key=None, high_priority=False):
        self.reads.append((ledger_id, entry_id, fence_master_key is not None))
        if self.down:
            return self._unavailable(f"READ {entry_id}")
        if fence_master_key is not None:
            if ledger_id in self.keys and self.keys[ledger_id] != fence_master_key:
                return defer.fail(Unauthorized("EUA", bookie=self.bookie_id))
            self.fenced.add(ledger_id)
        mine = {e: body for (lid, e), body in self.stored.items() if lid == ledger_id}
        if not mine:
            return defer.fail(NoSuchLedgerOnBookie("ENOLEDGER", bookie=self.bookie_id))
        if entry_id == -1:
            return defer.succeed(mine[max(mine)])
        if entry_id not in mine:
            return defer.fail(NoSuchEntry("ENOENTRY", bookie=self.bookie_id))
        return defer.succeed(mine[entry_id])

    def read_with_callback(self, ledger_id, entry_id, on_done, ctx, slot):
        """The channel's plain read as the ledger layer calls it (BookieChannel);
        the outcome goes to ``on_done`` as BookieConnection reports it."""
        d = self.read(ledger_id, entry_id)
        d.addCallbacks(lambda body: on_done(ctx, slot, self.bookie_id, body),
                       lambda f: on_done(ctx, slot, self.bookie_id, f.value))

    def batch_read(self, ledger_id, start_entry_id, max_count, max_size, *, fence_master_key=None):
        """Consecutive stored entries from ``first``, like a 4.17 bookie (``batch_limit``
        stands for its byte budget; ``no_batch``: a bookie that cannot batch-read)."""
        first = start_entry_id
        self.batch_reads.append((ledger_id, first, max_count))
        if self.down:
            return self._unavailable(f"BATCH_READ {first}")
        if self.no_batch:
            return defer.fail(BatchReadUnsupported("closed on BATCH_READ", bookie=self.bookie_id))
        mine = {e: body for (lid, e), body in self.stored.items() if lid == ledger_id}
        if not mine:
            return defer.fail(NoSuchLedgerOnBookie("ENOLEDGER", bookie=self.bookie_id))
        if first not in mine:
            return defer.fail(NoSuchEntry("ENOENTRY", bookie=self.bookie_id))
        out = []
        while first + len(out) in mine and len(out) < min(max_count, self.batch_limit):
            out.append(mine[first + len(out)])
        return defer.succeed(out)

    def lac(self, ledger_id) -> int:
        """The highest LAC piggybacked on the entries stored here (-1: none)."""
        return max((header(body)[2] for (lid, _), body in self.stored.items() if lid == ledger_id), default=-1)

    def read_long_poll(self, ledger_id, previous_lac, timeout_ms, piggyback=True):
        """A v3 long poll, answered (with the next entry when stored here) once
        this bookie's LAC passes ``previous_lac``, or by :meth:`answer_polls`
        with ``expire``."""
        if self.down:
            return self._unavailable("long-poll READ")
        if not any(lid == ledger_id for lid, _ in self.stored):  # as a bookie that never heard of it
            return defer.fail(NoSuchLedgerOnBookie("ENOLEDGER", bookie=self.bookie_id))
        d = defer.Deferred()
        self.polls.append((ledger_id, previous_lac, d))
        self.answer_polls()
        return d

    def answer_polls(self, expire=False):
        waiting, self.polls = self.polls, []
        for ledger_id, previous, d in waiting:
            if d.called:  # cancelled
                continue
            lac = self.lac(ledger_id)
            if lac > previous:
                body = self.stored.get((ledger_id, previous + 1))
                d.callback((lac, None if body is None else previous + 1, body))
            elif expire:
                d.callback((lac, None, None))
            else:
                self.polls.append((ledger_id, previous, d))

    def write_lac(self, ledger_id, lac, master_key, body):
        if self.down:
            return self._unavailable("WRITE_LAC")
        self.lacs.append((ledger_id, lac, master_key, body))
        return defer.succeed(None)

    def read_lac(self, ledger_id):
        if self.down:
            return self._unavailable("READ_LAC")
        mine = {e: body for (lid, e), body in self.stored.items() if lid == ledger_id}
        if not mine:
            return defer.fail(NoSuchEntry("ENOENTRY", bookie=self.bookie_id))
        return defer.succeed((None, mine[max(mine)]))


class FakePool:
    def __init__(self, clock=None, add_timeout=None):
        self.conns: dict[str, FakeConnection] = {}
        self.clock = clock
        self.add_timeout = add_timeout
        self.closed = False

    def get(self, bookie_id):
        if self.closed:
            raise RuntimeError("closed")
        if bookie_id not in self.conns:
            self.conns[bookie_id] = FakeConnection(bookie_id, self.clock, self.add_timeout)
        return self.conns[bookie_id]

    __getitem__ = get

    def close(self):
        self.closed = True
        return defer.succeed(None)
