"""Re-replicating lost bookies' data and decommissioning bookies (BookKeeper's
``recover`` and ``decommissionbookie``), over :mod:`bkctl.wire.client.rereplication`.

``rereplicate_bookies`` copies every fragment the given bookies held and returns its
summary (:class:`RecoverSummary`); the checks and words a
decommission (:mod:`.decommission`, a planner over the executor of replica moves)
shares with it live here too.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ..humanize import plural as _plural
from .errors import BadInput, NotFound
from .results import inlined, omitted_when_none

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from contextlib import AbstractContextManager

    from bkctl.wire.autorecovery.repairstate import LedgerRepair
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.client.bookkeeper import BookKeeperClient
    from bkctl.wire.client.ledger_report import LedgerReport
    from bkctl.wire.metadata.store import MetadataStore, WalkProgress


def check_bookie_ids(bookies: Iterable[str]) -> list[str]:
    """The ids, deduplicated; exit 2 for one that is not a bookie id, or
    looks like host:port with a port that is not 1-65535 (``host:1.2``)."""
    from bkctl.wire.metadata.bookieid import is_valid_bookie_id
    from bkctl.wire.text import split_host_port

    def looks_like_an_address(b: str) -> bool:
        try:
            split_host_port(b)
        except ValueError:
            return False
        return True

    out = list(dict.fromkeys(bookies))
    for b in out:
        if not is_valid_bookie_id(b) or (":" in b and not looks_like_an_address(b)):
            raise BadInput(f"not a bookie id: {b!r} (expected host:port with a port 1-65535, or a bookie id)")
    return out


def check_known(store: MetadataStore, bookies: Iterable[str], named: Collection[str]) -> None:
    """Exit 3 for a bookie the cluster has never heard of: no cookie, not
    registered, not in ``named`` (the bookies ledgers name: :attr:`Survey.named`)."""
    unknown = [
        b
        for b in bookies
        if b not in named and store.cookies.get(b) is None and not store.registration.is_registered(b)
    ]
    if unknown:
        raise NotFound(
            f"unknown bookie{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: no cookie, "
            "not registered, in no ledger's ensemble",
        )


def require_known_bookie(store: MetadataStore, bookie: str, override: str, what: str) -> None:
    """Exit 3 unless ``bookie`` is registered or has a cookie: ``what`` is the
    action refused (e.g. "start the bookie as X first"), ``override`` the
    flag that accepts it anyway (a bookie not started yet)."""
    if store.registration.is_registered(bookie) or store.cookies.get(bookie) is not None:
        return
    hint = "" if ":" in bookie else f"; {bookie!r} has no port (HOST:PORT)"
    raise NotFound(f"unknown bookie {bookie}: not registered, no cookie{hint}; {what}, or give {override}")


def live_bookies(store: MetadataStore, bookies: Iterable[str], connect_timeout: float = 1.0) -> list[str]:
    """Those of ``bookies`` that are registered (writable or read-only) and
    accept a connection: a bookie that just died stays registered until
    its ZooKeeper session expires, but it does not answer any more."""
    import socket

    from bkctl.wire.metadata.serviceinfo import parse_bookie_id_address

    live = []
    for b in bookies:
        if not store.registration.is_registered(b):
            continue
        try:
            info = store.registration.service_info(b)
            host, port = info.rpc_address(b) if info is not None else parse_bookie_id_address(b)
            socket.create_connection((host, port), timeout=connect_timeout).close()
        except (OSError, ValueError):
            continue
        live.append(b)
    return live


class Survey(NamedTuple):
    """The ledgers naming some bookies, from one walk (:func:`survey`): their ids
    (ascending; with those whose metadata names them but does not decode), about how
    many bytes of theirs the bookies hold (:func:`~bkctl.wire.client.rereplication.bytes_held`:
    closed ledgers only), and which of the bookies some ledger names."""

    ledger_ids: list[int]
    bytes: int
    named: frozenset[str]


def survey(store: MetadataStore, bookies: Iterable[str], progress: WalkProgress | None = None) -> Survey:
    """One streaming walk over every ledger, decoding only those whose stored metadata
    names one of ``bookies`` (``progress``: a walk's progress, :meth:`App.walk_progress`);
    only the ids are kept."""
    from bkctl.wire.client.fragments import bytes_held

    wanted = frozenset(bookies)
    found: list[int] = []
    total = 0
    named: set[str] = set()
    for ledger_id, md, _version in store.ledgers.walk(naming=wanted, progress=progress):
        if md is None:
            continue  # deleted meanwhile
        if isinstance(md, Exception):  # names one, maybe: reported as left, with its reason
            found.append(ledger_id)
            continue
        on = wanted.intersection(md.bookies)
        if on:
            found.append(ledger_id)
            named |= on
            total += bytes_held(ledger_id, md, on)
    return Survey(found, total, frozenset(named))


def surveyed(
    store: MetadataStore, bookies: list[str], progress: Callable[[], AbstractContextManager[WalkProgress]] | None
) -> Survey:
    """:func:`survey` with the walk's progress shown (``progress()``: a context
    manager, :meth:`bkctl.app.App.walk_progress`) until the walk ends."""
    if progress is None:
        return survey(store, bookies)
    with progress() as shown:
        return survey(store, bookies, shown)


def ledgers_on(store: MetadataStore, bookies: Iterable[str], progress: WalkProgress | None = None) -> list[int]:
    """Ids of the ledgers whose metadata names one of ``bookies`` in any segment
    (:func:`survey`; one whose metadata does not decode is among them)."""
    return survey(store, bookies, progress).ledger_ids


def still_on(store: MetadataStore, ledger_ids: Iterable[int], bookie: str) -> list[int]:
    """Those of ``ledger_ids`` whose metadata still names ``bookie`` (read pipelined:
    a wait over many ledgers reads only them, not every ledger again)."""
    left = []
    for ledger_id, md, _version in store.ledgers.read_many(ledger_ids, naming=[bookie]):
        if md is not None and (isinstance(md, Exception) or bookie in md.bookies):
            left.append(ledger_id)
    return left


def _chunks(items: Iterable, size: int) -> Iterator[list]:
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


#: the statuses of a ledger :class:`RecoverTotals` counts (clean and deleted ones only as ledgers)
_COUNTED = frozenset({"recovered", "planned", "skipped", "failed"})


@dataclass(slots=True)
class RecoverTotals:
    """The ``totals`` of ``bkctl recover``: ledgers by status, entries copied and found lost;
    added up as the rows stream past (:meth:`add`)."""

    ledgers: int = 0
    recovered: int = 0
    planned: int = 0
    skipped: int = 0
    failed: int = 0
    entries_copied: int = 0
    lost_entries: int = 0

    def add(self, results: Iterable[LedgerReport]) -> RecoverTotals:
        """Count ``results`` (rows of :func:`rereplicate_stream`) in; returns itself."""
        for r in results:
            self.ledgers += 1
            if r.status in _COUNTED:
                setattr(self, r.status, getattr(self, r.status) + 1)
            self.entries_copied += r.entries_copied
            self.lost_entries += r.lost_entries or 0
        return self


@dataclass(frozen=True, slots=True)
class RecoverSummary:
    """The document of ``bkctl recover``: ``bookies``, ``target``, ``dry_run``, ``skip_open_ledgers``,
    one row per ledger (:func:`rereplicate_stream`'s: ``ledger_id``, ``state`` (before), ``status``
    (recovered, planned, skipped, failed, clean, deleted), ``closed_first`` (an open ledger
    recovered/closed first, or that would be with --dry-run), ``fragments`` (``first_entry_id``,
    ``last_entry_id`` (null: open, end unknown), ``lost``, ``replacements`` {lost: new}, ``entries``
    (held by the lost bookies; null if unknown), ``entries_copied``), ``entries_copied``,
    ``lost_entries`` (entries no copy of which was good: not copied, recorded lost, the rest of the
    ledger repaired), ``bytes`` (about how many it moves), ``error``, and for one failed or skipped
    ``cause`` (:data:`~bkctl.wire.client.rereplication.CAUSES`) and ``reason`` (one short line)), the
    totals, and with ``--delete-cookie`` what became of each bookie's cookie (bookie -> outcome)."""

    bookies: list[str]
    target: str | None
    dry_run: bool
    skip_open_ledgers: bool
    ledgers: list[LedgerReport]
    totals: RecoverTotals
    cookies: dict[str, str] | None = omitted_when_none()


def summary(
    bookies: list[str], results: list[LedgerReport], *, dry_run: bool, target: str | None, skip_open: bool
) -> RecoverSummary:
    """The document of ``bkctl recover`` for these rows."""
    return RecoverSummary(bookies, target, dry_run, skip_open, results, RecoverTotals().add(results))


#: ledgers handed to the reactor at a time: the metadata read for them is what a run holds
CHUNK = 500


def rereplicate_bookies(
    bk: BlockingBookKeeper,
    store: MetadataStore,
    bookies: Iterable[str],
    *,
    target: str | None = None,
    dry_run: bool = False,
    skip_open: bool = False,
    **options: Any,
) -> RecoverSummary:
    """:func:`rereplicate_stream`'s results in one :func:`summary` (options as there)."""
    bookies = check_bookie_ids(bookies)
    results = [
        r
        for chunk in rereplicate_stream(
            bk, store, bookies, target=target, dry_run=dry_run, skip_open=skip_open, **options
        )
        for r in chunk
    ]
    return summary(bookies, results, dry_run=dry_run, target=target, skip_open=skip_open)


def rereplicate_stream(
    bk: BlockingBookKeeper,
    store: MetadataStore,
    bookies: Iterable[str],
    *,
    target: str | None = None,
    dry_run: bool = False,
    skip_open: bool = False,
    parallel: int = 4,
    window: int = 64,
    confirm: Callable[[list[int]], Any] | None = None,
    on_start: Callable[[int, int | None], Any] | None = None,
    on_ledger: Callable[[LedgerReport], Any] | None = None,
    on_entry: Callable[[int], Any] | None = None,
    ledger_ids: list[int] | None = None,
    expected_bytes: int | None = None,
    rate: float = 0,
    progress: Callable[[], AbstractContextManager[WalkProgress]] | None = None,
) -> Iterator[list[LedgerReport]]:
    """Re-replicate everything ``bookies`` held (see :func:`bkctl.wire.client.rereplication.rereplicate_ledger`).

    One walk finds the ledgers (:func:`survey`; ``progress()`` makes the context
    manager that hears it, :meth:`bkctl.app.App.walk_progress`), then
    their metadata is read again pipelined, :data:`CHUNK` ledgers at a time,
    each chunk planned (and copied) before the next is read: memory holds the
    ids and one chunk's metadata, however many ledgers there are.
    ``confirm(ledger_ids)`` is called before anything changes (not with
    ``dry_run``); ``on_start(count, bytes)`` (bytes: about how many the bookies
    held, None when not known), ``on_ledger(result)`` and
    ``on_entry(entry_id)`` report progress (the last two from the reactor
    thread).  ``rate``: at most that many bytes per second written to the
    replacements (0: no limit; the autorecovery worker's throttle).
    ``ledger_ids`` limits the run to those ledgers (``expected_bytes``: what
    :func:`survey` said they hold, for ``on_start``).  A generator: the checks,
    the walk and ``confirm`` run at the first ``next()`` (errors raise then,
    before any result), then each chunk's results (the rows of :func:`summary`'s
    ``ledgers``, ascending within a chunk) come as soon as it is done, and are
    not kept: a caller that prints them as they come holds one chunk.
    """
    from bkctl.wire.client.blocking import run_in_reactor
    from bkctl.wire.client.replica_swap import default_holder
    from bkctl.wire.client.rereplication import rereplicate_ledgers

    bookies = check_bookie_ids(bookies)
    if target is not None:
        check_bookie_ids([target])
        if target in bookies:
            raise BadInput(f"the target {target} is one of the bookies to recover")
        if target not in store.registration.writable_bookies():
            raise BadInput(f"the target {target} is not a writable bookie")
    total_bytes = expected_bytes
    if ledger_ids is None:
        found = surveyed(store, bookies, progress)
        check_known(store, bookies, found.named)
        ids, total_bytes = found.ledger_ids, found.bytes
    else:
        ids = ledger_ids
    if ids and not dry_run and confirm is not None:
        confirm(ids)
    if on_start is not None:
        on_start(len(ids), total_bytes)
    throttle = None
    if rate:
        from twisted.internet import reactor

        from bkctl.wire.client.throttle import RateLimiter

        throttle = RateLimiter(rate, reactor, cork=bk.client.pool.cork)
    yield []  # the checks are done
    for chunk in _chunks(store.ledgers.read_many(ids), CHUNK):
        yield run_in_reactor(
            rereplicate_ledgers,
            bk.client,
            chunk,
            bookies,
            parallel=parallel,
            on_ledger=on_ledger,
            target=target,
            skip_open=skip_open,
            dry_run=dry_run,
            window=window,
            on_entry=on_entry,
            throttle=throttle,
            lock_as=None if dry_run else default_holder(),
            on_lost=None if dry_run else _recorder(store, default_holder()),
            timeout=None,
        )


def _recorder(store: MetadataStore, holder: str) -> Callable[[int, list], Any]:
    """Records a ledger's entries with no good copy as the replication workers do
    (:func:`~bkctl.wire.autorecovery.lostentries.record_lost`): ``autorecovery status`` and
    ``ledger fsck`` name them, and no check marks the ledger again for them."""
    import time

    from bkctl.wire.autorecovery.lostentries import record_lost

    return lambda ledger_id, entries: record_lost(store, ledger_id, entries, holder, int(time.time() * 1000))


def autorecovery_available(store: MetadataStore) -> bool:
    """Whether autorecovery daemons can do the copying: enabled, with an auditor elected."""
    return store.underreplication.is_enabled() and store.auditor.current() is not None


#: the cause of a ledger left whose only copy of some entries is on the leaving bookie
LOST = "lost"


def lost_with(bk: BlockingBookKeeper, store: MetadataStore, ledger_ids: Iterable[int], bookie: str) -> dict[int, str]:
    """Those of ``ledger_ids`` that lose data if ``bookie`` never returns, by ``ledger fsck``'s
    rule for ``data_lost`` (:func:`~bkctl.wire.fsck.check.check_ledger`, the bookie counted as
    gone): every entry short of a copy off the bookie has its surviving copies read and
    digest-checked, and one with no good copy but the bookie's (none holds it, each copy fails
    its digest, or every other copy is on bookies down) is lost.  Ledger id -> why, in one
    short line (the lost entries, their bookies and cause)."""
    ids = list(ledger_ids)
    if not ids:
        return {}
    from bkctl.wire.metadata.registration_state import Registrations

    live = Registrations.read(store.registration).registered
    # a generator: the metadata is read as the chunks are checked, never a bookie's every
    # ledger's at once (a drain's dry run at 10^6 ledgers held 286,000: 535 MiB)
    reads = (
        r
        for r in store.ledgers.read_many(ids, naming=[bookie])
        if r[1] is not None and not isinstance(r[1], Exception) and bookie in r[1].bookies
    )
    from bkctl.wire.client.blocking import run_in_reactor

    out: dict[int, str] = {}
    for chunk in _chunks(reads, LOSS_CHECK_CHUNK):  # no time limit: a ledger's every copy may be read
        out.update(run_in_reactor(_losses, bk.client, chunk, live - {bookie}, timeout=None))
    return out


#: ledgers checked for lost data at once
LOSS_CHECK_CHUNK = 32


async def _losses(client: BookKeeperClient, reads: list, registered: frozenset[str]) -> dict[int, str]:
    from twisted.internet import defer

    from bkctl.wire.fsck.check import BookieRequests, CheckOptions, check_ledger
    from bkctl.wire.fsck.findings import Kind

    requests = BookieRequests(client.pool)
    options = CheckOptions(registered, sample=0)
    found = await defer.gatherResults(
        [defer.ensureDeferred(check_ledger(requests, lid, md, version, options)) for lid, md, version in reads],
        consumeErrors=True,
    )
    return {f.ledger_id: f.message for f in found if f is not None and f.kind in (Kind.DATA_LOST, Kind.METADATA_ONLY)}


def lost_entries_line(count: int) -> str:
    """The line a recover or decommission that went past entries with no good copy ends with."""
    return (
        f"{_plural(count, 'entry', 'entries')} had no good copy on any bookie: DATA LOST, recorded "
        "(bkctl autorecovery status and bkctl ledger fsck name them); the rest of their ledgers was copied"
    )


def lost_line(lost: list[int], bookie: str) -> str:
    """The one line that says a decommission loses data, first, with the way out."""
    shown = ", ".join(map(str, lost[:10])) + (f", ... ({len(lost) - 10} more)" if len(lost) > 10 else "")
    return (
        f"{_plural(len(lost), 'ledger')} LOST unless bookie {bookie} returns (no other copy: {shown}); "
        f"bring it back, or delete {'it' if len(lost) == 1 else 'them'} (`bkctl ledger delete ID --force`) "
        "and decommission again"
    )


#: what a ledger left waits for, by its repair state (:mod:`bkctl.wire.autorecovery.repairstate`),
#: where no failed attempt says more
_STATE_LABELS = {
    "waiting-delay": "waiting for lostBookieRecoveryDelay",
    "held-disabled": "held: autorecovery is disabled",
    "not-marked": "not marked by the auditor yet",
    "waiting-worker": "waiting for a worker",
    "re-replicating": "being re-replicated",
    "held-failed": "held after a failed attempt",
    "locked": "locked by a worker that keeps no status",
    "done": "done, metadata not updated yet",
    "appeared": "named the bookie after the run started",
    LOST: "lost unless the bookie returns (no other copy)",
}


def cause_label(cause: str) -> str:
    """The words for a ledger's ``cause`` (:data:`~bkctl.wire.client.rereplication.CAUSES`,
    or a repair state)."""
    from bkctl.wire.client.replication_causes import CAUSES

    return CAUSES.get(cause) or _STATE_LABELS.get(cause) or cause


@dataclass(frozen=True, slots=True)
class RepairState:
    """What a ledger left waits for (:func:`repair_states`): its repair state
    (:class:`~bkctl.wire.autorecovery.repairstate.LedgerRepair`, whose keys the document has), the
    line for people, and the last failed attempt's reason (None: none)."""

    text: str
    reason: str | None
    repair: LedgerRepair = inlined()


@dataclass(frozen=True, slots=True)
class WaitingLedger:
    """A decommission's row of a ledger the daemons left (:func:`daemon_rows`): its repair state,
    its ``text`` as ``error``, and the ``cause``/``reason`` its line in ``left`` gives."""

    ledger_id: int
    repair: RepairState
    error: str
    cause: str
    reason: str
    status: str = "waiting"


@dataclass(frozen=True, slots=True)
class LeftLedger:
    """A ledger a decommission left (:func:`left_rows`): why, as a cause
    (:data:`~bkctl.wire.client.rereplication.CAUSES`, a repair state, ``lost``, ``appeared``) and
    one short line."""

    ledger_id: int
    cause: str
    reason: str | None


def daemon_rows(states: Mapping[int, RepairState]) -> list[WaitingLedger]:
    """A decommission's rows of ledgers the daemons left, each with its ``cause`` and ``reason``:
    the last failed attempt's cause, the writer's grace period, or the repair state."""
    from bkctl.wire.autorecovery.repairstate import LedgerRepairState
    from bkctl.wire.client.replication_causes import GRACE, OTHER

    rows = []
    for lid, st in sorted(states.items()):
        last = st.repair.last_attempt
        if st.repair.state is LedgerRepairState.WAITING_GRACE:
            cause, reason = GRACE, st.text
        elif last is not None:
            cause = last.cause or OTHER
            reason = f"{last.worker or 'a worker'}: {(last.reason or '?').splitlines()[0][:100]}"
        else:
            cause, reason = st.repair.state.value, st.text
        rows.append(WaitingLedger(lid, st, st.text, cause, reason))
    return rows


def left_rows(
    rows: Iterable[LedgerReport | WaitingLedger | int], lost: Mapping[int, str] | None = None
) -> list[LeftLedger]:
    """Each ledger left -- its row (``recover``'s, or :func:`daemon_rows`'), or its id when it
    has none (it named the bookie after the run started) -- with its cause and reason, grouped by
    cause: the ``lost`` ones (ledger id -> why, :func:`lost_with`) first, then the most common
    cause first; ascending ids within a cause."""
    from collections import Counter

    lost = lost or {}
    out = []
    cause: str | None
    reason: str | None
    for r in rows:
        if isinstance(r, int):
            lid, cause, reason, error = r, None, None, None
        else:
            lid, cause, reason, error = r.ledger_id, r.cause, r.reason, r.error
        if lid in lost:
            cause, reason = LOST, lost[lid]
        elif cause is None:  # no attempt says why: it failed otherwise, or came since
            from bkctl.wire.client.replication_causes import OTHER

            cause = OTHER if error else "appeared"
            reason = error or "its metadata names the bookie; run decommission again"
        out.append(LeftLedger(lid, cause, reason))
    counts = Counter(r.cause for r in out)
    return sorted(out, key=lambda r: (r.cause != LOST, -counts[r.cause], r.cause, r.ledger_id))


def describe_left(left: Sequence[LeftLedger | WaitingLedger]) -> str:
    """``12 no bookie to copy to; 3 every copy down`` (:func:`left_rows` rows, or
    :func:`daemon_rows`')."""
    from collections import Counter

    counts = Counter(r.cause or "other" for r in left)
    ordered = sorted(counts.most_common(), key=lambda c: c[0] != LOST)
    return "; ".join(f"{n} {cause_label(cause)}" for cause, n in ordered)


def registered_message(store: MetadataStore, bookie: str) -> str:
    """Why a registered bookie cannot be decommissioned -- and, when it does not answer,
    that a bookie just killed stays registered until its ZooKeeper session expires."""
    message = f"bookie {bookie} is registered (running); stop it before decommissioning it"
    if live_bookies(store, [bookie]):
        return message
    return (
        f"bookie {bookie} is registered but does not answer: if it was just stopped (kill -9, a crash), "
        "ZooKeeper keeps its registration until its session expires (the bookie's zkTimeout); "
        "try again then, or stop it first if it still runs"
    )


def repair_states(store: MetadataStore, ledger_ids: Iterable[int], bookie: str | None = None) -> dict[int, RepairState]:
    """What each of ``ledger_ids`` (naming ``bookie``, marked or to be marked by the
    auditor) waits for, as the repair model says it
    (:func:`bkctl.wire.autorecovery.repairstate.ledger_states`): ``state``,
    ``text``, ``worker``, ``since``/``until`` (ms), ``attempts`` (every failed
    attempt the workers remember) and ``reason`` (the last attempt's)."""
    import time

    from bkctl.wire.autorecovery.repairstate import ledger_states, state_text

    ledger_ids = list(ledger_ids)
    if not ledger_ids:
        return {}
    now = int(time.time() * 1000)
    states = ledger_states(store, ledger_ids, now, bookies_of=(lambda _lid: [bookie]) if bookie else None)
    return {
        lid: RepairState(state_text(st, now), st.last_attempt.reason if st.last_attempt else None, st)
        for lid, st in states.items()
    }


def retire_cookie(store: MetadataStore, bookie: str) -> str:
    """The one rule for deleting a retired bookie's cookie (``decommission``, ``drain
    --decommission``, ``recover --delete-cookie``): only once the bookie is not registered and
    no ledger's metadata names it.  Returns ``deleted``, ``none`` (it had none), ``kept:
    registered`` or ``kept: named by ledger N``."""
    from bkctl.wire.metadata.errors import NoSuchCookie

    if store.registration.is_registered(bookie):
        return "kept: registered"
    named = ledgers_on(store, [bookie])
    if named:
        return f"kept: named by ledger {named[0]}" + (f" and {len(named) - 1} more" if len(named) > 1 else "")
    found = store.cookies.get(bookie)
    if found is None:
        return "none"
    try:
        store.cookies.delete(bookie, found[1])
    except NoSuchCookie:
        return "none"
    return "deleted"


def delete_cookies(store: MetadataStore, bookies: Iterable[str]) -> dict[str, str]:
    """:func:`retire_cookie` of each bookie: bookie -> what became of its cookie."""
    return {b: retire_cookie(store, b) for b in bookies}
