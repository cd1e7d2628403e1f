"""The ``bookkeeper`` data source's ``topic`` option: a Pulsar topic's messages as rows.

    df = (spark.read.format("bookkeeper")
          .option("metadataServiceUri", "zk+hierarchical://zk1:2181/ledgers")
          .option("topic", "persistent://public/default/orders")
          .load())

One row per message with the columns of ``bkctl export --topic``
(:data:`bkctl.export.topic.TOPIC_COLUMNS`).  Options beside the data
source's own (``splitEntries``, ``batchSize``, ``protocol``, ``password``,
``readTimeout``, ``readWindow``, ``zkSecurity``, ``bookieTls``):
``subscription`` and ``unackedOnly`` (only what that cursor has not
acknowledged), ``from``/``to`` (publish times), ``skipMissing`` (ledgers the
managed ledger lists but that were deleted: skipped instead of failing),
``onCorrupt`` (``row``: an error row, default; ``skip``), ``managedLedgers``
(Pulsar's root in ZooKeeper).
"""
from __future__ import annotations

from typing import Any, Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition

from . import planning
from .datasource import ReadOptions, _bool, _client
from .topic import TopicRange, plan_topic, read_topic_range, topic_arrow_schema

__all__ = ["TopicRangePartition", "TopicReader", "topic_options", "topic_schema"]


def topic_schema():
    """The Spark schema of a topic's rows."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(topic_arrow_schema())


def topic_options(options: Any, read: ReadOptions):
    """The export options :func:`~bkctl.export.topic.plan_topic` takes, from data source options."""
    from .job import ExportOptions

    opts = {str(k).lower(): v for k, v in dict(options or {}).items()}
    return ExportOptions(
        out="", spec=planning.LedgerSpec(), topic=str(opts["topic"]), subscription=opts.get("subscription"),
        unacked_only=_bool("unackedOnly", opts.get("unackedonly"), False),
        from_ms=planning.parse_ctime(opts["from"]) if opts.get("from") else None,
        to_ms=planning.parse_ctime(opts["to"]) if opts.get("to") else None,
        skip_missing=_bool("skipMissing", opts.get("skipmissing"), False),
        on_corrupt=str(opts.get("oncorrupt") or "row").lower(), managed_ledgers=opts.get("managedledgers"),
        split_entries=read.split_entries)


class TopicRangePartition(InputPartition):
    def __init__(self, part: TopicRange):
        self.part = part

    def __repr__(self) -> str:
        p = self.part
        return f"TopicRangePartition({p.topic}, ledger {p.ledger_id}, entries {p.first}..{p.last})"


class TopicReader(DataSourceReader):
    def __init__(self, options: Any, schema):
        if [f.name for f in schema.fields] != [f.name for f in topic_schema().fields]:
            raise planning.SpecError(f"the topic option has the fixed schema {topic_schema().simpleString()}")
        self.read_options = ReadOptions(options)
        self.topic_options = topic_options(options, self.read_options)

    def partitions(self) -> list[InputPartition]:
        from bkctl.wire.metadata.zk import ZKMetadataStore

        with ZKMetadataStore(self.read_options.uri, security=self.read_options.zk_security) as store:
            def bk():
                return _client(self.read_options)

            def lac_of(ledger_id: int) -> int:
                return bk().open(ledger_id, self.read_options.password).last_add_confirmed

            plan = plan_topic(store, self.topic_options, lac_of, bk)
        return [TopicRangePartition(r) for r in plan.ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, TopicRangePartition):
            return iter(())
        return read_topic_range(self.read_options, partition.part)
