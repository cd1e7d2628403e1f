"""A BookKeeper cluster's metadata: the formats of its znodes and the store that reads
and writes them in ZooKeeper, exactly as Java's tools lay them out.

Formats (pure codecs, no I/O): :mod:`.paths` (znode paths), :mod:`.layout` (the LAYOUT
znode and metadata service URIs), :mod:`.ledger` (ledger metadata), :mod:`.cookie`,
:mod:`.serviceinfo` (``available/<bookie>``), :mod:`.bookieid`, :mod:`.racks` (rack
maps), :mod:`.underreplication` (autorecovery znodes).

The store: :mod:`.store` states what callers need from one (the ``MetadataStore``
protocol: ledgers, ledger ids, registration, cookies, under-replication, auditor
election) and :mod:`.errors` holds its errors.  :mod:`.zk` implements it over kazoo,
one module per manager over one shared session (``ZKMetadataStore``; see
:mod:`.zk` for the table of managers), with :mod:`.zksecurity` for ZooKeeper
authentication, ACLs and TLS.  The unit tests' in-memory store is
``tests/support/fake_store.py``.
"""
