"""Ledgers, or a Pulsar topic's messages, to Spark-ready Parquet.

* :mod:`bkctl.export.job`: ``bkctl export`` (:func:`~bkctl.export.job.run_export`),
  a Spark job that drives any :class:`~bkctl.export.source.ExportSource`:
  plan on the driver, one task per planned task writing Parquet
  (:mod:`bkctl.export.writing`), check, commit atomically with a manifest;
* :mod:`bkctl.export.summary`: what an export did, as named types (what
  ``bkctl export`` prints and ``--json`` writes; the manifest is a file format apart);
* the two sources: :mod:`bkctl.export.ledger_source` (one row per entry) and
  :mod:`bkctl.export.topic_source` (one row per message; its plan:
  :mod:`bkctl.wire.domain.topic_plan`);
* :mod:`bkctl.export.columns`: each source's columns, stated once, and the
  Spark, Arrow and DDL schemas made from them;
* :mod:`bkctl.export.executor`: how the driver and the tasks read the
  bookies (one client per process, the reads, the LAC);
* :mod:`bkctl.export.datasource`: the ``bookkeeper`` PySpark data source
  (``spark.read.format("bookkeeper")``), the same sources as a Spark
  adapter, usable on its own in any PySpark 4 application;
* :mod:`bkctl.export.spark_session`: starting and stopping Spark;
* :mod:`bkctl.wire.domain.ledger_plan` (the rules, in the domain layer): ledger specs, time filters and entry-range
  planning (plain Python);
* :mod:`bkctl.export.output`: the output directory (staging, locking, swap);
  :mod:`bkctl.export.reading`: reading an export back.

Importing this package loads neither pyspark nor Twisted.  PySpark and
pyarrow come with ``pip install 'bkctl[spark]'``; on a Spark cluster every
executor needs that too, and must reach ZooKeeper and the bookies.
"""

__all__ = ["FORMAT"]

#: The data source's format name.
FORMAT = "bookkeeper"
