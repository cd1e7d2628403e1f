"""The message row: what ``bkctl export --topic`` writes for each message, stated once.

:data:`MESSAGE_COLUMNS` names every column of a row, in order, with its type
in Spark SQL's DDL words (``bkctl.export.columns`` derives the Arrow schema,
the Spark schema and the DDL from it) and with where a row's value comes
from when a batch is split (:data:`MADE_BY`):

* ``topic``: the same in every row a decoder makes (its topic, partition, and the
  topic a partition belongs to: :func:`topic_values`);
* ``entry``: the same for every message of an entry: the column's ``value``
  rule, applied to the entry's :class:`EntryFacts` in Python, and handed to
  either splitter (in Arrow's units: timestamps in microseconds);
* ``message``: each message's own, made by the batch splitters -- the
  pure-Python one (:mod:`.rows`) and the C one (``_packed.c``), which must
  list exactly these and the ``entry`` columns, in this order (a unit test
  compares them);
* ``general``: set only by the general path (encrypted, chunked and single
  messages, error rows); a split batch's rows take :data:`BATCH_DEFAULTS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = [
    "BATCH_DEFAULTS",
    "ENTRY_COLUMNS",
    "MADE_BY",
    "MESSAGE_COLUMNS",
    "Column",
    "EntryFacts",
    "entry_values",
    "names",
    "topic_values",
    "txn_id",
    "value_column",
]

#: Where a row's value comes from (see the module documentation); ``schema``: the
#: typed ``value`` a topic export with a schema adds after the message columns.
MADE_BY = ("topic", "entry", "message", "general", "schema")


class EntryFacts(NamedTuple):
    """What the rows of one entry share: its position, the producer's
    ``MessageMetadata``, and the broker's entry metadata (None: none)."""

    ledger_id: int
    entry_id: int
    metadata: Any
    broker_index: int | None = None
    broker_timestamp: int | None = None
    #: at or after the first message of a transaction still open (:mod:`.transactions`)
    pending: bool = False


class Column(NamedTuple):
    """A column of a row: its name, its type in Spark SQL's DDL words
    (``long``, ``int``, ``string``, ``binary``, ``boolean``, ``timestamp``,
    ``map<string,string>``, ``array<string>``), what makes its value, and for
    an ``entry`` column the rule that takes it from :class:`EntryFacts`."""

    name: str
    #: DDL words; the typed ``value`` column (:func:`value_column`) has its Arrow type instead
    type: Any
    made_by: str = ""
    value: Callable[[EntryFacts], Any] | None = None


def topic_values(topic: str, partition: int) -> dict[str, Any]:
    """The ``topic`` columns' values in every row of ``topic`` (``partition``: its index, -1 for
    a topic that is not a partition): ``base_topic`` is the partitioned topic a partition
    belongs to, as Pulsar's ``TopicName.getPartitionedTopicName()`` (the name less its
    ``-partition-N``), and the topic itself for one that is not a partition."""
    suffix = f"-partition-{partition}"
    base = topic[: -len(suffix)] if partition >= 0 and topic.endswith(suffix) else topic
    return {"topic": topic, "partition": partition, "base_topic": base}


def _us(ms: int | None) -> int | None:
    return None if ms is None else ms * 1000


def txn_id(md: Any) -> str | None:
    """A transactional message's (or marker's) transaction, as Pulsar's
    ``TxnID.toString()`` prints it: ``(most,least)``; None outside one."""
    if md.HasField("txnid_most_bits") and md.HasField("txnid_least_bits"):
        return f"({md.txnid_most_bits},{md.txnid_least_bits})"
    return None


MESSAGE_COLUMNS: tuple[Column, ...] = (
    Column("topic", "string", "topic"),
    Column("partition", "int", "topic"),
    # a partition's rows name the partitioned topic too: `WHERE base_topic = ...` takes every partition
    Column("base_topic", "string", "topic"),
    Column("ledger_id", "long", "entry", lambda e: e.ledger_id),
    Column("entry_id", "long", "entry", lambda e: e.entry_id),
    Column("batch_index", "int", "message"),
    Column("message_id", "string", "message"),
    Column("publish_time", "timestamp", "entry", lambda e: e.metadata.publish_time * 1000),
    Column("event_time", "timestamp", "message"),
    Column("producer_name", "string", "entry", lambda e: e.metadata.producer_name),
    Column("sequence_id", "long", "message"),
    Column("key", "string", "message"),
    Column("key_base64_encoded", "boolean", "message"),
    Column("ordering_key", "binary", "message"),
    Column("properties", "map<string,string>", "message"),
    Column(
        "schema_version",
        "binary",
        "entry",
        lambda e: e.metadata.schema_version if e.metadata.HasField("schema_version") else None,
    ),
    Column("payload", "binary", "message"),
    Column("payload_size", "int", "message"),
    Column("encrypted", "boolean", "general"),
    Column("encryption_keys", "array<string>", "general"),
    # the rest of a consumer's EncryptionContext: what decrypting the payload later takes
    Column("encryption_key_values", "array<binary>", "general"),
    Column("encryption_algo", "string", "general"),
    Column("encryption_param", "binary", "general"),
    Column("encryption_compression", "string", "general"),
    Column("encryption_uncompressed_size", "long", "general"),
    Column("encryption_batch_size", "int", "general"),
    Column("index", "long", "entry", lambda e: e.broker_index),
    Column("broker_timestamp", "timestamp", "entry", lambda e: _us(e.broker_timestamp)),
    Column(
        "replicated_from",
        "string",
        "entry",
        lambda e: e.metadata.replicated_from if e.metadata.HasField("replicated_from") else None,
    ),
    Column(
        "deliver_at_time",
        "timestamp",
        "entry",
        lambda e: e.metadata.deliver_at_time * 1000 if e.metadata.HasField("deliver_at_time") else None,
    ),
    Column("txn_id", "string", "entry", lambda e: txn_id(e.metadata)),
    Column("pending", "boolean", "entry", lambda e: e.pending),
    Column("error", "string", "general"),
)

#: The ``entry`` columns, in order: what :func:`entry_values` gives and a splitter's ``add_batch`` takes.
ENTRY_COLUMNS: tuple[Column, ...] = tuple(c for c in MESSAGE_COLUMNS if c.made_by == "entry")

#: how each of :data:`ENTRY_COLUMNS` is made from an entry's facts (each has its ``value``)
_ENTRY_VALUES: tuple[Callable[[EntryFacts], Any], ...] = tuple(c.value for c in ENTRY_COLUMNS if c.value is not None)
assert len(_ENTRY_VALUES) == len(ENTRY_COLUMNS)

#: The values of the ``general`` columns in the rows of a split batch.
BATCH_DEFAULTS: dict[str, Any] = {
    "encrypted": False,
    "encryption_keys": None,
    "encryption_key_values": None,
    "encryption_algo": None,
    "encryption_param": None,
    "encryption_compression": None,
    "encryption_uncompressed_size": None,
    "encryption_batch_size": None,
    "error": None,
}


def names(columns: tuple[Column, ...] = MESSAGE_COLUMNS, made_by: tuple[str, ...] = MADE_BY) -> list[str]:
    """The names of the columns made by any of ``made_by``, in order."""
    return [c.name for c in columns if c.made_by in made_by]


#: The values of the :data:`ENTRY_COLUMNS` for an entry's rows, in order (the C twin's row format).
EntryValues = tuple[object, ...]


def entry_values(facts: EntryFacts) -> EntryValues:
    """The values of the :data:`ENTRY_COLUMNS` for an entry's rows, in order."""
    return tuple(value(facts) for value in _ENTRY_VALUES)


def value_column(arrow_type: Any) -> Column:
    """The column a typed topic export adds after :data:`MESSAGE_COLUMNS`: each
    message's value decoded by its schema (:mod:`.typed`), of the reader
    schema's Arrow type (a struct for a record)."""
    return Column("value", arrow_type, "schema")
