"""Writing one ledger (Java's ``LedgerHandle`` and ``PendingEntryOp``).

:class:`LedgerHandle` adds entries:
* entry ``e`` goes to bookies ``(e + i) mod E`` of its segment's ensemble
  for ``i < Qw`` and is acknowledged after ``Qa`` of them answered;
* completions fire strictly in entry order, and the LAC piggybacked on
  each entry is the one known when it was packaged;
* at most ``max_inflight`` adds are outstanding.  Beyond that an add waits
  for room (:meth:`LedgerHandle.wait_writable`, :meth:`LedgerHandle.add_entries`
  give real back-pressure); at most ``max_waiting`` adds may wait, after
  which :class:`~bkctl.wire.client.errors.TooManyRequests` is raised.  With
  ``Qa < Qw`` entries complete without the slowest bookie of their write
  set; adds also wait while a bookie of the ensemble has ``max_inflight``
  writes unanswered, so a slow (not dead) bookie is not left with an
  unbounded backlog -- nor replaced because its connection's queue filled;
* a bookie that fails or times out is replaced (:mod:`.ensemble_change`): a new segment starting at
  the first unacknowledged entry is written to the metadata with
  compare-and-set (:mod:`.ledger_updates`), and every outstanding entry whose write set changed is
  sent to the replacement (acknowledgements from the replaced bookie no
  longer count).  Completions pause while the ensemble changes;
* a fenced ledger (EFENCED, or metadata found IN_RECOVERY/CLOSED by someone
  else) fails every outstanding add with
  :class:`~bkctl.wire.client.errors.LedgerFencedError` or
  :class:`LedgerClosedError`; a wrong password (EUA) fails them with
  :class:`~bkctl.wire.client.errors.Unauthorized`;
* :meth:`LedgerHandle.close` waits for the outstanding adds, then writes
  CLOSED with the last entry id and length by compare-and-set; :meth:`LedgerHandle.release`
  lets go of the ledger open (:mod:`.ledger_close`);
* with ``explicit_lac_interval`` (seconds; Java's ``explicitLacInterval``)
  a LAC the adds have not carried goes out as a WRITE_LAC (:mod:`.explicit_lac`);
* the fast path (:mod:`bkctl.wire.fastpath`): each entry is packaged (its
  digest) and encoded once for its whole write set
  (:class:`~bkctl.wire.codecs.add_frames.EncodedAdd`), each connection only
  adds its header; the adds of a burst (``add_entries``, or ``add_entry``
  calls made while a bookie's answers are handed out: the next adds of a
  pipelining writer) are sent at its end, each bookie its copies as one run
  (one call, one deadline, one registration pass) as far as its connection
  has room on the wire.  Off, each copy is encoded by its connection and sent on its own.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from bkctl.wire.codecs.add_frames import AddEncoder
from bkctl.wire.codecs.digest import DigestType
from bkctl.wire.codecs.protocol import DEFAULT_MAX_FRAME_SIZE
from bkctl.wire.metadata.ledger import LedgerMetadata

from .channel import BookieChannel
from .ensemble_change import EnsembleChange
from .errors import (
    ClientClosed,
    LedgerClosedError,
    LedgerFencedError,
    TooManyRequests,
    Unauthorized,
)
from .explicit_lac import ExplicitLac
from .ledger_close import LedgerClose
from .ledger_updates import write_closed
from .pending_add import EncodingEntries, PendingEntry
from .read_handle import ReadHandle
from .readable_ledger import StripeCursor

__all__ = ["LedgerHandle"]

log = logging.getLogger(__name__)

#: Room kept in a frame for the request envelope (v3 header, master key, ids).
_FRAME_OVERHEAD = 1024

_OPEN, _CLOSING, _CLOSED, _FAILED = "open", "closing", "closed", "failed"


# ----------------------------------------------------------------- writing


class LedgerHandle(ReadHandle):
    """Writes one ledger.  Made by ``BookKeeperClient.create_ledger`` and
    ``open_for_append``; recovery uses one internally (``recovery=True``:
    recovery adds, which fenced bookies still accept, and the close rules of a
    recoverer)."""

    def __init__(
        self,
        client: Any,
        ledger_id: int,
        metadata: LedgerMetadata,
        version: int,
        password: bytes,
        digest_type: DigestType,
        *,
        max_inflight: int | None = None,
        max_waiting: int | None = None,
        recovery: bool = False,
        on_close: Callable[[], Any] | None = None,
        explicit_lac_interval: float | None = None,
    ) -> None:
        super().__init__(client, ledger_id, metadata, version, password, digest_type)
        protocol = getattr(client, "protocol", "v3")
        if max_inflight is None:
            max_inflight = getattr(client, "max_inflight", 1000)
        if max_inflight < 1:
            raise ValueError("max_inflight must be >= 1")
        self.max_inflight = int(max_inflight)
        self.max_waiting = int(max_waiting if max_waiting is not None else self.max_inflight)
        self._refill = max(1, self.max_inflight // 8)
        self.recovery = recovery
        self._state = _OPEN
        self._error: BaseException | None = None
        self._next_entry_id = 0
        self._length = 0  # cumulative length of the last entry handed out
        self._confirmed_length: int | None = 0  # cumulative length at the LAC
        self._pending: deque[PendingEntry] = deque()
        self._waiting: deque[tuple[bytes, defer.Deferred[int]]] = deque()
        self._room_waiters: deque[defer.Deferred[None]] = deque()
        self._idle_waiters: list[defer.Deferred[None]] = []
        #: the bursts of the client's connections (:mod:`.cork`): a run of adds is one, and
        #: work is put off to the end of the one under way
        self._cork = client.pool.cork
        #: the fast path's adds started during the burst under way, not sent yet: they go out
        #: at its end (or once a run fills the room the bookies have), each bookie's copies
        #: as one run, as add_entries sends them (:meth:`_held_in_run`)
        self._run: list[PendingEntry] = []
        #: how many adds the run under way may hold (:meth:`_run_room`)
        self._run_room_left = 0
        #: whether the burst under way calls burst_ended for the run
        self._run_held = False
        #: the write sets of the stripe the adds are in
        self._add_stripe = StripeCursor(self)
        self._completing = False
        self._recheck = False
        #: the metadata's writes (ensemble changes, the close) one at a time
        md_lock = defer.DeferredLock()
        self.ensemble_changes = 0
        #: the largest payload an add takes (:attr:`max_entry_size`, read once: a frame's size is fixed)
        self._entry_limit = self.max_entry_size
        #: packages an entry, ``(ledger_id, entry_id, lac, length, payload)`` (the twin of the
        #: client's codecs in use for a CRC32C ledger: ``Twins.codec``)
        self._package = self.digest.packager(self.twins.codec)
        writer = self.twins.entries
        #: with fast paths on, a burst's adds are held for its end and go out as runs (:meth:`_held_in_run`)
        self._holds_runs = self.twins.enabled
        #: an entry that is its ADD encoded once for its whole write set (fast paths on: with the
        #: shared bytes, :class:`~bkctl.wire.codecs.add_frames.AddEncoder`; off: of its fields,
        #: which each connection builds the general way); an entry read back (recovery) is made by it too
        self._encoding = EncodingEntries(
            self._package,
            AddEncoder(protocol, self.twins.codec).fill if self.twins.enabled else None,
            ledger_id,
            self.master_key,
            recovery,
        )
        #: the one way an add is packaged: ``(entry_id, lac, length, payload, deferred)`` -> its
        #: PendingEntry, its own encoded ADD; over v3 with fast paths the twin in use
        #: (``Twins.entries.entries``), else ``_encoding``'s
        #: (its bound ``__call__``: a Python method called inline, not through the type's call slot)
        self._entries: Callable[[int, int, int, bytes, defer.Deferred[int] | None], PendingEntry] = (
            writer.entries(self._package, self.twins.codec.add_part, ledger_id, self.master_key, recovery)
            if self.twins.enabled and protocol == "v3"
            else self._encoding.__call__
        )
        #: the LAC told to the bookies outside the adds (WRITE_LAC; a recoverer never ticks)
        self._explicit = ExplicitLac(
            self,
            getattr(client, "explicit_lac_interval", 0.0) if explicit_lac_interval is None else explicit_lac_interval,
            recovery,
        )
        #: replaces the bookies that fail (completions pause while it runs: ``changing``)
        self._ensemble = EnsembleChange(
            self,
            md_lock,
            before=self._complete_held,
            changed=self._new_ensemble,
            failed=self._fail,
            after=self._ensemble_changed,
        )
        #: the bookies that failed for this ledger (the change's set: read on every copy sent)
        self._failed = self._ensemble.failed_bookies
        #: gives a run its write sets and encoded adds, grouped by bookie (:func:`~.pending_add.address_run`
        #: or its C twin: ``Twins.entries``)
        self._address_run = writer.address_run
        #: counts each copy's acknowledgement; called back by the connections, once per copy
        #: (:class:`~.acks.Acks`, or its C twin ``_addentries.Acks``: ``Twins.entries``), and
        #: reports to this handle (its :class:`~.acks.AckSink`).  It keeps each bookie's writes
        #: sent and not answered, completed entries included: with Qa < Qw a slow bookie falls
        #: behind, and adds wait while one of the ensemble is max_inflight writes behind (its
        #: backlog stays bounded: ``behind``); ``held``: completions are due at the burst's end
        self._acks = writer.acks(self, self.schedule.ack_quorum, self.max_inflight, self.max_inflight - self._refill)
        #: closes the ledger or lets go of it, then runs ``on_close``
        self._ending = LedgerClose(
            self,
            md_lock,
            self._explicit,
            on_close,
            stop_adding=self._stop_adding,
            write_closed=self._write_closed,
            closed=self._closed,
            fail=self._fail,
        )

    @property
    def max_entry_size(self) -> int:
        """The largest payload that fits in a bookie frame (nettyMaxFrameSizeBytes)."""
        frame = int(getattr(self.client, "max_frame_size", DEFAULT_MAX_FRAME_SIZE))
        return frame - _FRAME_OVERHEAD - 32 - self.digest.digest_length

    def read_lac(self) -> defer.Deferred[Any]:
        """A writer knows its LAC best: fires with it (the last entry once closed)."""
        return defer.succeed(self.metadata.last_entry_id if self.metadata.is_closed else self._lac)

    def refresh_metadata(self) -> defer.Deferred[Any]:
        """A writer's metadata only changes through the writer: fires with it."""
        return defer.succeed(self.metadata)

    def __repr__(self) -> str:
        return (
            f"<LedgerHandle ledger {self.ledger_id} {self._state} lac={self._lac}"
            f" next={self._next_entry_id} pending={len(self._pending)}>"
        )

    def resume_at(self, lac: int, length: int | None) -> None:
        """Continue after ``lac`` whose cumulative length is ``length``."""
        self._lac = lac
        self._next_entry_id = lac + 1
        self._confirmed_length = length
        self._length = length if length is not None else 0

    def confirm_length(self, length: int) -> None:
        """The cumulative length at the LAC is ``length`` (recovery read it back)."""
        self._confirmed_length = length
        self._length = length

    def drop_on_close(self) -> None:
        """Forget what was to run when the handle closes (its opener released it already)."""
        self._ending.on_close = None

    # -- state ------------------------------------------------------------------

    @property
    def state(self) -> str:
        """``open``, ``closing``, ``closed`` or ``failed``."""
        return self._state

    @property
    def error(self) -> BaseException | None:
        """Why the handle failed (state ``failed``), else None."""
        return self._error

    @property
    def next_entry_id(self) -> int:
        return self._next_entry_id

    @property
    def pending_adds(self) -> int:
        """Adds sent and not completed yet."""
        return len(self._pending)

    @property
    def waiting_adds(self) -> int:
        """Adds waiting for room in the pipeline."""
        return len(self._waiting)

    @property
    def length(self) -> int | None:
        if self.metadata.is_closed:
            return self.metadata.length
        return self._confirmed_length

    def _closed_error(self) -> BaseException:
        if self._state == _FAILED and self._error is not None:
            return self._error
        return LedgerClosedError(f"ledger {self.ledger_id} is closed")

    # -- adding -------------------------------------------------------------------

    def add_entry(self, payload: bytes) -> defer.Deferred[int]:
        """Fires with the entry id once ``Qa`` bookies stored the entry and
        every earlier entry completed."""
        if self._state != _OPEN:
            return defer.fail(self._closed_error())
        if type(payload) is not bytes:
            payload = bytes(payload)
        if len(payload) > self._entry_limit:
            return defer.fail(
                ValueError(
                    f"entry of {len(payload)} bytes is larger than the "
                    f"{self._entry_limit} bytes a bookie frame can carry"
                )
            )
        if self._waiting or len(self._pending) >= self.max_inflight or self._acks.behind:
            if len(self._waiting) >= self.max_waiting:
                return defer.fail(
                    TooManyRequests(
                        f"ledger {self.ledger_id}: {len(self._pending)} adds in flight and "
                        f"{len(self._waiting)} waiting; wait for completions (wait_writable) first"
                    )
                )
            d: defer.Deferred[int] = defer.Deferred()
            self._waiting.append((payload, d))  # started with this same Deferred once there is room
            return d
        d = defer.Deferred()
        self._start_add(payload, d)
        return d

    def writable(self) -> bool:
        """True when an add would be sent at once."""
        return (
            self._state == _OPEN
            and not self._waiting
            and len(self._pending) < self.max_inflight
            and not self._acks.behind
        )

    def wait_writable(self) -> defer.Deferred[None]:
        """Fires once adds would be sent at once again: at once if there is
        room, else when ``max_inflight // 8`` slots are free (so a producer
        refills the pipeline in bursts).  Fails if the handle fails or closes."""
        if self._state not in (_OPEN,):
            return defer.fail(self._closed_error())
        if self.writable():
            return defer.succeed(None)
        d: defer.Deferred[None] = defer.Deferred()
        self._room_waiters.append(d)
        return d

    def add_entries(self, payloads: Iterable[bytes]) -> defer.Deferred[int | None]:
        """Add every payload of an iterable, taking the next one only when
        there is room in the pipeline (memory stays bounded).  Fires with the
        last entry id (None for no payloads) once all completed; fails with
        the first error (later payloads are not taken)."""
        return defer.ensureDeferred(self._add_entries(payloads))

    async def _add_entries(self, payloads: Iterable[bytes]) -> int | None:
        # Entries added here get no Deferred of their own (completion is in
        # order, so watching the last one is enough; a failure fails the handle).
        limit = self.max_entry_size
        last: PendingEntry | None = None
        it = iter(payloads)
        exhausted = False
        while True:
            if self._state != _OPEN:
                raise self._closed_error()
            if not self.writable():
                await self.wait_writable()
                continue
            # a burst: its adds go out at its end, on the fast path each bookie's copies as
            # one run (_held_in_run, as for any add made during a burst)
            cork = self._cork
            holding = cork.hold()
            try:
                while self.writable():
                    try:
                        payload = bytes(next(it))
                    except StopIteration:
                        exhausted = True
                        break
                    if len(payload) > limit:
                        raise ValueError(
                            f"entry of {len(payload)} bytes is larger than the {limit} bytes a bookie frame can carry"
                        )
                    last = self._start_add(payload, None)
            finally:
                if holding:
                    cork.release()
            if exhausted:
                break
        if last is None:
            return None
        if self._lac >= last.entry_id:
            return last.entry_id
        if self._state == _FAILED:
            raise self._closed_error()  # the handle's error
        if last.deferred is None:
            last.deferred = defer.Deferred()
        return await last.deferred

    def _start_add(self, payload: bytes, deferred: defer.Deferred[int] | None) -> PendingEntry:
        """Package and send the next entry (during a burst: at its end, :meth:`_held_in_run`),
        which fires ``deferred`` once complete (None: nobody waits for this one)."""
        entry_id = self._next_entry_id
        self._next_entry_id = entry_id + 1
        lac = self._lac
        length = self._length = self._length + len(payload)
        self._explicit.piggybacked = lac
        p = self._entries(entry_id, lac, length, payload, deferred)
        self._pending.append(p)
        if self._ensemble.changing:
            return p  # sent once the ensemble changed (_resend)
        run = self._run
        if run:  # a run is being held for the burst's end: this add joins it (_held_in_run)
            run.append(p)
            if len(run) >= self._run_room_left:
                self._send_held_run()
        elif not self._holds_runs or not self._held_in_run(p):
            self._send(p)
        return p

    def _held_in_run(self, p: PendingEntry) -> bool:
        """During a burst (:mod:`.cork`: a chunk of answers handed out, whose callbacks
        add the next entries), hold ``p`` for the burst's end, when the adds started
        meanwhile go out together, each bookie's copies as one run (:meth:`_send_run`):
        what :meth:`add_entries` does, for every add.  A run is sent sooner once it holds
        as many adds as keep every bookie under ``max_inflight``.  False when no burst is
        under way: the caller sends ``p`` now."""
        run = self._run
        if not run:
            if not self._run_held:
                if not self._cork.finish_at_release(self):
                    return False
                self._run_held = True
            self._run_room_left = self._run_room()
        run.append(p)
        if len(run) >= self._run_room_left:
            self._send_held_run()
        return True

    def _send_held_run(self) -> None:
        """Send the adds :meth:`_held_in_run` held (those an ensemble change did not send already)."""
        run, self._run = self._run, []
        if run and self._state != _FAILED:
            self._send_run(run)  # address_run skips the entries an ensemble change sent already

    def add_packaged(self, entry_id: int, body: bytes, length: int) -> defer.Deferred[int]:
        """Re-write an entry read back (recovery): the bytes go out unchanged."""
        if entry_id != self._next_entry_id:
            raise AssertionError(f"entry {entry_id} added out of order (next is {self._next_entry_id})")
        self._next_entry_id += 1
        self._length = length
        d: defer.Deferred[int] = defer.Deferred()
        p = self._encoding.packaged(entry_id, body, length, d)
        self._pending.append(p)
        if not self._ensemble.changing:
            self._send(p)
        return d

    def _send(self, p: PendingEntry) -> None:
        """Give ``p`` its write set (no copy acknowledged yet) and send each copy to its bookie
        (:meth:`_send_slot` of each slot, inline: the general path's every entry goes this way)."""
        bookies = p.bookies = self._add_stripe.write_set(p.entry_id)
        p.acked = 0
        p.acks = 0
        failed = self._failed
        acks = self._acks
        pool = self.client.pool
        for slot in range(len(bookies)):
            if self._state == _FAILED:
                return
            bookie = p.bookies[slot]  # read anew: a refused copy's ensemble change may have reassigned it
            if bookie not in failed:  # else replaced by the ensemble change under way; sent then
                # :meth:`_send_copies` of the one copy, inline: the general path's every copy
                acks.sent(bookie, 1)
                try:
                    pool.get(bookie).add_run([p], [slot], acks)
                except Exception as exc:  # noqa: BLE001 - a closed pool or a bad argument: it did not go out
                    acks(p, slot, bookie, exc)

    def _run_room(self) -> int:
        """How many entries a run may hold: each puts at most one copy on a
        bookie, so this many keep every bookie of the ensemble under
        ``max_inflight`` unanswered writes, as sending them one by one would."""
        backlog = self._acks.backlog
        failed = self._failed
        most = max((backlog(b) for b in self.metadata.last_ensemble if b not in failed), default=0)
        return max(1, self.max_inflight - most)

    def _send_run(self, run: list[PendingEntry]) -> None:
        """:meth:`_send` of a burst's entries (the fast path): each bookie's copies go out in
        one call (``add_run``: as one run as far as its connection has room on the wire)."""
        if self._ensemble.changing:
            return  # sent once the ensemble changed (_resend)
        copies = self._address_run(run, self._add_stripe)  # {bookie: (entries, slots)}
        for bookie, (pendings, slots) in copies.items():
            if self._state == _FAILED:
                return
            if bookie not in self._failed:  # else replaced by the ensemble change under way; sent then
                self._send_copies(bookie, pendings, slots)

    def _send_slot(self, p: PendingEntry, slot: int) -> None:
        bookie = p.bookies[slot]  # type: ignore[index]  # addressed: it has its write set
        if bookie not in self._failed:  # else replaced by the ensemble change under way; sent then
            self._send_copies(bookie, [p], [slot])

    def _send_copies(self, bookie: str, pendings: list[PendingEntry], slots: list[int]) -> None:
        """Copies ``slots`` of ``pendings`` (each its own encoded ADD) to ``bookie`` through the
        one way an add enters its connection (``add_run``), which calls the counter back: no
        Deferred per copy."""
        self._acks.sent(bookie, len(pendings))
        try:
            conn: BookieChannel = self.client.pool.get(bookie)
            conn.add_run(pendings, slots, self._acks)
        except Exception as exc:  # noqa: BLE001 - a closed pool or a bad argument: before any copy went out
            for p, slot in zip(pendings, slots):
                self._acks(p, slot, bookie, exc)

    # -- what the acknowledgement counter reports (its :class:`~.acks.AckSink`) -----------

    def caught_up(self) -> None:
        """The last bookie that was behind caught up: start the adds that waited for it."""
        self._complete_ready()

    def quorum_reached(self, p: PendingEntry) -> bool:
        """``p`` has its ack quorum: when it heads the pipeline the ready adds complete, at the
        end of the burst under way if there is one (True: the counter's ``held``), else now."""
        pending = self._pending
        if not pending or pending[0] is not p:
            return False  # it completes when every earlier entry has
        if self._cork.finish_at_release(self):
            return True
        self._complete_ready()
        return False

    def burst_ended(self) -> None:
        """The burst ended (:class:`~.cork.FinishesBursts`): send the adds it started, then complete
        those it acknowledged."""
        self._run_held = False
        self._send_held_run()
        self._complete_held()

    def _complete_held(self) -> None:
        """Complete now the adds whose completion waits for the burst's end:
        before the handle fails or its ensemble changes, so that an add
        acknowledged before that completes as it would have at once."""
        acks = self._acks
        if acks.held:
            acks.held = False
            self._complete_ready()

    def copy_failed(self, exc: BaseException, p: PendingEntry, slot: int, bookie: str) -> None:
        """``bookie`` failed copy ``slot`` of ``p``: fail the handle, or replace the bookie."""
        if self._state in (_FAILED, _CLOSED):
            return
        if p.bookies is None or p.bookies[slot] != bookie:
            return  # stale: that slot went to another bookie already
        if self.client.closed:
            self._fail(ClientClosed(f"ledger {self.ledger_id}: the BookKeeper client was closed"))
        elif isinstance(exc, LedgerFencedError):
            self._fail(
                LedgerFencedError(
                    f"ledger {self.ledger_id} is fenced (another client is recovering or has recovered it); "
                    f"bookie {bookie} refused entry {p.entry_id}",
                    bookie=bookie,
                )
            )
        elif isinstance(exc, Unauthorized):
            explained = self.client.explain(exc)
            self._fail(
                explained
                if explained is not exc
                else Unauthorized(
                    f"ledger {self.ledger_id}: bookie {bookie} refused entry {p.entry_id}: wrong ledger "
                    f"password (master key) for a ledger it already has",
                    bookie=bookie,
                )
            )
        else:
            log.info(
                "ledger %d: bookie %s failed entry %d (%s); changing the ensemble",
                self.ledger_id,
                bookie,
                p.entry_id,
                exc,
            )
            self._bookie_failed(bookie, exc)

    # -- completion ------------------------------------------------------------------

    def _complete_ready(self) -> None:
        """Complete pending adds in entry order, start waiting adds, wake waiters."""
        if self._completing:
            self._recheck = True
            return
        self._completing = True
        try:
            self._recheck = True
            while self._recheck:
                self._recheck = False
                if self._state == _FAILED:
                    return
                qa = self.schedule.ack_quorum
                pending = self._pending
                explicit = self._explicit
                ensemble = self._ensemble
                while pending and not ensemble.changing:
                    p = pending[0]
                    if p.acks < qa:
                        break
                    pending.popleft()
                    self._lac = entry_id = p.entry_id
                    self._confirmed_length = p.length
                    if explicit.interval and self._state == _OPEN:
                        explicit.confirmed()
                    d = p.deferred
                    if d is not None:
                        d.callback(entry_id)
                        if self._state == _FAILED:
                            return
                while (
                    self._waiting
                    and len(self._pending) < self.max_inflight
                    and not self._acks.behind
                    and self._state in (_OPEN, _CLOSING)
                ):
                    payload, d = self._waiting.popleft()
                    self._start_add(payload, d)
                # Wake writers waiting for room only once a few slots are free,
                # so they refill the pipeline in bursts rather than one by one.
                while (
                    self._room_waiters
                    and self._state == _OPEN
                    and not self._waiting
                    and not self._acks.behind
                    and len(self._pending) <= self.max_inflight - self._refill
                ):
                    self._room_waiters.popleft().callback(None)
                if not self._pending and not self._waiting and self._idle_waiters:
                    waiters, self._idle_waiters = self._idle_waiters, []
                    for waiter in waiters:
                        waiter.callback(None)
        finally:
            self._completing = False

    def drain(self) -> defer.Deferred[None]:
        """Fires once nothing is pending or waiting; fails if the handle fails."""
        if self._state == _FAILED:
            return defer.fail(self._error)
        if not self._pending and not self._waiting:
            return defer.succeed(None)
        d: defer.Deferred[None] = defer.Deferred()
        self._idle_waiters.append(d)
        return d

    def _fail(self, error: BaseException) -> None:
        """The handle cannot go on: fail every outstanding and later add."""
        self._complete_held()
        if self._state in (_FAILED, _CLOSED):
            return
        log.info("ledger %d: failing outstanding adds: %s", self.ledger_id, error)
        self._state = _FAILED
        self._explicit.stop()
        self._error = error
        pending = list(self._pending)
        self._pending.clear()
        waiting, self._waiting = list(self._waiting), deque()
        rooms, self._room_waiters = list(self._room_waiters), deque()
        idle, self._idle_waiters = self._idle_waiters, []
        for p in pending:
            if p.deferred is not None:
                p.deferred.errback(Failure(error))
        for _payload, d in waiting:
            d.errback(Failure(error))
        for waiter in rooms + idle:
            waiter.errback(Failure(error))

    # -- ensemble change (:class:`~.ensemble_change.EnsembleChange`) ---------------------

    def _bookie_failed(self, bookie: str, cause: BaseException | None = None) -> None:
        if bookie not in self.metadata.last_ensemble:
            return
        self._acks.forget(bookie)  # it is being replaced: nothing to wait for
        self._ensemble.bookie_failed(bookie, cause)

    def _new_ensemble(self, metadata: LedgerMetadata, version: int) -> None:
        self.metadata, self._version = metadata, version
        self.ensemble_changes += 1

    def _ensemble_changed(self) -> None:
        self._resend()
        self._complete_ready()

    def _resend(self) -> None:
        """After an ensemble change: send unsent entries, and re-send every
        entry whose write set changed to its new bookies."""
        md = self.metadata
        for p in list(self._pending):
            if self._state == _FAILED:
                return
            if p.bookies is None:
                self._send(p)
                continue
            new = self.schedule.write_set_bookies(p.entry_id, md.ensemble_at(p.entry_id))
            for slot, bookie in enumerate(new):
                if p.bookies[slot] != bookie:
                    p.reassign(slot, bookie)
                    self._send_slot(p, slot)
                    if self._state == _FAILED:
                        return

    # -- letting go without closing ----------------------------------------------------

    def publish_lac(self) -> defer.Deferred[int]:
        """Send the LAC to every bookie of the last ensemble as an explicit
        LAC (WRITE_LAC, v3 connections only), so that a reader sees the last
        acknowledged entry too (normally only the next entry carries it).
        Best effort: fires with how many bookies took it."""
        return self._explicit.publish()

    def release(self) -> defer.Deferred[None]:
        """Let go of the ledger without closing it: wait for the outstanding
        adds, publish the LAC (:meth:`publish_lac`), fail later adds with
        :class:`HandleReleased` and run the release hook (the append lock of
        ``open_for_append``).  The ledger stays OPEN for the next writer."""
        return self._ending.release()

    # -- closing (:class:`~.ledger_close.LedgerClose`) ------------------------------------

    def close(self) -> defer.Deferred[None]:
        """Wait for the outstanding adds, then write CLOSED (last entry = the
        LAC, with its length) by compare-and-set.  Fires with None; calling it
        again gives the same outcome."""
        return self._ending.close()

    def _stop_adding(self) -> None:
        """A close starts: later adds fail, and so do writers waiting for room."""
        self._state = _CLOSING
        rooms, self._room_waiters = list(self._room_waiters), deque()
        for d in rooms:
            d.errback(Failure(LedgerClosedError(f"ledger {self.ledger_id} is being closed")))

    def _closed(self) -> None:
        if self._state != _FAILED:
            self._state = _CLOSED

    async def _write_closed(self) -> None:
        lac = self._lac
        length = self._confirmed_length
        if length is None:
            length = (await self._read_entry(lac)).length if lac >= 0 else 0
            self._confirmed_length = length
        md, version = await write_closed(
            self.client, self.ledger_id, self.metadata, self._version, lac, length, self.recovery
        )
        self.metadata, self._version = md, version
        self._lac = md.last_entry_id
