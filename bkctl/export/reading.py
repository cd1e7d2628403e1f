"""Reading an export back with its exact column types.

Any Parquet reader reads an export directly (``spark.read.parquet(DIR)``,
``pyarrow.dataset.dataset(DIR, partitioning="hive")``), but a partition
column's type is inferred from the folder names: Spark makes ``ledger_id``
an int while the ids fit in 32 bits, pyarrow a dictionary of int32.  These
helpers give ``ledger_id`` as a 64-bit integer, the columns in export order.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .output import MANIFEST, local_path

__all__ = ["arrow_dataset", "manifest", "read_export"]


def manifest(out: str | os.PathLike) -> dict[str, Any]:
    """The ``_manifest.json`` of an export."""
    with open(local_path(out) / MANIFEST) as f:
        return json.load(f)


def _layout(out) -> tuple[str, list[str]]:
    doc = manifest(out)
    return doc.get("partition_by", "ledger_id"), list(doc.get("columns") or [])


def arrow_dataset(out: str | os.PathLike):
    """A ``pyarrow.dataset.Dataset`` of the export (``ledger_id`` int64,
    ``date`` date32 when partitioned by date; a topic export's ``topic``
    string and ``date``)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    partition_by, _columns = _layout(out)
    fields = [("topic", pa.string())] if partition_by == "topic" else []
    fields += [("date", pa.date32())] if partition_by in ("date", "topic") else []
    fields.append(("ledger_id", pa.int64()))
    return ds.dataset(
        str(local_path(out)), format="parquet", partitioning=ds.partitioning(pa.schema(fields), flavor="hive")
    )


def read_export(spark, out: str | os.PathLike):
    """A Spark DataFrame of the export: the exported columns in order
    (``ledger_id`` as long), then ``date`` when partitioned by date (or, for a
    topic export, by topic and date)."""
    from pyspark.sql import functions as F

    partition_by, columns = _layout(out)
    df = spark.read.parquet(str(local_path(out)))
    wanted = columns + (["date"] if partition_by in ("date", "topic") else [])
    return df.select(*[F.col(c).cast("long").alias(c) if c == "ledger_id" else F.col(c) for c in wanted])
