"""The plan of a topic export (``bkctl export --topic``): which messages (:class:`TopicSpec`),
and the tasks that read them (:class:`TopicRange`, one range of one ledger each), made from the
topic's managed ledgers before any task runs -- in the bkctl process or Spark's planning worker --
apart from the reading because it reads metadata, not entries, and its rules are the managed
ledger's:

* the ledgers the managed ledger lists (each partition's, for a partitioned topic), up to the
  last entry of a closed ledger, and for the open one up to its newest entry that an ack quorum
  of its bookies holds -- past its LAC, as its broker would recover it, read without fencing
  (:mod:`bkctl.wire.client.unconfirmed_tail`); those entries are counted in the manifest's
  ``read_past_lac`` and the summary (never past a terminated position);
* a ledger offloaded to tiered storage is read from there when the offload is complete -- as a
  broker reads it with its default ``tiered-storage-first`` priority, or only once its
  BookKeeper copy is deleted with ``bookkeeper-first`` (:attr:`TopicSpec.offload_read`) -- so a
  ledger in both places is read once; one whose offload names no driver this reader speaks, and
  whose BookKeeper copy is gone, is skipped (reported);
  ledgers wholly acknowledged are left out with ``--unacked-only``; a listed ledger that was
  deleted stops the export (:class:`TopicLedgersMissing`, exit 3) unless ``skip_missing``;
* ``--from``/``--to`` skip whole ledgers and narrow the others;
* a ledger is read by tasks of at most ``--split-entries`` entries and, when its size is known
  (closed or offloaded), of about :data:`~.ledger_plan.SPLIT_BYTES` (128 MiB) each, so that a large
  ledger keeps every core busy.

The rules of which entries a read takes -- the window of publish times, the offload read
priority -- are :mod:`.topic_window`'s; the managed ledger's state (its ledgers, the cursor's
position) :mod:`.topic_state`'s.  ``bkctl export`` (:mod:`bkctl.export.topic_source`) gives the
plan the topic's schema and transactions, runs its tasks and renders what they read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import NotFound
from ..text import custom_metadata_text
from . import ledger_plan
from .entry_source import EntrySource
from .ledger_plan import LedgerPlan
from .topic_window import OFFLOAD_READ, PublishTimeOf, Pushdown, offloaded_copy

if TYPE_CHECKING:
    from ..client.unconfirmed_tail import Tail
    from ..metadata.store import MetadataStore
    from ..pulsar.managed_ledger import CursorState
    from ..pulsar.offload_store import OffloadLocation
    from .topic_state import BookKeeperFactory

__all__ = [
    "TopicLedgersMissing",
    "TopicPlan",
    "TopicRange",
    "TopicSpec",
    "cursor_from_json",
    "cursor_json",
    "namespace_topics",
    "plan_topic",
]


class TopicLedgersMissing(NotFound):
    """Ledgers the managed ledger lists are gone from BookKeeper (exit 3 unless --skip-missing)."""


@dataclass(frozen=True)
class TopicSpec:
    """Which messages of which topic to export."""

    topic: str
    #: the subscription whose cursor ``unacked_only`` uses (and whose state the manifest records)
    subscription: str | None = None
    unacked_only: bool = False
    #: publish times ``from_ms <= t < to_ms``
    from_ms: int | None = None
    to_ms: int | None = None
    #: ledgers the managed ledger lists but that were deleted: skipped instead of failing
    skip_missing: bool = False
    #: a corrupt entry becomes an error ``row`` or is ``skip``ped (reported either way)
    on_corrupt: str = "row"
    #: Pulsar's managed-ledger root (default: beside the ledger root)
    managed_ledgers: str | None = None
    #: a subscription whose position can only be read from its znode fails the plan
    strict: bool = False
    #: the messages an open transaction holds back are exported with ``pending`` set, not left out
    include_pending: bool = False
    #: today's rows only: no ``value`` column typed by the topic's schema
    raw: bool = False
    #: the schema version the values are read as (None: the newest readable one)
    schema_version: int | None = None
    #: where a ledger both offloaded and still in BookKeeper is read: Pulsar's
    #: ``managedLedgerDataReadPriority`` (tiered-storage-first, its default, or bookkeeper-first)
    offload_read: str = "tiered-storage-first"
    #: find the transactions' outcomes before the tasks run, reading every entry's metadata
    #: (what the data source does); False: the tasks find them as they read, and
    #: :meth:`~.topic_source.TopicSource.redo` names the few tasks to run again (what ``run_export`` does)
    scan_first: bool = True

    def __post_init__(self) -> None:
        from bkctl.wire.pulsar.managed_ledger import TopicName

        try:  # short names as pulsar-admin takes them, written out in full
            object.__setattr__(self, "topic", str(TopicName.parse(self.topic)))
        except ValueError as exc:  # a bad name; a znode that does not decode is no usage error
            raise ledger_plan.SpecError(str(exc)) from None
        if self.unacked_only and self.subscription is None:
            raise ledger_plan.SpecError("--unacked-only needs --subscription")
        if self.raw and self.schema_version is not None:
            raise ledger_plan.SpecError("--schema-version reads values by a schema; --raw reads none")
        if self.offload_read not in OFFLOAD_READ:
            raise ledger_plan.SpecError(
                f"offload read priority: {' or '.join(OFFLOAD_READ)}, not {self.offload_read!r}"
            )
        if self.on_corrupt not in ("row", "skip"):
            raise ledger_plan.SpecError(f"on corrupt entries: row or skip, not {self.on_corrupt!r}")


@dataclass(frozen=True)
class TopicRange:
    """Entries ``first..last`` of one of a topic's ledgers: the work of one task."""

    topic: str
    partition: int
    ledger_id: int
    first: int
    last: int
    #: the ledger's last planned entry: how far a task may read on to finish a chunked message
    ledger_last: int
    cursor: str | None = None
    from_ms: int | None = None
    to_ms: int | None = None
    error_rows: bool = True
    #: the topic's next ledger, when it directly follows this one in the plan: where a
    #: task reads on for a chunked message its ledger ends inside (Pulsar rolls a
    #: ledger over between two chunks as between two messages)
    next_ledger: int | None = None
    next_last: int = -1
    #: this ledger directly follows a planned one: chunks at its start that continue a
    #: message begun there are the task's that began it
    follows: bool = False
    #: the ledger is open: entries past its LAC (up to ``ledger_last``, planned) may be read
    unconfirmed: bool = False
    next_unconfirmed: bool = False
    #: what the range needs of its topic's transactions (None: none there; the export's
    #: :mod:`~bkctl.export.topic_transactions` fills it in)
    transactions: Any = None
    #: keep what an open transaction holds back, marked pending
    pending: bool = False
    #: report the transactions the range's entries show (``counts["transactions"]``)
    scan: bool = False
    #: the topic's :class:`~bkctl.wire.pulsar.typed.TypedView` (None: raw rows, no ``value``)
    typed: Any = None
    #: the ledger's (and the next ledger's) offloaded copy the task reads instead of the bookies
    #: (:class:`~bkctl.wire.pulsar.offload_store.OffloadLocation`; None: the bookies)
    offload: OffloadLocation | None = None
    next_offload: OffloadLocation | None = None

    @property
    def entries(self) -> int:
        return self.last - self.first + 1

    @property
    def source(self) -> EntrySource:
        """Where the range's entries are read (the plan's choice)."""
        return EntrySource(self.ledger_id, self.offload, self.unconfirmed)

    @property
    def next_source(self) -> EntrySource | None:
        """Where the topic's next ledger is read on, for a chunked message (None: no next ledger)."""
        if self.next_ledger is None:
            return None
        return EntrySource(self.next_ledger, self.next_offload, self.next_unconfirmed)


@dataclass
class TopicPlan:
    """What :func:`plan_topic` planned: a :class:`~.ledger_plan.LedgerPlan` per ledger read, the
    tasks, the ledgers left out and why (each with its topic), and ``details``:
    ``"topics"`` describes each managed ledger, ``"warnings"`` the subscriptions whose position
    fell back to the znode, ``"pushdown"`` what the ``--from``/``--to`` window skipped."""

    plans: list[LedgerPlan]
    tasks: list[TopicRange]
    skipped: list[ledger_plan.SkippedLedger] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


def namespace_topics(store: MetadataStore, namespace: str, managed_ledgers: str | None = None) -> list[str]:
    """The topics an export of ``namespace`` (``tenant/ns``, or a v1 name's ``tenant/cluster/ns``)
    takes, sorted: every persistent topic with a managed ledger there, a partition as its
    partitioned topic (exported whole, every partition, as ``--topic`` exports one).
    :class:`~.ledger_plan.SpecError` for a name that is not ``tenant/namespace``."""
    from .topic_state import topic_reader

    parts = namespace.strip().split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise ledger_plan.SpecError(f"{namespace!r} is not a namespace (want tenant/namespace)")
    topics = topic_reader(store, managed_ledgers).topics(parts[0], "/".join(parts[1:]))
    return sorted(dict.fromkeys(str(t.partitioned_topic) for t in topics))


def cursor_json(state: CursorState) -> str:
    return json.dumps(
        {
            "mark_delete": list(state.mark_delete),
            "ranges": [[list(lo), list(hi)] for lo, hi in state.ranges],
            "batch": [[list(pos), list(words)] for pos, words in state.batch_deletes.items()],
        }
    )


def cursor_from_json(text: str) -> CursorState:
    from ..pulsar.managed_ledger import CursorState

    doc = json.loads(text)
    return CursorState(
        tuple(doc["mark_delete"]),
        [(tuple(lo), tuple(hi)) for lo, hi in doc["ranges"]],
        {tuple(pos): tuple(words) for pos, words in doc["batch"]},
    )


def plan_topic(
    store: MetadataStore,
    spec: TopicSpec,
    split_entries: int,
    tail_of: Callable[[int], Tail],
    client: BookKeeperFactory | None = None,
    time_of: PublishTimeOf | None = None,
    scan: bool = False,
    offloaded: Callable[[OffloadLocation], int] | None = None,
) -> TopicPlan:
    """Plan the export of ``spec.topic`` (see the module documentation):
    ``tail_of(ledger_id)`` gives the open ledger's
    :class:`~bkctl.wire.client.unconfirmed_tail.Tail`, ``client()`` a
    BlockingBookKeeper to read a cursor ledger with (None: the cursor's
    znode alone), ``time_of(source, entry)`` an entry's publish
    time for the ``--from``/``--to`` pushdown (:class:`Pushdown`; None: no
    pushdown), ``scan`` the tasks' :attr:`TopicRange.scan`.  The plan's
    ``details["topics"]`` describes each managed
    ledger, ``details["warnings"]`` the subscriptions whose position fell
    back to the znode (:class:`~bkctl.wire.domain.topic_state.CursorFallback` with
    ``spec.strict``), ``details["pushdown"]`` what the window skipped.
    ``offloaded(location)`` gives the last entry id of each ledger read from tiered storage by
    its offloaded copy, reading the copy's index before any task (the reader's
    :meth:`~bkctl.export.executor.LedgerReader.offloaded_last_entry`; None: the managed ledger's count)."""
    from ..pulsar.errors import NoSuchSubscription
    from .topic_state import CursorFallback, cursor_state, fallback_warning, metadata_in_batches, resolve_topics
    from .topic_state import topic_reader as reader

    topics = reader(store, spec.managed_ledgers)
    managed = resolve_topics(topics, spec.topic)
    out = TopicPlan([], [], details={"topics": {}, "warnings": []})
    tasks: list[dict[str, Any]] = []  # out.tasks' fields: a ledger's are completed by the next one's
    pushdown = Pushdown(spec.from_ms, spec.to_ms, time_of) if time_of is not None else None
    topics_doc = out.details["topics"]
    missing: list[str] = []
    for ml in managed:
        topic = ml.topic
        assert topic is not None  # read by its name (resolve_topics)
        name = str(topic)
        follows = 0  # the ranges of the ledger before, when it was planned: the last ones of tasks
        cursor = None
        if spec.subscription is not None:
            info = ml.cursors.get(spec.subscription)
            if info is None:
                raise NoSuchSubscription(
                    f"{name} has no subscription {spec.subscription!r}"
                    f" (it has: {', '.join(sorted(ml.cursors)) or 'none'})"
                )
            state, source = cursor_state(info, client)
            if source.fallback:
                warning = fallback_warning(name, spec.subscription, source.fallback)
                if spec.strict:
                    raise CursorFallback(f"{warning} (--strict)")
                out.details["warnings"].append(warning)
            cursor = cursor_json(state) if spec.unacked_only else None
        past_lac: list[dict[str, int]] = []
        offloads: list[dict[str, Any]] = []
        topics_doc[name] = {
            "managed_ledger": ml.name,
            "partition": topic.partition,
            "ledgers": ml.ledger_ids,
            "subscription": spec.subscription,
            "cursor": None
            if spec.subscription is None
            else {**state.to_json(), "from": str(source), "source": source.kind.value, "fallback": source.fallback},
            "read_past_lac": past_lac,
            "offloaded": offloads,
        }
        terminated = ml.terminated
        previous_closed_at: int | None = None
        reads = metadata_in_batches(store, [li.ledgerId for li in ml.info.ledgerInfo])
        for li in ml.info.ledgerInfo:
            ledger_id = li.ledgerId
            md = next(reads)
            before, previous_closed_at = previous_closed_at, li.timestamp or None
            if (
                pushdown is not None
                and pushdown.active
                and pushdown.skip_ledger(li.timestamp if li.HasField("entries") else None, before)
            ):
                pushdown.ledgers_skipped += 1
                if li.HasField("entries"):
                    pushdown.entries_skipped += li.entries
                elif md is not None:  # the open ledger: the managed ledger counts none of its entries yet
                    pushdown.entries_skipped += (md.last_entry_id if md.is_closed else tail_of(ledger_id).last) + 1
                follows = 0
                continue
            offload = li.offloadContext if li.HasField("offloadContext") else None
            location = offloaded_copy(li, ml.name, md is not None, spec.offload_read)
            if location is not None:
                offloaded_last = offloaded(location) if offloaded is not None else li.entries - 1
                offloads.append(location.to_json())
            elif md is None:
                follows = 0
                if offload is not None and offload.complete and offload.bookkeeperDeleted:
                    out.skipped.append(
                        ledger_plan.SkippedLedger(
                            ledger_id, "offloaded to tiered storage and deleted from BookKeeper", name
                        )
                    )
                    continue
                missing.append(f"{ledger_id} (of {name})")
                out.skipped.append(
                    ledger_plan.SkippedLedger(ledger_id, "listed by the managed ledger but deleted", name)
                )
                continue
            if location is not None:
                last = offloaded_last
            elif md is not None and md.is_closed:
                last = md.last_entry_id
            else:
                tail = tail_of(ledger_id)
                last = tail.last
            if terminated is not None and ledger_id == terminated[0]:
                last = min(last, terminated[1])
            unconfirmed = location is None and md is not None and not md.is_closed
            entries_from = EntrySource(ledger_id, location, unconfirmed)
            if unconfirmed and last > tail.lac:
                past_lac.append({"ledger_id": ledger_id, "lac": tail.lac, "last": last, "entries": last - tail.lac})
            if cursor is not None and state.first_unacked(ledger_id) > last:
                out.skipped.append(
                    ledger_plan.SkippedLedger(ledger_id, f"wholly acknowledged by {spec.subscription}", name)
                )
                follows = 0
                continue
            first, end = 0, last
            if pushdown is not None and pushdown.active:
                first, last = pushdown.narrow(
                    entries_from, 0, last, li.timestamp if li.HasField("entries") else None, before
                )
                if first > last:
                    pushdown.ledgers_skipped += 1
                    follows = 0
                    continue
                if first > 0:
                    follows = 0  # the window starts inside the ledger: nothing continues from the one before
            if md is None:  # offloaded, its BookKeeper copy deleted: the managed ledger's word
                plan = LedgerPlan(ledger_id, "CLOSED", None, {}, first, last, li.size, 0)
            else:
                plan = LedgerPlan(
                    ledger_id=ledger_id,
                    state=md.state.name,
                    ctime_ms=md.ctime,
                    metadata=custom_metadata_text(md.custom_metadata),
                    first=first,
                    last=last,
                    length=md.length if md.is_closed else None,
                    segments=len(md.ensembles),
                )
            out.plans.append(plan)
            ranges = [
                {
                    "topic": name,
                    "partition": topic.partition,
                    "ledger_id": ledger_id,
                    "first": r.first,
                    "last": r.last,
                    "ledger_last": end,
                    "cursor": cursor,
                    "from_ms": spec.from_ms,
                    "to_ms": spec.to_ms,
                    "error_rows": spec.on_corrupt == "row",
                    "unconfirmed": unconfirmed,
                    "scan": scan,
                    "offload": location,
                }
                for r in ledger_plan.split_ranges([plan], ledger_plan.task_entries(split_entries, plan.length, end + 1))
            ]
            if ranges and follows:  # a chunked message begun in any range of the ledger before may end here
                for r in tasks[-follows:]:
                    r.update(next_ledger=ledger_id, next_last=end, next_unconfirmed=unconfirmed, next_offload=location)
                ranges[0]["follows"] = True
            tasks.extend(ranges)
            follows = len(ranges)
    # each task is made once, whole (a topic may have tens of thousands of ledgers)
    out.tasks = [TopicRange(**fields) for fields in tasks]
    if pushdown is not None and pushdown.active:
        out.details["pushdown"] = pushdown.to_json()
    if missing and not spec.skip_missing:
        raise TopicLedgersMissing(
            f"ledgers listed by {spec.topic} but deleted: {', '.join(missing)} (--skip-missing exports the rest)"
        )
    return out
