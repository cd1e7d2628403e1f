"""The Spark session of a test module that exports or reads through Spark."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["local_spark"]


def local_spark() -> Iterator[Any]:
    """A ``local[2]`` SparkSession for a module-scoped fixture (``yield from
    local_spark()``), stopped afterwards when this made it."""
    from bkctl.export.spark_session import spark_session, stop_spark

    session, created = spark_session("local[2]")
    try:
        yield session
    finally:
        if created:
            stop_spark(session)
