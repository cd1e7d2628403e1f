"""What an export exports: the :class:`ExportSource` Protocol, and what a source plans.

:func:`~bkctl.export.job.run_export` drives any source the same way: it
asks the source for a plan on the driver, runs one Spark task per planned
task (:func:`~bkctl.export.writing.run_task` writes what the source reads),
has the source check what was written, and writes the manifest with the
source's part in it.  Two sources: ledgers, one row per entry
(:class:`~bkctl.export.ledger_source.LedgerSource`), and a Pulsar topic, one
row per message (:class:`~bkctl.export.topic_source.TopicSource`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from bkctl.wire.domain.ledger_plan import LedgerPlan, SkippedLedger
    from bkctl.wire.pulsar.columns import Column

    from .executor import LedgerReader, ReadSettings
    from .summary import ExportSummary

__all__ = ["ExportError", "ExportSource", "FileWritten", "SourcePlan", "TaskReport", "Written"]


class ExportError(RuntimeError):
    """The export could not be completed (nothing was changed in the output)."""


@dataclass
class SourcePlan:
    """What an export will read: a plan per ledger (empty ones included),
    the tasks (each has ``ledger_id`` and ``entries``, and is picklable),
    the ledgers left out and why, and what the source wants to remember."""

    plans: list[LedgerPlan]
    tasks: list[Any]
    skipped: list[SkippedLedger] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class FileWritten:
    """A data file one attempt of task number ``task`` wrote: ``name`` in the partition
    folder ``leaf``, below the attempt's folder until :func:`~bkctl.export.writing.commit_files`
    moves it into ``leaf``."""

    task: int
    attempt: str
    leaf: str
    name: str
    rows: int


@dataclass
class TaskReport:
    """What task number ``task`` did (:func:`~bkctl.export.writing.run_task`, on an executor):
    the files it wrote, and the counts its source's :meth:`ExportSource.read` kept (the
    source's own, read back by the source alone)."""

    task: int
    files: list[FileWritten]
    counts: dict[str, Any]


@dataclass
class Written:
    """What the tasks wrote, checked against the plan: per ledger id its
    ``rows``, ``bytes``, ``first`` and ``last`` entry; the number of files."""

    stats: dict[int, dict[str, int]]
    files: int


class ExportSource(Protocol):
    """One kind of export.  A source is picklable: its tasks run on Spark's executors."""

    @property
    def partition_by(self) -> str:
        """The top folder level (``ledger_id``, ``date`` or ``topic``), recorded in the manifest."""

    @property
    def rows_are(self) -> str:
        """What a row is (``entries``, ``messages``): the name of their count in the manifest and summary."""

    @property
    def columns(self) -> Sequence[Column]:
        """The rows' columns (:mod:`bkctl.export.columns`)."""

    @property
    def partition_columns(self) -> Sequence[str]:
        """Columns that are folder names, not inside the files."""

    @property
    def dictionary_columns(self) -> Sequence[str]:
        """Columns the Parquet files dictionary-encode."""

    def plan(self, store: Any, reader: LedgerReader, split_entries: int) -> SourcePlan:
        """Read the metadata and decide what to read (on the driver)."""

    def read(self, settings: ReadSettings, task: Any, counts: dict[str, Any]) -> Iterator[Any]:
        """A task's rows as Arrow record batches of :attr:`columns` (on an
        executor, in an export's task or the data source's); ``counts``
        receives what the task wants to report."""

    def folders(self, task: Any, batch: Any) -> Iterator[tuple[str, Any]]:
        """A batch's rows as ``(leaf folder, rows)`` pairs: where they go in the export."""

    def verify(self, plan: SourcePlan, reports: list[TaskReport], staging: Any) -> Written:
        """Check what the tasks wrote into ``staging`` against the plan."""

    def manifest(self, plan: SourcePlan, reports: list[TaskReport], decode: str | None) -> dict[str, Any]:
        """The source's part of the manifest: ``columns``, ``layout``, what to
        add to this export's record (``export``), and sections of its own."""

    def summary(self, plan: SourcePlan, reports: list[TaskReport], summary: ExportSummary) -> ExportSummary:
        """The export's summary with the source's own facts (``summary`` counts the rows as its
        ``entries``; a source whose rows are something else says so in its own)."""

    def describe(self) -> dict[str, Any]:
        """What was asked for, as the manifest records it."""

    def refuse_mixing(self, plan: SourcePlan, previous: dict[str, Any] | None, out: Any) -> None:
        """Called before anything is written (not with --overwrite): raise Conflict when the
        previous export in ``out`` (its manifest) and this one's rows would not read as one
        dataset (a topic export's; a ledger export's rows always do)."""

    def redo(self, plan: SourcePlan, reports: list[TaskReport]) -> list[int]:
        """Called once the tasks ran: the numbers of the tasks to run again (their files are
        replaced), with ``plan.tasks`` updated for them -- what one task reads can change
        another's rows (a topic's transactions:
        :meth:`~bkctl.export.topic_source.TopicSource.redo`; a ledger export's: none)."""
