"""A topic's entries turned into message rows, column by column (pure).

:class:`TopicDecoder` is fed a topic's entries in storage order and keeps one
list per column of :data:`COLUMNS` (what ``bkctl export --topic`` writes):
one row per message, a chunked message once its last chunk is in, and for a
corrupt entry or an incomplete chunk set either an error row (``error`` says
what is wrong, ``payload`` holds the bytes as stored) or nothing -- but
always a :class:`Problem` naming topic, ledger and entry.

Fast path: with ``packed=True`` the rows of a batch go straight into
Arrow-layout buffers (:class:`PackedColumns`, made by the C extension
``_packed`` when it was built and fast paths are on): splitting a batch in
Python is most of what a message costs.  Anything that is not a plain,
well-formed batch (chunks, encrypted or single messages, ``keep``, a batch the
extension does not decode) takes the general path, and the rows keep their
storage order across both (:meth:`TopicDecoder.take_parts`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bkctl.wire import fastpath

from .chunks import ChunkAssembler
from .entry import decode_entry, decompress_whole, message_columns
from .errors import CorruptEntry

try:
    from ._packed import PackedRows as _PackedRows
except ImportError:  # installed where no C compiler was found: the general path does it all
    _PackedRows = None

__all__ = ["COLUMNS", "PACKED_AVAILABLE", "PackedColumns", "Problem", "TopicDecoder", "message_id"]

#: Whether the C extension behind ``TopicDecoder(packed=True)`` is installed.
PACKED_AVAILABLE = _PackedRows is not None

#: The row's columns, in order.
COLUMNS = ["topic", "partition", "ledger_id", "entry_id", "batch_index", "message_id", "publish_time",
           "event_time", "producer_name", "sequence_id", "key", "ordering_key", "properties", "schema_version",
           "payload", "payload_size", "encrypted", "encryption_keys", "index", "broker_timestamp", "error"]


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


def message_id(ledger_id: int, entry_id: int, partition: int, batch_index: int = -1,
               first_chunk: tuple[int, int] | None = None) -> str:
    """The id as Pulsar's Java client prints it: ``L:E:P``, ``L:E:P:B`` in a
    batch, ``first;last`` for a chunked message."""
    text = f"{ledger_id}:{entry_id}:{partition}" if batch_index < 0 else \
        f"{ledger_id}:{entry_id}:{partition}:{batch_index}"
    if first_chunk is not None:
        return f"{first_chunk[0]}:{first_chunk[1]}:{partition};{text}"
    return text


class PackedColumns:
    """Rows in Arrow's memory layout, as the C extension made them:
    ``buffers`` maps a column of :data:`COLUMNS` to its buffers (see
    ``_packed.PackedRows.take``); ``topic``, ``partition``, ``encrypted``,
    ``encryption_keys`` and ``error`` are the same in every row (the topic's,
    False, None, None) and have none."""

    __slots__ = ("rows", "buffers", "topic", "partition")

    def __init__(self, rows: int, buffers: dict[str, tuple], topic: str, partition: int):
        self.rows = rows
        self.buffers = buffers
        self.topic = topic
        self.partition = partition


class TopicDecoder:
    """Rows of one topic's messages.

    ``keep(position, batch_index)`` (optional) says whether a message is
    wanted (``--unacked-only``); ``from_ms``/``to_ms`` keep publish times
    ``from_ms <= t < to_ms``; ``error_rows`` False skips corrupt entries (they
    are still counted in :attr:`problems`).  ``packed``: batches' rows may
    come as :class:`PackedColumns` (take the rows with :meth:`take_parts`).
    """

    def __init__(self, topic: str, partition: int = -1, *, keep=None, from_ms: int | None = None,
                 to_ms: int | None = None, error_rows: bool = True, verify: bool = True, packed: bool = False):
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
        self._packed = _PackedRows(partition) if packed and _PackedRows is not None and fastpath.ENABLED else None
        #: rows taken out of :attr:`columns` or the packed buffers, when the other kind came next
        self._parts: list[dict[str, list] | PackedColumns] = []
        self._reset()

    def _reset(self) -> None:
        self.columns: dict[str, list] = {name: [] for name in COLUMNS}

    @property
    def rows(self) -> int:
        rows = len(self.columns["ledger_id"]) + sum(
            p.rows if isinstance(p, PackedColumns) else len(p["ledger_id"]) for p in self._parts)
        return rows + (self._packed.rows if self._packed is not None else 0)

    def take(self) -> dict[str, list]:
        """The rows so far (and start a new set); not with ``packed``."""
        if self._packed is not None:
            raise RuntimeError("a packed TopicDecoder's rows are taken with take_parts()")
        out = self.columns
        self._reset()
        return out

    def take_parts(self) -> list[dict[str, list] | PackedColumns]:
        """The rows so far in storage order, as lists per column or packed
        (and start a new set)."""
        self._seal_lists()
        self._seal_packed()
        out, self._parts = self._parts, []
        return out

    def _seal_lists(self) -> None:
        if self.columns["ledger_id"]:
            self._parts.append(self.columns)
            self._reset()

    def _seal_packed(self) -> None:
        if self._packed is not None and self._packed.rows:
            rows, buffers = self._packed.take()
            self._parts.append(PackedColumns(rows, buffers, self.topic, self.partition))

    # -- feeding ---------------------------------------------------------------

    def add(self, ledger_id: int, entry_id: int, data: bytes, *, skip_continuations: bool = False,
            only_continuations: bool = False) -> None:
        """One entry.  ``skip_continuations``: a chunk that continues a message
        started before this reader's first entry is another reader's.
        ``only_continuations``: reading past its range, a reader takes only
        the chunks of the messages it began (the rest is the next reader's)."""
        self.entries += 1
        try:
            entry = decode_entry(data, self.verify)
            if only_continuations and not (entry.is_chunk and self.chunks.started(entry.metadata.uuid)
                                           and entry.metadata.chunk_id > 0):
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
                        self._problem(ledger_id, entry_id, f"chunked message {whole.metadata.uuid}: {exc.reason}",
                                      None, whole.metadata)
                        return
                    self._add_chunked(whole)
                return
            if self._packed is not None and self._add_packed(ledger_id, entry_id, entry):
                return
            fields = message_columns(entry)
        except CorruptEntry as exc:
            if not only_continuations:  # past the range: the next reader's to report
                self._problem(ledger_id, entry_id, exc.reason, bytes(data))
            return
        md = entry.metadata
        publish = md.publish_time
        if (self.from_ms is not None and publish < self.from_ms) or (self.to_ms is not None and publish >= self.to_ms):
            return
        batch_index, payloads, keys, _b64, ordering, props, events, sequences, _nulls, _compacted = fields
        position = (ledger_id, entry_id)
        if self.keep is not None:
            keep = self.keep
            wanted = [i for i, b in enumerate(batch_index) if keep(position, b)]
            if len(wanted) != len(batch_index):
                batch_index, payloads, keys, ordering, props, events, sequences = (
                    [col[i] for i in wanted] for col in (batch_index, payloads, keys, ordering, props, events,
                                                         sequences))
        n = len(batch_index)
        if not n:
            return
        self._seal_packed()
        sizes = [None if p is None else len(p) for p in payloads]
        keys_enc = [k.key for k in md.encryption_keys] or None
        c = self.columns
        partition = self.partition
        prefix = f"{ledger_id}:{entry_id}:{partition}"
        c["topic"] += [self.topic] * n
        c["partition"] += [partition] * n
        c["ledger_id"] += [ledger_id] * n
        c["entry_id"] += [entry_id] * n
        c["batch_index"] += batch_index
        c["message_id"] += [prefix] if batch_index[0] < 0 else [f"{prefix}:{b}" for b in batch_index]
        c["publish_time"] += [publish] * n
        c["event_time"] += events
        c["producer_name"] += [md.producer_name] * n
        c["sequence_id"] += sequences
        c["key"] += keys
        c["ordering_key"] += ordering
        c["properties"] += props
        c["schema_version"] += [md.schema_version if md.HasField("schema_version") else None] * n
        c["payload"] += payloads
        c["payload_size"] += sizes
        c["encrypted"] += [keys_enc is not None] * n
        c["encryption_keys"] += [keys_enc] * n
        c["index"] += [entry.broker_index] * n
        c["broker_timestamp"] += [entry.broker_timestamp] * n
        c["error"] += [None] * n
        self.messages += n
        self.payload_bytes += sum(x for x in sizes if x)

    def _add_packed(self, ledger_id: int, entry_id: int, entry) -> bool:
        """The fast path: a plain batch's rows into the packed buffers; False
        when it is not one (nothing added)."""
        md = entry.metadata
        if self.keep is not None or not entry.is_batch or entry.encrypted:
            return False
        publish = md.publish_time
        if (self.from_ms is not None and publish < self.from_ms) or (self.to_ms is not None and publish >= self.to_ms):
            return False  # the general path checks the batch before leaving it out
        producer = md.producer_name
        if not isinstance(producer, str):  # not UTF-8: protobuf hands the bytes over
            return False
        if self.columns["ledger_id"]:
            self._seal_lists()
        added = self._packed.add_batch(entry.payload, md.num_messages_in_batch, md.sequence_id, ledger_id, entry_id,
                                       publish, producer.encode(),
                                       md.schema_version if md.HasField("schema_version") else None,
                                       entry.broker_index, entry.broker_timestamp)
        if added is None:
            return False
        self.messages += md.num_messages_in_batch
        self.payload_bytes += added
        return True

    def finish(self, reason: str = "the topic ends before the message's last chunk") -> None:
        """No more entries: unfinished chunk sets become problems."""
        self.chunks.finish(reason)
        self._chunk_problems()

    # -- helpers ---------------------------------------------------------------

    def _add_chunked(self, whole) -> None:
        md = whole.metadata
        publish = md.publish_time
        if (self.from_ms is not None and publish < self.from_ms) or (self.to_ms is not None and publish >= self.to_ms):
            return
        ledger_id, entry_id = whole.last
        if self.keep is not None and not self.keep(whole.last, -1):
            return
        payload = None if md.null_value else whole.payload
        size = None if payload is None else len(payload)
        row = {
            "topic": self.topic, "partition": self.partition, "ledger_id": ledger_id, "entry_id": entry_id,
            "batch_index": -1, "message_id": message_id(ledger_id, entry_id, self.partition, -1, whole.first),
            "publish_time": publish, "event_time": md.event_time or None, "producer_name": md.producer_name,
            "sequence_id": md.sequence_id,
            "key": md.partition_key if md.HasField("partition_key") and not md.null_partition_key else None,
            "ordering_key": md.ordering_key if md.HasField("ordering_key") else None,
            "properties": [(p.key, p.value) for p in md.properties],
            "schema_version": md.schema_version if md.HasField("schema_version") else None,
            "payload": payload, "payload_size": size, "encrypted": len(md.encryption_keys) > 0,
            "encryption_keys": [k.key for k in md.encryption_keys] or None,
            "index": whole.broker_index, "broker_timestamp": whole.broker_timestamp, "error": None,
        }
        self._append_row(row)
        self.messages += 1
        self.payload_bytes += size or 0

    def _append_row(self, row: dict[str, Any]) -> None:
        self._seal_packed()
        for name, value in row.items():
            self.columns[name].append(value)

    def _chunk_problems(self) -> None:
        problems = self.chunks.problems
        while problems:
            p = problems.pop(0)
            ledger_id, entry_id = p.positions[-1] if p.positions else (-1, -1)
            self._problem(ledger_id, entry_id, f"incomplete chunked message {p.uuid}: {p.reason}", None,
                          p.metadata)

    def _problem(self, ledger_id: int, entry_id: int, reason: str, payload: bytes | None, md: Any = None) -> None:
        self.problems.append(Problem(self.topic, ledger_id, entry_id, reason))
        if not self.error_rows:
            return
        row = dict.fromkeys(COLUMNS)
        row.update(topic=self.topic, partition=self.partition, ledger_id=ledger_id, entry_id=entry_id,
                   batch_index=-1, message_id=message_id(ledger_id, entry_id, self.partition),
                   payload=payload, payload_size=None if payload is None else len(payload), encrypted=False,
                   error=reason)
        if md is not None:
            row.update(publish_time=md.publish_time, producer_name=md.producer_name, sequence_id=md.sequence_id)
        self._append_row(row)
