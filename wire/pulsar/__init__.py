"""Apache Pulsar's storage formats, read from the bookies and ZooKeeper.

* :mod:`.entry` -- a stored entry: broker entry metadata, checksum, message
  metadata, decompression, batches (pure);
* :mod:`.chunks` -- chunked messages put back together (pure);
* :mod:`.managed_ledger` -- topic names, ``ManagedLedgerInfo`` and
  ``ManagedCursorInfo`` znode values, partitioned-topic metadata, cursor
  positions (pure);
* :mod:`.topics` -- topics' managed ledgers, cursors and partitions, read through the
  metadata store (``store.pulsar``) and decoded (read-only);
* :mod:`.errors` -- the errors of this package.

The protobuf classes are :mod:`bkctl.wire.proto.pulsar_api_pb2` and
:mod:`bkctl.wire.proto.pulsar_ml_pb2`, written from Pulsar's field numbers.
"""
