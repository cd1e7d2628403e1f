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

Spark itself is what one test per kind of dataset checks (its Python workers running an export's
tasks, its failures told in one line, its reads of what was written); the export's other
behaviour -- modes, layouts, manifests, what is skipped, what a person reads -- is the driver's
and the tasks', and :func:`tasks_in_this_process` runs the same ``bkctl export`` with its tasks
run here instead, each pickled as Spark pickles it, without a JVM.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "TasksHere",
    "WorkerSpark",
    "local_spark",
    "tasks_here",
    "tasks_in_this_process",
    "worker_spark",
    "workers_environment",
]

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


class _Tasks:
    """``sc.parallelize(items, n).map(f)``: ``collect`` runs ``f`` on each item here, in order,
    the function and each item pickled and unpickled first (as Spark ships them to a worker)
    and each result too (as a worker sends it back)."""

    def __init__(self, items: Iterable[Any], fn: Callable[[Any], Any] | None = None) -> None:
        self.items = list(items)
        self.fn = fn

    def map(self, fn: Callable[[Any], Any]) -> _Tasks:
        return _Tasks(self.items, fn)

    def collect(self) -> list[Any]:
        from pyspark import cloudpickle

        from bkctl.export.executor import close_process_clients

        assert self.fn is not None
        fn = cloudpickle.loads(cloudpickle.dumps(self.fn))
        try:
            return [
                cloudpickle.loads(cloudpickle.dumps(fn(cloudpickle.loads(cloudpickle.dumps(x))))) for x in self.items
            ]
        finally:
            close_process_clients()  # a worker's clients end with it; this process goes on


class _Nothing:
    """Spark's status tracker and configuration, as an idle local session answers them."""

    def getJobIdsForGroup(self, group: str) -> list[int]:  # noqa: N802 - Spark's name
        return []

    def get(self, key: str, default: Any = None) -> Any:
        return default


class _Context:
    def __init__(self, master: str) -> None:
        self.master = master

    def parallelize(self, items: Iterable[Any], slices: int) -> _Tasks:
        return _Tasks(items)

    def setJobGroup(self, group: str, description: str, interruptOnCancel: bool = False) -> None:  # noqa: N802,N803
        pass

    def cancelJobGroup(self, group: str) -> None:  # noqa: N802
        pass

    def statusTracker(self) -> _Nothing:  # noqa: N802
        return _Nothing()

    def getConf(self) -> _Nothing:  # noqa: N802
        return _Nothing()


class TasksHere:
    """What an export's driver asks of its SparkSession (``sparkContext``: ``master``,
    ``parallelize(...).map(...).collect()``, job groups, the status tracker), its tasks run in
    this process; ``masters``: the ``--master`` of each export that asked for one.  It answers
    as the process's running session would: the export runs on it, as it is (:data:`MASTER`)."""

    def __init__(self) -> None:
        self.masters: list[str] = []

    def session(self, master: str, *args: Any, **kwargs: Any) -> tuple[Any, bool]:
        self.masters.append(master)
        spark = type("SparkSession", (), {})()
        spark.sparkContext = _Context(MASTER)
        return spark, False  # not started here: nothing for the export to stop


@pytest.fixture
def tasks_here(monkeypatch: pytest.MonkeyPatch) -> Iterator[TasksHere]:
    """The test's ``bkctl export`` runs its tasks in the test's process (:func:`tasks_in_this_process`)."""
    with tasks_in_this_process(monkeypatch) as here:
        yield here


@contextmanager
def tasks_in_this_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[TasksHere]:
    """Meanwhile ``bkctl export`` (of ledgers, of a topic, of many topics) runs its tasks in this
    process (:class:`TasksHere`) instead of on a Spark session."""
    from bkctl.export import job, topics_job

    here = TasksHere()
    with monkeypatch.context() as patch:
        patch.setattr(job, "spark_session", here.session)
        patch.setattr(topics_job, "spark_session", here.session)
        yield here
