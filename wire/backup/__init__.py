"""``bkctl backup``'s archive format (``bkctl-archive/1``, docs/backup-format.md): its object
names, the ledger data objects' codec, the ledger records and the backups' manifests; no I/O
beyond the object store's interface (:mod:`bkctl.wire.objects`).  Taking, inspecting and
restoring a backup are bkctl's (``bkctl/backup/``)."""
