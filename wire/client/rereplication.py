"""Re-replication (Java's ``LedgerFragmentReplicator`` and the copying half of
``BookKeeperAdmin.recoverBookieData``): copying what lost bookies held of a
ledger to other bookies.  Not to be confused with *ledger recovery* (fencing
an open ledger and closing it at its last entry), which re-replication does
first for an open ledger whose last segment lost a bookie.

* :func:`~.fragments.fragments_to_rereplicate` lists the segments of a ledger
  whose ensemble contains a lost bookie (a *fragment*: entries ``first..last``
  of one ensemble), and the entries the lost bookies held of them
  (:mod:`.fragments`, pure).
* :func:`~.fragments.choose_replacements` picks, per lost member, a writable bookie that
  is not in that ensemble (or the operator's target); with none free, a lost
  bookie that is up and writable and only lacks copies may keep its place
  (``refill``: its copies are written back to it).
* :func:`replicate_fragment` reads each of those entries from the surviving
  replicas of its write set (digest verified, next replica on any failure),
  and last from its lost members that are still registered (a dead bookie's
  directories ``bookied --salvage`` serves read-only: the only copy, perhaps),
  and writes the stored bytes unchanged to the replacement with a recovery
  add (accepted on fenced ledgers), at most ``window`` entries being added
  at a time and as many read ahead, optionally paced by a ``throttle``
  (bytes): a pipeline of reads feeding adds (:class:`FragmentCopy`).
* :func:`replace_in_metadata` then swaps the bookies in that one segment by
  compare-and-set, re-reading on conflict.  It is idempotent: a segment that
  no longer names the lost bookie is left alone.  Since the metadata changes
  only after every entry was copied, a run that stops half way leaves the
  ledger as it was (plus harmless extra copies); running again completes it.
* :func:`rereplicate_ledger` does all of that for one ledger, first
  recovering (fencing and closing) an open ledger whose last segment
  contains a lost bookie, as BookKeeper's admin does;
  :func:`rereplicate_ledgers` runs several ledgers at once and reports each
  (one ledger failing does not stop the others).  ``bkctl recover``,
  ``bkctl decommission`` and the autorecovery workers all copy through them.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Collection, Coroutine, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from twisted.internet import defer
from twisted.python.failure import Failure

from bkctl.wire.codecs.add_frames import AddEncoder, EncodedAdd
from bkctl.wire.codecs.digest import DigestManager, master_key
from bkctl.wire.errors import BKError, DigestError
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.metadata.store import LedgerRead

from .credentials import ledger_credentials
from .errors import (
    MISSING_ON_BOOKIE,
    EntryUnrecoverable,
    ReplicationError,
    Unauthorized,
)
from .fragments import Fragment, bytes_held, choose_replacements, fragments_to_rereplicate
from .ledger_report import FragmentReport, LedgerReport
from .placement import RandomPlacement
from .replication_causes import CAUSES, LOCKED, OPEN, failure_cause

if TYPE_CHECKING:
    from .bookkeeper import BookKeeperClient

__all__ = [
    "CAUSES",
    "FragmentReport",
    "LedgerReport",
    "UnreadableEntry",
    "failure_cause",
    "replace_in_metadata",
    "replicate_fragment",
    "rereplicate_ledger",
    "rereplicate_ledgers",
]

log = logging.getLogger(__name__)

# ----------------------------------------------------------------- re-replication


class UnreadableEntry(NamedTuple):
    """An entry every replica read answered for without a good copy: who said it holds none,
    whose copy fails its digest (:func:`replicate_fragment`'s ``on_unreadable``)."""

    entry_id: int
    absent: tuple[str, ...]
    bad_digest: tuple[str, ...]


class _EntryCopy:
    """One entry on its way: where it can be read, where it goes, what went wrong."""

    __slots__ = ("entry_id", "sources", "targets", "errors", "answered", "unanswered", "absent", "bad")

    def __init__(self, entry_id: int, sources: list[str], targets: list[str]):
        self.entry_id = entry_id
        self.sources = sources
        self.targets = targets
        self.errors: list[str] = []
        self.answered = False  # a replica answered (without a good copy): the entry is unreadable, not down
        self.unanswered = 0  # adds sent and not acknowledged yet
        self.absent: tuple[str, ...] = ()  # replicas that answered without it
        self.bad: tuple[str, ...] = ()  # replicas whose copy fails its digest


class FragmentCopy:
    """The copy of one fragment (:func:`replicate_fragment`) as a pipeline:
    at most ``window`` entries being added at a time and as many more read
    ahead, each read from the first surviving replica of its write set whose
    copy verifies (the next one on a missing entry, a bad digest or any
    failure) and added unchanged to its replacements with recovery adds.
    Reads run ahead of the adds so that an add slot, once free, is filled
    from an entry already read: the window's entries then wait on the new
    bookie's journal alone, not on a read as well (Java's replicator reads
    and writes each batch of ``rereplicationEntryBatchSize`` entries in turn,
    the next batch read only when the last one is written).  Reads and adds
    go through the connections' callback calls (no Deferred or coroutine per
    entry); with the fast path (:mod:`bkctl.wire.fastpath`) an entry's ADD is
    encoded once for all its replacements, and the requests issued while a
    bookie's answers are handed out leave in one write per bookie.  Fires
    with the number of entries copied; the first failure fails it (the
    entries still in flight are then ignored)."""

    def __init__(
        self,
        client: BookKeeperClient,
        fragment: Fragment,
        replacements: dict[str, str],
        digest: DigestManager,
        key: bytes,
        window: int,
        on_entry: Callable[[int], Any] | None,
        throttle: Callable[..., Any] | None,
        read_replaced: bool = False,
        readable_lost: Collection[str] = (),
        on_unreadable: Callable[[UnreadableEntry], Any] | None = None,
    ):
        #: told of each entry no replica has a good copy of, the copy going on (None: it fails)
        self.on_unreadable = on_unreadable
        #: lost bookies still registered (a dead bookie ``bookied --salvage`` serves, a bookie
        #: recovered while up): read from last, after every surviving replica
        self.readable_lost = frozenset(readable_lost)
        self.client = client
        #: a move, not a repair: the replicas being replaced are live and are read too
        self.read_replaced = read_replaced
        self.pool = client.pool
        self.ledger_id = fragment.ledger_id
        self.digest = digest
        self.key = key
        self.window = window
        self.on_entry = on_entry
        self.throttle = throttle
        twins = client.twins
        self.adds = AddEncoder(getattr(client, "protocol", "v3"), twins.codec) if twins.enabled else None
        self._fragment = fragment
        self._schedule = fragment.schedule
        self._striped_until = self._schedule.striped_until
        #: entry_id % E -> where such an entry is read from and written to (entries up to
        #: striped_until: their write set is the stripe's)
        self._routes: dict[int, tuple[list[str], list[str]]] = {}
        self._entries = iter(fragment.entries())
        self._lost_positions = set(fragment.positions)
        self._replacements = replacements
        self.copied = 0
        #: entries whose adds are sent (or held by the throttle) and not all acknowledged
        self.running = 0
        #: reads sent and not answered
        self.reading = 0
        #: entries read and verified, waiting for an add slot: (copy, body)
        self._ready: deque[tuple[_EntryCopy, bytes]] = deque()
        self.done: defer.Deferred[int] = defer.Deferred()
        self._finished = False
        self._exhausted = False
        self._filling = False
        self._again = False

    def start(self) -> defer.Deferred[int]:
        self._fill()
        return self.done

    # -- the window -------------------------------------------------------------------

    def _fill(self) -> None:
        # reads and adds answered synchronously must not recurse once per entry
        if self._filling:
            self._again = True
            return
        self._filling = True
        try:
            self._again = True
            while self._again:
                self._again = False
                while not self._finished and self._ready and self.running < self.window:
                    copy, body = self._ready.popleft()
                    self.running += 1
                    self._send(copy, body)
                while not self._finished and not self._exhausted and self.reading + len(self._ready) < self.window:
                    entry_id = next(self._entries, None)
                    if entry_id is None:
                        self._exhausted = True
                        break
                    copy = self._plan(entry_id)
                    if not copy.targets:  # nothing of it was on a replaced bookie
                        self.copied += 1
                        continue
                    self.reading += 1
                    self._read(copy, 0)
            if self._exhausted and not self.running and not self.reading and not self._ready and not self._finished:
                self._finished = True
                self.done.callback(self.copied)
        finally:
            self._filling = False

    def _plan(self, entry_id: int) -> _EntryCopy:
        if entry_id <= self._striped_until:
            residue = entry_id % self._schedule.ensemble_size
            route = self._routes.get(residue)
            if route is None:
                route = self._routes[residue] = self._route(self._schedule.stripe()[residue])
        else:
            route = self._route(self._schedule.write_set(entry_id))
        return _EntryCopy(entry_id, *route)

    def _route(self, write_set: Sequence[int]) -> tuple[list[str], list[str]]:
        """The surviving replicas of a write set (ensemble indexes) and the
        replacements its lost members' copies go to (shared by the entries of
        a stripe position: never changed)."""
        ensemble = self._fragment.ensemble
        lost, replacements = self._lost_positions, self._replacements
        sources, targets, last_resort = [], [], []
        for i in write_set:
            if i not in lost or self.read_replaced:
                sources.append(ensemble[i])
            if i in lost and ensemble[i] in replacements:
                targets.append(replacements[ensemble[i]])
            if (
                i in lost
                and not self.read_replaced
                and ensemble[i] in self.readable_lost
                and ensemble[i] != replacements.get(ensemble[i])
            ):
                last_resort.append(ensemble[i])
        return sources + last_resort, targets

    def _fail(self, error: BaseException) -> None:
        if not self._finished:
            self._finished = True
            self.done.errback(Failure(error))

    # -- reading ------------------------------------------------------------------

    def _read(self, copy: _EntryCopy, index: int) -> None:
        if index >= len(copy.sources):
            if (
                self.on_unreadable is not None
                and copy.sources
                and len(copy.absent) + len(copy.bad) == len(copy.sources)
            ):  # every replica answered, none with a good copy: lost, the others still get copied
                self.reading -= 1
                self.on_unreadable(UnreadableEntry(copy.entry_id, copy.absent, copy.bad))
                self._fill()
                return
            what = f"entry {copy.entry_id} of ledger {self.ledger_id}"
            if not copy.sources:
                self._fail(
                    EntryUnrecoverable(
                        f"{what}: every bookie of its write set is lost", entry_id=copy.entry_id, down=True
                    )
                )
            else:
                self._fail(
                    EntryUnrecoverable(
                        f"{what} could not be read from any surviving replica "
                        f"({', '.join(copy.sources)}): {'; '.join(copy.errors[:3])}",
                        entry_id=copy.entry_id,
                        down=not copy.answered,
                    )
                )
            return
        bookie = copy.sources[index]
        try:
            self.pool.get(bookie).read_with_callback(self.ledger_id, copy.entry_id, self._read_done, copy, index)
        except Exception as exc:  # noqa: BLE001 - a closed pool: that replica failed
            self._read_done(copy, index, bookie, exc)

    def _read_done(self, copy: _EntryCopy, index: int, bookie: str, result: Any) -> None:
        if self._finished:
            return
        if isinstance(result, BaseException):
            if isinstance(result, Unauthorized):
                self._fail(result)
                return
            if isinstance(result, MISSING_ON_BOOKIE):
                copy.answered = True
                copy.absent += (bookie,)
            copy.errors.append(
                str(result) if isinstance(result, MISSING_ON_BOOKIE + (BKError,)) else f"{bookie}: {result!r}"
            )
            self._read(copy, index + 1)
            return
        body = result if type(result) is bytes else bytes(result)
        try:
            self.digest.payload(body, copy.entry_id)  # checked; the stored bytes are what is copied
        except DigestError as exc:
            copy.answered = True
            copy.bad += (bookie,)
            copy.errors.append(f"bookie {bookie}: {exc}")
            self._read(copy, index + 1)
            return
        self.reading -= 1
        self._ready.append((copy, body))
        self._fill()

    # -- adding -------------------------------------------------------------------

    def _send(self, copy: _EntryCopy, body: bytes) -> None:
        """Hold the entry to the byte rate, if any, then add it."""
        if self.throttle is not None:
            self.throttle(len(body) * len(copy.targets), self._add_paced, copy, body)
        else:
            self._add(copy, body)

    def _add_paced(self, copy: _EntryCopy, body: bytes) -> None:
        """:meth:`_add` as the throttle calls it (perhaps a tick later): a failure fails the copy."""
        try:
            self._add(copy, body)
        except Exception as exc:  # noqa: BLE001 - a bug; the copy fails with it rather than hang
            self._fail(exc)

    def _add(self, copy: _EntryCopy, body: bytes) -> None:
        if self._finished:
            return
        copy.unanswered = len(copy.targets)
        encode = self.adds.encode if self.adds is not None else EncodedAdd  # EncodedAdd: its fields only
        encoded = [encode(self.ledger_id, copy.entry_id, self.key, body, True, True)]

        def done(_add: object, slot: int, bookie: str, error: BaseException | None) -> None:
            self._add_done(copy, slot, bookie, error)  # add_run reports the add: this is its copy's

        for slot, bookie in enumerate(copy.targets):
            try:
                self.pool.get(bookie).add_run(encoded, [slot], done)
            except Exception as exc:  # noqa: BLE001 - a closed pool
                self._add_done(copy, slot, bookie, exc)
            if self._finished:
                return

    def _add_done(self, copy: _EntryCopy, slot: int, bookie: str, error: BaseException | None) -> None:
        if self._finished:
            return
        if error is not None:
            self._fail(
                error
                if isinstance(error, BKError)
                else ReplicationError(
                    f"writing entry {copy.entry_id} of ledger {self.ledger_id} to its new bookie failed: {error!r}"
                )
            )
            return
        copy.unanswered -= 1
        if copy.unanswered:
            return
        self.copied += 1
        self.running -= 1
        if self.on_entry is not None:
            self.on_entry(copy.entry_id)
        self._fill()


async def replicate_fragment(
    client: BookKeeperClient,
    fragment: Fragment,
    replacements: dict[str, str],
    digest: DigestManager,
    key: bytes,
    *,
    window: int = 64,
    on_entry: Callable[[int], Any] | None = None,
    throttle: Callable[..., Any] | None = None,
    read_replaced: bool = False,
    readable_lost: Collection[str] = (),
    on_unreadable: Callable[[UnreadableEntry], Any] | None = None,
) -> int:
    """Copy every entry a lost bookie of ``fragment`` held to its replacement.

    Each entry is read from the surviving members of its write set, then from
    the lost members in ``readable_lost`` (still registered: a dead bookie's
    directories ``bookied --salvage`` serves), verified, and added unchanged to the
    replacement of every lost member of its write set, with recovery adds
    (:class:`FragmentCopy`: reads feeding adds).  At most ``window`` entries
    are being added at a time, and at most ``window`` more read ahead.  ``on_entry(entry_id)`` is called (in the reactor thread)
    after each entry is copied.  ``throttle(n, add, *args)``, when given, is
    called with the bytes about to be written for each entry and must call
    ``add(*args)``, at once or when those bytes may go (a byte-rate limit:
    :class:`~bkctl.wire.autorecovery.worker.RateLimiter`).  ``read_replaced``: the
    members being replaced are live (a replica moved off a bookie, not a lost one) and
    are read from too, in write-set order.  Returns the number of entries copied;
    the first failure raises (a :class:`ReplicationError` or the bookie's
    error) and stops the copy.  ``on_unreadable(UnreadableEntry)``, when given, is told of
    each entry every replica read answered for without a good copy, and the others are still
    copied; an entry a replica did not answer for (it may be back) still fails the copy.
    """
    if window < 1:
        raise ValueError("window must be >= 1")
    args = (on_entry, throttle, read_replaced, readable_lost, on_unreadable)
    copy = FragmentCopy(client, fragment, replacements, digest, key, window, *args)
    return await copy.start()


async def replace_in_metadata(
    client: BookKeeperClient,
    ledger_id: int,
    first_entry_id: int,
    replacements: dict[str, str],
    known: tuple[LedgerMetadata, int] | None = None,
) -> tuple[LedgerMetadata, int]:
    """Swap ``old -> new`` in the segment starting at ``first_entry_id`` with the one
    compare-and-set every replica move makes (:func:`~.replica_swap.swap_bookies`, whose
    docstring states the rule).  A lost bookie no longer in the segment (replaced by an
    earlier run) is skipped.  ``known``: the metadata and version the copy was made from.
    Returns the metadata and version now stored; a segment changed otherwise meanwhile is a
    :class:`ReplicationError` (nothing written), a deleted ledger ``NoSuchLedger``."""
    from bkctl.wire.metadata.errors import NoSuchLedger

    from .replica_swap import Swap, SwapOutcome, swap_bookies

    swaps = [Swap(first_entry_id, old, new) for old, new in replacements.items()]
    done = await client.run_blocking(swap_bookies, client.store, ledger_id, swaps, known=known)
    if done.outcome is SwapOutcome.GONE or done.metadata is None:
        raise NoSuchLedger(ledger_id)
    if done.outcome is SwapOutcome.CONFLICT:
        raise ReplicationError(f"ledger {ledger_id}: {done.reason}; run the recovery again")
    return done.metadata, done.version


def _replacements(
    fragment: Fragment,
    writable: list[str],
    readonly: list[str],
    target: str | None,
    lost: tuple[str, ...],
    refill: Collection[str],
    placement: RandomPlacement | None,
) -> dict[str, str]:
    """:func:`choose_replacements`; when too few bookies are left outside the ensemble, the
    members of ``refill`` among the fragment's lost ones keep their place (their copies are
    written back to them) and only the others are replaced."""
    from .errors import NotEnoughBookies

    try:
        return choose_replacements(fragment, writable, readonly, target=target, exclude=lost, placement=placement)
    except NotEnoughBookies:
        in_place = [b for b in fragment.lost if b in refill and b in writable and b not in readonly]
        if target is not None or not in_place:
            raise
    others = tuple(b for b in fragment.lost if b not in in_place)
    chosen = (
        choose_replacements(replace(fragment, lost=others), writable, readonly, exclude=lost, placement=placement)
        if others
        else {}
    )
    return {**{b: b for b in in_place}, **chosen}


def _fragment_doc(fragment: Fragment, replacements: dict[str, str] | None) -> FragmentReport:
    return FragmentReport(
        fragment.first_entry_id,
        fragment.last_entry_id,
        tuple(fragment.lost),
        dict(replacements or {}),
        fragment.entry_count(),
    )


async def rereplicate_ledger(
    client: BookKeeperClient,
    ledger_id: int,
    lost: Iterable[str],
    *,
    target: str | None = None,
    skip_open: bool = False,
    dry_run: bool = False,
    window: int = 64,
    password: bytes | str | None = None,
    placement: RandomPlacement | None = None,
    refill: Collection[str] = (),
    on_entry: Callable[[int], Any] | None = None,
    throttle: Callable[..., Any] | None = None,
    metadata: LedgerMetadata | None = None,
    version: int | None = None,
    on_unreadable: Callable[[UnreadableEntry], Any] | None = None,
) -> LedgerReport:
    """Re-replicate everything the ``lost`` bookies held of one ledger.

    A ledger that is not closed is skipped with ``skip_open``; otherwise, if
    its last segment contains a lost bookie it is recovered first (fenced and
    closed: :meth:`BookKeeperClient.open_ledger` with recovery), so every
    segment has a known end.  Then each fragment on a lost bookie is copied
    to a replacement and the metadata updated.  With ``dry_run`` nothing is
    changed and the plan is returned (replacements as they would be chosen
    now).  ``metadata``: the ledger's metadata as a walk just read it (not
    read again; with its ``version``, the first metadata update tries it
    without reading either).  The writable and read-only bookies are the client's
    (:meth:`BookKeeperClient.bookie_lists`: kept by watches, no round trip a ledger).

    ``refill`` names lost bookies that are in fact up and writable and only
    lack copies (a bookie killed while entries were on their way to it, back
    since): when no bookie outside a fragment's ensemble can take one of
    them over, its copies are written back to it in place and the metadata
    keeps it (the autorecovery worker passes them).  Java's replicator only
    ever moves a fragment, and on a cluster with no spare bookie leaves such
    a ledger marked, short of a copy, until a bookie is added.

    ``on_unreadable``: as :func:`replicate_fragment`'s; the fragments' other entries
    are copied and the swap made (the autorecovery worker records what it is told:
    :mod:`bkctl.wire.autorecovery.lostentries`).  Without it a lost entry fails the ledger.

    Never raises for the ledger's own problems: returns a :class:`LedgerReport`
    with ``status`` one of ``recovered``, ``planned``, ``skipped``,
    ``failed`` (``error`` says why, ``cause`` and ``reason`` as
    :func:`failure_cause`), ``clean`` (nothing on the lost bookies) or
    ``deleted`` (the ledger vanished meanwhile); ``bytes``: about how many
    bytes it moves (:func:`bytes_held`; 0 when not known).
    """
    from bkctl.wire.metadata.errors import NoSuchLedger

    lost = tuple(dict.fromkeys(lost))
    lost_set = set(lost)
    result = LedgerReport(ledger_id, None, "")
    fragments: list[FragmentReport] = []
    try:
        if metadata is None:
            md, version = await client.run_blocking(client.store.ledgers.read, ledger_id)
        else:
            md = metadata
        known = (md, version) if version is not None and version >= 0 else None
        result = replace(result, state=md.state.name)
        if not lost_set.intersection(md.bookies):
            return replace(result, status="clean")
        if not md.is_closed:
            if skip_open:
                error = f"ledger is {md.state.name} (--skip-open-ledgers)"
                return replace(result, status="skipped", error=error, cause=OPEN, reason=f"ledger is {md.state.name}")
            if lost_set.intersection(md.last_ensemble):
                result = replace(result, closed_first=True)
                if not dry_run:
                    await client.open_ledger(ledger_id, recovery=True, password=password)
                    known = await client.run_blocking(client.store.ledgers.read, ledger_id)
                    md = known[0]
        result = replace(result, bytes=bytes_held(ledger_id, md, lost))
        password_bytes, digest_type = ledger_credentials(ledger_id, md, password)
        digest = DigestManager(ledger_id, digest_type, password_bytes)
        key = master_key(password_bytes)
        writable, readonly = await client.bookie_lists()
        for fragment in fragments_to_rereplicate(ledger_id, md, lost):
            replacements = _replacements(
                fragment,
                writable,
                readonly,
                target,
                lost,
                refill,
                placement if placement is not None else client.placement,
            )
            doc = _fragment_doc(fragment, replacements)
            fragments.append(doc)
            if dry_run:
                continue
            copied = await replicate_fragment(
                client,
                fragment,
                replacements,
                digest,
                key,
                window=window,
                on_entry=on_entry,
                throttle=throttle,
                readable_lost=lost_set.intersection(readonly).union(lost_set.intersection(writable)),
                on_unreadable=on_unreadable,
            )
            known = await replace_in_metadata(client, ledger_id, fragment.first_entry_id, replacements, known)
            fragments[-1] = replace(doc, entries_copied=copied)
            result = replace(result, entries_copied=result.entries_copied + copied)
            log.info(
                "ledger %d: entries %d..%s re-replicated (%d copied): %s%s",
                ledger_id,
                fragment.first_entry_id,
                fragment.last_entry_id,
                copied,
                replacements,
                " (in place: no other bookie could take them)"
                if any(old == new for old, new in replacements.items())
                else "",
            )
        return replace(result, status="planned" if dry_run else "recovered", fragments=tuple(fragments))
    except NoSuchLedger:
        return replace(result, status="deleted", fragments=tuple(fragments))
    except Exception as exc:  # noqa: BLE001 - reported, the other ledgers go on
        if not isinstance(exc, BKError):
            log.error("ledger %d: recovery failed unexpectedly", ledger_id, exc_info=True)
        cause, reason = failure_cause(exc)
        error = str(exc) or type(exc).__name__
        return replace(result, status="failed", fragments=tuple(fragments), error=error, cause=cause, reason=reason)


async def rereplicate_ledgers(
    client: BookKeeperClient,
    ledgers: Iterable[int | LedgerRead],
    lost: Iterable[str],
    *,
    parallel: int = 4,
    on_ledger: Callable[[LedgerReport], object] | None = None,
    **options: Any,
) -> list[LedgerReport]:
    """:func:`rereplicate_ledger` for each ledger, at most ``parallel`` at a time;
    ``on_ledger(result)`` after each.  A ledger is its id, or a
    :class:`~bkctl.wire.metadata.store.LedgerRead` as a walk read it (its metadata
    is not read again; one deleted meanwhile is ``deleted``, metadata that does not
    decode ``failed``).  ``lock_as``: each ledger under its
    replication lock, taken as that holder (``recover``, ``decommission``; a worker holds its
    ledger's already).  ``on_lost(ledger_id, entries)`` (blocking, run in a thread): a ledger
    goes on past its entries with no good copy (:class:`UnreadableEntry`), as a replication
    worker does, and they are handed to it to record; each result's ``lost_entries`` counts
    them.  Returns the results in ledger order."""
    if parallel < 1:
        raise ValueError("parallel must be >= 1")
    lost = tuple(lost)
    lock_as = options.pop("lock_as", None)
    lock_as = None if options.get("dry_run") else lock_as
    on_lost = options.pop("on_lost", None)
    results: list[LedgerReport] = []

    def done(result: LedgerReport) -> LedgerReport:
        results.append(result)
        if on_ledger is not None:
            on_ledger(result)
        return result

    pending: deque[defer.Deferred[LedgerReport]] = deque()
    for item in ledgers:
        if len(pending) >= parallel:
            await pending.popleft()
        if isinstance(item, LedgerRead):
            if item.metadata is None or isinstance(item.metadata, Exception):
                done(_unread(item))
                continue
            run = _past_lost(
                client, item.ledger_id, lost, on_lost, metadata=item.metadata, version=item.version, **options
            )
        else:
            run = _past_lost(client, item, lost, on_lost, **options)
        if lock_as is not None:
            run = _under_lock(client, item if isinstance(item, int) else item.ledger_id, lock_as, run)
        pending.append(defer.ensureDeferred(run).addCallback(done))
    while pending:
        await pending.popleft()
    results.sort(key=lambda r: r.ledger_id)
    return results


async def _past_lost(
    client: BookKeeperClient,
    ledger_id: int,
    lost: tuple[str, ...],
    on_lost: Callable[[int, list[UnreadableEntry]], object] | None,
    **options: Any,
) -> LedgerReport:
    """:func:`rereplicate_ledger`; with ``on_lost``, past the entries with no good copy, which
    it is handed (:func:`rereplicate_ledgers`)."""
    if on_lost is None:
        return await rereplicate_ledger(client, ledger_id, lost, **options)
    unreadable: list[UnreadableEntry] = []
    result = await rereplicate_ledger(client, ledger_id, lost, on_unreadable=unreadable.append, **options)
    if unreadable and result.status == "recovered":  # deleted meanwhile: "no such entry" is no loss
        await client.run_blocking(on_lost, ledger_id, unreadable)
        result = replace(result, lost_entries=len(unreadable))
    return result


async def _under_lock(
    client: BookKeeperClient, ledger_id: int, holder: str, run: Coroutine[Any, Any, LedgerReport]
) -> LedgerReport:
    """``run`` under the ledger's replication lock, taken as ``holder`` (:mod:`.replica_swap`); a
    ledger whose lock someone holds (a worker, a move) is ``skipped``, cause ``locked``, untouched."""
    from .replica_swap import lock_replica, release_replica

    try:
        who = await client.run_blocking(lock_replica, client.store, ledger_id, holder)
    except Exception as exc:  # noqa: BLE001 - ZooKeeper away: reported, the others go on
        who = f"? (taking it failed: {exc})"
    if who is not None:
        run.close()
        why = f"its replication lock is held by {who}: a worker or a move is on it"
        return replace(_unread(LedgerRead(ledger_id, None, -1)), status="skipped", error=why, cause=LOCKED, reason=why)
    try:
        return await run
    finally:
        await client.run_blocking(release_replica, client.store, ledger_id)


def _unread(read: LedgerRead) -> LedgerReport:
    """The result of a ledger a walk found deleted, or with metadata that does not decode."""
    if isinstance(read.metadata, Exception):
        cause, reason = failure_cause(read.metadata)
        return LedgerReport(read.ledger_id, None, "failed", error=str(read.metadata), cause=cause, reason=reason)
    return LedgerReport(read.ledger_id, None, "deleted")
