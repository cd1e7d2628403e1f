"""A topic export's view of the topic's transactions, made once on the driver.

Whether a message is delivered can depend on an entry far behind it: a
transaction's ``TXN_COMMIT``/``TXN_ABORT`` marker follows its messages,
maybe in a later ledger, and a transaction with no marker at all holds back
everything from its first message on.  No task sees the whole topic, so the
plan gets that knowledge first: :func:`scan_transactions` reads the planned
entries of each topic (partition) in storage order and looks only at each
entry's metadata (:class:`~bkctl.wire.pulsar.transactions.TransactionScan`:
an entry with no transaction or marker field is passed over unparsed).
BookKeeper reads whole entries and no index says which entries are markers,
so this is a second read of the planned entries; the CPU it costs is small
next to the tasks' (no checksum, no batch split, no decompression).  Each
task then carries what its range needs (:func:`with_transactions`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bkctl.wire.pulsar.transactions import TopicTransactions, TransactionScan

from .source import TaskReport

if TYPE_CHECKING:
    from .summary import LeftOut

__all__ = ["left_out_text", "scan_transactions", "tasks_to_redo", "with_transactions"]


def scan_transactions(reader: Any, tasks: list[Any]) -> dict[str, TopicTransactions]:
    """Each topic's transactions, from the entries of ``tasks`` (TopicRanges, read in storage order)."""
    scans: dict[str, TransactionScan] = {}
    for task in sorted(tasks, key=lambda t: (t.topic, t.ledger_id, t.first)):
        scan = scans.setdefault(task.topic, TransactionScan())
        ledger_id = task.ledger_id
        for entries in reader.entries(task.source, task.first, task.last):
            for entry_id, data in entries:
                scan.add((ledger_id, entry_id), data)
    return {topic: scan.result() for topic, scan in scans.items()}


def with_transactions(tasks: list[Any], transactions: dict[str, TopicTransactions], pending: bool) -> list[Any]:
    """The tasks, each with what its range needs of its topic's transactions."""
    out = []
    for task in tasks:
        txns = transactions.get(task.topic)
        if txns is not None:
            txns = txns.for_range(task.ledger_id, task.first, task.last)
            if not txns.ended and not txns.open:
                txns = None
        out.append(replace(task, transactions=txns, pending=pending, scan=False))
    return out


def tasks_to_redo(
    tasks: list[Any], scans: dict[int, TopicTransactions], reports: list[TaskReport], pending: bool
) -> tuple[list[int], list[Any], dict[str, TopicTransactions]]:
    """After the tasks ran finding the transactions themselves (``scans``:
    task number -> what its range showed): each topic's transactions, the
    tasks whose rows they change -- a range holding messages of an aborted
    transaction, one ending at or past where an open transaction holds
    messages back, or one that read on past its range for a chunked message
    while one does -- and the tasks, each with what it needs of them."""
    by_topic: dict[str, list[TopicTransactions]] = {}
    for index, scan in scans.items():
        by_topic.setdefault(tasks[index].topic, []).append(scan)
    transactions = {topic: TopicTransactions.merge(parts) for topic, parts in by_topic.items()}
    read_on = {r.task for r in reports if r.counts.get("read_ahead")}
    again = []
    for index, task in enumerate(tasks):
        txns = transactions.get(task.topic)
        if txns is None or index not in scans:
            continue
        cutoff = txns.cutoff
        if scans[index].seen & txns.aborted or (
            cutoff is not None and ((task.ledger_id, task.last) >= cutoff or index in read_on)
        ):
            again.append(index)
    return again, with_transactions(tasks, transactions, pending), transactions


def left_out_text(left_out: LeftOut, transactions: dict[str, Any]) -> str | None:
    """One line saying what a consumer would not have received and the export
    left out (or kept as pending), and why; None when there was nothing."""

    def count(n: int, what: str) -> str:
        return f"{n} {what}" if n == 1 else f"{n} {what.replace('entry', 'entries').replace('message', 'messages')}"

    parts = []
    markers = left_out.markers
    if markers:
        parts.append(
            count(sum(markers.values()), "marker entry")
            + " ("
            + ", ".join(f"{n} {name}" for name, n in sorted(markers.items()))
            + ")"
        )
    if left_out.aborted:
        parts.append(count(left_out.aborted, "message") + " of aborted transactions")
    held = "; ".join(
        f"{topic} from {t['cutoff']}, transaction {', '.join(t['open'])} open"
        for topic, t in sorted(transactions.items())
        if t.get("cutoff")
    )
    if left_out.pending_kept:
        parts.append(count(left_out.pending_kept, "message") + f" exported with pending = true ({held})")
    elif held:
        parts.append(count(left_out.pending, "message") + f" held back ({held}; --include-pending exports them marked)")
    return "what a consumer would not receive: " + "; ".join(parts) if parts else None
