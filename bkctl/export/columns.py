"""The columns of an export, one table per source, and everything derived from it.

A table is a sequence of :class:`~bkctl.wire.pulsar.columns.Column` (name
and type in Spark SQL's DDL words): :data:`LEDGER_COLUMNS` for a ledger
export (one row per entry), :data:`TOPIC_COLUMNS` for a topic export (one
row per message: the Pulsar reader's own table).  From a table come the
Spark schema (:func:`spark_schema`), the Arrow schema (:func:`arrow_schema`),
the DDL (:func:`ddl`), the columns inside the files (:func:`file_schema`) and
the manifest's column list (:func:`manifest_columns`), so that a new column
is one line here (and, for a topic, its value in the reader).

Importing this module loads neither pyarrow nor pyspark.
"""

from __future__ import annotations

from collections.abc import Sequence

from bkctl.wire.pulsar.columns import MESSAGE_COLUMNS, Column

__all__ = [
    "LEDGER_COLUMNS",
    "PAYLOAD_TEXT",
    "TOPIC_COLUMNS",
    "Column",
    "arrow_schema",
    "arrow_type",
    "ddl",
    "file_schema",
    "manifest_columns",
    "spark_schema",
    "spark_type",
]

LEDGER_COLUMNS: tuple[Column, ...] = (
    Column("ledger_id", "long"),
    Column("entry_id", "long"),
    Column("payload", "binary"),
    Column("payload_size", "int"),
    Column("ledger_ctime", "timestamp"),
    Column("ledger_state", "string"),
    Column("ledger_metadata", "map<string,string>"),
)

#: A topic export's columns: the messages' (:data:`MESSAGE_COLUMNS`), ``schema_version`` a
#: number (the 8 big-endian bytes Pulsar stores, as its registry counts versions), so that
#: ``WHERE schema_version = 1`` works; the readers keep the bytes until a batch leaves them.
TOPIC_COLUMNS: tuple[Column, ...] = tuple(
    Column(c.name, "long", c.made_by, c.value) if c.name == "schema_version" else c for c in MESSAGE_COLUMNS
)

#: The column ``--decode utf8`` adds at the end of the files (the payload as text).
PAYLOAD_TEXT = Column("payload_text", "string")

_SPARK_NAMES = {
    "long": "LongType",
    "int": "IntegerType",
    "string": "StringType",
    "binary": "BinaryType",
    "boolean": "BooleanType",
    "timestamp": "TimestampType",
}


def _inner(ddl_type: str, outer: str) -> list[str] | None:
    """The type arguments of ``outer<...>`` (None when ``ddl_type`` is not one)."""
    if not (ddl_type.startswith(outer + "<") and ddl_type.endswith(">")):
        return None
    return [part.strip() for part in ddl_type[len(outer) + 1 : -1].split(",")]


def arrow_type(ddl_type):
    """The Arrow type of a DDL type (timestamps: microseconds, UTC, as Spark writes them);
    a column typed by an Arrow type itself (a topic's typed ``value``) keeps it."""
    import pyarrow as pa

    if not isinstance(ddl_type, str):
        return ddl_type
    simple = {
        "long": pa.int64(),
        "int": pa.int32(),
        "string": pa.string(),
        "binary": pa.binary(),
        "boolean": pa.bool_(),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }
    if ddl_type in simple:
        return simple[ddl_type]
    if (args := _inner(ddl_type, "map")) is not None:
        return pa.map_(arrow_type(args[0]), arrow_type(args[1]))
    if (args := _inner(ddl_type, "array")) is not None:
        return pa.list_(arrow_type(args[0]))
    raise ValueError(f"no Arrow type for column type {ddl_type!r}")


def spark_type(ddl_type):
    """The Spark SQL type of a DDL type (or of an Arrow type: a typed ``value``)."""
    from pyspark.sql import types as T

    if not isinstance(ddl_type, str):
        from pyspark.sql.pandas.types import from_arrow_type

        return from_arrow_type(ddl_type)
    if ddl_type in _SPARK_NAMES:
        return getattr(T, _SPARK_NAMES[ddl_type])()
    if (args := _inner(ddl_type, "map")) is not None:
        return T.MapType(spark_type(args[0]), spark_type(args[1]))
    if (args := _inner(ddl_type, "array")) is not None:
        return T.ArrayType(spark_type(args[0]))
    raise ValueError(f"no Spark type for column type {ddl_type!r}")


def arrow_schema(columns: Sequence[Column]):
    """The Arrow schema of a table's rows."""
    import pyarrow as pa

    return pa.schema([(c.name, arrow_type(c.type)) for c in columns])


def spark_schema(columns: Sequence[Column]):
    """The Spark schema of a table's rows (what the data source declares)."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(c.name, spark_type(c.type)) for c in columns])


def ddl(columns: Sequence[Column]) -> str:
    """The rows' schema as Spark SQL DDL (``ledger_id long, entry_id long, ...``)."""
    return ", ".join(
        f"{c.name} {c.type if isinstance(c.type, str) else spark_type(c.type).simpleString()}" for c in columns
    )


def file_columns(
    columns: Sequence[Column], partition_columns: Sequence[str] = (), decode: str | None = None
) -> list[Column]:
    """The columns inside an export's files: the table's less its partition
    folders, plus ``payload_text`` with ``decode="utf8"``."""
    inside = [c for c in columns if c.name not in partition_columns]
    return inside + ([PAYLOAD_TEXT] if decode == "utf8" else [])


def file_schema(columns: Sequence[Column], partition_columns: Sequence[str] = (), decode: str | None = None):
    """The Arrow schema of :func:`file_columns`."""
    return arrow_schema(file_columns(columns, partition_columns, decode))


def manifest_columns(columns: Sequence[Column], decode: str | None = None) -> list[str]:
    """The column names a manifest lists: every column of the rows, in order
    (partition folders included), then ``payload_text`` with decode."""
    return [c.name for c in columns] + ([PAYLOAD_TEXT.name] if decode == "utf8" else [])
