"""One entry on its way to its write set (Java's ``PendingAddOp``): a writer's handle
(:mod:`.ledger_handle`) keeps one per entry from packaging until the entry completes, in entry
order; the state of the entry's copies -- the bookies they went to, which acknowledged -- is its
own, apart from the handle's pipeline and ensemble."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from twisted.internet import defer

from bkctl.wire.codecs.add_frames import EncodedAdd

__all__ = ["EncodingEntries", "Entries", "PendingAdd", "PendingEntry", "address_run"]

#: how a maker of entries encodes an entry's ADD (:class:`Entries`: its v3 parts; :class:`EncodingEntries`: all of it)
_Encoder = TypeVar("_Encoder")


class PendingAdd:
    """Entry ``entry_id``'s packaged ``body`` and the ledger's ``length`` with it, and its copies.
    The handle reads and sets the fields on its hot path; :meth:`reassign` is the rare change."""

    __slots__ = ("entry_id", "body", "length", "deferred", "bookies", "acked", "acks", "encoded")

    def __init__(
        self,
        entry_id: int,
        body: bytes,
        length: int,
        deferred: defer.Deferred[int] | None = None,
        encoded: EncodedAdd | None = None,
    ):
        self.entry_id = entry_id
        self.body = body
        self.length = length
        #: its ADD, encoded once for every bookie of the write set (None: not yet)
        self.encoded = encoded
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


class PendingEntry(Protocol):
    """What a writer, its acknowledgement counter and :func:`address_run` use of an entry on its
    way: :class:`PendingAdd`, or the C twin's ``_addentries.Entry`` (which is also its own encoded
    ADD); the twins' interfaces (:mod:`.add_twins`) are typed with it."""

    @property
    def entry_id(self) -> int: ...

    @property
    def body(self) -> bytes: ...

    @property
    def length(self) -> int: ...

    encoded: EncodedAdd | None
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
    payload, deferred)`` -> a :class:`PendingAdd` with its
    :class:`~bkctl.wire.codecs.add_frames.EncodedAdd`.  The C twin is ``_addentries.Entries``,
    whose entry is its own encoded ADD (:attr:`bkctl.wire.fastpath.Twins.entries`)."""

    __slots__ = ()

    def __call__(
        self, entry_id: int, lac: int, length: int, payload: bytes, deferred: defer.Deferred[int] | None
    ) -> PendingAdd:
        ledger_id, key, recovery = self.ledger_id, self.master_key, self.recovery
        body = self.package(ledger_id, entry_id, lac, length, payload)
        add = EncodedAdd(ledger_id, entry_id, key, body, recovery, recovery)  # a recovery add: high priority
        add.v3_part, add.v3_tail = self.encoder(ledger_id, entry_id, key, body, recovery)
        return PendingAdd(entry_id, body, length, deferred, add)


class EncodingEntries(_Maker[Callable[[int, int, bytes, bytes, bool, bool], EncodedAdd]]):
    """A writer's maker of its entries where no twin makes them (fast paths off, or over v2):
    each packaged (``package``, as :class:`Entries`) and its ADD encoded at once for its whole
    write set by ``encoder`` (``(ledger_id, entry_id, master_key, body, recovery,
    high_priority)`` -> :class:`~bkctl.wire.codecs.add_frames.EncodedAdd`: :meth:`AddEncoder.encode
    <bkctl.wire.codecs.add_frames.AddEncoder.encode>`, or ``EncodedAdd`` itself for an ADD of
    its fields only, which each connection builds the general way): the same call as
    :class:`Entries`.  :meth:`packaged` encodes an entry packaged already (recovery's)."""

    __slots__ = ()

    def __call__(
        self, entry_id: int, lac: int, length: int, payload: bytes, deferred: defer.Deferred[int] | None
    ) -> PendingAdd:
        ledger_id, recovery = self.ledger_id, self.recovery
        body = self.package(ledger_id, entry_id, lac, length, payload)
        # :meth:`packaged`, inline: the general path's every entry
        add = self.encoder(ledger_id, entry_id, self.master_key, body, recovery, recovery)
        return PendingAdd(entry_id, body, length, deferred, add)

    def packaged(self, entry_id: int, body: bytes, length: int, deferred: defer.Deferred[int] | None) -> PendingAdd:
        """The entry whose packaged bytes are ``body``, its ADD encoded (a recovery add: high priority)."""
        recovery = self.recovery
        add = self.encoder(self.ledger_id, entry_id, self.master_key, body, recovery, recovery)
        return PendingAdd(entry_id, body, length, deferred, add)

    def encode(self, p: PendingEntry) -> EncodedAdd:
        """``p``'s ADD, encoded (for :func:`address_run`: an entry is encoded when it is made)."""
        encoded = p.encoded = self.encoder(
            self.ledger_id, p.entry_id, self.master_key, p.body, self.recovery, self.recovery
        )
        return encoded


def address_run(
    run: list[PendingEntry], cursor: WriteSets, encode: Callable[[PendingEntry], EncodedAdd]
) -> dict[str, tuple[list[EncodedAdd], list[PendingEntry], list[int]]]:
    """A run of entries not addressed yet (the others are skipped) given their write sets (``cursor``: the writer's
    :class:`~.readable_ledger.StripeCursor`; no copy acknowledged yet) and each its ADD
    (``encode(p)`` for one not encoded yet), grouped by bookie: ``{bookie: (encoded adds,
    entries, slots)}``, in run order.  The C twin is ``_addentries.address_run`` (fast paths on,
    :attr:`bkctl.wire.fastpath.Twins.entries`; tests/unit/test_client_acks.py checks both)."""
    copies: dict[str, tuple[list[EncodedAdd], list[PendingEntry], list[int]]] = {}
    write_set = cursor.write_set
    for p in run:
        if p.bookies is not None:
            continue  # addressed already (an ensemble change sent it)
        bookies = p.bookies = write_set(p.entry_id)
        p.acked = 0
        p.acks = 0
        encoded = p.encoded
        if encoded is None:
            encoded = encode(p)
        for slot, bookie in enumerate(bookies):
            mine = copies.get(bookie)
            if mine is None:
                mine = copies[bookie] = ([], [], [])
            mine[0].append(encoded)
            mine[1].append(p)
            mine[2].append(slot)
    return copies
