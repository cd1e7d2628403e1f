"""The topic export (``bkctl export --topic``): a Pulsar topic's messages, one row each.

The columns are :data:`~bkctl.export.columns.TOPIC_COLUMNS`; the export's
machinery (:func:`~bkctl.export.job.run_export`: output directory, Spark
tasks, commit, manifest) does the rest.  What is the topic's own:

* planning (:mod:`bkctl.wire.domain.topic_plan`, the domain layer's rules): the ledgers'
  entry ranges, one task each;
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
from collections.abc import Iterator
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from bkctl.wire.domain.topic_plan import TopicRange, TopicSpec, cursor_from_json, plan_topic
from bkctl.wire.pulsar.columns import MESSAGE_COLUMNS
from bkctl.wire.text import utc_iso

from .columns import TOPIC_COLUMNS, arrow_schema, manifest_columns
from .executor import LedgerReader, ReadSettings
from .source import ExportError, SourcePlan, TaskReport, Written
from .summary import ExportSummary, LeftOut, TopicExportSummary

if TYPE_CHECKING:
    from bkctl.wire.domain.entry_source import EntrySource
    from bkctl.wire.domain.topic_window import PublishTimeOf
    from bkctl.wire.pulsar.value_columns import AvroColumnTwins

__all__ = [
    "TopicSource",
    "escape_partition_value",
    "publish_time_reader",
    "read_topic_range",
    "record_batch",
    "rows_by_folder",
    "topic_typing",
]

#: A record batch every this many rows: the packed buffers stay small enough to
#: stay in the CPU's caches (100,000 rows per batch cost 5% more CPU per message)
ROWS_PER_BATCH = 32_768
#: ... or once their payloads hold this many bytes: a task's memory stays small with large
#: messages (32,768 rows of 1 MiB would be 32 GiB held before the first batch is made)
BYTES_PER_BATCH = 8 << 20
#: Characters Spark (Hive) escapes in a partition folder's value.
_ESCAPE = set("\"#%'*/:=?\\{[]^") | {chr(c) for c in range(0x20)} | {"\x7f"}
#: Where a topic export's rows go.
LAYOUT = "topic=T/date=YYYY-MM-DD/ledger_id=N/"


def escape_partition_value(value: str) -> str:
    """A folder name's value as Spark writes it (``%XX`` for its special characters)."""
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPE else ch for ch in value)


def publish_time_reader(reader: LedgerReader) -> PublishTimeOf:
    """``time_of(source, entry)``: an entry's publish time, one entry read from where the plan
    reads its ledger (None when it does not decode)."""

    def time_of(source: EntrySource, entry_id: int) -> int | None:
        from bkctl.wire.pulsar.entry import decode_entry

        for entries in reader.entries(source, entry_id, entry_id):
            for _entry_id, data in entries:
                try:
                    return decode_entry(data, verify=False).metadata.publish_time
                except Exception:  # noqa: BLE001 - a corrupt entry: its time is unknown
                    return None
        return None

    return time_of


def topic_typing(store, spec: TopicSpec, reader: LedgerReader) -> tuple[Any, dict[str, Any]]:
    """The :class:`~bkctl.wire.pulsar.typed.TypedView` the topic's values are
    read by (None: raw rows) and the manifest's ``schema`` section: its schema
    id, the versions (each read from its ledger; one that cannot be read is
    named, and its messages become error rows), the reader version, the
    value's type, or why the values are not typed (``--raw``; no schema; a
    BYTES schema, whose value is the payload; a type with no reading)."""
    from bkctl.wire.domain.topic_state import schema_registry as registry
    from bkctl.wire.pulsar.errors import NoSuchSchema, SchemaUnreadable, Untyped
    from bkctl.wire.pulsar.schema import schema_id
    from bkctl.wire.pulsar.typed import TypedView

    sid = schema_id(spec.topic)
    doc: dict[str, Any] = {
        "schema_id": sid,
        "typed": False,
        "why_not": None,
        "reader_version": None,
        "type": None,
        "versions": [],
        "unreadable": {},
    }
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
    versions, unreadable, failures = {}, {}, {}
    for entry in sorted(locator.index):
        try:
            versions[entry.version] = reg.version(sid, entry.version, locator)[1]
        except SchemaUnreadable as exc:
            unreadable[entry.version] = str(exc)
            failures[entry.version] = exc
    doc.update(versions=sorted(versions), unreadable={str(v): why for v, why in unreadable.items()})
    if spec.schema_version is not None and spec.schema_version not in versions:
        if spec.schema_version in unreadable:
            located = locator.entry(spec.schema_version)
            assert located is not None  # an unreadable version is one its locator lists
            raise SchemaUnreadable(located.ledger_id, unreadable[spec.schema_version])
        raise NoSuchSchema(
            f"{spec.topic} has no schema version {spec.schema_version} "
            f"(versions {', '.join(map(str, sorted(versions) + sorted(unreadable)))})"
        )
    if not versions and unreadable:
        # the topic has a schema and none of it reads: rows without ``value`` would
        # change a scheduled export's columns without a word, so nothing is exported
        newest = failures[max(failures)]
        raise SchemaUnreadable(
            newest.ledger_id,
            f"{newest.why}: {spec.topic}'s schema (version {max(failures)}) does not read, so its `value` "
            "column cannot be typed; nothing exported (bring its bookies back, or --raw for rows without `value`)",
            missing=newest.missing,
        )
    try:
        view = TypedView(versions, unreadable, spec.schema_version)
    except Untyped as exc:
        doc["why_not"] = str(exc)
        return None, doc
    from .columns import spark_type

    doc.update(
        typed=True, reader_version=view.reader, type=view.type, value_type=_simple_type(view.arrow_type, spark_type)
    )
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

    from bkctl.wire.pulsar.columns import BATCH_DEFAULTS, topic_values

    n = part.rows
    constants = {**topic_values(part.topic, part.partition), **BATCH_DEFAULTS}
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
        return pa.MapArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), n + 1, [bitmap, pa.py_buffer(offsets)], null_count=nulls),
            _wrap(arrow_type.key_type, count, keys),
            _wrap(arrow_type.item_type, count, items),
        )
    return pa.Array.from_buffers(arrow_type, n, [bitmap] + [pa.py_buffer(b) for b in data], null_count=nulls)


def read_topic_range(reader: LedgerReader, part: TopicRange, counts: dict[str, Any] | None = None) -> Iterator[Any]:
    """Arrow record batches (the columns of :data:`~bkctl.export.columns.TOPIC_COLUMNS`)
    of the messages in ``part``; ``counts`` receives entries read, messages,
    bytes and problems."""
    from bkctl.wire.pulsar.messages import TopicDecoder

    keep = None
    if part.cursor is not None:
        state = cursor_from_json(part.cursor)

        def keep(position, batch_index):
            return not state.message_acked(position, batch_index)

    twins = reader.twins
    decoder = TopicDecoder(
        part.topic,
        part.partition,
        keep=keep,
        from_ms=part.from_ms,
        to_ms=part.to_ms,
        error_rows=part.error_rows,
        transactions=part.transactions,
        pending=part.pending,
        splitter=twins.batch_rows,
    )
    schema = arrow_schema(MESSAGE_COLUMNS)  # schema_version as stored (bytes) while the values are typed
    rows = _read_rows(reader, part, decoder, schema, counts)
    yield from _version_numbers(
        _typed(rows, part, schema, counts, twins.avro_columns) if part.typed is not None else rows
    )


def _version_numbers(batches: Iterator[Any]) -> Iterator[Any]:
    """The batches with ``schema_version`` a number (:data:`TOPIC_COLUMNS`): the 8
    big-endian bytes Pulsar stores; null without a version (or bytes that are not 8)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from bkctl.wire.pulsar.errors import PulsarFormatError
    from bkctl.wire.pulsar.schema import version_of

    def number(data: bytes | None) -> int | None:
        try:
            return version_of(data)
        except PulsarFormatError:
            return None

    out_schema = None
    for batch in batches:
        i = batch.schema.get_field_index("schema_version")
        if out_schema is None:
            out_schema = batch.schema.set(i, pa.field("schema_version", pa.int64()))
        column = batch.column(i)
        if column.null_count == len(column):
            numbers = pa.nulls(len(column), pa.int64())
        else:  # a batch's versions are few: each decoded once
            distinct = pc.unique(column)
            numbers = pa.array([number(v) for v in distinct.to_pylist()], pa.int64()).take(
                pc.index_in(column, value_set=distinct)
            )
        arrays = batch.columns
        arrays[i] = numbers
        yield pa.RecordBatch.from_arrays(arrays, schema=out_schema)


def _typed(
    batches: Iterator[Any], part: TopicRange, schema, counts: dict[str, Any] | None, avro_columns: AvroColumnTwins
) -> Iterator[Any]:
    """The batches with each message's ``value`` decoded by the topic's schema
    (:attr:`TopicRange.typed`); a message that does not decode keeps its row,
    ``value`` null and ``error`` saying why (counted in ``counts["decode_errors"]``).
    ``avro_columns``: the reader's ``Twins.avro_columns``, which decodes a batch's values."""
    import pyarrow as pa

    from bkctl.wire.pulsar.typed import ValueBatch

    view = part.typed
    typed_schema = schema.append(pa.field("value", view.arrow_type))
    failed: list[dict[str, Any]] = []
    for batch in batches:
        n = batch.num_rows
        if n:
            errors = batch.column("error")
            skip = None if errors.null_count == n else errors.to_pylist()
            versions = _same_or_list(batch.column("schema_version"))
            keys = batch.column("key").to_pylist() if view.separated else None
            b64 = batch.column("key_base64_encoded").to_pylist() if view.separated else None
            column, failures = avro_columns.values(view, ValueBatch(versions, batch.column("payload"), skip, keys, b64))
        else:
            column, failures = pa.array([], view.arrow_type), {}
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


def _read_rows(reader: LedgerReader, part: TopicRange, decoder, schema, counts) -> Iterator[Any]:
    """The raw rows of ``part`` (:func:`read_topic_range` without ``value``)."""
    from bkctl.wire.pulsar.transactions import TransactionScan

    skip = part.first > 0 or part.follows
    ledger_id = part.ledger_id
    scan = TransactionScan() if part.scan else None
    taken = 0
    for entries in reader.entries(part.source, part.first, part.last):
        i = 0
        while i < len(entries):
            # a run of plain entries taken whole (no marker or transaction among them: nothing to
            # scan), else one entry by the general path
            after = decoder.add_entries(
                ledger_id, entries, i, ROWS_PER_BATCH - decoder.rows, BYTES_PER_BATCH - (decoder.payload_bytes - taken)
            )
            if after == i:
                entry_id, data = entries[i]
                decoder.add(ledger_id, entry_id, data, skip_continuations=skip)
                if scan is not None:
                    scan.add((ledger_id, entry_id), data)
                after = i + 1
            i = after
            if decoder.rows >= ROWS_PER_BATCH or decoder.payload_bytes - taken >= BYTES_PER_BATCH:
                taken = decoder.payload_bytes
                for rows in decoder.take_parts():
                    yield record_batch(rows, schema)
    for rows in decoder.take_parts():
        yield record_batch(rows, schema)
    read_ahead = _read_on(reader, decoder, part.source, part.last, part.ledger_last)
    ended = "the ledger ends before the message's last chunk"
    following = part.next_source
    if decoder.chunks.pending and following is not None:  # ... and then into the topic's next ledger
        read_ahead += _read_on(reader, decoder, following, -1, part.next_last)
        ended = "the next ledger ends before the message's last chunk"
    decoder.finish(ended)
    for rows in decoder.take_parts():
        yield record_batch(rows, schema)
    if counts is not None:
        counts.update(
            entries=part.entries,
            read_ahead=read_ahead,
            messages=decoder.messages,
            bytes=decoder.payload_bytes,
            problems=[p.to_json() for p in decoder.problems],
            left_out=decoder.left_out,
        )
        if scan is not None:
            counts["transactions"] = scan.result()


def _read_on(reader: LedgerReader, decoder, source: EntrySource, after: int, last: int) -> int:
    """Read the ledger of ``source`` past entry ``after`` up to ``last``, 16 entries at a
    time, taking only the chunks of messages begun before, until none is
    unfinished; returns the entries read."""
    read_on = after
    while decoder.chunks.pending and read_on < last:
        stop = min(last, read_on + 16)
        for entries in reader.entries(source, read_on + 1, stop):
            for entry_id, data in entries:
                decoder.add(source.ledger_id, entry_id, data, only_continuations=True)
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
        by_day = (
            batch if len(unique_days) == 1 else batch.filter(pc.is_null(days) if day is None else pc.equal(days, day))
        )
        unique_ledgers = pc.unique(by_day.column("ledger_id")).to_pylist()
        for ledger in unique_ledgers:
            rows = by_day if len(unique_ledgers) == 1 else by_day.filter(pc.equal(by_day.column("ledger_id"), ledger))
            yield (
                f"{topic_dir}/date={_day(None if day is None else day * 86_400_000) or NO_DATE}/ledger_id={ledger}",
                rows,
            )


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

        planned = plan_topic(
            store,
            self.spec,
            split_entries,
            reader.tail,
            reader.client,
            publish_time_reader(reader),
            scan=not self.spec.scan_first,
            offloaded=reader.offloaded_last_entry,
        )
        plan = SourcePlan(planned.plans, planned.tasks, planned.skipped, planned.details)
        view = self.type_values(store, reader)
        assert self._typing is not None  # read by type_values
        plan.details["schema"] = self._typing[1]
        if view is not None:
            plan.tasks = [replace(t, typed=view) for t in plan.tasks]
        if not self.spec.scan_first:
            return plan
        transactions = scan_transactions(reader, plan.tasks)
        plan.tasks = with_transactions(plan.tasks, transactions, self.spec.include_pending)
        plan.details["transactions"] = {topic: t.to_json() for topic, t in transactions.items()}
        return plan

    def redo(self, plan: SourcePlan, reports: list[TaskReport]) -> list[int]:
        """The tasks to run again once every task reported the transactions
        its entries show (``scan_first`` False): those holding messages of an
        aborted transaction, and those at or past where an open one holds
        messages back; they get what they need of the topic's transactions."""
        from .topic_transactions import tasks_to_redo

        if self.spec.scan_first:
            return []
        scans = {r.task: r.counts["transactions"] for r in reports if "transactions" in r.counts}
        again, plan.tasks, transactions = tasks_to_redo(plan.tasks, scans, reports, self.spec.include_pending)
        plan.details["transactions"] = {topic: t.to_json() for topic, t in transactions.items()}
        return again

    def read(self, settings: ReadSettings, task: TopicRange, counts: dict[str, Any]) -> Iterator[Any]:
        counts.update(topic=task.topic, ledger_id=task.ledger_id, first=task.first, last=task.last)
        return read_topic_range(LedgerReader.in_process(settings), task, counts)

    def folders(self, task: TopicRange, batch: Any) -> Iterator[tuple[str, Any]]:
        return rows_by_folder(task.topic, batch)

    def verify(self, plan: SourcePlan, reports: list[TaskReport], staging: Any) -> Written:
        """Per ledger: messages written and their bytes, from the tasks'
        counts checked against the files they wrote; and the file count.  (A
        chunked message a rollover cut is counted with the ledger it began
        in, though its row is in the next ledger's folder.)"""
        tasks = [r.counts for r in reports]
        files = [f for r in reports for f in r.files]
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
        written = sum(f.rows for f in files)
        made = sum(s["rows"] for s in stats.values())
        if written != made:
            problems.append(f"the tasks made {made} rows but their files hold {written}")
        if problems:
            raise ExportError("the written data does not match the plan: " + "; ".join(problems[:5]))
        return Written(stats, len(files))

    @staticmethod
    def problems(reports: list[TaskReport]) -> list[dict[str, Any]]:
        return [p for r in reports for p in r.counts.get("problems", [])]

    @staticmethod
    def left_out(reports: list[TaskReport]) -> LeftOut:
        """What the tasks left out (or kept as pending), summed: markers by name, aborted, pending."""
        markers: dict[str, int] = {}
        counts = {"aborted": 0, "pending": 0, "pending_kept": 0}
        for r in reports:
            for key, value in (r.counts.get("left_out") or {}).items():
                if key == "markers":
                    for name, n in value.items():
                        markers[name] = markers.get(name, 0) + n
                else:
                    counts[key] += value
        return LeftOut(markers, **counts)

    @staticmethod
    def pushdown_doc(plan: SourcePlan, reports: list[TaskReport]) -> dict[str, Any] | None:
        """What --from/--to skipped, and the entries the tasks read (None: no window)."""
        doc = plan.details.get("pushdown")
        if doc is None:
            return None
        tasks = [r.counts for r in reports]
        return {
            **doc,
            "ledgers_read": len({r["ledger_id"] for r in tasks}),
            "entries_read": sum(r["entries"] + r.get("read_ahead", 0) for r in tasks),
        }

    @staticmethod
    def schema_doc(plan: SourcePlan, reports: list[TaskReport]) -> dict[str, Any]:
        """How the values were typed: the plan's schema section and the messages that did not decode."""
        failed = [f for r in reports for f in r.counts.get("decode_errors", ())]
        return {**(plan.details.get("schema") or {}), "decode_errors": len(failed), "first_decode_errors": failed[:20]}

    def manifest(self, plan: SourcePlan, reports: list[TaskReport], decode: str | None) -> dict[str, Any]:
        return {
            "columns": manifest_columns(self.columns, decode),
            "layout": LAYOUT,
            "topics": dict(plan.details.get("topics") or {}),
            "schema": self.schema_doc(plan, reports),
            "pushdown": self.pushdown_doc(plan, reports),
            "export": {
                "problems": self.problems(reports),
                "left_out": asdict(self.left_out(reports)),
                "transactions": dict(plan.details.get("transactions") or {}),
            },
        }

    def refuse_mixing(self, plan: SourcePlan, previous: dict[str, Any] | None, out: Any) -> None:
        """Refuse to add this topic's rows to ``out`` beside a previous export
        Spark could not read as one dataset with them: another topic's (each
        topic's ``value`` has a type of its own; Spark takes one file's schema
        for the whole folder), or this topic's with other columns or another
        ``value`` type (``--raw`` then typed, a schema that changed)."""
        from bkctl.wire.errors import Conflict
        from bkctl.wire.pulsar.managed_ledger import TopicName

        if not previous:
            return
        before = (previous.get("last_export") or {}).get("options") or {}
        mine = TopicName.parse(self.spec.topic).partitioned_topic
        if before.get("topic") and TopicName.parse(before["topic"]).partitioned_topic != mine:
            raise Conflict(
                f"{out} holds the export of {before['topic']}: one folder per topic (Spark reads a folder's "
                f"files as one schema, and each topic's `value` has its own); export {mine} into a folder "
                f"of its own, e.g. --out {out.parent / mine.local}, or --overwrite to replace {out}"
            )
        had = set(previous.get("columns") or ()) - {"value", "payload_text"}
        if previous.get("columns") is not None and had != set(self.names()) - {"value"}:
            added, dropped = sorted(set(self.names()) - {"value"} - had), sorted(had - set(self.names()))
            raise Conflict(
                f"{out} holds {mine} exported with other columns (an older bkctl's; now also: "
                f"{', '.join(added) or 'none'}; no longer: {', '.join(dropped) or 'none'}): Spark could not "
                f"read the folder as one dataset; export into a new folder, or --overwrite to replace {out}"
            )
        was = (previous.get("schema") or {}).get("value_type") if "value" in (previous.get("columns") or ()) else None
        now = (self._typing[1].get("value_type") if self._typing else None) if "value" in self.names() else None
        if previous.get("columns") is not None and was != now:
            raise Conflict(
                f"{out} holds {mine} exported with other columns (value: {was or 'none'}; now: {now or 'none'}): "
                f"Spark could not read the folder as one dataset; export into a new folder, or --overwrite "
                f"to replace {out}"
            )

    def names(self) -> list[str]:
        """The rows' column names."""
        return [c.name for c in self.columns]

    def summary(self, plan: SourcePlan, reports: list[TaskReport], summary: ExportSummary) -> TopicExportSummary:
        """The summary's rows are the messages; its entries, those the tasks read."""
        import dataclasses

        topics = plan.details.get("topics") or {}
        return TopicExportSummary(
            **{
                **{f.name: getattr(summary, f.name) for f in dataclasses.fields(ExportSummary)},
                "entries": sum(r.counts["entries"] for r in reports),
            },
            messages=summary.entries,
            topics=sorted(topics),
            problems=self.problems(reports),
            read_past_lac=sum(p["entries"] for t in topics.values() for p in t.get("read_past_lac", ())),
            warnings=list(plan.details.get("warnings") or []),
            left_out=self.left_out(reports),
            transactions=dict(plan.details.get("transactions") or {}),
            schema=self.schema_doc(plan, reports),
            pushdown=self.pushdown_doc(plan, reports),
        )

    def describe(self) -> dict[str, Any]:
        s = self.spec
        return {
            "topic": s.topic,
            "subscription": s.subscription,
            "unacked_only": s.unacked_only,
            "from": utc_iso(s.from_ms),
            "to": utc_iso(s.to_ms),
            "skip_missing": s.skip_missing,
            "on_corrupt": s.on_corrupt,
            "strict": s.strict,
            "include_pending": s.include_pending,
            "raw": s.raw,
            "schema_version": s.schema_version,
        }
