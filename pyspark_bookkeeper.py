"""The ``bookkeeper`` data source, registered with every SparkSession on its own.

PySpark 4 registers by itself the ``DefaultSource`` of each top-level module
named ``pyspark_*`` that the Python of its workers can import (its
``lookup_data_sources`` worker), so with bkctl installed in that Python
``spark.read.format("bookkeeper")`` needs no registration line.  The source
itself is :class:`bkctl.export.datasource.BookKeeperDataSource`.
"""

from bkctl.export.datasource import BookKeeperDataSource as DefaultSource

__all__ = ["DefaultSource"]
