"""``bkctl ledger read --bookie B``: read the entries one bookie holds of a ledger, straight from
that bookie (no failover to other replicas), to compare replicas (Java's ``readledger -b``).

Each entry the bookie should hold (its write set names the bookie) is read from it and its
digest verified with the ledger's password and digest type; an entry the bookie lacks or
that fails its digest is reported, not skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bkctl.wire.client.bookkeeper import BookKeeperClient


async def read_replica(
    client: BookKeeperClient,
    ledger_id: int,
    bookie: str,
    first: int,
    last: int | None,
    password: bytes | None = None,
    window: int = 64,
) -> dict:
    """``{"ledger_id", "bookie", "first", "last", "entries": [{"entry_id", "status" (ok,
    missing, corrupt, error), "payload" (bytes or None), "error"}]}`` for the entries in
    ``first..last`` whose write set holds ``bookie``.  ``last`` None: the closed ledger's last
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
    rows: dict[int, dict[str, Any]] = {}

    def ok(data, entry_id):
        try:
            rows[entry_id] = {
                "entry_id": entry_id,
                "status": "ok",
                "payload": digest.verify(data, entry_id).payload,
                "error": None,
            }
        except Exception as e:  # noqa: BLE001 - a bad replica is the finding
            rows[entry_id] = {"entry_id": entry_id, "status": "corrupt", "payload": None, "error": str(e)}

    def bad(f, entry_id):
        status = "missing" if f.check(NotFound) else "error"
        rows[entry_id] = {"entry_id": entry_id, "status": status, "payload": None, "error": f.getErrorMessage()}

    for i in range(0, len(wanted), window):
        ds = []
        for e in wanted[i : i + window]:
            d = conn.read(ledger_id, e)
            d.addCallbacks(ok, bad, callbackArgs=(e,), errbackArgs=(e,))
            ds.append(d)
        await defer.DeferredList(ds)
    return {
        "ledger_id": ledger_id,
        "bookie": bookie,
        "first": first,
        "last": last,
        "entries": [rows[e] for e in wanted],
    }
