"""Ledgers to Spark-ready Parquet.

* :mod:`bkctl.export.datasource`: the ``bookkeeper`` PySpark data source
  (``spark.read.format("bookkeeper")``), usable on its own in any PySpark 4
  application;
* :mod:`bkctl.export.job`: ``bkctl export``, a Spark job whose tasks read as
  that source does and write Parquet (:mod:`bkctl.export.writing`), committed
  atomically with a manifest;
* :mod:`bkctl.export.planning`: ledger specs, time filters and entry-range
  planning (plain Python);
* :mod:`bkctl.export.output`: the output directory (staging, locking, swap).

Importing this package loads neither pyspark nor Twisted.  PySpark and
pyarrow come with ``pip install 'bkctl[spark]'``; on a Spark cluster every
executor needs that too, and must reach ZooKeeper and the bookies.
"""

__all__ = ["FORMAT"]

#: The data source's format name.
FORMAT = "bookkeeper"
