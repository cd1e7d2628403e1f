"""The library bookied and bkctl share; it imports neither of them.

* :mod:`.codecs` -- pure codecs of the bookie protocol (frames, v2, v3, digests) and of
  Java bookies' files; no I/O;
* :mod:`.metadata` -- the cluster's znode formats and the ZooKeeper metadata store;
* :mod:`.client` -- the BookKeeper client over Twisted: connections, ledger handles,
  reads, ledger recovery, re-replication, placement;
* :mod:`.autorecovery` -- the auditor and the replication workers (Java's
  ``replication`` package);
* :mod:`.process` -- systemd notification and bounded shutdown for the daemons;
* :mod:`.tls` -- TLS between clients and bookies (START_TLS), used by both sides;
* :mod:`.pulsar` -- Apache Pulsar's entry and managed-ledger formats, topics read from
  ZooKeeper;
* :mod:`.proto` -- the generated protobuf classes (bookie protocol, metadata formats, Pulsar's);
* :mod:`.errors` -- exceptions shared by all of the above; :mod:`.fastpath` -- the one
  twin selector: the C or Python implementation of each fast path, chosen once
  (``BKCTL_FASTPATHS=0``: none), handed to the components;
* :mod:`.text` -- the text rules every package shares: booleans, ``host:port``.
"""
