"""The ledger export: one row per entry (:data:`~bkctl.export.columns.LEDGER_COLUMNS`).

* planning: :func:`~bkctl.wire.domain.ledger_plan.plan_ledgers` (``0..last entry``
  of a closed ledger, ``0..LAC`` of an open one with ``include_open``), cut
  into ranges of at most ``split_entries`` entries, one task each;
* a task reads its range and makes one Arrow record batch per read batch
  (:func:`read_ledger_range`, also what the ``bookkeeper`` data source
  reads), all below ``ledger_id=N`` (or ``date=D/ledger_id=N``);
* checking: the rows, first and last entry of each ledger, read back from
  the Parquet footers, against the plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bkctl.wire.domain import ledger_plan
from bkctl.wire.domain.ledger_plan import EntryRange, LedgerSpec, OffloadedCopy
from bkctl.wire.text import utc_iso

from .columns import LEDGER_COLUMNS, arrow_schema, manifest_columns
from .executor import LedgerReader, ReadSettings
from .source import ExportError, SourcePlan, TaskReport, Written
from .summary import ExportSummary
from .writing import leaf_dir

__all__ = ["LedgerBatchBuilder", "LedgerSelection", "LedgerSource", "read_ledger_range", "written_stats"]

#: Folder layouts of a ledger export.
LAYOUTS = {"ledger_id": "ledger_id=N/", "date": "date=YYYY-MM-DD/ledger_id=N/"}


@dataclass(frozen=True)
class LedgerSelection:
    """Which ledgers to export and how to lay them out."""

    spec: LedgerSpec = field(default_factory=LedgerSpec)
    since_ms: int | None = None
    until_ms: int | None = None
    include_open: bool = False
    partition_by: str = "ledger_id"

    def __post_init__(self) -> None:
        if self.partition_by not in LAYOUTS:
            raise ledger_plan.SpecError(f"partition by ledger_id or date, not {self.partition_by!r}")


class LedgerBatchBuilder:
    """Arrow record batches of one range: the per-ledger columns are made
    once (as long as the largest batch) and sliced; per batch only the entry
    ids, payloads and sizes are converted."""

    def __init__(self, task: EntryRange, capacity: int):
        import pyarrow as pa
        import pyarrow.compute as pc

        self.pa = pa
        self.pc = pc
        self.schema = arrow_schema(LEDGER_COLUMNS)
        types = {f.name: f.type for f in self.schema}
        n = max(1, capacity)
        ctime_us = None if task.ctime_ms is None else int(task.ctime_ms) * 1000
        self.ledger = pa.repeat(pa.scalar(task.ledger_id, types["ledger_id"]), n)
        self.ctime = pa.repeat(pa.scalar(ctime_us, types["ledger_ctime"]), n)
        self.state = pa.repeat(pa.scalar(task.state, types["ledger_state"]), n)
        self.metadata = pa.repeat(pa.scalar(list(task.metadata.items()), types["ledger_metadata"]), n)

    def build(self, entries: list) -> Any:
        pa = self.pa
        n = len(entries)
        if n > len(self.ledger):
            raise AssertionError("batch larger than its builder")
        ids = pa.array([e[0] for e in entries], pa.int64())
        payloads = pa.array([e[1] for e in entries], pa.binary())
        sizes = self.pc.binary_length(payloads)
        return pa.RecordBatch.from_arrays(
            [
                self.ledger.slice(0, n),
                ids,
                payloads,
                sizes,
                self.ctime.slice(0, n),
                self.state.slice(0, n),
                self.metadata.slice(0, n),
            ],
            schema=self.schema,
        )


def offloaded_ledgers(store: Any, reader: LedgerReader, ids: list[int]) -> dict[int, OffloadedCopy]:
    """Of ``ids`` (ledgers BookKeeper no longer has), those a Pulsar managed ledger (under the
    default root) offloaded completely to a store this reader speaks, by id; each copy's index
    read now (its last entry id)."""
    from bkctl.wire.domain.topic_state import topic_reader as topics_reader
    from bkctl.wire.pulsar.offload_store import location_of

    wanted = set(ids)
    found: dict[int, OffloadedCopy] = {}
    topics = topics_reader(store)
    for ml in topics.read_all(topics.topics(), cursors=False):
        for li in ml.info.ledgerInfo:
            if li.ledgerId in wanted:
                location = location_of(li, ml.name)
                if location is not None and location.complete and (location.is_s3 or location.is_filesystem):
                    found[li.ledgerId] = OffloadedCopy(location, reader.offloaded_last_entry(location))
    return found


def read_ledger_range(reader: LedgerReader, task: EntryRange) -> Iterator[Any]:
    """Arrow record batches of the range's entries, ``batch_size`` at a time."""
    builder = LedgerBatchBuilder(task, min(reader.settings.batch_size, task.entries))
    for entries in reader.entries(task.source, task.first, task.last):
        yield builder.build(entries)


def _footer_bounds(md: Any) -> tuple[int, int] | None:
    """The first and last entry id of a Parquet file with rows, from its footer's
    statistics (``md``: its FileMetaData); None when a row group has none."""
    leaves = [md.schema.column(i).path for i in range(md.num_columns)]
    entry_col = leaves.index("entry_id")
    first: int | None = None
    last: int | None = None
    for g in range(md.num_row_groups):
        st = md.row_group(g).column(entry_col).statistics
        if st is None or not st.has_min_max:
            return None
        first = st.min if first is None else min(first, st.min)
        last = st.max if last is None else max(last, st.max)
    return None if first is None or last is None else (first, last)


def written_stats(root) -> tuple[dict[int, dict[str, int]], int]:
    """Per ledger id: rows, first and last entry id, payload bytes, as written
    below ``root``; and the number of data files.  Rows and entry ids come from
    the Parquet footers, bytes from the ``payload_size`` column alone."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .output import data_files, leaf_partitions

    stats: dict[int, dict[str, int]] = {}
    files = 0
    for rel, ledger_id in leaf_partitions(root).items():
        for path in data_files(root / rel):
            files += 1
            pf = pq.ParquetFile(path)
            md = pf.metadata
            if md.num_rows == 0:
                continue
            bounds = _footer_bounds(md)
            if bounds is None:
                ids = pf.read(columns=["entry_id"]).column(0)
                bounds = pc.min(ids).as_py(), pc.max(ids).as_py()
            first, last = bounds
            nbytes = pc.sum(pf.read(columns=["payload_size"]).column(0)).as_py() or 0
            s = stats.setdefault(ledger_id, {"rows": 0, "first": first, "last": last, "bytes": 0})
            s["rows"] += md.num_rows
            s["first"] = min(s["first"], first)
            s["last"] = max(s["last"], last)
            s["bytes"] += int(nbytes)
    return stats, files


class LedgerSource:
    """Ledgers, one row per entry (see the module documentation)."""

    rows_are = "entries"
    columns = LEDGER_COLUMNS
    partition_columns = ("ledger_id",)
    #: the columns that hold one value per ledger; the entry ids, payloads and
    #: sizes are nearly all distinct, and trying a dictionary on them first made
    #: the files 25% larger and no faster
    dictionary_columns = (
        "ledger_ctime",
        "ledger_state",
        "ledger_metadata.key_value.key",
        "ledger_metadata.key_value.value",
    )

    def __init__(self, selection: LedgerSelection):
        self.selection = selection

    @property
    def partition_by(self) -> str:
        return self.selection.partition_by

    def plan(self, store: Any, reader: LedgerReader, split_entries: int) -> SourcePlan:
        s = self.selection
        planned = ledger_plan.plan_ledgers(
            store,
            s.spec,
            include_open=s.include_open,
            since_ms=s.since_ms,
            until_ms=s.until_ms,
            lac_of=reader.last_add_confirmed,
            offloaded=lambda ids: offloaded_ledgers(store, reader, ids),
        )
        plans = planned.plans
        return SourcePlan(plans, ledger_plan.split_ranges(plans, split_entries), planned.skipped)

    def read(self, settings: ReadSettings, task: EntryRange, counts: dict[str, Any]) -> Iterator[Any]:
        counts.update(ledger_id=task.ledger_id, first=task.first, last=task.last, entries=task.entries)
        return read_ledger_range(LedgerReader.in_process(settings), task)

    def folders(self, task: EntryRange, batch: Any) -> Iterator[tuple[str, Any]]:
        yield leaf_dir(self.partition_by, task.ledger_id, task.ctime_ms), batch

    def verify(self, plan: SourcePlan, reports: list[TaskReport], staging: Any) -> Written:
        stats, files = written_stats(staging)
        wanted = {p.ledger_id: p for p in plan.plans if p.entries}
        problems = []
        for ledger_id, p in wanted.items():
            got = stats.get(ledger_id)
            if got is None:
                problems.append(f"ledger {ledger_id}: nothing written, expected {p.entries} entries")
            elif (got["rows"], got["first"], got["last"]) != (p.entries, p.first, p.last):
                problems.append(
                    f"ledger {ledger_id}: wrote {got['rows']} rows for entries {got['first']}.."
                    f"{got['last']}, expected {p.entries} for {p.first}..{p.last}"
                )
        for ledger_id in sorted(set(stats) - set(wanted)):
            problems.append(f"ledger {ledger_id}: {stats[ledger_id]['rows']} rows written that were not planned")
        if problems:
            raise ExportError("the written data does not match the plan: " + "; ".join(problems[:5]))
        return Written(stats, files)

    def manifest(self, plan: SourcePlan, reports: list[TaskReport], decode: str | None) -> dict[str, Any]:
        return {"columns": manifest_columns(self.columns, decode), "layout": LAYOUTS[self.partition_by]}

    def summary(self, plan: SourcePlan, reports: list[TaskReport], summary: ExportSummary) -> ExportSummary:
        return summary  # the rows are the entries

    def describe(self) -> dict[str, Any]:
        s = self.selection
        return {
            "ledgers": str(s.spec),
            "since": utc_iso(s.since_ms),
            "until": utc_iso(s.until_ms),
            "include_open": s.include_open,
        }

    def refuse_mixing(self, plan: SourcePlan, previous: dict[str, Any] | None, out: Any) -> None:
        """Ledger rows always read as one dataset with a previous ledger export's: nothing to refuse."""

    def redo(self, plan: SourcePlan, reports: list[TaskReport]) -> list[int]:
        """What one task reads never changes another's rows: no task to run again."""
        return []
