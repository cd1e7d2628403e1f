"""Ledger operations on metadata: list, show, delete."""
from __future__ import annotations

from typing import Iterator

from wire.metadata import LedgerMetadata, LedgerState


def describe(ledger_id: int, md: LedgerMetadata, version: int | None = None) -> dict:
    """Stable, JSON-ready description of a ledger's metadata (no password bytes)."""
    return {
        "ledger_id": ledger_id,
        "state": md.state.name,
        "ensemble_size": md.ensemble_size,
        "write_quorum": md.write_quorum,
        "ack_quorum": md.ack_quorum,
        "last_entry_id": md.last_entry_id,
        "length": md.length,
        "digest": md.digest_type.name if md.digest_type is not None else None,
        "password_set": bool(md.password),
        "ctime": md.ctime,
        "custom_metadata": {k: v.decode("utf-8", "backslashreplace") for k, v in md.custom_metadata.items()},
        "segments": [{"first_entry_id": first, "bookies": list(ens)} for first, ens in md.ensembles],
        "format_version": md.format_version,
        "version": version,
    }


def list_ledgers(store, state: str | None = None, bookie: str | None = None) -> Iterator[dict]:
    """Stream ledgers in id order; with a filter each ledger's metadata is read."""
    want_state = LedgerState[state.upper()] if state else None
    for ledger_id in store.iter_ledger_ids():
        if want_state is None and bookie is None:
            yield {"ledger_id": ledger_id}
            continue
        try:
            md, version = store.read_ledger(ledger_id)
        except Exception as e:  # deleted meanwhile, or corrupt: report and go on
            from wire.errors import NotFound

            if isinstance(e, NotFound):
                continue
            yield {"ledger_id": ledger_id, "error": str(e)}
            continue
        if want_state is not None and md.state is not want_state:
            continue
        if bookie is not None and bookie not in md.bookies:
            continue
        yield describe(ledger_id, md, version)


def show_ledger(store, ledger_id: int) -> dict:
    md, version = store.read_ledger(ledger_id)
    return describe(ledger_id, md, version)


def delete_ledger(store, ledger_id: int) -> dict:
    store.read_ledger(ledger_id)  # NoSuchLedger (exit 3) rather than a silent no-op
    store.delete_ledger(ledger_id)
    return {"ledger_id": ledger_id, "deleted": True}
