"""Ledgers whose copies are planted on chosen bookies by raw adds: what each bookie holds of
a ledger, and what its metadata says, set apart (fsck's faults: copies missing on one replica,
a flipped byte, data on bookies the metadata does not name, a segment with no copy)."""

from __future__ import annotations

from bkctl.wire.codecs import v2
from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
from bkctl.wire.codecs.protocol import RC
from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.bookieproc import WireClient

PASSWORD = b"fsck"


def payload(ledger_id: int, entry_id: int) -> bytes:
    return f"p{ledger_id}-{entry_id}".encode()


def packaged(ledger_id: int, entry_id: int, flip: bool = False) -> bytes:
    """Entry ``entry_id`` as its writer packages it (CRC32C, :data:`PASSWORD`); ``flip``: one
    payload byte flipped after the digest was made (a copy gone bad)."""
    digest = DigestManager(ledger_id, DigestType.CRC32C, PASSWORD)
    length = sum(len(payload(ledger_id, e)) for e in range(entry_id + 1))
    body = bytearray(digest.package(entry_id, entry_id - 1, length, payload(ledger_id, entry_id)))
    if flip:
        body[-1] ^= 0x01
    return bytes(body)


def put(port: int, ledger_id: int, entry_ids, flipped=()) -> None:
    """Add these entries of the ledger to the bookie listening on ``port`` (v2 adds)."""
    c = WireClient(port)
    try:
        key = master_key(PASSWORD)
        for e in entry_ids:
            body = packaged(ledger_id, e, flip=e in flipped)
            assert c.v2(v2.AddRequest(2, 0, key, body, ledger_id, e)).rc == RC.EOK
    finally:
        c.close()


def closed_metadata(
    ledger_id: int, segments: list[tuple[int, list[str]]], last_entry_id: int, write_quorum: int
) -> LedgerMetadata:
    """Closed metadata of these segments ``(first entry, ensemble)`` (CRC32C, :data:`PASSWORD`)."""
    md = LedgerMetadata.new(segments[0][1], write_quorum, write_quorum, password=PASSWORD)
    for first, ensemble in segments[1:]:
        md = md.with_ensemble_change(first, ensemble)
    length = sum(len(payload(ledger_id, e)) for e in range(last_entry_id + 1))
    return md.closed(last_entry_id, length)
