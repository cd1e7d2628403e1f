"""``bkctl simpletest``: BookKeeper's simpletest, an end-to-end check of a cluster.

Creates a ledger (CRC32C, empty password, custom metadata
``Bookie=simpletest``), appends n 100-byte A-Z payloads, checks that the
last entry id is n-1, reads them back (unconfirmed read through the writer),
closes it, reopens it, reads the confirmed entries, and deletes it.  Unlike
the legacy shell, which always exits 0, any failure raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import SimpleTestFailed

if TYPE_CHECKING:
    from bkctl.wire.client.blocking import BlockingBookKeeper

ENTRY_SIZE = 100
PAYLOAD = bytes(ord("A") + i % 26 for i in range(ENTRY_SIZE))


@dataclass(frozen=True)
class SimpleTestResult:
    """``bkctl simpletest``/``bookiesanity`` that passed: the ledger it wrote, read back and
    deleted, on which bookies, and how long the writes and the reads took (seconds)."""

    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    entries: int
    entry_size: int
    bookies: list[str]
    last_entry_id: int
    write_seconds: float
    read_seconds: float
    deleted: bool
    ok: bool


def simpletest(
    bk: BlockingBookKeeper,
    ensemble: int = 3,
    write_quorum: int = 2,
    ack_quorum: int = 2,
    entries: int = 100,
    on_step: Callable[[str], Any] | None = None,
    bookie: str | None = None,
) -> SimpleTestResult:
    """Run the test; returns its :class:`SimpleTestResult`.  Raises :class:`SimpleTestFailed`
    naming the step that failed; the ledger is deleted anyway.

    ``bookie`` pins the test to that one bookie (ensemble, write and ack
    quorum 1, no ensemble change to another bookie), as Java's bookiesanity."""
    if bookie is not None:
        from bkctl.wire.client.placement import PinnedPlacement

        client = bk.client
        saved, client.placement = client.placement, PinnedPlacement([bookie])
        try:
            return simpletest(bk, 1, 1, 1, entries, on_step)
        finally:
            client.placement = saved
    step = "create"
    ledger_id: int | None = None  # once created, until deleted

    def at(name: str) -> None:
        nonlocal step
        step = name
        if on_step is not None:
            on_step(name)

    try:
        at("create")
        lh = bk.create(ensemble, write_quorum, ack_quorum, "CRC32C", b"", {"Bookie": b"simpletest"})
        ledger_id = created = lh.ledger_id
        bookies = list(lh.metadata.last_ensemble)
        at("write")
        started = time.perf_counter()
        last = lh.add_many(PAYLOAD for _ in range(entries))
        write_seconds = round(time.perf_counter() - started, 6)
        expected_last = entries - 1
        got_last = -1 if last is None else last
        if got_last != expected_last or lh.last_add_confirmed != expected_last:
            raise SimpleTestFailed(
                "write", f"last entry id is {got_last} (LAC {lh.last_add_confirmed}), expected {expected_last}"
            )
        at("read unconfirmed")
        _check(lh.read(0, expected_last, allow_unconfirmed=True) if entries else [], entries, "read unconfirmed")
        at("close")
        lh.close()
        at("reopen")
        rh = bk.open(lh.ledger_id)
        if rh.last_entry_id != expected_last:
            raise SimpleTestFailed(
                "reopen", f"the closed ledger's last entry is {rh.last_entry_id}, expected {expected_last}"
            )
        at("read confirmed")
        started = time.perf_counter()
        _check(
            [e for batch in rh.read_range(0, batch=1000) for e in batch] if entries else [], entries, "read confirmed"
        )
        read_seconds = round(time.perf_counter() - started, 6)
        at("delete")
        bk.delete(lh.ledger_id)
        ledger_id = None
    except SimpleTestFailed:
        _cleanup(bk, ledger_id)
        raise
    except Exception as e:
        _cleanup(bk, ledger_id)
        raise SimpleTestFailed(step, str(e) or type(e).__name__) from e
    return SimpleTestResult(
        created,
        ensemble,
        write_quorum,
        ack_quorum,
        entries,
        ENTRY_SIZE,
        bookies,
        got_last,
        write_seconds,
        read_seconds,
        deleted=True,
        ok=True,
    )


def _check(entries: list[tuple[int, bytes]], n: int, step: str) -> None:
    if [e for e, _ in entries] != list(range(n)):
        raise SimpleTestFailed(step, f"read {len(entries)} entries, expected {n} in order")
    for entry_id, payload in entries:
        if payload != PAYLOAD:
            raise SimpleTestFailed(step, f"entry {entry_id} does not hold what was written")


def _cleanup(bk: BlockingBookKeeper, ledger_id: int | None) -> None:
    """Delete the test's ledger after a failure, if it was created and is not deleted yet."""
    if ledger_id is None:
        return
    try:
        bk.delete(ledger_id)
    except Exception:  # noqa: BLE001 - the failure itself is what gets reported
        pass
