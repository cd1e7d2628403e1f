"""ledger list's LAC reads (bkctl.ops.ledgers): an open ledger's read starts as the walk meets
it, at most LAC_WINDOW run at once, the listing keeps the walk's order, a failed read is shown
beside its ledger, and a listing left early cancels the reads still out."""

from __future__ import annotations

import itertools

from bkctl.ops import ledgers as L
from bkctl.ops.results import to_json
from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.fake_store import FakeMetadataStore

A, B = "127.0.0.1:3181", "127.0.0.1:3182"


class Pending:
    def __init__(self, client, ledger_id):
        self.client, self.ledger_id, self.cancelled = client, ledger_id, False

    def result(self):
        self.client.running.discard(self.ledger_id)
        if self.ledger_id % 7 == 0:
            return ConnectionRefusedError("bookie down")
        return self.ledger_id * 10

    def cancel(self):
        self.cancelled = True
        self.client.running.discard(self.ledger_id)


class Client:
    def __init__(self):
        self.running: set[int] = set()
        self.most = 0
        self.started: list[Pending] = []

    def start_read_lac(self, ledger_id, md, version):
        assert md.is_open
        self.running.add(ledger_id)
        self.most = max(self.most, len(self.running))
        self.started.append(Pending(self, ledger_id))
        return self.started[-1]


def _store(n: int) -> FakeMetadataStore:
    store = FakeMetadataStore().start()
    for ledger_id in range(1, n + 1):
        md = LedgerMetadata.new((A, B), password=b"")
        store.ledgers.create(md.closed(4, 50) if ledger_id % 3 == 0 else md, ledger_id)
    return store


def test_lacs_are_read_in_a_window_and_the_listing_keeps_its_order():
    store, client = _store(1000), Client()
    made = []
    docs = [to_json(d) for d in L.list_ledgers(store, details=True, lacs=lambda: made.append(1) or client)]
    assert [d["ledger_id"] for d in docs] == list(range(1, 1001))
    assert len(made) == 1  # one client, made when the first open ledger came
    assert 1 < client.most <= L.LAC_WINDOW
    for d in docs:
        if d["state"] == "CLOSED":
            assert d["last_add_confirmed"] == 4 and "lac_error" not in d
        elif d["ledger_id"] % 7 == 0:
            assert d["last_add_confirmed"] is None and d["lac_error"] == "bookie down"
        else:
            assert d["last_add_confirmed"] == d["ledger_id"] * 10 and d["lac_note"] is None


def test_no_client_is_made_for_a_cluster_of_closed_ledgers():
    store = FakeMetadataStore().start()
    store.ledgers.create(LedgerMetadata.new((A, B), password=b"").closed(1, 2), 5)
    assert [d.ledger_id for d in L.list_ledgers(store, details=True, lacs=lambda: 1 / 0)] == [5]


def test_a_listing_left_early_cancels_the_reads_still_out():
    store, client = _store(300), Client()
    listing = L.list_ledgers(store, details=True, lacs=lambda: client)
    list(itertools.islice(listing, 3))
    listing.close()
    out = [p for p in client.started if p.cancelled]
    assert out and not client.running
