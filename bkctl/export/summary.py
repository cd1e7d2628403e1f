"""What ``bkctl export`` did, as named types: :class:`ExportSummary` (a ledger export's),
:class:`TopicExportSummary` (a topic's: the same and the topic's own facts), :class:`ExportedTopic`
(a topic's in a run of many: the same and its name), what the command prints and ``--json``
writes: each field a key, as the CLI's encoder writes any result (:func:`bkctl.ops.results.to_json`;
keys sorted).

Not the manifest: ``_manifest.json`` is a file format, written and read as its document by
:mod:`~bkctl.export.job` and :mod:`~bkctl.export.output`.  The parts of a topic's summary that
are the manifest's sections as well -- ``problems``, ``schema``, ``pushdown``, ``transactions``
-- are those sections' documents, as the manifest has them; ``skipped`` holds the plan's
:class:`~bkctl.wire.domain.ledger_plan.SkippedLedger`, written as the manifest's documents of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bkctl.wire.domain.ledger_plan import SkippedLedger

__all__ = ["ExportSummary", "ExportedTopic", "LeftOut", "TopicExportSummary"]


@dataclass(frozen=True)
class LeftOut:
    """What a topic export's tasks left out, as a consumer would not have received it (or kept
    as pending): marker entries by their name, messages of aborted transactions, messages held
    back past an open transaction, and those exported marked pending (--include-pending)."""

    markers: dict[str, int] = field(default_factory=dict)
    aborted: int = 0
    pending: int = 0
    pending_kept: int = 0


@dataclass(frozen=True)
class ExportSummary:
    """A ledger export's summary (and the start of a topic export's)."""

    out: str
    ledgers: int  #: ledgers planned
    entries: int  #: entries read (a ledger export's rows)
    bytes: int
    files: int
    seconds: float
    master: str  #: the Spark master that ran it
    mode: str  #: replace, append or overwrite
    partition_by: str
    ledger_ids: list[int]
    #: the ledgers not read, and why, as the plan left them out (their documents are the
    #: manifest's: ``ledger_id``, ``reason``; a topic's ``topic`` too)
    skipped: list[SkippedLedger]
    manifest: str  #: the path of ``_manifest.json``
    #: each step's seconds, by the step's name (plan, spark_start, write, write_again, verify, commit)
    timings: dict[str, float]


@dataclass(frozen=True)
class TopicExportSummary(ExportSummary):
    """A topic export's summary: the ledger export's (``entries`` those read) and the topic's."""

    messages: int  #: the rows: messages exported
    topics: list[str]
    #: corrupt entries and incomplete chunked messages: the manifest's documents of them
    problems: list[dict[str, Any]]
    read_past_lac: int  #: entries of open ledgers read past their last add confirmed
    warnings: list[str]  #: a subscription's position older than its broker's
    left_out: LeftOut
    #: each topic's transactions, by topic name: the manifest's ``transactions`` section
    transactions: dict[str, Any]
    #: how the values were typed: the manifest's ``schema`` section
    schema: dict[str, Any]
    #: what --from/--to skipped: the manifest's ``pushdown`` section (None: no window)
    pushdown: dict[str, Any] | None


@dataclass(frozen=True)
class ExportedTopic(TopicExportSummary):
    """A topic's summary in a run of many (``bkctl export --topic A --topic B``): which topic."""

    topic: str
