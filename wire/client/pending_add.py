"""One entry on its way to its write set (Java's ``PendingAddOp``): a writer's handle
(:mod:`.ledger_handle`) keeps one per entry from packaging until the entry completes, in entry
order; the state of the entry's copies -- the bookies they went to, which acknowledged -- is its
own, apart from the handle's pipeline and ensemble."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from twisted.internet import defer

from bkctl.wire.codecs.add_frames import AddFields, EncodedAdd

__all__ = ["EncodingEntries", "Entries", "PendingAdd", "PendingEntry", "address_run"]

#: how a maker of entries encodes an entry's ADD (:class:`Entries`: its v3 parts; :class:`EncodingEntries`: all of it)
_Encoder = TypeVar("_Encoder")


class PendingAdd(EncodedAdd):
    """Entry ``entry_id`` of ledger ``ledger_id`` on its way: its packaged ``body`` and the
    ledger's ``length`` with it, its copies, and its ADD encoded once for its whole write set --
    the entry is its own :class:`~bkctl.wire.codecs.add_frames.EncodedAdd` (made of its fields:
    a recovery add is high priority; a maker fills its shared bytes, :class:`Entries`,
    :class:`EncodingEntries`), as the C twin ``_addentries.Entry`` is: one object per add.  The
    handle reads and sets the fields on its hot path; :meth:`reassign` is the rare change."""

    __slots__ = ("length", "deferred", "bookies", "acked", "acks")

    def __init__(
        self,
        ledger_id: int,
        entry_id: int,
        master_key: bytes,
        body: bytes,
        recovery: bool,
        length: int,
        deferred: defer.Deferred[int] | None = None,
    ):
        # EncodedAdd's fields set here, not by its __init__: one call per entry, not two
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.master_key = master_key
        self.body = body
        self.recovery = recovery
        self.high_priority = recovery  # a recovery add: high priority
        self.deferred_sync = False
        self.v3_part = None
        self.v3_tail = None
        self.v2_frame = None
        self.length = length
        self.deferred = deferred  # None: nobody waits for this one
        # write set, slot i = copy i; None until sent. A tuple shared with the
        # other entries of the same stripe until an ensemble change edits it.
        self.bookies: tuple[str, ...] | list[str] | None = None
        self.acked = 0  # bit i: copy i acknowledged
        self.acks = 0

    def reassign(self, slot: int, bookie: str) -> None:
        """Copy ``slot`` goes to ``bookie`` now (an ensemble change replaced the one it went to):
        an acknowledgement from the replaced bookie no longer counts."""
        if type(self.bookies) is not list:
            self.bookies = list(self.bookies or ())  # shared with its stripe until now
        bit = 1 << slot
        if self.acked & bit:
            self.acked &= ~bit
            self.acks -= 1
        self.bookies[slot] = bookie


class PendingEntry(AddFields, Protocol):
    """What a writer, its acknowledgement counter and :func:`address_run` use of an entry on its
    way: :class:`PendingAdd`, or the C twin's ``_addentries.Entry``; each is its own encoded ADD
    (:class:`~bkctl.wire.codecs.add_frames.AddFields`: what a connection reads of one).  The
    twins' interfaces (:mod:`.add_twins`) are typed with it."""

    @property
    def length(self) -> int: ...

    deferred: defer.Deferred[int] | None
    bookies: tuple[str, ...] | list[str] | None
    acked: int
    acks: int

    def reassign(self, slot: int, bookie: str, /) -> None: ...


class WriteSets(Protocol):
    """What addresses a run: a writer's :class:`~.readable_ledger.StripeCursor` (declared here, as
    the twin selector's record of the add path's twins imports this module)."""

    def write_set(self, entry_id: int) -> tuple[str, ...]:
        """The bookies of ``entry_id``'s write set."""


class _Maker(Generic[_Encoder]):
    """What a writer's maker of its entries holds, the one constructor :class:`Entries` and
    :class:`EncodingEntries` share: how it packages an entry (``package``: ``(ledger_id,
    entry_id, lac, length, payload)`` -> bytes) and encodes its ADD (``encoder``), for ledger
    ``ledger_id`` with ``master_key``, its adds recovery adds (``recovery``) or not."""

    __slots__ = ("package", "encoder", "ledger_id", "master_key", "recovery")

    def __init__(
        self,
        package: Callable[[int, int, int, int, bytes], bytes],
        encoder: _Encoder,
        ledger_id: int,
        master_key: bytes,
        recovery: bool,
    ):
        self.package = package
        self.encoder = encoder
        self.ledger_id = ledger_id
        self.master_key = master_key
        self.recovery = recovery


class Entries(_Maker[Callable[[int, int, bytes, bytes, bool], tuple[bytes, bytes]]]):
    """A writer's maker of its entries on the fast path over v3, each packaged (``package``)
    and its ADD encoded at once for its whole write set (``encoder``: ``add_part``,
    ``Twins.codec.add_part`` of :mod:`bkctl.wire.fastpath`): ``entries(entry_id, lac, length,
    payload, deferred)`` -> a :class:`PendingAdd`, its own encoded ADD.  The C twin is
    ``_addentries.Entries`` (:attr:`bkctl.wire.fastpath.Twins.entries`)."""

    __slots__ = ()

    def __call__(
        self, entry_id: int, lac: int, length: int, payload: bytes, deferred: defer.Deferred[int] | None
    ) -> PendingAdd:
        ledger_id, key, recovery = self.ledger_id, self.master_key, self.recovery
        body = self.package(ledger_id, entry_id, lac, length, payload)
        p = PendingAdd(ledger_id, entry_id, key, body, recovery, length, deferred)
        p.v3_part, p.v3_tail = self.encoder(ledger_id, entry_id, key, body, recovery)
        return p


class EncodingEntries(_Maker[Callable[[EncodedAdd], None] | None]):
    """A writer's maker of its entries where no twin makes them (fast paths off, or over v2):
    each packaged (``package``, as :class:`Entries`), a :class:`PendingAdd` whose shared bytes
    ``encoder`` fills for its whole write set (:meth:`AddEncoder.fill
    <bkctl.wire.codecs.add_frames.AddEncoder.fill>`), or None for an ADD of its fields only,
    which each connection builds the general way (fast paths off): the same call as
    :class:`Entries`.  :meth:`packaged` makes an entry packaged already (recovery's)."""

    __slots__ = ()

    def __call__(
        self, entry_id: int, lac: int, length: int, payload: bytes, deferred: defer.Deferred[int] | None
    ) -> PendingAdd:
        ledger_id = self.ledger_id
        body = self.package(ledger_id, entry_id, lac, length, payload)
        # :meth:`packaged`, inline: the general path's every entry
        p = PendingAdd(ledger_id, entry_id, self.master_key, body, self.recovery, length, deferred)
        encoder = self.encoder
        if encoder is not None:
            encoder(p)
        return p

    def packaged(self, entry_id: int, body: bytes, length: int, deferred: defer.Deferred[int] | None) -> PendingAdd:
        """The entry whose packaged bytes are ``body``, its ADD encoded."""
        p = PendingAdd(self.ledger_id, entry_id, self.master_key, body, self.recovery, length, deferred)
        encoder = self.encoder
        if encoder is not None:
            encoder(p)
        return p


def address_run(run: list[PendingEntry], cursor: WriteSets) -> dict[str, tuple[list[PendingEntry], list[int]]]:
    """A run of entries not addressed yet (the others are skipped) given their write sets (``cursor``: the writer's
    :class:`~.readable_ledger.StripeCursor`; no copy acknowledged yet), grouped by bookie:
    ``{bookie: (entries, slots)}``, in run order (each entry is its own encoded ADD).  The C
    twin is ``_addentries.address_run`` (fast paths on, :attr:`bkctl.wire.fastpath.Twins.entries`;
    tests/unit/test_client_address_run.py checks both)."""
    copies: dict[str, tuple[list[PendingEntry], list[int]]] = {}
    write_set = cursor.write_set
    for p in run:
        if p.bookies is not None:
            continue  # addressed already (an ensemble change sent it)
        bookies = p.bookies = write_set(p.entry_id)
        p.acked = 0
        p.acks = 0
        for slot, bookie in enumerate(bookies):
            mine = copies.get(bookie)
            if mine is None:
                mine = copies[bookie] = ([], [])
            mine[0].append(p)
            mine[1].append(slot)
    return copies
