"""Disk capacity of the cluster's bookies: each bookie's GET_BOOKIE_INFO (``bookie list --disk``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from .bookies import BookieRow, Registration

if TYPE_CHECKING:
    from twisted.python.failure import Failure

    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.client.bookkeeper import BookKeeperClient

__all__ = ["BookieCapacity", "ClusterCapacity", "DiskCapacity", "with_disk"]


class _Answer(NamedTuple):
    """One bookie's answer to GET_BOOKIE_INFO: its space, or why there is none."""

    total_bytes: int | None
    free_bytes: int | None
    error: str | None


_NOT_ASKED = _Answer(None, None, None)


@dataclass(frozen=True, slots=True)
class BookieCapacity(BookieRow):
    """A row of ``bookie list`` with the bookie's disk space (None: down, or no answer, then
    ``error`` says why)."""

    total_bytes: int | None
    free_bytes: int | None
    used_bytes: int | None
    used_percent: float | None
    error: str | None


@dataclass(frozen=True, slots=True)
class ClusterCapacity:
    """The cluster's space: the sum over the ``answered`` of ``bookies`` (None: none answered)."""

    bookies: int
    answered: int
    total_bytes: int
    free_bytes: int
    used_bytes: int | None
    used_percent: float | None


@dataclass(frozen=True, slots=True)
class DiskCapacity:
    """``bookie list --disk``: each bookie's space, and the cluster's ``total``."""

    bookies: list[BookieCapacity]
    total: ClusterCapacity


async def _disk_of(
    client: BookKeeperClient, bookie_ids: list[str], on_answer: Callable[[], None] | None
) -> dict[str, _Answer]:
    from twisted.internet import defer

    out: dict[str, _Answer] = {}

    def answered(result: tuple[int, int], bookie_id: str) -> None:
        total, free = result
        out[bookie_id] = _Answer(total, free, None)

    def failed(f: Failure, bookie_id: str) -> None:
        out[bookie_id] = _Answer(None, None, str(client.explain(f.value)))

    def ask(bookie_id: str) -> defer.Deferred[Any]:
        return client.pool.get(bookie_id).bookie_info()

    def counted(_: object) -> None:
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


def with_disk(
    bk: BlockingBookKeeper, rows: list[BookieRow], on_answer: Callable[[], None] | None = None
) -> DiskCapacity:
    """``rows`` (from ``list_bookies``) with their disk space (asked of every registered bookie
    at once; a bookie that is down or does not answer has nulls and, if asked, the error), and
    the cluster's total."""
    asked = [r.bookie_id for r in rows if r.state is not Registration.DOWN]
    disk = bk.run(_disk_of, asked, on_answer) if asked else {}
    out = []
    total = free = answered = 0
    for r in rows:
        d = disk.get(r.bookie_id, _NOT_ASKED)
        used, percent = _usage(d.total_bytes, d.free_bytes)
        out.append(BookieCapacity(r.bookie_id, r.state, d.total_bytes, d.free_bytes, used, percent, d.error))
        if d.total_bytes is not None and d.free_bytes is not None:
            answered += 1
            total += d.total_bytes
            free += d.free_bytes
    used, percent = _usage(total if answered else None, free if answered else None)
    return DiskCapacity(out, ClusterCapacity(len(rows), answered, total, free, used, percent))


def _usage(total: int | None, free: int | None) -> tuple[int | None, float | None]:
    """(used bytes, used percent), None without both figures."""
    if total is None or free is None:
        return None, None
    used = total - free
    return used, round(used * 100.0 / total, 1) if total else 0.0
