"""A topic's entries turned into message rows, column by column (pure).

:class:`TopicDecoder` is fed a topic's entries in storage order and makes one
row per message with the columns of :data:`~.columns.MESSAGE_COLUMNS` (what
``bkctl export --topic`` writes): a chunked message once its last chunk is
in, and for a corrupt entry or an incomplete chunk set either an error row
(``error`` says what is wrong, ``payload`` holds the bytes as stored) or
nothing -- but always a :class:`Problem` naming topic, ledger and entry.

Batches are split by ``Twins.batch_rows`` of :mod:`bkctl.wire.fastpath` (the C twin when it is in
use: splitting a batch in Python is most of what a message costs), and runs of plain
entries -- single messages and batches, neither compressed, encrypted, chunked nor
transactional -- are decoded whole by it (:meth:`TopicDecoder.add_entries`); every
other row -- single, encrypted and chunked messages, error rows, and a batch
the C twin does not split or that is filtered message by message (``keep``)
or left out by its publish time -- comes from the Python twin
(:class:`~.rows.PyMessageRows`).  The rows keep their storage order across
both (:meth:`TopicDecoder.take_parts`).

What a consumer would not receive is left out and counted (:attr:`TopicDecoder.left_out`):
marker entries always; with the topic's :class:`~.transactions.TopicTransactions`, the
messages of aborted transactions, and those at or after the first message of a
transaction still open -- or, with ``pending=True``, kept with ``pending`` set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .chunks import ChunkAssembler, ChunkedMessage
from .columns import MESSAGE_COLUMNS, EntryFacts, entry_values, topic_values
from .entry import StoredEntry, decode_entry, decompress_whole
from .errors import CorruptEntry
from .rows import (
    BatchRowsProtocol,
    MessageValues,
    PlainLimits,
    PyMessageRows,
    encryption_values,
    entry_messages,
    message_values,
)
from .transactions import Position, TopicTransactions, marker_name, txn_of

__all__ = ["COLUMNS", "Problem", "RowPart", "TopicDecoder", "message_id"]

S = TypeVar("S", bound=BatchRowsProtocol)

#: The row's columns, in order.
COLUMNS = [c.name for c in MESSAGE_COLUMNS]


@dataclass
class Problem:
    """An entry (or chunk set) that gave no proper message."""

    topic: str
    ledger_id: int
    entry_id: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "ledger_id": self.ledger_id, "entry_id": self.entry_id, "reason": self.reason}

    def __str__(self) -> str:
        return f"{self.topic} ledger {self.ledger_id} entry {self.entry_id}: {self.reason}"


def message_id(
    ledger_id: int, entry_id: int, partition: int, batch_index: int = -1, first_chunk: tuple[int, int] | None = None
) -> str:
    """The id as Pulsar's Java client prints it: ``L:E:P``, ``L:E:P:B`` in a
    batch, ``first;last`` for a chunked message."""
    text = (
        f"{ledger_id}:{entry_id}:{partition}"
        if batch_index < 0
        else f"{ledger_id}:{entry_id}:{partition}:{batch_index}"
    )
    if first_chunk is not None:
        return f"{first_chunk[0]}:{first_chunk[1]}:{partition};{text}"
    return text


class RowPart:
    """Rows in storage order, as one splitter took them (``take()``):
    ``columns`` maps a column to its values -- a list (the Python twin) or
    Arrow buffers (the C twin); the ``topic`` columns are those of ``topic`` and
    ``partition`` in every row (:func:`~.columns.topic_values`), and a column the part lacks has its
    :data:`~.columns.BATCH_DEFAULTS` value."""

    __slots__ = ("rows", "columns", "topic", "partition")

    def __init__(self, rows: int, columns: dict[str, Any], topic: str, partition: int):
        self.rows = rows
        self.columns = columns
        self.topic = topic
        self.partition = partition


class TopicDecoder:
    """Rows of one topic's messages.

    ``keep(position, batch_index)`` (optional) says whether a message is
    wanted (``--unacked-only``); ``from_ms``/``to_ms`` keep publish times
    ``from_ms <= t < to_ms``; ``error_rows`` False skips corrupt entries (they
    are still counted in :attr:`problems`).  ``splitter``: the batch splitter
    class (its builder's ``Twins.batch_rows``: the export reader's; the tests compare the twins).
    ``transactions``: the topic's :class:`~.transactions.TopicTransactions`
    (None: no message is left out for its transaction); ``pending``: keep the
    messages a consumer cannot receive yet, marked, instead of leaving them out.
    """

    def __init__(
        self,
        topic: str,
        partition: int = -1,
        *,
        keep: Callable[[Position, int], bool] | None = None,
        from_ms: int | None = None,
        to_ms: int | None = None,
        error_rows: bool = True,
        verify: bool = True,
        splitter: type[BatchRowsProtocol],
        transactions: TopicTransactions | None = None,
        pending: bool = False,
    ):
        self.topic = topic
        self.partition = partition
        self.keep = keep
        self.from_ms = from_ms
        self.to_ms = to_ms
        self.error_rows = error_rows
        self.verify = verify
        self.chunks = ChunkAssembler()
        self.problems: list[Problem] = []
        self.entries = 0
        self.messages = 0
        self.payload_bytes = 0
        self.aborted = frozenset() if transactions is None else transactions.aborted
        self.cutoff = None if transactions is None else transactions.cutoff
        self.pending = pending
        #: what a consumer would not receive: marker entries by name, messages of
        #: aborted transactions, messages held back behind an open one
        #: (and those kept as pending)
        self.left_out: dict[str, Any] = {"markers": {}, "aborted": 0, "pending": 0, "pending_kept": 0}
        #: every row but those of the batches the C twin splits
        self._rows = PyMessageRows(partition)
        self._batches = self._rows if splitter is PyMessageRows else splitter(partition)
        #: rows taken out of one splitter when the other one's came next
        self._parts: list[RowPart] = []

    @property
    def rows(self) -> int:
        rows = sum(p.rows for p in self._parts) + self._rows.rows
        return rows + (self._batches.rows if self._batches is not self._rows else 0)

    def take_parts(self) -> list[RowPart]:
        """The rows so far in storage order (and start a new set)."""
        self._seal(self._rows)
        self._seal(self._batches)
        out, self._parts = self._parts, []
        return out

    def take(self) -> dict[str, list[object]]:
        """The rows so far as a list per column of :data:`COLUMNS` (and start a
        new set); only when the Python twin made every row (``splitter=PyMessageRows``)."""
        out: dict[str, list[object]] = {name: [] for name in COLUMNS}
        for part in self.take_parts():
            if not all(isinstance(v, list) for v in part.columns.values()):
                raise RuntimeError("rows the C splitter made are taken with take_parts()")
            for name, value in topic_values(part.topic, part.partition).items():
                out[name] += [value] * part.rows
            for name, values in part.columns.items():
                out[name] += values
        return out

    def _seal(self, splitter: BatchRowsProtocol) -> None:
        if splitter.rows:
            rows, columns = splitter.take()
            self._parts.append(RowPart(rows, columns, self.topic, self.partition))

    def _to(self, splitter: S) -> S:
        """``splitter`` takes the next rows: the other one's rows are sealed first (storage order)."""
        other = self._batches if splitter is self._rows else self._rows
        if other is not splitter:
            self._seal(other)
        return splitter

    # -- feeding ---------------------------------------------------------------

    def add(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        *,
        skip_continuations: bool = False,
        only_continuations: bool = False,
    ) -> None:
        """One entry.  ``skip_continuations``: a chunk that continues a message
        started before this reader's first entry is another reader's.
        ``only_continuations``: reading past its range, a reader takes only
        the chunks of the messages it began (the rest is the next reader's)."""
        self.entries += 1
        try:
            entry = decode_entry(data, self.verify)
            if only_continuations and not (
                entry.is_chunk and self.chunks.started(entry.metadata.uuid) and entry.metadata.chunk_id > 0
            ):
                return
            pending = self._left_out(entry, (ledger_id, entry_id))
            if pending is None:
                return
            if entry.is_chunk:
                if skip_continuations and entry.metadata.chunk_id > 0 and not self.chunks.started(entry.metadata.uuid):
                    return
                whole = self.chunks.add((ledger_id, entry_id), entry)
                self._chunk_problems()
                if whole is not None:
                    try:
                        whole.payload = decompress_whole(whole.metadata, whole.payload)
                    except CorruptEntry as exc:
                        self._problem(
                            ledger_id,
                            entry_id,
                            f"chunked message {whole.metadata.uuid}: {exc.reason}",
                            None,
                            whole.metadata,
                        )
                        return
                    self._add_chunked(whole)
                return
            facts = EntryFacts(ledger_id, entry_id, entry.metadata, entry.broker_index, entry.broker_timestamp, pending)
            if self._split_in_c(entry, facts):
                return
            messages = entry_messages(entry, f"{ledger_id}:{entry_id}:{self.partition}")
        except CorruptEntry as exc:
            if not only_continuations:  # past the range: the next reader's to report
                self._problem(ledger_id, entry_id, exc.reason, bytes(data))
            return
        md = entry.metadata
        if not self._in_window(md.publish_time):
            return
        if self.keep is not None:
            position, keep = (ledger_id, entry_id), self.keep
            messages = [m for m in messages if keep(position, m[0])]
        self._add(facts, messages, encryption_values(md))

    def add_entries(
        self, ledger_id: int, entries: list[tuple[int, bytes]], start: int, rows: int, payload_bytes: int
    ) -> int:
        """Entries ``entries[start:]`` (``(entry id, stored entry)``) taken whole by the
        splitter while each is a plain entry (:func:`~.rows.plain_entry`: a plain message or
        batch in the window; none of them is a marker, a transaction's or a chunk, so none is
        left out or held back), until ``rows`` rows or ``payload_bytes`` bytes were added;
        returns the index of the first entry not taken, which :meth:`add` then takes
        (``start``: none taken; always ``start`` while messages are filtered one by one
        or held back behind an open transaction)."""
        if self.keep is not None or self.cutoff is not None or start >= len(entries):
            return start
        limits = PlainLimits(self.verify, self.from_ms, self.to_ms, max(1, rows), max(1, payload_bytes))
        splitter = self._batches
        if splitter is not self._rows and self._rows.rows:
            # the Python twin's rows come first (storage order); sealed only when the C twin takes the next
            if not splitter.takes(entries[start][1], limits):
                return start
            self._seal(self._rows)
        before_rows, before_bytes = splitter.rows, splitter.payload_bytes
        taken = splitter.add_entries(ledger_id, entries, start, limits)
        self.entries += taken - start
        self.messages += splitter.rows - before_rows
        self.payload_bytes += splitter.payload_bytes - before_bytes
        return taken

    def _left_out(self, entry: StoredEntry, position: Position) -> bool | None:
        """None when a consumer never gets the entry's messages, or not yet
        (counted in :attr:`left_out`: only inside the publish-time window, as
        rows are); else whether they are kept as pending."""
        md = entry.metadata
        outside = not entry.is_chunk and not self._in_window(md.publish_time)  # no row either way: not counted
        if md.HasField("marker_type"):
            if not outside:
                markers = self.left_out["markers"]
                name = marker_name(md.marker_type)
                markers[name] = markers.get(name, 0) + 1
            return None
        # a chunked message counts once: at its first chunk, or where it is held back
        counted = (
            0 if outside or (entry.is_chunk and md.chunk_id > 0) else md.num_messages_in_batch if entry.is_batch else 1
        )
        if self.aborted and txn_of(md) in self.aborted:
            self.left_out["aborted"] += counted
            return None
        if self.cutoff is not None and position >= self.cutoff:
            # a chunked message begun before the cutoff is held back (or kept) whole, counted once
            begun = self.chunks.first(md.uuid) if entry.is_chunk else None
            if self.pending:
                if begun is not None and begun < self.cutoff and md.chunk_id == md.num_chunks_from_msg - 1:
                    counted = 1
                self.left_out["pending_kept"] += counted
                return True
            if begun is not None:
                self.chunks.drop(md.uuid)
                counted = 1
            self.left_out["pending"] += counted
            return None
        return False

    def _in_window(self, publish_ms: int) -> bool:
        return not (
            (self.from_ms is not None and publish_ms < self.from_ms)
            or (self.to_ms is not None and publish_ms >= self.to_ms)
        )

    def _split_in_c(self, entry: StoredEntry, facts: EntryFacts) -> bool:
        """The one place a batch goes to the C twin: a plain batch, kept whole
        (no ``keep``, inside the publish-time window: the Python twin checks
        a batch before leaving it out); False when it is not one, or the C
        twin did not split it (nothing added: the Python twin then does, and
        says what is wrong)."""
        md = entry.metadata
        if (
            self._batches is self._rows
            or not entry.is_batch
            or entry.encrypted
            or self.keep is not None
            or not self._in_window(md.publish_time)
        ):
            return False
        added = self._to(self._batches).add_batch(
            entry.payload, md.num_messages_in_batch, md.sequence_id, entry_values(facts)
        )
        if added is None:
            return False
        self.messages += md.num_messages_in_batch
        self.payload_bytes += added
        return True

    def _add(self, facts: EntryFacts, messages: list[MessageValues], encryption: dict[str, Any] | None) -> None:
        if messages:
            self.payload_bytes += self._to(self._rows).add_messages(entry_values(facts), messages, encryption)
            self.messages += len(messages)

    def finish(self, reason: str = "the topic ends before the message's last chunk") -> None:
        """No more entries: unfinished chunk sets become problems."""
        self.chunks.finish(reason)
        self._chunk_problems()

    # -- helpers ---------------------------------------------------------------

    def _add_chunked(self, whole: ChunkedMessage) -> None:
        md = whole.metadata
        if not self._in_window(md.publish_time):
            return
        ledger_id, entry_id = whole.last
        if self.keep is not None and not self.keep(whole.last, -1):
            return
        facts = EntryFacts(
            ledger_id,
            entry_id,
            md,
            whole.broker_index,
            whole.broker_timestamp,
            self.cutoff is not None and whole.last >= self.cutoff,
        )
        ident = message_id(ledger_id, entry_id, self.partition, -1, whole.first)
        self._add(facts, [message_values(md, whole.payload, -1, ident, md.sequence_id)], encryption_values(md))

    def _chunk_problems(self) -> None:
        problems = self.chunks.problems
        while problems:
            p = problems.pop(0)
            ledger_id, entry_id = p.positions[-1] if p.positions else (-1, -1)
            self._problem(ledger_id, entry_id, f"incomplete chunked message {p.uuid}: {p.reason}", None, p.metadata)

    def _problem(self, ledger_id: int, entry_id: int, reason: str, payload: bytes | None, md: Any = None) -> None:
        self.problems.append(Problem(self.topic, ledger_id, entry_id, reason))
        if not self.error_rows:
            return
        row = dict(
            ledger_id=ledger_id,
            entry_id=entry_id,
            batch_index=-1,
            message_id=message_id(ledger_id, entry_id, self.partition),
            payload=payload,
            payload_size=None if payload is None else len(payload),
            encrypted=False,
            error=reason,
        )
        if md is not None:
            row.update(publish_time=md.publish_time * 1000, producer_name=md.producer_name, sequence_id=md.sequence_id)
        self._to(self._rows).add_row(row)
