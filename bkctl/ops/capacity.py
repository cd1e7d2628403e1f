"""Disk capacity of the cluster's bookies: each bookie's GET_BOOKIE_INFO (``bookie list --disk``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.client.bookkeeper import BookKeeperClient


async def _disk_of(
    client: BookKeeperClient, bookie_ids: list[str], on_answer: Callable[[], None] | None
) -> dict[str, dict]:
    from twisted.internet import defer

    out: dict[str, dict] = {}

    def answered(result, bookie_id):
        total, free = result
        out[bookie_id] = {"total_bytes": total, "free_bytes": free, "error": None}

    def failed(f, bookie_id):
        out[bookie_id] = {"total_bytes": None, "free_bytes": None, "error": str(client.explain(f.value))}

    def ask(bookie_id: str):
        return client.pool.get(bookie_id).bookie_info()

    def counted(_):
        if on_answer is not None:
            on_answer()

    ds = []
    for b in bookie_ids:
        d = defer.maybeDeferred(ask, b)  # pool.get's own failure too, as the bookie's answer
        d.addCallbacks(answered, failed, callbackArgs=(b,), errbackArgs=(b,))
        d.addBoth(counted)
        ds.append(d)
    await defer.DeferredList(ds)
    return out


def with_disk(bk: BlockingBookKeeper, rows: list[dict], on_answer: Callable[[], None] | None = None) -> dict:
    """``rows`` (from ``list_bookies``) with ``total_bytes``, ``free_bytes``, ``used_bytes``,
    ``used_percent`` and ``error`` (asked of every registered bookie at once; a bookie that
    is down or does not answer has nulls and, if asked, the error), plus the cluster's
    ``total`` (``bookies``, ``answered``, ``total_bytes``, ``free_bytes``, ``used_bytes``,
    ``used_percent``)."""
    asked = [r["bookie_id"] for r in rows if r["state"] != "down"]
    disk = bk.run(_disk_of, asked, on_answer) if asked else {}
    out = []
    total = free = answered = 0
    for r in rows:
        d = disk.get(r["bookie_id"], {"total_bytes": None, "free_bytes": None, "error": None})
        row = dict(r, **d)
        row.update(_usage(d["total_bytes"], d["free_bytes"]))
        if d["total_bytes"] is not None and d["free_bytes"] is not None:
            answered += 1
            total += d["total_bytes"]
            free += d["free_bytes"]
        out.append(row)
    cluster = {"bookies": len(rows), "answered": answered, "total_bytes": total, "free_bytes": free}
    cluster.update(_usage(total if answered else None, free if answered else None))
    return {"bookies": out, "total": cluster}


def _usage(total: int | None, free: int | None) -> dict:
    if total is None or free is None:
        return {"used_bytes": None, "used_percent": None}
    used = total - free
    return {"used_bytes": used, "used_percent": round(used * 100.0 / total, 1) if total else 0.0}
