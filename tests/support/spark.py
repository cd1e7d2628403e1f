"""The Spark session of the test modules that export or read through Spark.

A Spark session is a JVM (some 20 CPU-seconds to start and to run its first job, which starts
Spark's Python workers): one per test process (an xdist worker), shared by every module of that
process that asks for it (:func:`worker_spark`, a session-scoped fixture), started by the first
and stopped at the end of the process.  Each module keeps its own cluster, output folders and
cluster root; what they share is stateless between them (the ``bookkeeper`` data source is
registered again by whoever reads through it, temporary views are replaced by name).  A test
that needs a session of its own (an environment its JVM and workers must inherit) stops the
shared one first (:meth:`WorkerSpark.stop`) and starts its own with :func:`local_spark`;
one whose Spark workers only need variables of their own (an object store's ``AWS_*``
credentials) gives them to the shared session's workers for a while (:func:`workers_environment`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest

__all__ = ["WorkerSpark", "local_spark", "worker_spark", "workers_environment"]

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


@contextmanager
def workers_environment(spark: Any, env: Mapping[str, str]) -> Iterator[None]:
    """The Python workers of the jobs ``spark`` runs meanwhile see ``env`` in their environment,
    as they would had the session's JVM started in it; as they were afterwards.

    A Python function Spark ships to its workers (a UDF, a ``mapInArrow``, a Python data source's
    reader) carries the variables of ``SparkContext.environment`` as they are when it is made, and
    the JVM runs it in a Python worker started with them (one daemon per set of variables, a fork
    of it per task), so a job planned meanwhile reads them where the JVM's own environment
    would have had them."""
    environment = spark.sparkContext.environment
    saved = {key: environment.get(key) for key in env}
    environment.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                environment.pop(key, None)
            else:
                environment[key] = value


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
