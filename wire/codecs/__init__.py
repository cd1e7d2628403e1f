"""Pure codecs of the bookie protocol and of a bookie's files: bytes in, values out, no I/O.

* :mod:`.protocol` -- opcodes, flags, return codes (v2 and v3 numbering);
* :mod:`.framing` -- the ``i32 length | payload`` frames both versions share;
* :mod:`.v2` and :mod:`.v3` -- requests and responses of each protocol version;
  :mod:`.answers` -- what an answer to a client request says (its rc and value);
  :mod:`.detect` -- the bookie's per-connection choice between them;
* :mod:`.varint` -- protobuf varints, for fields written or read by hand;
* :mod:`.digest` -- entry and LAC digests and the master key;
* :mod:`.plain` -- the bookie's plain-request twins (``_plain.c`` or Python); the C twins are loaded by :mod:`bkctl.wire.fastpath`;
* :mod:`.availability` -- which entries a bookie holds (GET_LIST_OF_ENTRIES_OF_LEDGER);
* :mod:`.javadisk` -- Java bookies' journal, entry log and index files, read-only.
"""
