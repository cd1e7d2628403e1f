"""Ledgers for integration tests: written through the client, or metadata only; and the check
that a repaired ledger is whole on every bookie of its write sets."""

from __future__ import annotations

from bkctl.wire.codecs import v2
from bkctl.wire.codecs.digest import DigestManager
from bkctl.wire.codecs.protocol import RC
from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.bookieproc import WireClient

#: Bookie ids for metadata-only ledgers (nothing listens there).
ENSEMBLE = ["127.0.0.1:3181", "127.0.0.1:3182"]


def make_ledger(
    bk,
    ensemble: int,
    write_quorum: int,
    ack_quorum: int = 2,
    *,
    entries: int,
    close: bool = True,
    tag: str = "e",
    **create,
) -> int:
    lh = bk.create(ensemble, write_quorum, ack_quorum, **create)
    lid = lh.ledger_id
    lh.add_many(f"{tag}{lid}-{i}".encode() for i in range(entries))
    if close:
        lh.close()
    return lid


def most_named(zkstore, ledger_ids, procs):
    """The bookie process named by the most of these ledgers' ensembles: a fault test's victim
    that surely holds some of them (placement is random; ``procs[0]`` may hold none)."""
    counts: dict[str, int] = {}
    for lid in ledger_ids:
        for bookie in zkstore.ledgers.read(lid)[0].bookies:
            counts[bookie] = counts.get(bookie, 0) + 1
    return max((p for p in procs if p.bookie_id in counts), key=lambda p: counts[p.bookie_id])


def holds_entry(port: int, ledger_id: int, entry_id: int) -> bool:
    """Whether the bookie listening on ``port`` answers a read of the entry (a copy under way
    has reached it: a move's or a repair's target)."""
    client = WireClient(port)
    try:
        return client.v2(v2.ReadRequest(2, 0, ledger_id, entry_id)).rc == RC.EOK
    finally:
        client.close()


def make_ledgers(zkstore, ids) -> None:
    """Metadata-only ledgers with the given ids on :data:`ENSEMBLE`."""
    md = LedgerMetadata.new(ENSEMBLE)
    for ledger_id in ids:
        zkstore.ledgers.create(md, ledger_id=ledger_id)


def assert_fully_replicated(zkstore, ports: dict[str, int], ledger_id: int, gone: set[str]) -> int:
    """Every entry of a closed ledger is on every bookie of its write set (asked directly,
    digest checked), and no segment names a bookie in ``gone``.  Returns the entry count."""
    md, _ = zkstore.ledgers.read(ledger_id)
    assert md.is_closed
    assert not gone.intersection(md.bookies), (ledger_id, md.ensembles)
    digest = DigestManager(ledger_id, md.digest_type, md.password)
    clients = {}
    try:
        for entry_id in range(md.last_entry_id + 1):
            for bookie in md.write_set(entry_id):
                client = clients.get(bookie) or clients.setdefault(bookie, WireClient(ports[bookie]))
                resp = client.v2(v2.ReadRequest(2, 0, ledger_id, entry_id))
                assert resp.rc == RC.EOK, f"entry {ledger_id}/{entry_id} missing on {bookie}"
                digest.verify(resp.body, entry_id)
    finally:
        for c in clients.values():
            c.close()
    return md.last_entry_id + 1
