"""Message rows, column by column: the batch splitter's twins and the one choice between them.

The interface (:class:`BatchRowsProtocol`): ``add_batch(batch, count, base_sequence,
entry)`` appends the rows of a batch's messages -- ``entry`` holds the
values of the :data:`~.columns.ENTRY_COLUMNS` (:func:`~.columns.entry_values`)
-- and returns their payload bytes; ``add_entries(ledger_id, entries, start,
limits)`` appends the rows of whole stored entries as long as each is a plain
message or batch (:func:`plain_entry`: what most of a topic is), so that no
Python runs per message; ``rows``, ``payload_bytes``; ``take()`` hands the rows
over and starts again.  Two implementations, as aiokafka keeps its record
batches:

* :class:`PyMessageRows`, pure Python, the reference: its rules for a
  message's own values are :func:`message_values`, stated once; a batch that
  does not split raises :class:`~.errors.CorruptEntry` saying why.  It also
  takes the rows that are not a plain batch's (single, encrypted and chunked
  messages, error rows).  ``take()`` gives a list per column, values in
  Arrow's units (timestamps in microseconds);
* ``_packed.PackedRows``, the C one (``_packed.c``; a stored entry read in
  ``_packed_entry.c``), for plain batches and plain entries only:
  the same columns (:func:`c_columns`; a build whose table differs is not
  used) and rules, straight into Arrow-layout buffers; ``take()``
  gives each column's buffers.  For anything it does not split plainly
  ``add_batch`` appends nothing and returns None, and the batch goes to the
  Python twin.

The twin selector names the one that splits batches (``Twins.batch_rows`` of
:mod:`bkctl.wire.fastpath`): the C one when it is built, this is a little-endian machine
and fast paths are on, else the Python one.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple, Protocol

from ..proto import pulsar_api_pb2 as pb
from .columns import BATCH_DEFAULTS, MESSAGE_COLUMNS, EntryFacts, EntryValues, entry_values, names
from .entry import INT64_MAX, MS_MAX, StoredEntry, check_range, check_text, decode_entry
from .errors import CorruptEntry

__all__ = [
    "BatchRowsProtocol",
    "C_KINDS",
    "MESSAGE_VALUE_COLUMNS",
    "PackedModule",
    "PlainLimits",
    "PyMessageRows",
    "c_columns",
    "encryption_values",
    "entry_messages",
    "message_values",
    "plain_entry",
    "split_batch",
]

_U32 = struct.Struct(">I")
#: What :func:`message_values` gives, in order: the ``message`` columns.
MESSAGE_VALUE_COLUMNS = tuple(names(MESSAGE_COLUMNS, ("message",)))
_ENTRY = tuple(names(MESSAGE_COLUMNS, ("entry",)))
_GENERAL = tuple(names(MESSAGE_COLUMNS, ("general",)))
#: The columns a :class:`PyMessageRows` keeps (the ``topic`` ones are its decoder's).
_KEPT = tuple(names(MESSAGE_COLUMNS, ("entry", "message", "general")))


#: A message's own values, in :data:`MESSAGE_VALUE_COLUMNS` order (:func:`message_values`;
#: the C twin's row format): the batch index first.
MessageValues = tuple[int, *tuple[object, ...]]


class PlainLimits(NamedTuple):
    """What :meth:`BatchRowsProtocol.add_entries` is given besides the entries."""

    #: check each entry's CRC32C (an entry whose checksum fails is not taken)
    verify: bool
    #: the publish-time window (ms): ``from_ms <= t < to_ms``, None for no bound (an entry outside is not taken)
    from_ms: int | None
    to_ms: int | None
    #: stop once the call appended this many rows ...
    rows: int
    #: ... or this many payload bytes
    payload_bytes: int


#: fields whose presence makes an entry not plain: markers, transactions, chunks, encryption, compacted batches
_NOT_PLAIN = (
    "marker_type",
    "txnid_least_bits",
    "txnid_most_bits",
    "uuid",
    "num_chunks_from_msg",
    "total_chunk_msg_size",
    "chunk_id",
    "encryption_algo",
    "encryption_param",
)


def plain_entry(data: bytes, limits: PlainLimits) -> StoredEntry | None:
    """The stored entry decoded when it is a plain message or a plain batch whose rows the
    window keeps -- no marker, no transaction, no chunk, no encryption, no compression, and
    nothing wrong with it (:func:`~.entry.decode_entry` takes it; the checksum is checked when
    ``limits.verify``) -- else None: the rule of :meth:`BatchRowsProtocol.add_entries`, stated
    once on this side (the C twin's: ``parse_plain_entry`` in ``_packed_entry.c``)."""
    try:
        entry = decode_entry(data, limits.verify)
    except CorruptEntry:
        return None
    md = entry.metadata
    has = md.HasField
    t = md.publish_time
    if (
        any(has(name) for name in _NOT_PLAIN)
        or md.encryption_keys
        or md.compacted_batch_indexes
        or (has("compression") and md.compression != pb.NONE)
        or (limits.from_ms is not None and t < limits.from_ms)
        or (limits.to_ms is not None and t >= limits.to_ms)
    ):
        return None
    return entry


class BatchRowsProtocol(Protocol):
    """A batch splitter: rows of a topic's messages, column by column."""

    def __init__(self, partition: int) -> None:
        """A splitter for the rows of partition ``partition`` (-1: not partitioned)."""

    @property
    def rows(self) -> int:
        """Rows appended since the last :meth:`take`."""

    @property
    def payload_bytes(self) -> int:
        """Payload bytes of the messages appended since the last :meth:`take`."""

    def add_batch(self, batch: bytes, count: int, base_sequence: int, entry: EntryValues, /) -> int | None:
        """Append the rows of a batch's ``count`` messages; their payload bytes,
        or None when this splitter does not split it (nothing appended)."""

    def add_entries(self, ledger_id: int, entries: list[tuple[int, bytes]], start: int, limits: PlainLimits, /) -> int:
        """Append the rows of ``entries[start:]`` (``(entry id, stored entry)``) of ledger
        ``ledger_id`` while each is a plain entry (:func:`plain_entry`) and the call has
        appended fewer than ``limits.rows`` rows and ``limits.payload_bytes`` payload bytes;
        the index of the first entry not taken (``start``: none; an entry is taken whole)."""

    def takes(self, entry: bytes, limits: PlainLimits, /) -> bool:
        """Whether :meth:`add_entries` would take this stored entry, judged by its metadata
        and publish time (its checksum is not checked here)."""

    def take(self) -> tuple[int, dict[str, Any]]:
        """``(rows, columns)``: the rows appended so far; start again empty."""


class PackedModule(Protocol):
    """The slot ``_packed`` (C) fills: its batch splitter (``PackedRows``, a
    :class:`BatchRowsProtocol`) and the columns it fills (``COLUMNS``: a build whose columns are
    not :func:`c_columns` is not used); the twin selector holds the C module's stub to it
    (:mod:`bkctl.wire.fastpath`, under TYPE_CHECKING: mypy fails when the stub does not fit)."""

    @property
    def COLUMNS(self) -> tuple[tuple[str, str, str], ...]: ...  # noqa: N802 - the C module's constant

    @property
    def PackedRows(self) -> type[BatchRowsProtocol]: ...  # noqa: N802 - the C module's class


def message_values(
    md: pb.MessageMetadata | pb.SingleMessageMetadata,
    payload: bytes | None,
    batch_index: int,
    message_id: str,
    sequence_id: int,
) -> MessageValues:
    """A message's own values, in :data:`MESSAGE_VALUE_COLUMNS` order, from its
    metadata (a batch's ``SingleMessageMetadata`` or an entry's
    ``MessageMetadata``: the fields have the same names).  The rules, stated
    once on this side (the C twin's: ``message_values`` in ``_packed.c``): no
    key when it is unset or ``null_partition_key`` says so, and whether it is
    base64 (``partition_key_b64_encoded``) as stored; the sequence id
    is the metadata's own, else ``sequence_id`` (the entry's plus the
    message's index); no event time when it is 0 (unset); no payload (and no
    size) when ``null_value`` says so."""
    has = md.HasField
    sequence = md.sequence_id if has("sequence_id") else sequence_id
    event = md.event_time
    if event > MS_MAX or sequence > INT64_MAX:
        check_range(
            f"batch message {batch_index}" if batch_index >= 0 else "message metadata",
            event_time=event,
            sequence_id=sequence,
        )
    if md.null_value:
        payload = None
    properties = md.properties
    return (
        batch_index,
        message_id,
        event * 1000 if event else None,
        sequence,
        md.partition_key if has("partition_key") and not md.null_partition_key else None,
        md.partition_key_b64_encoded,
        md.ordering_key if has("ordering_key") else None,
        [(p.key, p.value) for p in properties] if properties else [],
        payload,
        None if payload is None else len(payload),
    )


def encryption_values(md: Any) -> dict[str, Any] | None:
    """The ``general`` encryption columns of an encrypted message (None when
    it is not): what a consumer's ``Message.getEncryptionCtx()`` holds -- the
    keys' names and encrypted data keys (not their metadata), the algorithm,
    the parameter (IV), the payload's codec and size before compression, and
    the batch's size (None: not a batch)."""
    keys = md.encryption_keys
    if not keys:
        return None
    has = md.HasField
    return {
        "encrypted": True,
        "encryption_keys": [k.key for k in keys],
        "encryption_key_values": [k.value for k in keys],
        "encryption_algo": md.encryption_algo if has("encryption_algo") else None,
        "encryption_param": md.encryption_param if has("encryption_param") else None,
        "encryption_compression": pb.CompressionType.Name(md.compression),
        "encryption_uncompressed_size": md.uncompressed_size,
        "encryption_batch_size": md.num_messages_in_batch if has("num_messages_in_batch") else None,
    }


def split_batch(payload: bytes, count: int, base_sequence: int, id_prefix: str) -> list[MessageValues]:
    """A batch's messages as :func:`message_values` tuples, in storage order;
    message ids ``id_prefix:index``.  CorruptEntry when it does not split."""
    n = len(payload)
    off = 0
    view = memoryview(payload)
    unpack = _U32.unpack_from
    smd = pb.SingleMessageMetadata()  # one message object, parsed again for each message (parsing clears it)
    out: list[MessageValues] = []
    for index in range(count):
        if off + 4 > n:
            raise CorruptEntry(f"batch truncated at message {index} of {count}")
        size = unpack(payload, off)[0]
        off += 4
        if off + size > n:
            raise CorruptEntry(f"batch message {index}: metadata of {size} bytes overruns the payload")
        try:
            smd.ParseFromString(view[off : off + size])  # type: ignore[arg-type]  # any buffer parses: no copy
        except Exception as exc:  # noqa: BLE001
            raise CorruptEntry(f"batch message {index}: metadata does not parse: {exc}") from None
        off += size
        if not smd.HasField("payload_size"):
            raise CorruptEntry(f"batch message {index}: metadata has no payload_size")
        length = smd.payload_size
        if length < 0 or off + length > n:
            raise CorruptEntry(f"batch message {index}: payload of {length} bytes overruns the batch")
        if not isinstance(smd.partition_key, str) or smd.properties:
            check_text(f"batch message {index}", smd.partition_key, smd.properties)
        out.append(
            message_values(smd, payload[off : off + length], index, f"{id_prefix}:{index}", base_sequence + index)
        )
        off += length
    if off != n:
        raise CorruptEntry(f"batch of {count} messages leaves {n - off} bytes unread")
    return out


def entry_messages(entry: StoredEntry, id_prefix: str) -> list[MessageValues]:
    """The messages of a decoded entry (:class:`~.entry.StoredEntry`) as
    :func:`message_values` tuples, by the Python twin's rules: a batch split,
    anything else one message (an encrypted batch too: it cannot be split
    without the key, and its payload is kept as stored).  Message ids
    ``id_prefix`` and ``id_prefix:index`` (``L:E:P``, ``L:E:P:B``)."""
    md = entry.metadata
    if entry.is_batch and not entry.encrypted:
        return split_batch(entry.payload, md.num_messages_in_batch, md.sequence_id, id_prefix)
    return [message_values(md, entry.payload, -1, id_prefix, md.sequence_id)]


class PyMessageRows:
    """The pure-Python twin of ``_packed.PackedRows`` (see the module
    documentation); also the home of the rows that are not a plain batch's."""

    def __init__(self, partition: int = -1):
        self.partition = partition
        self._reset()

    def _reset(self) -> None:
        self._payload_bytes = 0
        self._columns: dict[str, list[object]] = {name: [] for name in _KEPT}
        self._entry_lists = [self._columns[name] for name in _ENTRY]
        self._message_lists = [self._columns[name] for name in MESSAGE_VALUE_COLUMNS]
        self._general_lists = [self._columns[name] for name in _GENERAL]

    @property
    def rows(self) -> int:
        return len(self._columns["ledger_id"])

    @property
    def payload_bytes(self) -> int:
        return self._payload_bytes

    def add_batch(self, batch: bytes, count: int, base_sequence: int, entry: EntryValues) -> int:
        ledger_id, entry_id = entry[_ENTRY.index("ledger_id")], entry[_ENTRY.index("entry_id")]
        messages = split_batch(batch, count, base_sequence, f"{ledger_id}:{entry_id}:{self.partition}")
        return self.add_messages(entry, messages)

    def add_entries(self, ledger_id: int, entries: list[tuple[int, bytes]], start: int, limits: PlainLimits) -> int:
        i, rows, added = start, self.rows, 0
        while i < len(entries) and self.rows - rows < limits.rows and added < limits.payload_bytes:
            entry_id, data = entries[i]
            entry = plain_entry(data, limits)
            if entry is None:
                break
            try:
                messages = entry_messages(entry, f"{ledger_id}:{entry_id}:{self.partition}")
            except CorruptEntry:
                break
            added += self.add_messages(
                entry_values(
                    EntryFacts(ledger_id, entry_id, entry.metadata, entry.broker_index, entry.broker_timestamp)
                ),
                messages,
            )
            i += 1
        return i

    def takes(self, entry: bytes, limits: PlainLimits) -> bool:
        return plain_entry(entry, limits._replace(verify=False)) is not None

    def add_messages(
        self, entry: EntryValues, messages: list[MessageValues], encryption: dict[str, Any] | None = None
    ) -> int:
        """Rows of an entry's ``messages`` (:func:`message_values` tuples), an
        encrypted one's with its :func:`encryption_values`; their payload bytes."""
        n = len(messages)
        if not n:
            return 0
        for values, value in zip(self._entry_lists, entry):
            values += [value] * n
        for values, column in zip(self._message_lists, zip(*messages)):
            values += column
        general = BATCH_DEFAULTS if encryption is None else {**BATCH_DEFAULTS, **encryption}
        for values, name in zip(self._general_lists, _GENERAL):
            values += [general[name]] * n
        added = sum(size for size in self._columns["payload_size"][-n:] if isinstance(size, int))
        self._payload_bytes += added
        return added

    def add_row(self, row: dict[str, Any]) -> None:
        """One row given by column (the columns it does not name are null)."""
        for name, values in self._columns.items():
            values.append(row.get(name))

    def take(self) -> tuple[int, dict[str, list[object]]]:
        out = (self.rows, self._columns)
        self._reset()
        return out


#: How the C twin stores a column of each DDL type (``_packed.c``'s kinds).
C_KINDS = {
    "long": "int64",
    "timestamp": "int64",
    "int": "int32",
    "string": "string",
    "binary": "binary",
    "boolean": "bool",
    "map<string,string>": "map",
}


def c_columns() -> list[tuple[str, str, str]]:
    """What the C twin's ``COLUMNS`` must be: the ``entry`` and ``message``
    columns of :data:`~.columns.MESSAGE_COLUMNS`, in order, as ``(name, kind, made_by)``."""
    return [(c.name, C_KINDS[c.type], c.made_by) for c in MESSAGE_COLUMNS if c.made_by in ("entry", "message")]
