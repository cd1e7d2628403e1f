"""``bkctl export --topic``: a Pulsar topic's messages, one row each.

The ledger export's machinery does the work (:func:`~bkctl.export.job.run_export`:
output directory, Spark tasks, commit, manifest); this module is what differs:

* planning (:func:`plan_topic`): the ledgers the managed ledger lists (each
  partition's, for a partitioned topic), up to the last entry of a closed
  ledger or the LAC of the open one (never past a terminated position);
  a ledger offloaded to tiered storage and deleted from BookKeeper is
  skipped (reported);
  ledgers wholly acknowledged are left out with ``--unacked-only``; a listed
  ledger that was deleted stops the export (:class:`TopicLedgersMissing`,
  exit 3) unless ``skip_missing``;
* the task (:func:`write_topic_range`): reads its entries as the ledger
  export does, decodes them (:class:`~bkctl.wire.pulsar.messages.TopicDecoder`),
  and writes rows below ``topic=T/date=D/ledger_id=N`` (the UTC day of each
  message's publish time).  A task whose range ends inside a chunked message
  reads on until that message is complete -- into the topic's next ledger
  when a rollover cut the message there; its row then goes with the ledger
  of its last chunk, whose position is Pulsar's id for it -- and the next
  task leaves those chunks alone;
* checking (:meth:`TopicSource.verify`): every planned entry was read, and
  the files hold the rows the tasks made.
"""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

from bkctl.wire.errors import NotFound

from . import planning
from .planning import LedgerPlan

__all__ = ["TOPIC_COLUMNS", "TopicLedgersMissing", "TopicRange", "TopicSource", "plan_topic", "read_topic_range",
           "topic_arrow_schema", "write_topic_range"]

#: Columns of a topic export's files, in order (``topic``, ``date`` and
#: ``ledger_id`` are the partition folders; ``payload_text`` only with decode).
TOPIC_COLUMNS = ["topic", "partition", "ledger_id", "entry_id", "batch_index", "message_id", "publish_time",
                 "event_time", "producer_name", "sequence_id", "key", "ordering_key", "properties", "schema_version",
                 "payload", "payload_size", "encrypted", "encryption_keys", "index", "broker_timestamp", "error"]
#: A record batch every this many rows: the packed buffers stay small enough to
#: stay in the CPU's caches (100,000 rows per batch cost 5% more CPU per message)
ROWS_PER_BATCH = 32_768
_TIME_COLUMNS = ("publish_time", "event_time", "broker_timestamp")
#: Characters Spark (Hive) escapes in a partition folder's value.
_ESCAPE = set('"#%\'*/:=?\\{[]^') | {chr(c) for c in range(0x20)} | {"\x7f"}


class TopicLedgersMissing(NotFound):
    """Ledgers the managed ledger lists are gone from BookKeeper (exit 3 unless --skip-missing)."""


def topic_arrow_schema():
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return pa.schema([
        ("topic", pa.string()), ("partition", pa.int32()), ("ledger_id", pa.int64()), ("entry_id", pa.int64()),
        ("batch_index", pa.int32()), ("message_id", pa.string()), ("publish_time", ts), ("event_time", ts),
        ("producer_name", pa.string()), ("sequence_id", pa.int64()), ("key", pa.string()),
        ("ordering_key", pa.binary()), ("properties", pa.map_(pa.string(), pa.string())),
        ("schema_version", pa.binary()), ("payload", pa.binary()), ("payload_size", pa.int32()),
        ("encrypted", pa.bool_()), ("encryption_keys", pa.list_(pa.string())), ("index", pa.int64()),
        ("broker_timestamp", ts), ("error", pa.string()),
    ])


def file_schema(decode: str | None = None):
    """The columns inside a topic export's files (less the partition columns)."""
    import pyarrow as pa

    schema = topic_arrow_schema()
    for name in ("topic", "ledger_id"):
        schema = schema.remove(schema.get_field_index(name))
    if decode == "utf8":
        schema = schema.append(pa.field("payload_text", pa.string()))
    return schema


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

    @property
    def entries(self) -> int:
        return self.last - self.first + 1


@dataclass
class TopicPlan:
    plans: list[LedgerPlan]
    ranges: list[TopicRange]
    skipped: list[dict[str, Any]] = field(default_factory=list)
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)


def _cursor_json(state) -> str:
    return json.dumps({"mark_delete": list(state.mark_delete), "ranges": [[list(lo), list(hi)] for lo, hi in state.ranges],
                       "batch": [[list(pos), list(words)] for pos, words in state.batch_deletes.items()]})


def _cursor_from_json(text: str):
    from bkctl.wire.pulsar.managed_ledger import CursorState

    doc = json.loads(text)
    return CursorState(tuple(doc["mark_delete"]), [(tuple(lo), tuple(hi)) for lo, hi in doc["ranges"]],
                       {tuple(pos): tuple(words) for pos, words in doc["batch"]})


def plan_topic(store, options, lac_of, bk_factory=None) -> TopicPlan:
    """Plan the export of ``options.topic`` (see the module documentation)."""
    from bkctl.ops.pulsar import cursor_state, reader, resolve_topics
    from bkctl.wire.metadata.errors import NoSuchLedger
    from bkctl.wire.pulsar.errors import NoSuchSubscription
    from bkctl.wire.pulsar.managed_ledger import TopicName

    topics = reader(store, options.managed_ledgers)
    try:
        TopicName.parse(options.topic)
    except ValueError as exc:  # a bad name; a znode that does not decode is no usage error
        raise planning.SpecError(str(exc)) from None
    managed = resolve_topics(topics, options.topic)
    out = TopicPlan([], [])
    missing: list[str] = []
    for ml in managed:
        name = str(ml.topic)
        follows = 0  # the ranges of the ledger before, when it was planned: the last ones of out.ranges
        cursor = None
        if options.subscription is not None:
            info = ml.cursors.get(options.subscription)
            if info is None:
                raise NoSuchSubscription(f"{name} has no subscription {options.subscription!r}"
                                  f" (it has: {', '.join(sorted(ml.cursors)) or 'none'})")
            state, source = cursor_state(info, bk_factory)
            cursor = _cursor_json(state) if options.unacked_only else None
        out.topics[name] = {"managed_ledger": ml.name, "partition": ml.topic.partition,
                            "ledgers": ml.ledger_ids, "subscription": options.subscription,
                            "cursor": None if options.subscription is None else {**state.to_json(), "from": source}}
        terminated = ml.terminated
        for li in ml.info.ledgerInfo:
            ledger_id = li.ledgerId
            offload = li.offloadContext if li.HasField("offloadContext") else None
            try:
                md, _version = store.ledgers.read(ledger_id)
            except NoSuchLedger:
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
                last = int(lac_of(ledger_id))
            if terminated is not None and ledger_id == terminated[0]:
                last = min(last, terminated[1])
            if cursor is not None and state.first_unacked(ledger_id) > last:
                out.skipped.append({"ledger_id": ledger_id, "topic": name,
                                    "reason": f"wholly acknowledged by {options.subscription}"})
                follows = 0
                continue
            plan = LedgerPlan(ledger_id=ledger_id, state=md.state.name, ctime_ms=md.ctime,
                              metadata=planning.decode_custom_metadata(md.custom_metadata), first=0, last=last,
                              length=md.length if md.is_closed else None, segments=len(md.ensembles))
            out.plans.append(plan)
            ranges = [TopicRange(name, ml.topic.partition, ledger_id, r.first, r.last, last, cursor,
                                 options.from_ms, options.to_ms, options.on_corrupt == "row")
                      for r in planning.split_ranges([plan], options.split_entries)]
            if ranges and follows:  # a chunked message begun in any range of the ledger before may end here
                out.ranges[-follows:] = [replace(r, next_ledger=ledger_id, next_last=last)
                                         for r in out.ranges[-follows:]]
                ranges[0] = replace(ranges[0], follows=True)
            out.ranges.extend(ranges)
            follows = len(ranges)
    if missing and not options.skip_missing:
        raise TopicLedgersMissing(f"ledgers listed by {options.topic} but deleted: {', '.join(missing)} "
                                  "(--skip-missing exports the rest)")
    return out


# ---------------------------------------------------------------- reading


def _to_batch(columns, schema) -> Any:
    """One record batch of ``schema`` from a part of :meth:`TopicDecoder.take_parts`."""
    import pyarrow as pa

    from bkctl.wire.pulsar.messages import PackedColumns

    if isinstance(columns, PackedColumns):
        return _packed_batch(columns, schema)
    arrays = []
    for f in schema:
        values = columns[f.name]
        if f.name in _TIME_COLUMNS:
            arrays.append(pa.array([None if v is None else v * 1000 for v in values], pa.int64()).cast(f.type))
        else:
            arrays.append(pa.array(values, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _packed_batch(part, schema) -> Any:
    """The packed buffers wrapped as Arrow arrays (no copy); the columns that
    are the same in every row made here."""
    import pyarrow as pa

    n, buffers = part.rows, part.buffers
    arrays = []
    for f in schema:
        name = f.name
        if name == "topic":
            arrays.append(pa.repeat(pa.scalar(part.topic, f.type), n))
        elif name == "partition":
            arrays.append(pa.repeat(pa.scalar(part.partition, f.type), n))
        elif name == "encrypted":
            arrays.append(pa.repeat(pa.scalar(False, f.type), n))
        elif name in ("encryption_keys", "error"):
            arrays.append(pa.nulls(n, f.type))
        elif name == "properties":
            offsets, key_offsets, key_data, value_offsets, value_data = buffers[name]
            count = len(key_offsets) // 4 - 1
            keys = pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(key_offsets), pa.py_buffer(key_data)])
            items = pa.Array.from_buffers(pa.string(), count,
                                          [None, pa.py_buffer(value_offsets), pa.py_buffer(value_data)])
            arrays.append(pa.MapArray.from_arrays(pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(offsets)]),
                                                  keys, items))
        else:
            validity, nulls, *data = buffers[name]
            arrays.append(pa.Array.from_buffers(f.type, n, [None if validity is None else pa.py_buffer(validity)]
                                                + [pa.py_buffer(b) for b in data], null_count=nulls))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_topic_range(read_options, part: TopicRange, stats: dict[str, Any] | None = None) -> Iterator[Any]:
    """Arrow record batches (:func:`topic_arrow_schema`) of the messages in
    ``part``; ``stats`` receives entries read, messages, bytes and problems."""
    from bkctl.wire.pulsar.messages import TopicDecoder

    from .datasource import read_entries

    keep = None
    if part.cursor is not None:
        state = _cursor_from_json(part.cursor)

        def keep(position, batch_index):
            return not state.message_acked(position, batch_index)

    decoder = TopicDecoder(part.topic, part.partition, keep=keep, from_ms=part.from_ms, to_ms=part.to_ms,
                           error_rows=part.error_rows, packed=True)
    schema = topic_arrow_schema()
    skip = part.first > 0 or part.follows
    ledger_id = part.ledger_id
    for entries in read_entries(read_options, ledger_id, part.first, part.last):
        for entry_id, data in entries:
            decoder.add(ledger_id, entry_id, data, skip_continuations=skip)
            if decoder.rows >= ROWS_PER_BATCH:
                for columns in decoder.take_parts():
                    yield _to_batch(columns, schema)
    for columns in decoder.take_parts():
        yield _to_batch(columns, schema)
    read_on = part.last
    read_ahead = _read_on(read_options, decoder, ledger_id, read_on, part.ledger_last)
    ended = "the ledger ends before the message's last chunk"
    if decoder.chunks.pending and part.next_ledger is not None:  # ... and then into the topic's next ledger
        read_ahead += _read_on(read_options, decoder, part.next_ledger, -1, part.next_last)
        ended = "the next ledger ends before the message's last chunk"
    decoder.finish(ended)
    for columns in decoder.take_parts():
        yield _to_batch(columns, schema)
    if stats is not None:
        stats.update(entries=part.entries, read_ahead=read_ahead, messages=decoder.messages,
                     bytes=decoder.payload_bytes, problems=[p.to_json() for p in decoder.problems])


def _read_on(read_options, decoder, ledger_id: int, after: int, last: int) -> int:
    """Read ``ledger_id`` past entry ``after`` up to ``last``, 16 entries at a
    time, taking only the chunks of messages begun before, until none is
    unfinished; returns the entries read."""
    from .datasource import read_entries

    read_on = after
    while decoder.chunks.pending and read_on < last:
        stop = min(last, read_on + 16)
        for entries in read_entries(read_options, ledger_id, read_on + 1, stop):
            for entry_id, data in entries:
                decoder.add(ledger_id, entry_id, data, only_continuations=True)
        read_on = stop
    return read_on - after


def _day(ms: int | None) -> str | None:
    if ms is None:
        return None
    return (_dt.date(1970, 1, 1) + _dt.timedelta(days=ms // 86_400_000)).isoformat()


def write_topic_range(read_options, options, item: tuple[int, TopicRange]) -> list[dict[str, Any]]:
    """One Spark task: read ``item = (index, TopicRange)`` and write its rows
    below this attempt's folder, one folder per publish day.  Returns a record
    per file written and, last, the task's counts (``"task"``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .output import NO_DATE
    from .writing import ATTEMPTS, RangeWriter, _attempt_name

    index, part = item
    attempt = _attempt_name()
    schema = file_schema(options.decode)
    writers: dict[str, RangeWriter] = {}
    topic_dir = f"topic={escape_partition_value(part.topic)}"
    stats: dict[str, Any] = {}
    try:
        for batch in read_topic_range(read_options, part, stats):
            days = pc.cast(pc.divide(pc.cast(batch.column("publish_time"), pa.int64()), 86_400_000_000), pa.int64())
            unique_days = pc.unique(days).to_pylist()
            for day in unique_days:
                by_day = batch if len(unique_days) == 1 else batch.filter(
                    pc.is_null(days) if day is None else pc.equal(days, day))
                # a chunked message the next ledger finishes is that ledger's row
                unique_ledgers = pc.unique(by_day.column("ledger_id")).to_pylist()
                for ledger in unique_ledgers:
                    rows = by_day if len(unique_ledgers) == 1 else by_day.filter(
                        pc.equal(by_day.column("ledger_id"), ledger))
                    leaf = f"{topic_dir}/date={_day(None if day is None else day * 86_400_000) or NO_DATE}/" \
                           f"ledger_id={ledger}"
                    writer = writers.get(leaf)
                    if writer is None:
                        writer = writers[leaf] = RangeWriter(Path(options.staging) / ATTEMPTS / attempt / leaf,
                                                             index, options, schema=schema)
                    writer.write(rows)
        files = [{"attempt": attempt, "leaf": leaf, "name": name, "rows": rows}
                 for leaf, writer in writers.items() for name, rows in writer.close()]
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise
    return files + [{"task": index, "topic": part.topic, "ledger_id": part.ledger_id, "first": part.first,
                     "last": part.last, **stats}]


# ---------------------------------------------------------------- the export's hooks


class TopicSource:
    """What :func:`~bkctl.export.job.run_export` asks of a topic export."""

    partition_by = "topic"
    layout = "topic=T/date=YYYY-MM-DD/ledger_id=N/"

    def __init__(self, options):
        self.options = options
        self.plan: TopicPlan | None = None
        self.reports: list[dict[str, Any]] = []

    def make_plan(self, store, lac_of, bk_factory=None) -> tuple[list[LedgerPlan], list[TopicRange], list[dict]]:
        self.plan = plan_topic(store, self.options, lac_of, bk_factory)
        return self.plan.plans, self.plan.ranges, self.plan.skipped

    write_fn = staticmethod(write_topic_range)

    def verify(self, plans: list[LedgerPlan], reports: list[dict[str, Any]]) -> tuple[dict[int, dict[str, int]], int]:
        """Per ledger: messages written and their bytes, from the tasks'
        counts checked against the files they wrote; and the file count.  (A
        chunked message a rollover cut is counted with the ledger it began
        in, though its row is in the next ledger's folder.)"""
        from .job import ExportError

        self.reports = [r for r in reports if "task" in r]
        files = [r for r in reports if "name" in r]
        covered: dict[int, list[tuple[int, int]]] = {}
        stats: dict[int, dict[str, int]] = {}
        for r in self.reports:
            covered.setdefault(r["ledger_id"], []).append((r["first"], r["last"]))
            s = stats.setdefault(r["ledger_id"], {"rows": 0, "bytes": 0, "first": r["first"], "last": r["last"]})
            s["rows"] += r["messages"] + (len(r["problems"]) if self.options.on_corrupt == "row" else 0)
            s["bytes"] += r["bytes"]
            s["first"], s["last"] = min(s["first"], r["first"]), max(s["last"], r["last"])
        problems = []
        for plan in plans:
            spans = sorted(covered.get(plan.ledger_id, []))
            want = plan.first
            for lo, hi in spans:
                if lo != want:
                    break
                want = hi + 1
            if plan.entries and want != plan.last + 1:
                problems.append(f"ledger {plan.ledger_id}: entries {plan.first}..{plan.last} planned, read "
                                f"{spans}")
        written = sum(f["rows"] for f in files)
        made = sum(s["rows"] for s in stats.values())
        if written != made:
            problems.append(f"the tasks made {made} rows but their files hold {written}")
        if problems:
            raise ExportError("the written data does not match the plan: " + "; ".join(problems[:5]))
        return stats, len(files)

    @property
    def problems(self) -> list[dict[str, Any]]:
        return [p for r in self.reports for p in r.get("problems", [])]

    def amend_manifest(self, manifest: dict[str, Any]) -> None:
        columns = list(TOPIC_COLUMNS) + (["payload_text"] if self.options.decode == "utf8" else [])
        manifest.update(columns=columns, layout=self.layout, partition_by=self.partition_by)
        manifest["topics"] = dict(self.plan.topics if self.plan else {})
        manifest["last_export"]["problems"] = self.problems
        manifest["last_export"]["messages"] = manifest["last_export"].pop("entries")

    def amend_summary(self, summary: dict[str, Any]) -> None:
        summary["messages"] = summary["entries"]
        summary["entries"] = sum(r["entries"] for r in self.reports)
        summary["topics"] = sorted(self.plan.topics) if self.plan else []
        summary["problems"] = self.problems
