"""The topic export (``bkctl export --topic``): a Pulsar topic's messages, one row each.

The columns are :data:`~bkctl.export.columns.TOPIC_COLUMNS`; the export's
machinery (:func:`~bkctl.export.job.run_export`: output directory, Spark
tasks, commit, manifest) does the rest.  What is the topic's own:

* planning (:func:`plan_topic`): the ledgers the managed ledger lists (each
  partition's, for a partitioned topic), up to the last entry of a closed
  ledger, and for the open one up to its newest entry that an ack quorum of
  its bookies holds -- past its LAC, as its broker would recover it, read
  without fencing (:mod:`bkctl.wire.client.unconfirmed_tail`); those entries
  are counted in the manifest's ``read_past_lac`` and the summary (never
  past a terminated position);
  a ledger offloaded to tiered storage and deleted from BookKeeper is
  skipped (reported);
  ledgers wholly acknowledged are left out with ``--unacked-only``; a listed
  ledger that was deleted stops the export (:class:`TopicLedgersMissing`,
  exit 3) unless ``skip_missing``;
* the task (:meth:`TopicSource.read`): reads its entries as the ledger
  export does, decodes them (:class:`~bkctl.wire.pulsar.messages.TopicDecoder`),
  and puts rows below ``topic=T/date=D/ledger_id=N`` (the UTC day of each
  message's publish time).  A task whose range ends inside a chunked message
  reads on until that message is complete -- into the topic's next ledger
  when a rollover cut the message there; its row then goes with the ledger
  of its last chunk, whose position is Pulsar's id for it -- and the next
  task leaves those chunks alone;
* checking (:meth:`TopicSource.verify`): every planned entry was read, and
  the files hold the rows the tasks made.

The rows are what a consumer receives: marker entries, messages of aborted
transactions and whatever an open transaction holds back are left out and
counted; the transactions are scanned once for the plan
(:mod:`~bkctl.export.topic_transactions`).
"""
from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from bkctl.wire.errors import NotFound
from bkctl.wire.text import custom_metadata_text, utc_iso

from . import planning
from .columns import TOPIC_COLUMNS, arrow_schema, manifest_columns
from .executor import LedgerReader, ReadSettings
from .planning import LedgerPlan
from .source import ExportError, SourcePlan, Written

__all__ = ["PUBLISH_TIME_SLACK_MS", "Pushdown", "TopicLedgersMissing", "TopicRange", "TopicSource", "TopicSpec",
           "escape_partition_value", "plan_topic", "publish_time_reader", "read_topic_range", "topic_typing"]

#: A record batch every this many rows: the packed buffers stay small enough to
#: stay in the CPU's caches (100,000 rows per batch cost 5% more CPU per message)
ROWS_PER_BATCH = 32_768
#: Characters Spark (Hive) escapes in a partition folder's value.
_ESCAPE = set('"#%\'*/:=?\\{[]^') | {chr(c) for c in range(0x20)} | {"\x7f"}
#: Where a topic export's rows go.
LAYOUT = "topic=T/date=YYYY-MM-DD/ledger_id=N/"


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
    #: find the transactions' outcomes before the tasks run, reading every entry's metadata
    #: (what the data source does); False: the tasks find them as they read, and
    #: :meth:`TopicSource.redo` names the few tasks to run again (what ``run_export`` does)
    scan_first: bool = True

    def __post_init__(self) -> None:
        from bkctl.wire.pulsar.managed_ledger import TopicName

        try:  # short names as pulsar-admin takes them, written out in full
            object.__setattr__(self, "topic", str(TopicName.parse(self.topic)))
        except ValueError as exc:  # a bad name; a znode that does not decode is no usage error
            raise planning.SpecError(str(exc)) from None
        if self.unacked_only and self.subscription is None:
            raise planning.SpecError("--unacked-only needs --subscription")
        if self.raw and self.schema_version is not None:
            raise planning.SpecError("--schema-version reads values by a schema; --raw reads none")
        if self.on_corrupt not in ("row", "skip"):
            raise planning.SpecError(f"on corrupt entries: row or skip, not {self.on_corrupt!r}")


def escape_partition_value(value: str) -> str:
    """A folder name's value as Spark writes it (``%XX`` for its special characters)."""
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPE else ch for ch in value)


# ---------------------------------------------------------------- planning


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
    #: what the range needs of its topic's transactions (None: none there)
    transactions: Any = None
    #: keep what an open transaction holds back, marked pending
    pending: bool = False
    #: report the transactions the range's entries show (``counts["transactions"]``)
    scan: bool = False
    #: the topic's :class:`~bkctl.wire.pulsar.typed.TypedView` (None: raw rows, no ``value``)
    typed: Any = None

    @property
    def entries(self) -> int:
        return self.last - self.first + 1


def _cursor_json(state) -> str:
    return json.dumps({"mark_delete": list(state.mark_delete), "ranges": [[list(lo), list(hi)] for lo, hi in state.ranges],
                       "batch": [[list(pos), list(words)] for pos, words in state.batch_deletes.items()]})


def _cursor_from_json(text: str):
    from bkctl.wire.pulsar.managed_ledger import CursorState

    doc = json.loads(text)
    return CursorState(tuple(doc["mark_delete"]), [(tuple(lo), tuple(hi)) for lo, hi in doc["ranges"]],
                       {tuple(pos): tuple(words) for pos, words in doc["batch"]})


#: How far publish times may run against the order of a topic's entries and the
#: broker's ledger timestamps (producer clocks, batching delays, sends queued at a
#: rollover) for the --from/--to pushdown still to find every message of the window.
PUBLISH_TIME_SLACK_MS = 60_000


class Pushdown:
    """The --from/--to pushdown of one plan (Pulsar SQL's ``__publish_time__``
    pushdown): whole ledgers skipped by ManagedLedgerInfo's timestamps -- a
    closed ledger whose close time is before ``from`` (less the slack) holds
    nothing newer; a ledger whose predecessor closed after ``to`` (plus the
    slack) was created after it and holds nothing older -- and inside a ledger
    the first and last entries of the window found by bisecting on the
    entries' publish times (``time_of(ledger, entry, unconfirmed)``, one
    entry read each), as publish times grow along a topic.  The exact window
    is still applied to every message read; ``to_json`` counts what was skipped."""

    def __init__(self, from_ms: int | None, to_ms: int | None, time_of, slack_ms: int = PUBLISH_TIME_SLACK_MS):
        self.from_ms, self.to_ms, self.time_of, self.slack = from_ms, to_ms, time_of, slack_ms
        self.ledgers_skipped = self.entries_skipped = self.bisection_reads = 0

    @property
    def active(self) -> bool:
        return self.from_ms is not None or self.to_ms is not None

    def skip_ledger(self, closed_at: int | None, previous_closed_at: int | None) -> bool:
        """Whether a ledger lies wholly outside the window by the managed ledger's timestamps."""
        if self.from_ms is not None and closed_at and closed_at + self.slack < self.from_ms:
            return True
        return self.to_ms is not None and bool(previous_closed_at) and previous_closed_at - self.slack >= self.to_ms

    def _first_at_or_after(self, ledger_id: int, lo: int, hi: int, target: int, unconfirmed: bool) -> int:
        """The first entry of ``lo..hi`` published at or after ``target`` (``hi + 1``: none)."""
        end = hi + 1
        while lo < end:
            mid = (lo + end) // 2
            self.bisection_reads += 1
            t = self.time_of(ledger_id, mid, unconfirmed)
            if t is None:  # an entry whose time cannot be read: stop narrowing, keep the rest
                return lo
            if t < target:
                lo = mid + 1
            else:
                end = mid
        return lo

    def narrow(self, ledger_id: int, first: int, last: int, unconfirmed: bool, closed_at: int | None = None,
               previous_closed_at: int | None = None) -> tuple[int, int]:
        """The entries of ``first..last`` that may hold messages of the window;
        an edge the managed ledger's timestamps already place outside the
        ledger (created after ``from``, closed before ``to``) is not bisected."""
        total = last - first + 1
        if total <= 0:
            return first, last
        if self.from_ms is not None and not (previous_closed_at and previous_closed_at >= self.from_ms):
            first = self._first_at_or_after(ledger_id, first, last, self.from_ms - self.slack, unconfirmed)
        if self.to_ms is not None and first <= last and not (closed_at and closed_at < self.to_ms):
            last = self._first_at_or_after(ledger_id, first, last, self.to_ms + self.slack, unconfirmed) - 1
        self.entries_skipped += total - max(0, last - first + 1)
        return first, last

    def to_json(self) -> dict[str, Any]:
        return {"from": utc_iso(self.from_ms), "to": utc_iso(self.to_ms), "slack_ms": self.slack,
                "ledgers_skipped": self.ledgers_skipped, "entries_skipped": self.entries_skipped,
                "bisection_reads": self.bisection_reads}


def publish_time_reader(reader: LedgerReader):
    """``time_of(ledger, entry, unconfirmed)``: an entry's publish time, one
    entry read (None when it does not decode)."""
    def time_of(ledger_id: int, entry_id: int, unconfirmed: bool) -> int | None:
        from bkctl.wire.pulsar.entry import decode_entry

        for entries in reader.entries(ledger_id, entry_id, entry_id, unconfirmed=unconfirmed):
            for _entry_id, data in entries:
                try:
                    return decode_entry(data, verify=False).metadata.publish_time
                except Exception:  # noqa: BLE001 - a corrupt entry: its time is unknown
                    return None
        return None
    return time_of


def plan_topic(store, spec: TopicSpec, split_entries: int, tail_of, client=None, time_of=None,
               scan: bool = False) -> SourcePlan:
    """Plan the export of ``spec.topic`` (see the module documentation):
    ``tail_of(ledger_id)`` gives the open ledger's
    :class:`~bkctl.wire.client.unconfirmed_tail.Tail`, ``client()`` a
    BlockingBookKeeper to read a cursor ledger with (None: the cursor's
    znode alone), ``time_of(ledger, entry, unconfirmed)`` an entry's publish
    time for the ``--from``/``--to`` pushdown (:class:`Pushdown`; None: no
    pushdown), ``scan`` the tasks' :attr:`TopicRange.scan`.  The plan's
    ``details["topics"]`` describes each managed
    ledger, ``details["warnings"]`` the subscriptions whose position fell
    back to the znode (:class:`~bkctl.ops.pulsar.CursorFallback` with
    ``spec.strict``), ``details["pushdown"]`` what the window skipped."""
    from bkctl.ops.pulsar import (CursorFallback, cursor_state, fallback_warning, metadata_in_batches, reader,
                                  resolve_topics)
    from bkctl.wire.pulsar.errors import NoSuchSubscription

    topics = reader(store, spec.managed_ledgers)
    managed = resolve_topics(topics, spec.topic)
    out = SourcePlan([], [], details={"topics": {}, "warnings": []})
    tasks: list[dict[str, Any]] = []  # out.tasks' fields: a ledger's are completed by the next one's
    pushdown = Pushdown(spec.from_ms, spec.to_ms, time_of) if time_of is not None else None
    topics_doc = out.details["topics"]
    missing: list[str] = []
    for ml in managed:
        name = str(ml.topic)
        follows = 0  # the ranges of the ledger before, when it was planned: the last ones of tasks
        cursor = None
        if spec.subscription is not None:
            info = ml.cursors.get(spec.subscription)
            if info is None:
                raise NoSuchSubscription(f"{name} has no subscription {spec.subscription!r}"
                                  f" (it has: {', '.join(sorted(ml.cursors)) or 'none'})")
            state, source = cursor_state(info, client)
            if source.fallback:
                warning = fallback_warning(name, spec.subscription, source.fallback)
                if spec.strict:
                    raise CursorFallback(f"{warning} (--strict)")
                out.details["warnings"].append(warning)
            cursor = _cursor_json(state) if spec.unacked_only else None
        past_lac: list[dict[str, int]] = []
        topics_doc[name] = {"managed_ledger": ml.name, "partition": ml.topic.partition,
                            "ledgers": ml.ledger_ids, "subscription": spec.subscription,
                            "cursor": None if spec.subscription is None else {
                                **state.to_json(), "from": str(source), "source": source.kind,
                                "fallback": source.fallback},
                            "read_past_lac": past_lac}
        terminated = ml.terminated
        previous_closed_at = None
        reads = metadata_in_batches(store, [li.ledgerId for li in ml.info.ledgerInfo])
        for li in ml.info.ledgerInfo:
            ledger_id = li.ledgerId
            md = next(reads)
            before, previous_closed_at = previous_closed_at, li.timestamp or None
            if pushdown is not None and pushdown.active and pushdown.skip_ledger(
                    li.timestamp if li.HasField("entries") else None, before):
                pushdown.ledgers_skipped += 1
                pushdown.entries_skipped += li.entries
                follows = 0
                continue
            offload = li.offloadContext if li.HasField("offloadContext") else None
            if md is None:
                follows = 0
                if offload is not None and offload.complete and offload.bookkeeperDeleted:
                    out.skipped.append({"ledger_id": ledger_id, "topic": name,
                                        "reason": "offloaded to tiered storage and deleted from BookKeeper"})
                    continue
                missing.append(f"{ledger_id} (of {name})")
                out.skipped.append({"ledger_id": ledger_id, "topic": name,
                                    "reason": "listed by the managed ledger but deleted"})
                continue
            if md.is_closed:
                last = md.last_entry_id
            else:
                tail = tail_of(ledger_id)
                last = tail.last
            if terminated is not None and ledger_id == terminated[0]:
                last = min(last, terminated[1])
            if not md.is_closed and last > tail.lac:
                past_lac.append({"ledger_id": ledger_id, "lac": tail.lac, "last": last, "entries": last - tail.lac})
            if cursor is not None and state.first_unacked(ledger_id) > last:
                out.skipped.append({"ledger_id": ledger_id, "topic": name,
                                    "reason": f"wholly acknowledged by {spec.subscription}"})
                follows = 0
                continue
            first, end = 0, last
            if pushdown is not None and pushdown.active:
                first, last = pushdown.narrow(ledger_id, 0, last, not md.is_closed,
                                              li.timestamp if li.HasField("entries") else None, before)
                if first > last:
                    pushdown.ledgers_skipped += 1
                    follows = 0
                    continue
                if first > 0:
                    follows = 0  # the window starts inside the ledger: nothing continues from the one before
            plan = LedgerPlan(ledger_id=ledger_id, state=md.state.name, ctime_ms=md.ctime,
                              metadata=custom_metadata_text(md.custom_metadata), first=first, last=last,
                              length=md.length if md.is_closed else None, segments=len(md.ensembles))
            out.plans.append(plan)
            ranges = [{"topic": name, "partition": ml.topic.partition, "ledger_id": ledger_id, "first": r.first,
                       "last": r.last, "ledger_last": end, "cursor": cursor, "from_ms": spec.from_ms,
                       "to_ms": spec.to_ms, "error_rows": spec.on_corrupt == "row", "unconfirmed": not md.is_closed,
                       "scan": scan}
                      for r in planning.split_ranges([plan], split_entries)]
            if ranges and follows:  # a chunked message begun in any range of the ledger before may end here
                for r in tasks[-follows:]:
                    r.update(next_ledger=ledger_id, next_last=end, next_unconfirmed=not md.is_closed)
                ranges[0]["follows"] = True
            tasks.extend(ranges)
            follows = len(ranges)
    # each task is made once, whole (a topic may have tens of thousands of ledgers)
    out.tasks = [TopicRange(**fields) for fields in tasks]
    if pushdown is not None and pushdown.active:
        out.details["pushdown"] = pushdown.to_json()
    if missing and not spec.skip_missing:
        raise TopicLedgersMissing(f"ledgers listed by {spec.topic} but deleted: {', '.join(missing)} "
                                  "(--skip-missing exports the rest)")
    return out


def topic_typing(store, spec: TopicSpec, reader: LedgerReader) -> tuple[Any, dict[str, Any]]:
    """The :class:`~bkctl.wire.pulsar.typed.TypedView` the topic's values are
    read by (None: raw rows) and the manifest's ``schema`` section: its schema
    id, the versions (each read from its ledger; one that cannot be read is
    named, and its messages become error rows), the reader version, the
    value's type, or why the values are not typed (``--raw``; no schema; a
    BYTES schema, whose value is the payload; a type with no reading)."""
    from bkctl.ops.pulsar_schema import registry
    from bkctl.wire.pulsar.errors import NoSuchSchema, SchemaUnreadable, Untyped
    from bkctl.wire.pulsar.schema import schema_id
    from bkctl.wire.pulsar.typed import TypedView

    sid = schema_id(spec.topic)
    doc: dict[str, Any] = {"schema_id": sid, "typed": False, "why_not": None, "reader_version": None,
                           "type": None, "versions": [], "unreadable": {}}
    if spec.raw:
        doc["why_not"] = "--raw"
        return None, doc
    reg = registry(store, spec.managed_ledgers, reader.client)
    locator = reg.locator(sid)
    if locator is None:
        doc["why_not"] = "the topic has no schema"
        if spec.schema_version is not None:
            raise NoSuchSchema(f"{spec.topic} has no schema (--schema-version {spec.schema_version})")
        return None, doc
    versions, unreadable = {}, {}
    for entry in sorted(locator.index):
        try:
            versions[entry.version] = reg.version(sid, entry.version, locator)[1]
        except SchemaUnreadable as exc:
            unreadable[entry.version] = str(exc)
    doc.update(versions=sorted(versions), unreadable={str(v): why for v, why in unreadable.items()})
    if spec.schema_version is not None and spec.schema_version not in versions:
        if spec.schema_version in unreadable:
            raise SchemaUnreadable(locator.entry(spec.schema_version).ledger_id, unreadable[spec.schema_version])
        raise NoSuchSchema(f"{spec.topic} has no schema version {spec.schema_version} "
                           f"(versions {', '.join(map(str, sorted(versions) + sorted(unreadable)))})")
    try:
        view = TypedView(versions, unreadable, spec.schema_version)
    except Untyped as exc:
        doc["why_not"] = str(exc)
        return None, doc
    from .columns import spark_type

    doc.update(typed=True, reader_version=view.reader, type=view.type,
               value_type=_simple_type(view.arrow_type, spark_type))
    return view, doc


def _simple_type(arrow_type, spark_type) -> str:
    """The value's type in Spark SQL's words (Arrow's when PySpark is not installed)."""
    try:
        return spark_type(arrow_type).simpleString()
    except ImportError:
        return str(arrow_type)


# ---------------------------------------------------------------- reading

def record_batch(part, schema) -> Any:
    """One record batch of ``schema`` from a :class:`~bkctl.wire.pulsar.messages.RowPart`,
    whichever splitter made it: a column as a list (the Python twin) or as
    Arrow buffers (the C twin, wrapped without a copy); the ``topic`` columns
    and those the part lacks made here."""
    import pyarrow as pa

    from bkctl.wire.pulsar.columns import BATCH_DEFAULTS

    n = part.rows
    constants = {"topic": part.topic, "partition": part.partition, **BATCH_DEFAULTS}
    arrays = []
    for f in schema:
        data = part.columns.get(f.name)
        if data is None:
            arrays.append(pa.repeat(pa.scalar(constants[f.name], f.type), n))
        elif isinstance(data, list):
            arrays.append(pa.array(data, f.type))
        else:
            arrays.append(_wrap(f.type, n, data))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _wrap(arrow_type, n: int, buffers) -> Any:
    """Arrow buffers ``(validity | None, null_count, values[, data])`` as an
    array (a map's: ``(validity | None, null_count, offsets, keys, values)``)."""
    import pyarrow as pa

    validity, nulls, *data = buffers
    bitmap = None if validity is None else pa.py_buffer(validity)
    if pa.types.is_map(arrow_type):
        offsets, keys, items = data
        count = len(keys[2]) // 4 - 1
        return pa.MapArray.from_arrays(pa.Array.from_buffers(pa.int32(), n + 1, [bitmap, pa.py_buffer(offsets)],
                                                             null_count=nulls),
                                       _wrap(arrow_type.key_type, count, keys), _wrap(arrow_type.item_type, count, items))
    return pa.Array.from_buffers(arrow_type, n, [bitmap] + [pa.py_buffer(b) for b in data], null_count=nulls)


def read_topic_range(reader: LedgerReader, part: TopicRange, counts: dict[str, Any] | None = None) -> Iterator[Any]:
    """Arrow record batches (the columns of :data:`~bkctl.export.columns.TOPIC_COLUMNS`)
    of the messages in ``part``; ``counts`` receives entries read, messages,
    bytes and problems."""
    from bkctl.wire.pulsar.messages import TopicDecoder

    keep = None
    if part.cursor is not None:
        state = _cursor_from_json(part.cursor)

        def keep(position, batch_index):
            return not state.message_acked(position, batch_index)

    decoder = TopicDecoder(part.topic, part.partition, keep=keep, from_ms=part.from_ms, to_ms=part.to_ms,
                           error_rows=part.error_rows, transactions=part.transactions, pending=part.pending)
    schema = arrow_schema(TOPIC_COLUMNS)
    if part.typed is not None:
        yield from _typed(_read_rows(reader, part, decoder, schema, counts), part, schema, counts)
        return
    yield from _read_rows(reader, part, decoder, schema, counts)


def _typed(batches: Iterator[Any], part: TopicRange, schema, counts: dict[str, Any] | None) -> Iterator[Any]:
    """The batches with each message's ``value`` decoded by the topic's schema
    (:attr:`TopicRange.typed`); a message that does not decode keeps its row,
    ``value`` null and ``error`` saying why (counted in ``counts["decode_errors"]``)."""
    import pyarrow as pa

    from bkctl.wire import fastpath

    view = part.typed
    avrocols = fastpath.selected().avro_columns
    typed_schema = schema.append(pa.field("value", view.arrow_type))
    failed: list[dict[str, Any]] = []
    for batch in batches:
        failures: dict[int, str] = {}
        n = batch.num_rows
        column = None
        if n:
            errors = batch.column("error")
            skip = None if errors.null_count == n else errors.to_pylist()
            versions = _same_or_list(batch.column("schema_version"))
            column = view.arrow_values(versions, batch.column("payload"), skip, avrocols)
            if column is None:
                keys = batch.column("key").to_pylist() if view.separated else None
                b64 = batch.column("key_base64_encoded").to_pylist() if view.separated else None
                values, failures = view.decode_many(versions, batch.column("payload").to_pylist(), keys, b64, skip)
                column, unfit = _value_array(values, view.arrow_type)
                failures.update(unfit)
        if column is None:
            column = pa.array([], view.arrow_type)
        arrays = batch.columns
        if failures:
            ids = batch.column("message_id").to_pylist()
            errors = batch.column("error").to_pylist()
            for i, why in sorted(failures.items()):
                errors[i] = f"{part.topic} message {ids[i]}: does not decode by its schema: {why}"
                failed.append({"topic": part.topic, "message_id": ids[i], "reason": why})
            arrays[schema.get_field_index("error")] = pa.array(errors, pa.string())
        yield pa.RecordBatch.from_arrays(arrays + [column], schema=typed_schema)
    if counts is not None:
        counts["decode_errors"] = failed


def _same_or_list(column) -> list:
    """A column's values as a list, made cheaply when they are all one (a batch's
    schema versions mostly are)."""
    import pyarrow.compute as pc

    n = len(column)
    if n and column.null_count in (0, n):
        distinct = pc.unique(column)
        if len(distinct) == 1:
            return [distinct[0].as_py()] * n
    return column.to_pylist()


def _value_array(values: list, arrow_type) -> tuple[Any, dict[int, str]]:
    """``values`` as an Arrow array; a value that does not fit the type
    (a JSON number too big for its field, ...) is null, with why."""
    import pyarrow as pa

    try:
        return pa.array(values, arrow_type), {}
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        pass
    fitted, unfit = [], {}
    for i, v in enumerate(values):
        try:
            pa.array([v], arrow_type)
            fitted.append(v)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
            fitted.append(None)
            unfit[i] = f"its value does not fit the column's type: {exc}"
    return pa.array(fitted, arrow_type), unfit


def _read_rows(reader: LedgerReader, part: TopicRange, decoder, schema, counts) -> Iterator[Any]:
    """The raw rows of ``part`` (:func:`read_topic_range` without ``value``)."""
    from bkctl.wire.pulsar.transactions import TransactionScan

    skip = part.first > 0 or part.follows
    ledger_id = part.ledger_id
    scan = TransactionScan() if part.scan else None
    for entries in reader.entries(ledger_id, part.first, part.last, unconfirmed=part.unconfirmed):
        for entry_id, data in entries:
            decoder.add(ledger_id, entry_id, data, skip_continuations=skip)
            if scan is not None:
                scan.add((ledger_id, entry_id), data)
            if decoder.rows >= ROWS_PER_BATCH:
                for rows in decoder.take_parts():
                    yield record_batch(rows, schema)
    for rows in decoder.take_parts():
        yield record_batch(rows, schema)
    read_ahead = _read_on(reader, decoder, ledger_id, part.last, part.ledger_last, part.unconfirmed)
    ended = "the ledger ends before the message's last chunk"
    if decoder.chunks.pending and part.next_ledger is not None:  # ... and then into the topic's next ledger
        read_ahead += _read_on(reader, decoder, part.next_ledger, -1, part.next_last, part.next_unconfirmed)
        ended = "the next ledger ends before the message's last chunk"
    decoder.finish(ended)
    for rows in decoder.take_parts():
        yield record_batch(rows, schema)
    if counts is not None:
        counts.update(entries=part.entries, read_ahead=read_ahead, messages=decoder.messages,
                      bytes=decoder.payload_bytes, problems=[p.to_json() for p in decoder.problems],
                      left_out=decoder.left_out)
        if scan is not None:
            counts["transactions"] = scan.result()


def _read_on(reader: LedgerReader, decoder, ledger_id: int, after: int, last: int, unconfirmed: bool) -> int:
    """Read ``ledger_id`` past entry ``after`` up to ``last``, 16 entries at a
    time, taking only the chunks of messages begun before, until none is
    unfinished; returns the entries read."""
    read_on = after
    while decoder.chunks.pending and read_on < last:
        stop = min(last, read_on + 16)
        for entries in reader.entries(ledger_id, read_on + 1, stop, unconfirmed=unconfirmed):
            for entry_id, data in entries:
                decoder.add(ledger_id, entry_id, data, only_continuations=True)
        read_on = stop
    return read_on - after


def _day(ms: int | None) -> str | None:
    if ms is None:
        return None
    return (_dt.date(1970, 1, 1) + _dt.timedelta(days=ms // 86_400_000)).isoformat()


def rows_by_folder(topic: str, batch) -> Iterator[tuple[str, Any]]:
    """A batch's rows as ``(leaf folder, rows)``: one folder per publish day and
    ledger (a chunked message the next ledger finishes is that ledger's row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .output import NO_DATE

    topic_dir = f"topic={escape_partition_value(topic)}"
    days = pc.cast(pc.divide(pc.cast(batch.column("publish_time"), pa.int64()), 86_400_000_000), pa.int64())
    unique_days = pc.unique(days).to_pylist()
    for day in unique_days:
        by_day = batch if len(unique_days) == 1 else batch.filter(
            pc.is_null(days) if day is None else pc.equal(days, day))
        unique_ledgers = pc.unique(by_day.column("ledger_id")).to_pylist()
        for ledger in unique_ledgers:
            rows = by_day if len(unique_ledgers) == 1 else by_day.filter(pc.equal(by_day.column("ledger_id"), ledger))
            yield f"{topic_dir}/date={_day(None if day is None else day * 86_400_000) or NO_DATE}/ledger_id={ledger}", \
                rows


# ---------------------------------------------------------------- the source


class TopicSource:
    """A Pulsar topic, one row per message (see the module documentation)."""

    partition_by = "topic"
    rows_are = "messages"
    columns = TOPIC_COLUMNS
    partition_columns = ("topic", "ledger_id")
    dictionary_columns = ()

    def __init__(self, spec: TopicSpec):
        self.spec = spec
        #: the rows' columns: :data:`TOPIC_COLUMNS`, and ``value`` once :meth:`type_values` found a schema
        self.columns = TOPIC_COLUMNS
        self._typing: tuple[Any, dict[str, Any]] | None = None

    def type_values(self, store: Any, reader: LedgerReader) -> Any:
        """Read the topic's schema (once) and type the rows' ``value`` by it:
        the :class:`~bkctl.wire.pulsar.typed.TypedView`, None for raw rows."""
        if self._typing is None:
            self._typing = topic_typing(store, self.spec, reader)
            view = self._typing[0]
            if view is not None:
                from bkctl.wire.pulsar.columns import value_column

                self.columns = TOPIC_COLUMNS + (value_column(view.arrow_type),)
        return self._typing[0]

    def plan(self, store: Any, reader: LedgerReader, split_entries: int) -> SourcePlan:
        from .topic_transactions import scan_transactions, with_transactions

        plan = plan_topic(store, self.spec, split_entries, reader.tail, reader.client, publish_time_reader(reader),
                          scan=not self.spec.scan_first)
        view = self.type_values(store, reader)
        plan.details["schema"] = self._typing[1]
        if view is not None:
            plan.tasks = [replace(t, typed=view) for t in plan.tasks]
        if not self.spec.scan_first:
            return plan
        transactions = scan_transactions(reader, plan.tasks)
        plan.tasks = with_transactions(plan.tasks, transactions, self.spec.include_pending)
        plan.details["transactions"] = {topic: t.to_json() for topic, t in transactions.items()}
        return plan

    def redo(self, plan: SourcePlan, reports: list[dict[str, Any]]) -> list[int]:
        """The tasks to run again once every task reported the transactions
        its entries show (``scan_first`` False): those holding messages of an
        aborted transaction, and those at or past where an open one holds
        messages back; they get what they need of the topic's transactions."""
        from .topic_transactions import tasks_to_redo

        if self.spec.scan_first:
            return []
        scans = {r["task"]: r["transactions"] for r in reports if "task" in r and "transactions" in r}
        again, plan.tasks, transactions = tasks_to_redo(plan.tasks, scans, reports, self.spec.include_pending)
        plan.details["transactions"] = {topic: t.to_json() for topic, t in transactions.items()}
        return again

    def read(self, settings: ReadSettings, task: TopicRange, counts: dict[str, Any]) -> Iterator[Any]:
        counts.update(topic=task.topic, ledger_id=task.ledger_id, first=task.first, last=task.last)
        return read_topic_range(LedgerReader.in_process(settings), task, counts)

    def folders(self, task: TopicRange, batch: Any) -> Iterator[tuple[str, Any]]:
        return rows_by_folder(task.topic, batch)

    def verify(self, plan: SourcePlan, reports: list[dict[str, Any]], staging: Any) -> Written:
        """Per ledger: messages written and their bytes, from the tasks'
        counts checked against the files they wrote; and the file count.  (A
        chunked message a rollover cut is counted with the ledger it began
        in, though its row is in the next ledger's folder.)"""
        tasks = [r for r in reports if "task" in r]
        files = [r for r in reports if "name" in r]
        covered: dict[int, list[tuple[int, int]]] = {}
        stats: dict[int, dict[str, int]] = {}
        for r in tasks:
            covered.setdefault(r["ledger_id"], []).append((r["first"], r["last"]))
            s = stats.setdefault(r["ledger_id"], {"rows": 0, "bytes": 0, "first": r["first"], "last": r["last"]})
            s["rows"] += r["messages"] + (len(r["problems"]) if self.spec.on_corrupt == "row" else 0)
            s["bytes"] += r["bytes"]
            s["first"], s["last"] = min(s["first"], r["first"]), max(s["last"], r["last"])
        problems = []
        for p in plan.plans:
            if not p.entries:
                continue
            spans = sorted(covered.get(p.ledger_id, []))
            want = p.first
            for lo, hi in spans:
                if lo != want:
                    break
                want = hi + 1
            if want != p.last + 1:
                problems.append(f"ledger {p.ledger_id}: entries {p.first}..{p.last} planned, read {spans}")
        written = sum(f["rows"] for f in files)
        made = sum(s["rows"] for s in stats.values())
        if written != made:
            problems.append(f"the tasks made {made} rows but their files hold {written}")
        if problems:
            raise ExportError("the written data does not match the plan: " + "; ".join(problems[:5]))
        return Written(stats, len(files))

    @staticmethod
    def problems(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [p for r in reports if "task" in r for p in r.get("problems", [])]

    @staticmethod
    def left_out(reports: list[dict[str, Any]]) -> dict[str, Any]:
        """What the tasks left out (or kept as pending), summed: markers by name, aborted, pending."""
        out: dict[str, Any] = {"markers": {}, "aborted": 0, "pending": 0, "pending_kept": 0}
        for r in reports:
            for key, value in (r.get("left_out") or {}).items() if "task" in r else ():
                if key == "markers":
                    for name, n in value.items():
                        out["markers"][name] = out["markers"].get(name, 0) + n
                else:
                    out[key] += value
        return out

    @staticmethod
    def pushdown_doc(plan: SourcePlan, reports: list[dict[str, Any]]) -> dict[str, Any] | None:
        """What --from/--to skipped, and the entries the tasks read (None: no window)."""
        doc = plan.details.get("pushdown")
        if doc is None:
            return None
        tasks = [r for r in reports if "task" in r]
        return {**doc, "ledgers_read": len({r["ledger_id"] for r in tasks}),
                "entries_read": sum(r["entries"] + r.get("read_ahead", 0) for r in tasks)}

    @staticmethod
    def schema_doc(plan: SourcePlan, reports: list[dict[str, Any]]) -> dict[str, Any]:
        """How the values were typed: the plan's schema section and the messages that did not decode."""
        failed = [f for r in reports if "task" in r for f in r.get("decode_errors", ())]
        return {**(plan.details.get("schema") or {}), "decode_errors": len(failed), "first_decode_errors": failed[:20]}

    def manifest(self, plan: SourcePlan, reports: list[dict[str, Any]], decode: str | None) -> dict[str, Any]:
        return {"columns": manifest_columns(self.columns, decode), "layout": LAYOUT,
                "topics": dict(plan.details.get("topics") or {}), "schema": self.schema_doc(plan, reports),
                "pushdown": self.pushdown_doc(plan, reports),
                "export": {"problems": self.problems(reports), "left_out": self.left_out(reports),
                           "transactions": dict(plan.details.get("transactions") or {})}}

    def summary(self, plan: SourcePlan, reports: list[dict[str, Any]], summary: dict[str, Any]) -> None:
        summary["entries"] = sum(r["entries"] for r in reports if "task" in r)
        topics = plan.details.get("topics") or {}
        summary["topics"] = sorted(topics)
        summary["problems"] = self.problems(reports)
        summary["read_past_lac"] = sum(p["entries"] for t in topics.values() for p in t.get("read_past_lac", ()))
        summary["warnings"] = list(plan.details.get("warnings") or [])
        summary["left_out"] = self.left_out(reports)
        summary["transactions"] = dict(plan.details.get("transactions") or {})
        summary["schema"] = self.schema_doc(plan, reports)
        summary["pushdown"] = self.pushdown_doc(plan, reports)

    def describe(self) -> dict[str, Any]:
        s = self.spec
        return {"topic": s.topic, "subscription": s.subscription, "unacked_only": s.unacked_only,
                "from": utc_iso(s.from_ms), "to": utc_iso(s.to_ms), "skip_missing": s.skip_missing,
                "on_corrupt": s.on_corrupt, "strict": s.strict, "include_pending": s.include_pending,
                "raw": s.raw, "schema_version": s.schema_version}
