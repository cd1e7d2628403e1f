"""``bkctl backup`` and ``bkctl restore``: ledgers and Pulsar topics copied to an archive
(a local directory or an S3 bucket) and written back into a cluster, with no broker.

* :mod:`.storage` -- where an archive lives: one Protocol, a local directory and S3 twins;
* the archive's format is :mod:`bkctl.wire.backup.archive`'s (docs/backup-format.md);
* :mod:`.catalog` -- an archive's marker and its backups' manifests, newest last;
* :mod:`.take` -- reading a cluster into an archive (read-only towards the cluster);
* :mod:`.storing` -- a copy's batches written and stored in threads of their own;
* :mod:`.inspect` -- ``verify``, ``list`` and ``show`` of an archive;
* :mod:`.restore` -- writing an archive's ledgers and Pulsar metadata into a cluster.
"""
