"""A BookKeeper cluster's metadata: the formats of its znodes and the store that reads
and writes them in ZooKeeper, exactly as Java's tools lay them out.

Formats (pure codecs, no I/O): :mod:`.paths` (znode paths), :mod:`.layout` (the LAYOUT
znode and metadata service URIs), :mod:`.ledger` (ledger metadata), :mod:`.cookie`,
:mod:`.serviceinfo` (``available/<bookie>``), :mod:`.bookieid`, :mod:`.racks` (rack
maps), :mod:`.underreplication` (autorecovery znodes).

The store: :mod:`.zkstore` over kazoo, with :mod:`.zksecurity` for ZooKeeper
authentication, ACLs and TLS.
"""
