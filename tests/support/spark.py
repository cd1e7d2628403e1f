"""The Spark session of the test modules that export or read through Spark.

A Spark session is a JVM (some 20 CPU-seconds to start and to run its first job, which starts
Spark's Python workers): one per test process (an xdist worker), shared by every module of that
process that asks for it (:func:`worker_spark`, a session-scoped fixture), started by the first
and stopped at the end of the process.  Each module keeps its own cluster, output folders and
cluster root; what they share is stateless between them (the ``bookkeeper`` data source is
registered again by whoever reads through it, temporary views are replaced by name).  A test
that needs a session of its own (an environment its JVM and workers must inherit) stops the
shared one first (:meth:`WorkerSpark.stop`) and starts its own with :func:`local_spark`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["WorkerSpark", "local_spark", "worker_spark"]

#: the master of every test session: two task slots, as the machine has two cores
MASTER = "local[2]"


def local_spark() -> Iterator[Any]:
    """A ``local[2]`` SparkSession (``yield from local_spark()``, or a loop over it), stopped
    afterwards when this made it (the process's running session is used as it is)."""
    from bkctl.export.spark_session import spark_session, stop_spark

    session, created = spark_session(MASTER)
    try:
        yield session
    finally:
        if created:
            stop_spark(session)


class WorkerSpark:
    """This process's shared SparkSession, started on first use."""

    def __init__(self) -> None:
        self.current: Any = None
        self.created = False

    def session(self) -> Any:
        """The shared session, started now if none runs (or the last one was stopped)."""
        if self.current is None:
            from bkctl.export.spark_session import spark_session

            self.current, self.created = spark_session(MASTER)
        return self.current

    def stop(self) -> None:
        """Stop the shared session (when this started it); the next :meth:`session` starts another."""
        if self.current is not None and self.created:
            from bkctl.export.spark_session import stop_spark

            stop_spark(self.current)
        self.current, self.created = None, False


@pytest.fixture(scope="session")
def worker_spark() -> Iterator[WorkerSpark]:
    """The test process's :class:`WorkerSpark`: a module's ``spark`` fixture returns
    ``worker_spark.session()``; stopped when the process's tests are over."""
    shared = WorkerSpark()
    try:
        yield shared
    finally:
        shared.stop()
