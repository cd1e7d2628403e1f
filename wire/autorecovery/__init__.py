"""Autorecovery: auditor election, the auditor, and replication workers (Java's
``org.apache.bookkeeper.replication``), on BookKeeper's own ZooKeeper protocol."""
