"""The library bookied and bkctl share; it imports neither of them.

* :mod:`.codecs` -- pure codecs of the bookie protocol (frames, v2, v3, digests) and of
  Java bookies' files; no I/O;
* :mod:`.metadata` -- the cluster's znode formats and the ZooKeeper metadata store;
* :mod:`.client` -- the BookKeeper client over Twisted: connections, ledger handles,
  reads, ledger recovery, re-replication, placement;
* :mod:`.autorecovery` -- the auditor and the replication workers (Java's
  ``replication`` package);
* :mod:`.rebalance` -- moving replicas between live bookies with never a copy fewer
  (``bkctl rebalance``, ``bkctl drain``): survey, plan, mover;
* :mod:`.fsck` -- ledger fsck: what can be wrong with a ledger, the check that finds it,
  the guarded metadata repairs;
* :mod:`.domain` -- the rules every command shares about a cluster's ledgers and Pulsar's
  topics (what a topic holds, who owns a ledger, the orphan sweep, disk attribution...),
  with typed results;
* :mod:`.backup` -- ``bkctl backup``'s archive format (docs/backup-format.md): object names,
  ledger data objects, records, manifests;
* :mod:`.bookie_disk` -- a bookie's directories on disk: layout, cookies, their check
  against ZooKeeper's;
* :mod:`.process` -- systemd notification and bounded shutdown for the daemons;
* :mod:`.tls` -- TLS between clients and bookies (START_TLS), used by both sides;
* :mod:`.pulsar` -- Apache Pulsar's entry and managed-ledger formats, topics read from
  ZooKeeper;
* :mod:`.proto` -- the generated protobuf classes (bookie protocol, metadata formats, Pulsar's);
* :mod:`.errors` -- exceptions shared by all of the above; :mod:`.fastpath` -- the one
  twin selector: the C or Python implementation of each fast path, chosen once
  (``BKCTL_FASTPATHS=0``: none), handed to the components;
* :mod:`.text` -- the text rules every package shares: booleans, ``host:port``;
  :mod:`.clock` -- the reactor's parts the library calls, as Protocols; :mod:`.send_now` --
  writing to a TCP transport without waiting for the next reactor turn.
"""
