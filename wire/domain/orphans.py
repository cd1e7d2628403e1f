"""The orphan sweep: every ledger Pulsar made for a managed ledger that nothing lists, over the
whole cluster, in one walk of the ledger metadata -- ``pulsar orphans``, and ``bkctl disk``'s
orphans (which hears of every ledger the walk reads, :attr:`OrphanSweep.on_ledger`, to attribute
the rest in the same walk).

The rule an orphan is judged by, here and in the object store's sweep
(:mod:`.offload_orphans`, ``pulsar offload orphans``), is :func:`judge`: only what is Pulsar's
is judged (anything else is counted apart), what a managed ledger names is not an orphan, and
what is younger than the age asked for (or of no known age) is left alone -- a broker makes a
ledger, or offloads one, before its managed ledger names it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..pulsar.managed_ledger import COMPONENT, CURSOR_KEY, MANAGED_LEDGER_KEY
from .ownership import YOUNG_LEDGER_SECONDS, candidates, pulsar_component
from .topic_state import bookies_of, topic_reader

if TYPE_CHECKING:
    from ..metadata.ledger import LedgerMetadata
    from ..metadata.store import MetadataStore, WalkProgress

__all__ = ["LedgerSeen", "Orphan", "OrphanSweep", "Verdict", "judge"]


class Verdict(Enum):
    """What :func:`judge` makes of a ledger or an object."""

    #: not Pulsar's: never called an orphan, counted apart
    FOREIGN = "foreign"
    #: a managed ledger names it
    NAMED = "named"
    #: no one names it, but it is younger than the age asked for (or its age is unknown)
    YOUNG = "young"
    ORPHAN = "orphan"


def judge(pulsars: bool, named: bool, born: float | None, cutoff: float) -> Verdict:
    """The one orphan rule (see the module documentation): ``born`` and ``cutoff`` in the same
    unit (None: of no known age)."""
    if not pulsars:
        return Verdict.FOREIGN
    if named:
        return Verdict.NAMED
    if born is None or born > cutoff:
        return Verdict.YOUNG
    return Verdict.ORPHAN


#: told of each ledger the sweep's walk reads: its id, its metadata (None: deleted meanwhile;
#: an exception: it does not decode) and its znode version
LedgerSeen = Callable[[int, "LedgerMetadata | Exception | None", int], None]


@dataclass(frozen=True)
class Orphan:
    """A Pulsar ledger nothing lists, old enough to judge."""

    ledger_id: int
    managed_ledger: str | None
    cursor: str | None
    state: str
    #: entries and size of a closed ledger (None: open)
    entries: int | None
    size: int | None
    created: str | None
    bookies: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "ledger_id": self.ledger_id,
            "managed_ledger": self.managed_ledger,
            "cursor": self.cursor,
            "state": self.state,
            "entries": self.entries,
            "size": self.size,
            "created": self.created,
            "bookies": self.bookies,
        }


class OrphanSweep:
    """Every ledger Pulsar made for a managed ledger (its custom metadata says
    so) that no managed ledger lists as a data ledger and no cursor as its
    ledger: what :func:`~.ownership.ledger_owner` calls an orphan, over the whole cluster.

    Iterating yields one :class:`Orphan` per orphan, in ledger id order.  A broker
    creates a ledger before its managed ledger lists it, and trims the list
    before it deletes the ledger: ledgers younger than ``older_than`` seconds
    are left out (counted in ``young``), and each candidate is checked again
    (its managed ledger re-read, the ledger still there) before it is
    reported.  Ledgers of Pulsar's other components are counted in
    ``unchecked``, ledgers whose metadata does not decode in ``unreadable``;
    neither is reported.  Ledger metadata is read in one walk
    (``store.ledgers.walk``), which tells ``progress``, and ``on_ledger`` of each ledger."""

    def __init__(
        self,
        store: MetadataStore,
        base: str | None = None,
        older_than: float = YOUNG_LEDGER_SECONDS,
        now_ms: int | None = None,
        progress: WalkProgress | None = None,
        recheck_batch: int = 1000,
        listed: Container[int] | None = None,
        on_ledger: LedgerSeen | None = None,
    ):
        self.store = store
        #: the ledgers the managed ledgers list, when the caller read them already (None: read here)
        self.listed = listed
        #: how many unlisted ledgers are read again at once: each after the walk found it
        #: unlisted and before it is reported (1: each just before its own report)
        self.recheck_batch = max(1, recheck_batch)
        self.progress = progress
        self.on_ledger = on_ledger
        self.topics = topic_reader(store, base)
        self.older_than = older_than
        self.now_ms = now_ms
        self.checked = self.pulsar = self.young = self.unchecked = self.unreadable = 0
        self.orphans = self.orphan_bytes = 0

    def __iter__(self) -> Iterator[Orphan]:
        from ..text import custom_metadata_text

        listed = self.listed
        if listed is None:
            found: set[int] = set()
            for ml in candidates(self.topics, {}):
                found |= ml.listed
            listed = found
        now_ms = self.now_ms if self.now_ms is not None else int(time.time() * 1000)
        cutoff = now_ms - self.older_than * 1000
        seen = self.on_ledger
        batch: list[tuple[int, LedgerMetadata, dict[str, str]]] = []
        for ledger_id, md, version in self.store.ledgers.walk(progress=self.progress):
            if seen is not None:
                seen(ledger_id, md, version)
            self.checked += 1
            if md is None:
                continue  # deleted meanwhile
            if isinstance(md, Exception):  # metadata that does not decode: not judged, counted
                self.unreadable += 1
                continue
            custom = custom_metadata_text(md.custom_metadata)
            component = pulsar_component(custom)
            if component is None:
                continue
            self.pulsar += 1
            if component != COMPONENT:
                self.unchecked += 1
                continue
            if ledger_id in listed:
                continue
            batch.append((ledger_id, md, custom))
            if len(batch) >= self.recheck_batch:
                yield from self._judged(batch, cutoff)
                batch = []
        yield from self._judged(batch, cutoff)

    def _judged(self, batch: list[tuple[int, LedgerMetadata, dict[str, str]]], cutoff: float) -> Iterator[Orphan]:
        """The orphans among *batch* (unlisted when the walk began), each read again
        now -- gone, or listed after all, it is none -- a batch at a time: their ledgers and
        the managed ledgers they name each read pipelined, not four round trips a ledger."""
        if not batch:
            return
        there = {r.ledger_id for r in self.store.ledgers.read_many([c[0] for c in batch]) if r.metadata}
        named = sorted({custom[MANAGED_LEDGER_KEY] for _, _, custom in batch if custom.get(MANAGED_LEDGER_KEY)})
        listed_now: set[int] = set()
        for ml in self.topics.read_all_named(named):
            listed_now |= ml.listed
        for ledger_id, md, custom in batch:
            if ledger_id not in there:
                continue  # deleted meanwhile
            is_named = ledger_id in listed_now or (
                # names no managed ledger: every one read again
                not custom.get(MANAGED_LEDGER_KEY)
                and any(ledger_id in ml.listed for ml in candidates(self.topics, custom))
            )
            verdict = judge(True, is_named, md.ctime, cutoff)
            if verdict is Verdict.NAMED:
                continue
            if verdict is Verdict.YOUNG:
                self.young += 1
                continue
            self.orphans += 1
            self.orphan_bytes += md.length if md.is_closed else 0
            yield _orphan(ledger_id, md, custom)


def _orphan(ledger_id: int, md: LedgerMetadata, custom: dict[str, str]) -> Orphan:
    from ..text import utc_iso

    return Orphan(
        ledger_id,
        custom.get(MANAGED_LEDGER_KEY),
        custom.get(CURSOR_KEY),
        md.state.name,
        md.last_entry_id + 1 if md.is_closed else None,
        md.length if md.is_closed else None,
        utc_iso(md.ctime),
        bookies_of(md),
    )
