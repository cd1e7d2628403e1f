"""``bookkeeper``: a PySpark (4.x) Python data source that reads ledger entries.

    from bkctl.export.datasource import BookKeeperDataSource
    spark.dataSource.register(BookKeeperDataSource)
    df = (spark.read.format("bookkeeper")
          .option("metadataServiceUri", "zk+hierarchical://zk1:2181/ledgers")
          .option("ledgers", "1,2,5-9")
          .load())

One row per entry, with the fixed schema :data:`SCHEMA` (``ledger_id long,
entry_id long, payload binary, payload_size int, ledger_ctime timestamp,
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
    a Pulsar topic instead of ledgers: one row per message, with the options
    and columns :mod:`bkctl.export.topic_source` describes.
``plan``
    JSON list of ledger plans made by :func:`bkctl.export.planning.plan_ledgers`
    (``bkctl export`` passes it so that what is read is exactly what it planned);
    when given, ``ledgers``/``since``/``until``/``includeOpen`` are not used.

Planning (``partitions()``) runs in a Python process on the driver: it
reads ledger metadata from ZooKeeper (and, for open ledgers, the LAC from
their bookies) and returns one :class:`LedgerRangePartition` per range of at
most ``splitEntries`` entries; empty ledgers produce none.

Reading (``read()``) runs in Spark's Python workers on the executors.  Each
worker process runs one Twisted reactor in a background thread (crochet)
and keeps one BookKeeper client per cluster for all the partitions it reads;
entries are read with failover across replicas and digest verification,
never past the last entry of a closed ledger nor the LAC of an open one.
The executors need ``pip install 'bkctl[spark]'`` and must reach ZooKeeper
and the bookies under the addresses the cluster publishes.
"""
from __future__ import annotations

import atexit
import os
import threading
from typing import Any, Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from bkctl.wire.text import parse_bool

from .planning import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_SPLIT_ENTRIES,
    EntryRange,
    SpecError,
    parse_ctime,
    parse_ledger_spec,
    plan_ledgers,
    plans_from_json,
    split_ranges,
)

__all__ = ["BookKeeperDataSource", "BookKeeperReader", "LedgerRangePartition", "SCHEMA", "SCHEMA_DDL",
           "ReadOptions", "arrow_schema", "register"]

#: The format name: ``spark.read.format("bookkeeper")``.
FORMAT = "bookkeeper"

SCHEMA = StructType([
    StructField("ledger_id", LongType()),
    StructField("entry_id", LongType()),
    StructField("payload", BinaryType()),
    StructField("payload_size", IntegerType()),
    StructField("ledger_ctime", TimestampType()),
    StructField("ledger_state", StringType()),
    StructField("ledger_metadata", MapType(StringType(), StringType())),
])

SCHEMA_DDL = ("ledger_id long, entry_id long, payload binary, payload_size int, ledger_ctime timestamp, "
              "ledger_state string, ledger_metadata map<string,string>")

DEFAULT_READ_TIMEOUT = 10.0
DEFAULT_READ_WINDOW = 256


def arrow_schema():
    """The Arrow schema Spark expects from :meth:`BookKeeperReader.read`."""
    import pyarrow as pa

    return pa.schema([
        ("ledger_id", pa.int64()),
        ("entry_id", pa.int64()),
        ("payload", pa.binary()),
        ("payload_size", pa.int32()),
        ("ledger_ctime", pa.timestamp("us", tz="UTC")),
        ("ledger_state", pa.string()),
        ("ledger_metadata", pa.map_(pa.string(), pa.string())),
    ])


def register(spark) -> None:
    """Register the ``bookkeeper`` format with a SparkSession (once)."""
    if getattr(spark, "_bkctl_bookkeeper_registered", False):
        return
    spark.dataSource.register(BookKeeperDataSource)
    try:
        spark._bkctl_bookkeeper_registered = True
    except AttributeError:  # a session object that takes no attributes: registering again is harmless
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


class ReadOptions:
    """The data source options, checked (picklable; no connections)."""

    def __init__(self, options: Any):
        opts = {str(k).lower(): v for k, v in dict(options or {}).items()}
        self.uri = opts.get("metadataserviceuri") or opts.get("metadatauri")
        if not self.uri:
            raise SpecError("the bookkeeper data source needs option metadataServiceUri")
        self.plan_json = opts.get("plan")
        ledgers = opts.get("ledgers")
        #: a Pulsar topic instead of ledgers (:mod:`bkctl.export.topic_source`)
        self.topic = opts.get("topic")
        if self.plan_json is None and not ledgers and not self.topic:
            raise SpecError("the bookkeeper data source needs option ledgers (\"all\" or ids like 1,2,5-9)")
        self.spec = parse_ledger_spec(ledgers) if ledgers else None
        self.include_open = _bool("includeOpen", opts.get("includeopen"), False)
        self.split_entries = _int("splitEntries", opts.get("splitentries"), DEFAULT_SPLIT_ENTRIES)
        self.batch_size = _int("batchSize", opts.get("batchsize"), DEFAULT_BATCH_SIZE)
        self.since_ms = parse_ctime(opts["since"]) if opts.get("since") else None
        self.until_ms = parse_ctime(opts["until"]) if opts.get("until") else None
        security = opts.get("zksecurity")
        if security:
            from bkctl.wire.metadata.zksecurity import ZKSecurity

            try:
                self.zk_security = ZKSecurity.from_json(security)
            except ValueError as e:
                raise SpecError(f"option zkSecurity: {e}") from None
        else:
            self.zk_security = None
        tls = opts.get("bookietls")
        if tls:
            import json

            from bkctl.wire.tls import TLSFiles

            try:
                self.bookie_tls = TLSFiles(**json.loads(tls))
            except (ValueError, TypeError) as e:
                raise SpecError(f"option bookieTls: {e}") from None
        else:
            self.bookie_tls = None
        self.protocol = str(opts.get("protocol") or "v3").lower()
        if self.protocol not in ("v2", "v3"):
            raise SpecError(f"option protocol must be v2 or v3, not {self.protocol!r}")
        password = opts.get("password")
        self.password = None if password is None else str(password).encode("utf-8")
        self.read_timeout = _float("readTimeout", opts.get("readtimeout"), DEFAULT_READ_TIMEOUT)
        self.read_window = _int("readWindow", opts.get("readwindow"), DEFAULT_READ_WINDOW)

    def client_key(self) -> tuple:
        return (self.uri, self.protocol, self.read_timeout, self.read_window)


# ---------------------------------------------------------------- partitions


class LedgerRangePartition(InputPartition):
    """Entries ``first..last`` of one ledger, with the ledger facts every row carries."""

    def __init__(self, ledger_id: int, first: int, last: int, ctime_ms: int | None, state: str,
                 metadata: dict[str, str]):
        self.ledger_id = int(ledger_id)
        self.first = int(first)
        self.last = int(last)
        self.ctime_ms = ctime_ms
        self.state = state
        self.metadata = dict(metadata)

    @classmethod
    def of(cls, r: EntryRange) -> "LedgerRangePartition":
        return cls(r.ledger_id, r.first, r.last, r.ctime_ms, r.state, r.metadata)

    @property
    def entries(self) -> int:
        return self.last - self.first + 1

    def __repr__(self) -> str:
        return f"LedgerRangePartition(ledger {self.ledger_id}, entries {self.first}..{self.last}, {self.state})"


def plan_partitions(options: ReadOptions) -> list[LedgerRangePartition]:
    """The partitions for ``options``: from its plan, else from the cluster's metadata."""
    if options.plan_json is not None:
        plans = plans_from_json(options.plan_json)
    else:
        from bkctl.wire.metadata.zk import ZKMetadataStore

        with ZKMetadataStore(options.uri, security=options.zk_security) as store:
            lac_of = None
            bk = None
            if options.include_open:
                bk = _client(options)

                def lac_of(ledger_id: int) -> int:
                    return bk.open(ledger_id, options.password).last_add_confirmed

            plans, _skipped = plan_ledgers(store, options.spec, include_open=options.include_open,
                                           since_ms=options.since_ms, until_ms=options.until_ms,
                                           lac_of=lac_of)
    return [LedgerRangePartition.of(r) for r in split_ranges(plans, options.split_entries)]


# ---------------------------------------------------------------- the data source


class BookKeeperDataSource(DataSource):
    """Ledger entries as rows; see the module documentation for the options."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _topic(self) -> bool:
        return any(str(k).lower() == "topic" for k in dict(self.options or {}))

    def schema(self):
        if self._topic():
            from .topic_source import topic_schema

            return topic_schema()
        return SCHEMA

    def reader(self, schema: StructType):
        if self._topic():
            from .topic_source import TopicReader

            return TopicReader(self.options, schema)
        return BookKeeperReader(ReadOptions(self.options), schema)


class BookKeeperReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: StructType):
        if [(f.name, f.dataType) for f in schema.fields] != [(f.name, f.dataType) for f in SCHEMA.fields]:
            raise SpecError(f"the bookkeeper data source has the fixed schema {SCHEMA_DDL}; "
                            f"it cannot read {schema.simpleString()}")
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return list(plan_partitions(self.options))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, LedgerRangePartition):
            return iter(())  # Spark's stand-in when there is nothing to read
        return read_partition(self.options, partition)


# ---------------------------------------------------------------- executor side

_clients_lock = threading.Lock()
_clients: dict[tuple, Any] = {}
_clients_pid: int | None = None


def _client(options: ReadOptions):
    """This process's BlockingBookKeeper for the cluster (made once, reused by
    every partition the process reads).  Its reactor is crochet's one thread."""
    global _clients_pid
    from bkctl.wire.client.blocking import BlockingBookKeeper

    key = options.client_key()
    with _clients_lock:
        if _clients_pid != os.getpid():  # a forked child must not use its parent's connections
            _clients.clear()
            _clients_pid = os.getpid()
        bk = _clients.get(key)
        if bk is None:
            if options.zk_security is not None:
                from bkctl.wire.metadata import zksecurity

                zksecurity.set_default(options.zk_security)  # the executor's ZooKeeper sessions
            tls = {"tls": options.bookie_tls} if options.bookie_tls else {}
            bk = BlockingBookKeeper(options.uri, protocol=options.protocol, **tls,
                                    read_timeout=options.read_timeout, add_timeout=options.read_timeout,
                                    read_window=options.read_window,
                                    timeout=max(60.0, options.read_timeout * 6))
            _clients[key] = bk
            if len(_clients) == 1:
                atexit.register(_close_clients)
        return bk


def _close_clients() -> None:
    with _clients_lock:
        clients = list(_clients.values()) if _clients_pid == os.getpid() else []
        _clients.clear()
    for bk in clients:
        try:
            bk.close()
        except Exception:  # noqa: BLE001 - leaving anyway
            pass


class LedgerRangeError(RuntimeError):
    """A partition asks for entries the ledger does not (or no longer) have."""


class _BatchBuilder:
    """Arrow record batches for one partition: the per-ledger columns are made
    once (as long as the largest batch) and sliced; per batch only the entry
    ids, payloads and sizes are converted."""

    def __init__(self, partition: LedgerRangePartition, capacity: int):
        import pyarrow as pa

        self.pa = pa
        import pyarrow.compute as pc

        self.pc = pc
        self.schema = arrow_schema()
        types = {f.name: f.type for f in self.schema}
        n = max(1, capacity)
        ctime_us = None if partition.ctime_ms is None else int(partition.ctime_ms) * 1000
        self.ledger = pa.repeat(pa.scalar(partition.ledger_id, types["ledger_id"]), n)
        self.ctime = pa.repeat(pa.scalar(ctime_us, types["ledger_ctime"]), n)
        self.state = pa.repeat(pa.scalar(partition.state, types["ledger_state"]), n)
        self.metadata = pa.repeat(pa.scalar(list(partition.metadata.items()), types["ledger_metadata"]), n)

    def build(self, entries: list) -> Any:
        pa = self.pa
        n = len(entries)
        if n > len(self.ledger):
            raise AssertionError("batch larger than its builder")
        ids = pa.array([e[0] for e in entries], pa.int64())
        payloads = pa.array([e[1] for e in entries], pa.binary())
        sizes = self.pc.binary_length(payloads)
        return pa.RecordBatch.from_arrays(
            [self.ledger.slice(0, n), ids, payloads, sizes, self.ctime.slice(0, n), self.state.slice(0, n),
             self.metadata.slice(0, n)], schema=self.schema)


def read_entries(options: ReadOptions, ledger_id: int, first: int, last: int) -> Iterator[list]:
    """Entries ``first..last`` of a ledger as lists of ``(entry id, payload)``,
    ``batchSize`` at a time, never past what the ledger has."""
    bk = _client(options)
    ledger = bk.open(ledger_id, options.password)
    limit = ledger.last_entry_id if ledger.is_closed else ledger.last_add_confirmed
    if last > limit:
        what = "last entry" if ledger.is_closed else "last add confirmed"
        raise LedgerRangeError(f"ledger {ledger_id}: cannot read entries {first}..{last}, its {what} is {limit}")
    expected = first
    for entries in ledger.read_range(first, last, batch=options.batch_size):
        if not entries:
            continue
        if entries[0][0] != expected or entries[-1][0] != expected + len(entries) - 1:
            raise LedgerRangeError(f"ledger {ledger_id}: expected entries from {expected}, got "
                                   f"{entries[0][0]}..{entries[-1][0]}")
        expected += len(entries)
        yield entries
    if expected != last + 1:
        raise LedgerRangeError(f"ledger {ledger_id}: read stopped at entry {expected - 1}, wanted up to {last}")


def read_partition(options: ReadOptions, partition: LedgerRangePartition) -> Iterator[Any]:
    """Arrow record batches of the partition's entries, ``batchSize`` at a time."""
    builder = _BatchBuilder(partition, min(options.batch_size, partition.entries))
    for entries in read_entries(options, partition.ledger_id, partition.first, partition.last):
        yield builder.build(entries)
