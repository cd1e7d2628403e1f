"""Apache Pulsar's storage formats, read from the bookies and ZooKeeper.

* :mod:`.entry` -- a stored entry: broker entry metadata, checksum, message
  metadata, decompression (pure);
* :mod:`.chunks` -- chunked messages put back together (pure);
* :mod:`.columns` -- the message row's columns, stated once (pure);
* :mod:`.rows` -- a batch's messages split into rows: the Python splitter,
  the C one (``_packed``), and the choice between them;
* :mod:`.messages` -- a topic's entries turned into rows (:class:`~.messages.TopicDecoder`);
* :mod:`.managed_ledger` -- topic names, ``ManagedLedgerInfo`` and
  ``ManagedCursorInfo`` znode values, partitioned-topic metadata, cursor
  positions (pure);
* :mod:`.topics` -- topics' managed ledgers, cursors and partitions, read through the
  metadata store (``store.pulsar``) and decoded (read-only);
* :mod:`.schema` -- the schema registry as stored: schema ids, ``SchemaLocator``
  znode values, schema ledgers' ``SchemaEntry``/``SchemaInfo``, versions (pure);
* :mod:`.registry` -- a cluster's schema registry read as a broker reads it
  (locators through ``store.pulsar``, versions from their ledgers, read-only);
* :mod:`.typed` -- a message's value decoded by its schema (AVRO, JSON,
  PROTOBUF_NATIVE, KEY_VALUE, primitives) as Arrow-typed values (pure);
* :mod:`.avro_types` -- Avro schemas as Arrow types, JSON documents shaped by them (pure);
* :mod:`.protobuf_values` -- protobuf messages (PROTOBUF_NATIVE, PROTOBUF) as Arrow structs (pure);
* :mod:`.errors` -- the errors of this package.

The protobuf classes are :mod:`bkctl.wire.proto.pulsar_api_pb2` and
:mod:`bkctl.wire.proto.pulsar_ml_pb2` and :mod:`bkctl.wire.proto.pulsar_schema_pb2`,
written from Pulsar's field numbers.
"""
