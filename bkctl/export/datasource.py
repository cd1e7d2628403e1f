"""``bookkeeper``: a PySpark (4.x) Python data source that reads ledger entries.

    df = (spark.read.format("bookkeeper")
          .option("metadataServiceUri", "zk+hierarchical://zk1:2181/ledgers")
          .option("ledgers", "1,2,5-9")
          .load())

PySpark registers it by itself: the wheel installs the top-level module
``pyspark_bookkeeper`` (PySpark registers the ``DefaultSource`` of every
``pyspark_*`` module its workers' Python imports), so the Python of Spark's
workers (``PYSPARK_PYTHON``, ``spark.pyspark.python``) must have bkctl.  A
source checkout installed with ``pip install -e`` is not seen by that
lookup: :func:`register` (``spark.dataSource.register(BookKeeperDataSource)``).

One row per entry, with the fixed schema of
:data:`bkctl.export.columns.LEDGER_COLUMNS` (``ledger_id long, entry_id
long, payload binary, payload_size int, ledger_ctime timestamp,
ledger_state string, ledger_metadata map<string,string>``).

Options (names are case-insensitive, values strings):

``metadataServiceUri``
    the cluster (required).
``ledgers``
    ``"all"`` or ids and inclusive ranges, ``"1,2,5-9"`` (required unless
    ``plan`` is given).  A single id that does not exist fails the load; a
    range selects the ledgers that exist in it and must match at least one.
``includeOpen``
    ``true`` to read ledgers that are not closed, up to their last add
    confirmed (LAC) as found when planning; default ``false`` (skipped).
``splitEntries``
    a Spark partition (task) reads at most this many entries (default 100000).
``batchSize``
    entries per read batch; each batch becomes one Arrow record batch, so a
    task holds about two batches in memory whatever the ledger size (default 1000).
``since`` / ``until``
    only ledgers created at or after ``since`` and before ``until`` (ISO date or
    time, epoch milliseconds, or an age such as ``7d``).
``protocol``
    ``v3`` (default) or ``v2`` for talking to bookies.
``password``
    the ledger password; by default the one stored in the metadata.
``readTimeout`` / ``readWindow``
    per-request timeout in seconds (default 10) and entries in flight per task (default 256).
``topic``
    a Pulsar topic instead of ledgers: one row per message, with the columns
    of ``bkctl export --topic`` (:data:`bkctl.export.columns.TOPIC_COLUMNS`)
    and these options beside the ones above (``splitEntries``, ``batchSize``,
    ``protocol``, ``password``, ``readTimeout``, ``readWindow``,
    ``zkSecurity``, ``bookieTls``): ``subscription`` and ``unackedOnly``
    (only what that cursor has not acknowledged), ``strict`` (``true``: fail
    when the cursor's position can only come from its znode), ``from``/``to`` (publish
    times), ``skipMissing`` (ledgers the managed ledger lists but that were
    deleted: skipped instead of failing), ``onCorrupt`` (``row``: an error
    row, default; ``skip``), ``managedLedgers`` (Pulsar's root in ZooKeeper),
    ``includePending`` (the messages an open transaction holds back, with
    ``pending`` true; default false: left out); a topic with a schema has a
    ``value`` column typed by it as ``bkctl export --topic`` has (``raw``:
    ``true`` leaves it out; ``schemaVersion``: read every value as that
    version instead of the newest readable one).
``pushdown``
    ``true``: narrow the reading by the query's filters (:class:`PushdownReader`,
    :mod:`bkctl.export.pushdown`; Spark needs ``spark.sql.python.filterPushdown.enabled``).
``plan``
    JSON list of ledger plans made by :func:`bkctl.wire.domain.ledger_plan.plan_ledgers`
    (``bkctl export`` passes it so that what is read is exactly what it planned);
    when given, ``ledgers``/``since``/``until``/``includeOpen`` are not used.

Planning (``partitions()``) runs in a Python process on the driver: it
reads the metadata from ZooKeeper (and, for open ledgers, the LAC from
their bookies) and returns one partition per task the source plans (for
ledgers a range of at most ``splitEntries`` entries; empty ledgers produce
none).

Reading (``read()``) runs in Spark's Python workers on the executors
(:mod:`bkctl.export.executor`): each worker process runs one Twisted
reactor in a background thread (wire.client.blocking) and keeps one BookKeeper client
per cluster for all the partitions it reads;
entries are read with failover across replicas and digest verification,
never past the last entry of a closed ledger nor the LAC of an open one.
The executors need ``pip install 'bkctl[spark]'`` and must reach ZooKeeper
and the bookies under the addresses the cluster publishes.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from bkctl.wire.domain import ledger_plan
from bkctl.wire.domain.ledger_plan import SpecError
from bkctl.wire.domain.topic_plan import TopicSpec
from bkctl.wire.text import parse_bool

from . import FORMAT
from .columns import LEDGER_COLUMNS, ddl, spark_schema
from .executor import DEFAULT_BATCH_SIZE, DEFAULT_READ_TIMEOUT, DEFAULT_READ_WINDOW, LedgerReader, ReadSettings
from .ledger_source import LedgerSelection, LedgerSource
from .pushdown import Narrowing
from .source import SourcePlan
from .topic_source import TopicSource

__all__ = [
    "BookKeeperDataSource",
    "ReadOptions",
    "SparkSourceReader",
    "TaskPartition",
    "data_source_options",
    "register",
    "source_frame",
]

#: the SparkSessions the ``bookkeeper`` format was registered with (by identity, not kept alive)
_registered: weakref.WeakSet = weakref.WeakSet()


def register(spark) -> None:
    """Register the ``bookkeeper`` format with a SparkSession (once)."""
    try:
        if spark in _registered:
            return
    except TypeError:  # a session object that takes no weak reference: registering again is harmless
        pass
    spark.dataSource.register(BookKeeperDataSource)
    try:
        _registered.add(spark)
    except TypeError:
        pass


# ---------------------------------------------------------------- options


def _bool(name: str, value: Any, default: bool) -> bool:
    if value is None or str(value).strip() == "":
        return default
    try:
        return parse_bool(value if isinstance(value, bool) else str(value), name)
    except ValueError as e:
        raise SpecError(f"option {e}") from None


def _int(name: str, value: Any, default: int, minimum: int = 1) -> int:
    if value is None or str(value).strip() == "":
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise SpecError(f"option {name} must be an integer, not {value!r}") from None
    if number < minimum:
        raise SpecError(f"option {name} must be at least {minimum}, not {number}")
    return number


def _float(name: str, value: Any, default: float) -> float:
    if value is None or str(value).strip() == "":
        return default
    try:
        number = float(str(value).strip())
    except ValueError:
        raise SpecError(f"option {name} must be a number, not {value!r}") from None
    if number <= 0:
        raise SpecError(f"option {name} must be positive, not {number}")
    return number


def _time(value: Any) -> int | None:
    return ledger_plan.parse_ctime(value) if value else None


class ReadOptions:
    """The data source options, checked (picklable; no connections): how to
    read (:attr:`settings`), what (:attr:`source`), and how to split it."""

    def __init__(self, options: Any):
        opts = {str(k).lower(): v for k, v in dict(options or {}).items()}
        uri = opts.get("metadataserviceuri") or opts.get("metadatauri")
        if not uri:
            raise SpecError("the bookkeeper data source needs option metadataServiceUri")
        self.plan_json = opts.get("plan")
        ledgers = opts.get("ledgers")
        topic = opts.get("topic")
        if self.plan_json is None and not ledgers and not topic:
            raise SpecError('the bookkeeper data source needs option ledgers ("all" or ids like 1,2,5-9)')
        self.split_entries = _int("splitEntries", opts.get("splitentries"), ledger_plan.DEFAULT_SPLIT_ENTRIES)
        #: narrow the reading by the query's filters (:class:`PushdownReader`)
        self.pushdown = _bool("pushdown", opts.get("pushdown"), False)
        protocol = str(opts.get("protocol") or "v3").lower()
        if protocol not in ("v2", "v3"):
            raise SpecError(f"option protocol must be v2 or v3, not {protocol!r}")
        password = opts.get("password")
        self.settings = ReadSettings(
            str(uri),
            protocol=protocol,
            read_timeout=_float("readTimeout", opts.get("readtimeout"), DEFAULT_READ_TIMEOUT),
            read_window=_int("readWindow", opts.get("readwindow"), DEFAULT_READ_WINDOW),
            batch_size=_int("batchSize", opts.get("batchsize"), DEFAULT_BATCH_SIZE),
            password=None if password is None else str(password).encode("utf-8"),
            zk_security=_zk_security(opts.get("zksecurity")),
            bookie_tls=_bookie_tls(opts.get("bookietls")),
        )
        if topic:
            self.source: LedgerSource | TopicSource = TopicSource(
                TopicSpec(
                    topic=str(topic),
                    subscription=opts.get("subscription"),
                    unacked_only=_bool("unackedOnly", opts.get("unackedonly"), False),
                    from_ms=_time(opts.get("from")),
                    to_ms=_time(opts.get("to")),
                    skip_missing=_bool("skipMissing", opts.get("skipmissing"), False),
                    on_corrupt=str(opts.get("oncorrupt") or "row").lower(),
                    managed_ledgers=opts.get("managedledgers"),
                    strict=_bool("strict", opts.get("strict"), False),
                    include_pending=_bool("includePending", opts.get("includepending"), False),
                    raw=_bool("raw", opts.get("raw"), False),
                    schema_version=None
                    if opts.get("schemaversion") in (None, "")
                    else _int("schemaVersion", opts.get("schemaversion"), 0, minimum=0),
                )
            )
        else:
            self.source = LedgerSource(
                LedgerSelection(
                    spec=ledger_plan.parse_ledger_spec(ledgers) if ledgers else ledger_plan.LedgerSpec(),
                    since_ms=_time(opts.get("since")),
                    until_ms=_time(opts.get("until")),
                    include_open=_bool("includeOpen", opts.get("includeopen"), False),
                )
            )


def _zk_security(text: Any):
    if not text:
        return None
    from bkctl.wire.metadata.zksecurity import ZKSecurity

    try:
        return ZKSecurity.from_json(text)
    except ValueError as e:
        raise SpecError(f"option zkSecurity: {e}") from None


def _bookie_tls(text: Any):
    if not text:
        return None
    import json

    from bkctl.wire.tls import TLSFiles

    try:
        return TLSFiles(**json.loads(text))
    except (ValueError, TypeError) as e:
        raise SpecError(f"option bookieTls: {e}") from None


def data_source_options(
    settings: ReadSettings, split_entries: int, plans: list[ledger_plan.LedgerPlan]
) -> dict[str, str]:
    """The options that make the data source read exactly ``plans`` with ``settings``."""
    import dataclasses
    import json

    opts = {
        "metadataServiceUri": settings.uri,
        "plan": ledger_plan.plans_to_json(plans),
        "splitEntries": str(split_entries),
        "batchSize": str(settings.batch_size),
        "protocol": settings.protocol,
        "readTimeout": str(settings.read_timeout),
        "readWindow": str(settings.read_window),
    }
    if settings.password is not None:
        opts["password"] = settings.password.decode("utf-8")
    if settings.zk_security is not None:
        opts["zkSecurity"] = settings.zk_security.to_json()
    if settings.bookie_tls:
        opts["bookieTls"] = json.dumps(dataclasses.asdict(settings.bookie_tls), sort_keys=True)
    return opts


def source_frame(spark, settings: ReadSettings, split_entries: int, plans: list[ledger_plan.LedgerPlan]):
    """The data source's DataFrame of what ``plans`` select."""
    register(spark)
    return spark.read.format(FORMAT).options(**data_source_options(settings, split_entries, plans)).load()


# ---------------------------------------------------------------- the data source


class TaskPartition(InputPartition):
    """The work of one Spark task: a task its source planned (entries of one ledger)."""

    def __init__(self, task):
        self.task = task

    def __repr__(self) -> str:
        return f"TaskPartition({self.task!r})"


def _plan(options: ReadOptions) -> SourcePlan:
    """What the options select: their plan, else one made from the cluster's metadata."""
    if options.plan_json is not None and isinstance(options.source, LedgerSource):
        plans = ledger_plan.plans_from_json(options.plan_json)
        return SourcePlan(plans, ledger_plan.split_ranges(plans, options.split_entries))
    from bkctl.wire.metadata.zk import ZKMetadataStore

    settings = options.settings
    reader = LedgerReader.in_process(settings)
    with ZKMetadataStore(settings.uri, security=settings.zk_security, twins=reader.twins) as store:
        return options.source.plan(store, reader, options.split_entries)


def _typed(options: ReadOptions) -> ReadOptions:
    """The options with a topic source's ``value`` typed by the topic's schema
    (read from the cluster now: the schema Spark is told must be the rows')."""
    if isinstance(options.source, TopicSource):
        from bkctl.wire.metadata.zk import ZKMetadataStore

        settings = options.settings
        reader = LedgerReader.in_process(settings)
        with ZKMetadataStore(settings.uri, security=settings.zk_security, twins=reader.twins) as store:
            options.source.type_values(store, reader)
    return options


class BookKeeperDataSource(DataSource):
    """Ledger entries, or a topic's messages, as rows; see the module documentation for the options."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self):
        topic = any(str(k).lower() == "topic" for k in dict(self.options or {}))
        if topic:
            return spark_schema(_typed(ReadOptions(self.options)).source.columns)
        return spark_schema(LEDGER_COLUMNS)

    def reader(self, schema):
        options = ReadOptions(self.options)
        return (PushdownReader if options.pushdown else SparkSourceReader)(options, schema)


class SparkSourceReader(DataSourceReader):
    """The Spark side of an export source: its plan as partitions (on the
    driver), each read in a worker as the export's tasks read."""

    def __init__(self, options: ReadOptions, schema):
        columns = _typed(options).source.columns
        if [(f.name, f.dataType) for f in schema.fields] != [
            (f.name, f.dataType) for f in spark_schema(columns).fields
        ]:
            raise SpecError(
                f"the bookkeeper data source has the fixed schema {ddl(columns)}"
                f"{' with option topic' if isinstance(options.source, TopicSource) else ''}; "
                f"it cannot read {schema.simpleString()}"
            )
        self.options = options
        self.narrowing = Narrowing()

    def partitions(self) -> list[InputPartition]:
        return [TaskPartition(t) for t in _plan(self.options).tasks if self.narrowing.keeps(t.ledger_id)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, TaskPartition):
            return iter(())  # Spark's stand-in when there is nothing to read
        return self.options.source.read(self.options.settings, partition.task, {})


class PushdownReader(SparkSourceReader):
    """The reader with option ``pushdown`` true: it narrows what it reads by the
    query's filters (:mod:`bkctl.export.pushdown`; Spark needs
    ``spark.sql.python.filterPushdown.enabled``).  Opt-in, because PySpark (4.3)
    plans a DataFrame's later queries that push no filter with the partitions of
    its first pushed one: such a DataFrame serves one filtered query."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:  # noqa: N802 - PySpark's name
        """Narrow what is read by the query's filters; every filter is given
        back, so Spark still checks each row."""
        for f in filters:
            self.narrowing.take(f)
            yield f
        source = self.options.source
        if isinstance(source, TopicSource):
            source.spec = self.narrowing.narrowed_spec(source.spec)
        else:
            source.selection = self.narrowing.narrowed_selection(source.selection)
