"""Re-replication over many ledgers: planned from what the walk read (no metadata read
again, the bookie lists read once: the client's, kept by watches), each failure with its cause and one short reason,
the ledgers left grouped by cause, and the progress line (ledgers and bytes left, the
rate, the ETA) on a fake clock -- and off on a pipe."""

from __future__ import annotations

import json

from twisted.internet import defer

from bkctl.ops.recovery import cause_label, describe_left, left_rows
from bkctl.wire import fastpath
from bkctl.wire.client import replication_causes as R
from bkctl.wire.client import rereplication
from bkctl.wire.client.bookie_watcher import BookieWatcher
from bkctl.wire.client.ledger_report import LedgerReport
from bkctl.wire.codecs.digest import DigestManager, DigestType
from bkctl.wire.domain.replica_size import packed_entry_bytes
from bkctl.wire.metadata.errors import MetadataStoreError
from bkctl.wire.metadata.ledger import LedgerMetadata, write_set_indices
from bkctl.wire.metadata.store import LedgerRead
from tests.support.deferreds import successResultOf
from tests.support.fake_bookie import FakePool
from tests.support.fake_store import FakeMetadataStore

A, B, C, D = (f"10.0.0.{i}:3181" for i in range(1, 5))


class Client:
    """What re-replication uses of a client: its bookie lists the client's own
    (:class:`BookieWatcher` over the fake store, where the bookies are registered)."""

    def __init__(self, writable=(A, B, C, D)):
        self.pool = FakePool(auto=True)
        self.store = FakeMetadataStore().start()
        self.placement = None
        self.twins = fastpath.selected()
        self.bookies = BookieWatcher(self.store, self.run_blocking)
        self.writable = writable

    @property
    def writable(self):
        return self.store.registration.writable_bookies()

    @writable.setter
    def writable(self, bookies):
        for bookie in set(self.writable) - set(bookies):
            self.store.registration.unregister(bookie)
        for bookie in bookies:
            self.store.registration.register(bookie)

    def run_blocking(self, fn, *args, **kw):
        return defer.maybeDeferred(fn, *args, **kw)

    def bookie_lists(self):
        return self.bookies.lists(self.placement)


def closed(ensemble=(A, B, C), last=9, length=1000):
    return LedgerMetadata.new(list(ensemble), 2, 2).closed(last, length)


def write(client, ledger_id, md, entries):
    digest = DigestManager(ledger_id, DigestType.CRC32C, b"")
    for e in entries:
        body = digest.package(e, e - 1, e + 1, b"x")
        for i in write_set_indices(e, md.ensemble_size, md.write_quorum):
            client.pool.get(md.ensembles[0][1][i]).stored[(ledger_id, e)] = body


def run(client, items, **options):
    import random

    from bkctl.wire.client.placement import RandomPlacement

    return successResultOf(
        defer.ensureDeferred(
            rereplication.rereplicate_ledgers(
                client, items, [B], placement=RandomPlacement(random.Random(3)), **options
            )
        )
    )


def test_a_plan_from_the_walk_reads_no_metadata_and_the_bookies_once():
    client = Client()
    reads = [LedgerRead(lid, closed(), 0) for lid in range(1, 301)]
    reads.append(LedgerRead(400, None, -1))  # deleted between the walk and now
    reads.append(LedgerRead(401, MetadataStoreError("ledger 401 has corrupt metadata: truncated"), -1))
    client.store.calls.clear()
    results = run(client, reads, dry_run=True, parallel=8)
    assert client.store.called("ledgers.read") == []
    assert [name for name, _ in client.store.calls] == [
        "on_session_lost",
        "registration.watch_writable_bookies",
        "registration.watch_readonly_bookies",
    ]
    by_status = {}
    for r in results:
        by_status.setdefault(r.status, []).append(r.ledger_id)
    assert by_status == {"planned": list(range(1, 301)), "deleted": [400], "failed": [401]}
    planned = results[0]
    # B held 2 of every 3 entries of a 1000-byte, 10-entry E3/Qw2 ledger: 7 of 10 entries, their
    # payload and what the client packed around each (the one rule disk and rebalance count with)
    assert planned.fragments[0].entries == 7
    assert planned.bytes == 700 + 7 * packed_entry_bytes(closed())
    assert results[-1].cause == R.METADATA_GONE and "corrupt" in results[-1].reason


def test_each_failure_has_its_cause_and_one_short_reason():
    client = Client(writable=(A, C, D))
    # 1: copied; 2: no copy anywhere (unreadable); 3: its survivors are down; 4: no bookie free
    for lid in (1, 2, 3):
        client.store.ledgers.create(closed(), lid)
    write(client, 1, closed(), range(10))
    client.store.ledgers.create(closed((A, B, C, D)[:3]), 4)
    results = {r.ledger_id: r for r in run(client, [1, 2, 3], parallel=1)}
    assert results[1].status == "recovered" and results[1].cause is None
    assert results[2].cause == R.UNREADABLE and results[2].reason.startswith("entry 0: no good copy")
    assert "\n" not in results[2].reason and len(results[2].reason) <= 120
    write(client, 3, closed(), range(10))
    client.pool.get(A).down = client.pool.get(C).down = True
    again = run(client, [3], parallel=1)[0]
    assert again.cause == R.COPIES_DOWN and again.reason == "entry 0: no bookie holding a copy answers"
    client.writable = [A, C]  # nothing outside the ensemble
    none = run(client, [4], parallel=1)[0]
    assert none.cause == R.NO_BOOKIE and none.reason.startswith("needs 1 writable bookie outside")


def test_the_ledgers_left_are_grouped_by_cause_most_common_first():
    def failed(lid, cause=None, reason=None, error=None):
        return LedgerReport(lid, "CLOSED", "failed", error=error or reason, cause=cause, reason=reason)

    rows = [
        failed(9, R.NO_BOOKIE, "needs 1 writable bookie outside the ensemble, 0 available"),
        failed(3, R.COPIES_DOWN, "entry 0: no bookie holding a copy answers"),
        failed(4, R.NO_BOOKIE, "needs 1 ..."),
        failed(5, error="timed out"),  # a failure with no cause known
        6,  # named the bookie only after the run began: no row
    ]
    left = left_rows(rows)
    assert [(r.ledger_id, r.cause) for r in left] == [
        (4, R.NO_BOOKIE),
        (9, R.NO_BOOKIE),
        (6, "appeared"),
        (3, R.COPIES_DOWN),
        (5, R.OTHER),
    ]
    assert (
        describe_left(left) == "2 no bookie to copy to; 1 named the bookie after the run started; "
        "1 every copy down; 1 other"
    )
    assert cause_label(R.GRACE) == "writer's grace period" and cause_label("waiting-worker") == "waiting for a worker"


def test_the_eta_line_on_a_fake_clock():
    from bkctl.commands.progress import Eta

    now = [100.0]
    eta = Eta(clock=lambda: now[0], window=30.0)
    eta.start(25_000, 25_000 * 1024)
    assert eta.text() == "25,000 of 25,000 ledgers left, 24.4 MiB of 24.4 MiB; ETA --:--:--"
    for _ in range(10):
        now[0] += 1.0
        eta.advance(100, 100 * 1024)
    assert eta.text() == (
        "24,000 of 25,000 ledgers left, 23.4 MiB of 24.4 MiB; 100 ledgers/s, 100.0 KiB/s; ETA 0:04:00"
    )
    for _ in range(60):  # faster now: the window forgets the slow start
        now[0] += 1.0
        eta.advance(200, 200 * 1024)
    assert eta.seconds_left() == (25_000 - 13_000) / 200
    assert eta.text().endswith("200 ledgers/s, 200.0 KiB/s; ETA 0:01:00")
    open_ledgers = Eta(clock=lambda: now[0])  # no bytes known (open ledgers): by the ledger count
    open_ledgers.start(10, 0)
    now[0] += 2.0
    open_ledgers.advance(4)
    assert open_ledgers.text() == "6 of 10 ledgers left; 2 ledgers/s; ETA 0:00:03"


def test_the_progress_is_off_on_a_pipe(capsys):
    from bkctl.app import App
    from bkctl.commands.progress import LedgerProgress

    reporter = LedgerProgress(App(), "re-replicating")
    reporter.start(3, 300)
    for _ in range(3):
        reporter.ledger(100)
    reporter.stop()
    assert reporter.eta.done_ledgers == 3 and reporter.eta.done_bytes == 300
    assert capsys.readouterr().err == ""


def test_a_copy_from_the_walk_updates_the_metadata_on_the_version_it_read():
    client = Client(writable=(A, C, D))
    for lid in (1, 2):
        client.store.ledgers.create(closed(), lid)
        write(client, lid, closed(), range(10))
    results = run(client, list(client.store.ledgers.read_many([1, 2])), parallel=2)
    assert [r.status for r in results] == ["recovered", "recovered"]
    assert client.store.called("ledgers.read") == []  # neither to plan nor to compare-and-set
    for lid in (1, 2):
        md, version = client.store.ledgers.read(lid)
        assert md.ensembles[0][1] == (A, D, C) and version == 1


def test_the_streamed_document_is_the_one_emit_writes(capsys):
    from bkctl.app import App
    from bkctl.commands.recovery import _stream_json
    from bkctl.ops.recovery import RecoverTotals, summary
    from bkctl.wire.client.ledger_report import FragmentReport

    rows = [
        LedgerReport(
            7,
            "CLOSED",
            "failed",
            error='entry 0 of ledger 7: \u00e9"',
            cause=R.UNREADABLE,
            reason="entry 0: no good copy",
        ),
        LedgerReport(9, "OPEN", "planned", closed_first=True, fragments=(FragmentReport(0, None, (B,), {B: D}, None),)),
        LedgerReport(11, "CLOSED", "recovered", entries_copied=5, bytes=50, lost_entries=2),
    ]
    app = App()
    app.emit_json(summary([B], rows, dry_run=True, target=None, skip_open=False))
    whole = capsys.readouterr().out
    totals = RecoverTotals()
    _stream_json(
        app,
        {"bookies": [B], "dry_run": True},
        iter(rows),
        lambda: {"skip_open_ledgers": False, "target": None, "totals": totals.add(rows)},
    )
    assert capsys.readouterr().out == whole
    # the rows' keys as `recover --json` always wrote them; lost_entries only once counted
    doc = json.loads(whole)
    assert doc["ledgers"][1] == {
        "ledger_id": 9,
        "state": "OPEN",
        "status": "planned",
        "closed_first": True,
        "fragments": [
            {
                "first_entry_id": 0,
                "last_entry_id": None,
                "lost": [B],
                "replacements": {B: D},
                "entries": None,
                "entries_copied": 0,
            }
        ],
        "entries_copied": 0,
        "bytes": 0,
        "error": None,
        "cause": None,
        "reason": None,
    }
    assert doc["ledgers"][2]["lost_entries"] == 2 and "lost_entries" not in doc["ledgers"][0]
    assert doc["totals"]["lost_entries"] == 2 and doc["totals"]["recovered"] == 1
