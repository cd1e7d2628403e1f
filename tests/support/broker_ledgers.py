"""A managed ledger's data ledger written as a Pulsar broker writes it, for the integration tests
that lay a topic out in a cluster with no broker.

A broker's managed ledger creates each of its ledgers with CRC32C digests, an empty password and
its custom metadata (``application=pulsar``, ``component=managed-ledger``,
``pulsar/managed-ledger=<name>``: tests/vectors/pulsar/zk/bookkeeper_ledger_custom_metadata.json),
adds the entries and closes it; the managed ledger's znode (``ManagedLedgerInfo``) then names it
with its entry count, size and the time it was closed.  :func:`write_ledger` is the first half,
:func:`managed_ledger_info` the second.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

__all__ = ["WrittenLedger", "custom_metadata", "managed_ledger_info", "write_ledger"]


def custom_metadata(ml_name: str, **extra: bytes) -> dict[str, bytes]:
    """The custom metadata a broker gives the ledgers of managed ledger ``ml_name`` (and ``extra``)."""
    return {
        "application": b"pulsar",
        "component": b"managed-ledger",
        "pulsar/managed-ledger": ml_name.encode(),
        **extra,
    }


class WrittenLedger(NamedTuple):
    """A ledger :func:`write_ledger` wrote and closed: its id, entry count and bytes."""

    ledger_id: int
    entries: int
    size: int


def write_ledger(
    bk: Any,
    ml_name: str,
    entries: Iterable[bytes],
    *,
    ensemble: int = 3,
    write_quorum: int = 2,
    ack_quorum: int = 2,
    ledger_id: int | None = None,
    extra_metadata: Mapping[str, bytes] | None = None,
) -> WrittenLedger:
    """Create a ledger of ``ml_name`` on ``bk`` (a BlockingBookKeeper) as its broker does, add
    ``entries`` and close it; ``ledger_id``: that id rather than the next free one."""
    lh = bk.create(
        ensemble,
        write_quorum,
        ack_quorum,
        digest_type="CRC32C",
        password=b"",
        custom_metadata=custom_metadata(ml_name, **(extra_metadata or {})),
        ledger_id=ledger_id,
    )
    count = size = 0
    for data in entries:
        lh.add(data)
        count += 1
        size += len(data)
    lh.close()
    return WrittenLedger(lh.ledger_id, count, size)


def managed_ledger_info(ledgers: Iterable[WrittenLedger], timestamp: int) -> Any:
    """A ``ManagedLedgerInfo`` naming ``ledgers`` in order, each closed at ``timestamp`` (ms)."""
    from bkctl.wire.proto import pulsar_ml_pb2 as ml

    info = ml.ManagedLedgerInfo()
    for ledger in ledgers:
        info.ledgerInfo.add(ledgerId=ledger.ledger_id, entries=ledger.entries, size=ledger.size, timestamp=timestamp)
    return info
