"""``bkctl ledger read --bookie B``: read the entries one bookie holds of a ledger, straight from
that bookie (no failover to other replicas), to compare replicas (Java's ``readledger -b``).

Each entry the bookie should hold (its write set names the bookie) is read from it and its
digest verified with the ledger's password and digest type; an entry the bookie lacks or
that fails its digest is reported, not skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from twisted.python.failure import Failure

    from bkctl.wire.client.bookkeeper import BookKeeperClient


class ReplicaStatus(Enum):
    """What the bookie gave for an entry its write set names it for."""

    OK = "ok"
    MISSING = "missing"  #: the bookie does not have it
    CORRUPT = "corrupt"  #: its digest fails
    ERROR = "error"  #: the read failed otherwise


@dataclass(frozen=True)
class ReplicaEntry:
    """One entry as the bookie gave it: its payload when ``ok``, else why not."""

    entry_id: int
    status: ReplicaStatus
    payload: bytes | None
    error: str | None


@dataclass(frozen=True)
class ReplicaRead:
    """The entries in ``first..last`` of a ledger whose write set holds ``bookie``, as it gave them."""

    ledger_id: int
    bookie: str
    first: int
    last: int
    entries: list[ReplicaEntry]


@dataclass(frozen=True)
class BadReplica:
    """The JSON line of ``ledger read --bookie`` for an entry the bookie lacks or holds damaged."""

    ledger_id: int
    entry_id: int
    bookie: str
    status: ReplicaStatus
    error: str | None


async def read_replica(
    client: BookKeeperClient,
    ledger_id: int,
    bookie: str,
    first: int,
    last: int | None,
    password: bytes | None = None,
    window: int = 64,
) -> ReplicaRead:
    """The entries in ``first..last`` whose write set holds ``bookie``, as it gave them.  ``last`` None: the closed ledger's last
    entry, or for an open ledger the highest entry the bookie has."""
    from twisted.internet import defer

    from bkctl.wire.client.credentials import ledger_credentials
    from bkctl.wire.codecs.digest import DigestManager
    from bkctl.wire.errors import NotFound

    md, _ = await client.run_blocking(client.store.ledgers.read, ledger_id)
    if bookie not in md.bookies:
        raise NotFound(f"ledger {ledger_id} has no segment on bookie {bookie}")
    pw, digest_type = ledger_credentials(ledger_id, md, password)
    digest = DigestManager(ledger_id, digest_type, pw)
    conn = client.pool.get(bookie)
    if last is None:
        if md.is_closed:
            last = md.last_entry_id
        else:
            try:
                last = digest.verify(await conn.read(ledger_id, -1)).entry_id
            except NotFound:
                last = -1
    wanted = [e for e in range(first, last + 1) if bookie in md.write_set(e)]
    rows: dict[int, ReplicaEntry] = {}

    def ok(data: bytes, entry_id: int) -> None:
        try:
            rows[entry_id] = ReplicaEntry(entry_id, ReplicaStatus.OK, digest.verify(data, entry_id).payload, None)
        except Exception as e:  # noqa: BLE001 - a bad replica is the finding
            rows[entry_id] = ReplicaEntry(entry_id, ReplicaStatus.CORRUPT, None, str(e))

    def bad(f: Failure, entry_id: int) -> None:
        status = ReplicaStatus.MISSING if f.check(NotFound) else ReplicaStatus.ERROR
        rows[entry_id] = ReplicaEntry(entry_id, status, None, f.getErrorMessage())

    for i in range(0, len(wanted), window):
        ds = []
        for e in wanted[i : i + window]:
            d = conn.read(ledger_id, e)
            d.addCallbacks(ok, bad, callbackArgs=(e,), errbackArgs=(e,))
            ds.append(d)
        await defer.DeferredList(ds)
    return ReplicaRead(ledger_id, bookie, first, last, [rows[e] for e in wanted])
