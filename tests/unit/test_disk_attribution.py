"""The pure parts of ``bkctl disk``: a ledger's copies per bookie, owners and their groups, entry
logs by what reclaims their dead bytes, a bookie's space attributed (bookied and Java), the one-line answer."""

from collections import defaultdict

from hypothesis import given
from hypothesis import strategies as st

from bkctl.ops.bookie_reads import BookieReading
from bkctl.ops.bookies import Registration
from bkctl.ops.disk import bookie_doc, summary_line, totals
from bkctl.ops.results import to_json
from bkctl.wire.domain import disk_attribution
from bkctl.wire.domain.disk_attribution import (
    Logical,
    Owner,
    Tally,
    Walk,
    copies_by_bookie,
    entry_log_classes,
    owner_by_metadata,
    walk_ledgers,
)
from bkctl.wire.metadata.ledger import LedgerMetadata

A, B, C, D = "a:1", "b:1", "c:1", "d:1"
HEADER = 32 + 4  # entry header + CRC32C


def brute_force(md, entries: int, payload: int) -> dict:
    out = defaultdict(lambda: [0, 0])
    for e in range(entries):
        for b in md.write_set(e):
            out[b][0] += 1
            out[b][1] += payload + HEADER
    return {b: tuple(v) for b, v in out.items()}


def test_copies_follow_the_write_sets_across_ensemble_changes():
    for e, qw, change in ((3, 2, 7), (3, 3, 5), (4, 2, 10), (5, 3, 1), (2, 1, 3)):
        ens = [A, B, C, D, "e:1"][:e]
        later = [D if b == A else b for b in ens] if A in ens and D not in ens else list(reversed(ens))
        md = LedgerMetadata.new(ens, qw, 1).with_ensemble_change(change, later)
        for last in (change - 1, change, 40):  # a later segment starts at most one past the last entry
            closed = md.closed(last, (last + 1) * 100)
            assert copies_by_bookie(closed, last, (last + 1) * 100) == brute_force(closed, last + 1, 100), (
                e,
                qw,
                change,
                last,
            )


def test_open_ledger_copies_use_the_end_given():
    md = LedgerMetadata.new([A, B, C], 2, 2)
    assert copies_by_bookie(md, 8, 900) == brute_force(md, 9, 100)
    assert copies_by_bookie(md, -1, 0) == {}


def test_owners_by_custom_metadata():
    assert owner_by_metadata({"application": "myapp"}) == Owner("application", "myapp")
    assert owner_by_metadata({}).name == "(no application metadata)"
    assert (
        owner_by_metadata(
            {"application": "pulsar", "component": "managed-ledger", "pulsar/managed-ledger": "t/ns/persistent/x"}
        )
        is None
    )  # the sweep decides
    schema = owner_by_metadata({"application": "pulsar", "component": "schema", "pulsar/schemaId": "t/ns/x"})
    assert (schema.kind, schema.name, schema.component) == ("topic", "persistent://t/ns/x", "schema")
    encoded = owner_by_metadata({"application": "pulsar", "component": "schema", "pulsar/schemaId": "t/ns/a+b%3Ac"})
    assert encoded.name == "persistent://t/ns/a b:c"  # a schema id names its topic URL-encoded
    compacted = owner_by_metadata(
        {"application": "pulsar", "component": "compacted-ledger", "pulsar/compactedTopic": "persistent://t/ns/x"}
    )
    assert compacted.component == "compacted" and compacted.namespace == "ns"
    assert owner_by_metadata({"application": "pulsar", "component": "delayed-index-bucket"}) == Owner(
        "pulsar", "delayed-index-bucket"
    )


def test_groups_at_each_level():
    o = Owner("topic", "persistent://t/ns/x", "t", "ns", "cursor")
    assert o.group("tenant") == ("topic", "t", "") and o.group("namespace") == ("topic", "t/ns", "")
    assert o.group("topic") == ("topic", "persistent://t/ns/x", "cursor")
    assert Owner("application", "app").group("tenant") == ("application", "app", "")


def log(log_id, size, live, directory="/d"):
    return {
        "ledgerDirectory": directory,
        "logId": log_id,
        "sizeBytes": size,
        "liveBytes": live,
        "liveRatio": live / size,
    }


def test_entry_logs_by_what_reclaims_them():
    logs = [log(1, 1000, 100), log(2, 1000, 500), log(3, 1000, 900), log(4, 1000, 200), log(1, 1000, 0, "/e")]
    c = entry_log_classes(logs, 0.2, 0.8)
    assert (c.below_minor_dead_bytes, c.below_major_dead_bytes, c.above_major_dead_bytes) == (900, 500, 100)
    assert c.active_log_dead_bytes == 800 + 1000  # the newest of each directory, as none is marked
    assert c.active_assumed and c.lowest_live_ratio == 0.1 and c.dead_bytes == 3300
    marked = [dict(x, active=x["logId"] == 3) for x in logs[:4]]
    c = entry_log_classes(marked, 0.2, 0.8)
    assert not c.active_assumed and c.active_log_dead_bytes == 100 and c.below_major_dead_bytes == 500 + 800
    # a threshold of 0 disables that kind: those logs wait for the other
    assert entry_log_classes(logs[:2], 0.0, 0.8).below_major_dead_bytes == 900


def walk_with(cells) -> Walk:
    tally = Tally()
    for bookie, owner, entries, nbytes, estimate in cells:
        tally.add(owner, {bookie: (entries, nbytes)}, nbytes, estimate)

    class Sweep:
        young = unchecked = 0

    return Walk(tally, Sweep(), [], len(cells), 0, 0, {})


def bookied(bookie_id, logs, gc_extra=None) -> BookieReading:
    return BookieReading(
        bookie_id,
        Registration.WRITABLE,
        "h:1",
        info={"freeSpace": 10_000, "totalSpace": 100_000},
        gc={"is_in_force_gc": "false", "gcRuns": 3, **(gc_extra or {})},
        gc_details=[{"gcRuns": 3, "entryLogs": logs}],
    )


def test_a_bookieds_space_attributed():
    topic = Owner("topic", "persistent://t/ns/x", "t", "ns", "data")
    orphan = Owner("orphan", "persistent://t/ns/x", "t", "ns", "data")
    walk = walk_with([(A, topic, 10, 5000, False), (A, orphan, 2, 1000, False), (A, topic, 1, 400, True)])
    reading = bookied(A, [log(1, 20_000, 9_000), log(2, 10_000, 0)])
    doc = bookie_doc(reading, walk, "namespace")
    stored = 5000 + 400 + 11 * 24
    assert to_json(doc.live) == {"topics": stored, "applications": 0, "orphans": 1000 + 2 * 24, "unlisted": 0}
    assert doc.estimated_bytes == 400 + 24
    assert doc.awaiting_gc_bytes == 9_000 - stored - 1048
    assert doc.entry_log_bytes == 30_000 and doc.compaction.dead_bytes == 21_000
    assert doc.other_files_bytes == 90_000 - 30_000
    assert set(doc.unread) == {"journal", "index"} and not doc.thresholds_reported
    # the bookie holds less than the metadata says: data not in the entry logs yet
    short = bookie_doc(bookied(A, [log(1, 2_000, 1_000)]), walk, "namespace")
    assert short.awaiting_gc_bytes == 0 and short.not_in_entry_logs_bytes == stored + 1048 - 1000
    # thresholds the bookie reports are used
    own = bookie_doc(
        bookied(A, [log(1, 100, 50)], {"minorCompactionThreshold": 0.6, "majorCompactionThreshold": 0.9}),
        walk,
        "namespace",
    )
    assert own.thresholds_reported and own.compaction.below_minor_dead_bytes == 0  # the active log


def test_a_java_bookie_says_what_it_cannot_break_down():
    walk = walk_with([(A, Owner("application", "app"), 10, 5000, False)])
    reading = BookieReading(
        A,
        Registration.WRITABLE,
        "h:1",
        info={"freeSpace": 40_000, "totalSpace": 100_000},
        gc={"is_in_force_gc": "false"},
        gc_details=[{"gcRunning": False}],
    )
    doc = bookie_doc(reading, walk, "namespace")
    assert doc.kind == "java" and doc.entry_log_bytes is None and doc.compaction is None
    assert doc.live.applications == 5000 + 10 * 4  # Java's 4-byte entry-log framing
    assert doc.data_bytes is None  # the filesystem's 60,000 used bytes are not the bookie's
    assert "entry logs" in doc.unread and "journal" in doc.unread
    report = ([doc], totals([doc]))
    assert summary_line(report[0], report[1]) == (
        "4.9 KiB is live data on 1 bookie whose HTTP admin sizes none of its files "
        "(Java's: only the filesystem's free and total space, shared with other data; "
        "`du` its ledger and journal directories)"
    )
    # beside a bookied, each is said on its own: the bookied's data is not summed with a filesystem
    sized = bookie_doc(
        bookied(B, [log(1, 20_000, 9_000)]), walk_with([(B, Owner("application", "app"), 2, 1000, False)]), "namespace"
    )
    both = summary_line([doc, sized], totals([doc, sized]))
    assert both.startswith("1.0 KiB of 19.5 KiB used is live data; ") and "4.9 KiB is live data on 1 bookie" in both
    # its /metrics tells its entry logs' live bytes: the deleted ledgers not yet collected are known
    reading.metrics = (
        "# TYPE bookie_ACTIVE_ENTRY_LOG_SPACE_BYTES gauge\n"
        'bookie_ACTIVE_ENTRY_LOG_SPACE_BYTES{indexDir="/d1/current",ledgerDir="/d1/current"} 7000\n'
        'bookie_ACTIVE_ENTRY_LOG_SPACE_BYTES{indexDir="/d2/current",ledgerDir="/d2/current"} 1000.0\n'
    )
    measured = bookie_doc(reading, walk, "namespace")
    assert measured.awaiting_gc_bytes == 8000 - 5040 and measured.not_in_entry_logs_bytes == 0
    assert doc.awaiting_gc_bytes is None  # without it: not known
    down = bookie_doc(BookieReading(B, Registration.DOWN, unread={"http": "not registered (down)"}), walk, "namespace")
    assert down.kind is None and down.live_bytes == 0 and down.unread == {"http": "not registered (down)"}


def test_the_one_line_answer_names_the_largest_share_and_its_cure():
    app = Owner("application", "app")
    orphan = Owner("orphan", "persistent://t/ns/x", "t", "ns", "data")
    walk = walk_with([(A, app, 100, 100_000, False), (A, orphan, 10, 50_000, False)])
    # dead bytes mostly in logs between the thresholds: raise the minor one or force a major compaction
    logs = [log(1, 200_000, 80_000), log(2, 100_000, 32_640), log(3, 50_000, 40_000)]  # live: what the walk says
    doc = bookie_doc(bookied(A, logs), walk, "namespace")
    report = ([doc], totals([doc]))
    assert summary_line(report[0], report[1]) == (
        "100.0 KiB of 341.8 KiB used is live data; 192.7 KiB is waiting for compaction (in logs between the minor "
        "threshold 0.2 and the major 0.8, the default: the next major compaction takes it, or now "
        "`bkctl bookie gc a:1 --major`; 9.8 KiB in the active log); "
        "49.1 KiB is orphans (list: `bkctl pulsar orphans`)"
    )
    # mostly under the minor threshold: the next minor compaction; more live data in the logs: deleted ledgers
    logs = [log(1, 200_000, 20_000), log(2, 150_000, 142_640), log(3, 1000, 1000)]
    report = ([d := bookie_doc(bookied(A, logs), walk, "namespace")], totals([d]))
    line = summary_line(report[0], report[1])
    assert (
        "the next minor compaction takes it, or now `bkctl bookie gc a:1 --minor`; 7.2 KiB over the major "
        "threshold)" in line
    ), line
    assert "; 10.7 KiB is deleted ledgers the next GC pass removes (now: `bkctl bookie gc BOOKIE`)" in line, line
    assert summary_line([], totals([])).startswith("no bookie answered")


def test_one_walk_attributes_topics_orphans_and_applications_on_the_fake_store():
    """Topics from the managed ledgers, orphans by the sweep's rule, one pipelined read of the
    ledgers for both; an open ledger's size unknown without the bookies."""
    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from tests.support.fake_store import FakeMetadataStore

    store = FakeMetadataStore().start()
    name = "t/ns/persistent/x"
    value = ml.ManagedLedgerInfo()
    for lid in (1, 2):
        value.ledgerInfo.add(ledgerId=lid, entries=10, size=1000, timestamp=1)
    store.pulsar.put_managed_ledger(
        name,
        value.SerializeToString(),
        {"sub": ml.ManagedCursorInfo(cursorsLedgerId=3, markDeleteLedgerId=1, markDeleteEntryId=0).SerializeToString()},
    )
    pulsar = {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": name.encode()}
    ens = [A, B, C]
    for lid, custom, closed in (
        (1, pulsar, True),
        (2, pulsar, False),
        (3, dict(pulsar, **{"pulsar/cursor": b"sub"}), True),
        (4, pulsar, True),
        (5, {"application": b"app"}, True),
    ):
        md = LedgerMetadata.new(ens, 2, 2, ctime=1, custom_metadata=custom)
        store.ledgers.create(md.closed(9, 1000) if closed else md, lid)
    store.calls.clear()
    walk = walk_ledgers(store, None, older_than=60, now_ms=10**12)
    assert [c for c, _ in store.calls].count("ledgers.ids") == 1  # one walk serves disk and the orphan sweep
    assert walk.orphan_ids == [4] and walk.ledgers == 5 and walk.open_unknown == {2: "the bookies were not asked"}
    owners = {(o.kind, o.component): row.ledgers for o, row in walk.tally.logical.items()}
    assert owners == {("topic", "data"): 1, ("topic", "cursor"): 1, ("orphan", "data"): 1, ("application", None): 1}
    per_bookie = sum(cell.entries for (b, _o), cell in walk.tally.cells.items() if b == A)
    assert per_bookie == 4 * sum(1 for e in range(10) if A in md.write_set(e))


def test_the_journal_and_index_count_and_the_advice_is_the_one_the_bookie_allows():
    """Issue 54, items 3 and 5: bookied reports its journal's and index's sizes (counted as bookie
    data), and its compaction settings: with intervals 0 and forceAllowCompaction=false no forced
    pass compacts, so the advice is to change them, not `bookie gc --major`."""
    app = Owner("application", "app")
    walk = walk_with([(A, app, 100, 100_000, False)])
    logs = [log(1, 200_000, 80_000), log(2, 100_000, 32_640), log(3, 50_000, 40_000)]
    off = {
        "minorCompactionThreshold": 0.2,
        "majorCompactionThreshold": 0.8,
        "minorCompactionInterval": 0,
        "majorCompactionInterval": 0,
        "forceAllowCompaction": False,
        "forcedCompactionRefused": {
            "major": "majorCompactionInterval is 0 (not periodic) and "
            "forceAllowCompaction=false: a forced pass does not compact either",
            "minor": "minorCompactionInterval is 0 (not periodic) and "
            "forceAllowCompaction=false: a forced pass does not compact either",
        },
    }
    reading = bookied(A, logs, off)
    reading.info.update(journalBytes=40_000, indexBytes=8_000)
    doc = bookie_doc(reading, walk, "namespace")
    assert doc.data_bytes == 350_000 + 40_000 + 8_000 and "journal" not in doc.unread
    assert doc.other_files_bytes == 0  # the made-up filesystem is smaller than the data: nothing else on it
    line = summary_line([doc], totals([doc]))
    assert "of 388.7 KiB used is live data" in line, line
    assert (
        "(in logs between the minor threshold 0.2 and the major 0.8: no compaction takes it: "
        "majorCompactionInterval is 0 (not periodic) and forceAllowCompaction=false: a forced pass does not "
        "compact either; set forceAllowCompaction=true (then `bkctl bookie gc a:1 --major`) or a "
        "majorCompactionInterval"
    ) in line, line
    allowed = dict(off, forceAllowCompaction=True, forcedCompactionRefused={"major": None, "minor": None})
    line = summary_line([d := bookie_doc(bookied(A, logs, allowed), walk, "namespace")], totals([d]))
    assert (
        "major compaction is not periodic (majorCompactionInterval=0): `bkctl bookie gc a:1 --major` takes it" in line
    ), line


def test_the_first_line_names_read_only_bookies_and_why():
    """Issue 54, item 4: why a bookie went read-only, as it says, and how much of its filesystem
    is not bookie data, first."""
    walk = walk_with([(A, Owner("application", "app"), 10, 5_000, False)])
    reading = bookied(A, [log(1, 20_000, 5_000)])
    reading.state = Registration.READ_ONLY
    reading.info.update(
        journalBytes=1_000, indexBytes=1_000, readOnlyReasons={"disk": "disk usage 96.0% over diskUsageThreshold 95%"}
    )
    doc = bookie_doc(reading, walk, "namespace")
    java = bookie_doc(
        BookieReading(
            B,
            Registration.READ_ONLY,
            "h:2",
            info={"freeSpace": 1, "totalSpace": 10},
            gc={"is_in_force_gc": "false"},
            gc_details=[{}],
        ),
        walk,
        "namespace",
    )
    line = summary_line([doc, java], totals([doc, java]))
    assert line.startswith(
        "read-only: a:1 (disk usage 96.0% over diskUsageThreshold 95%; 66.4 KiB of the 87.9 KiB "
        "used on its filesystem is not bookie data), b:1 (its HTTP admin does not say why (a Java "
        "bookie? its log does)); "
    ), line


@given(
    st.integers(1, 6).flatmap(lambda e: st.tuples(st.just(e), st.integers(1, e))),
    st.lists(st.integers(0, 40), min_size=1, max_size=4),
    st.integers(-1, 300),
)
def test_each_bookies_entries_are_what_rereplicating_it_alone_would_copy(sizes, gaps, last_entry_id):
    """disk's count of a bookie's copies (one pass over the segments) equals the entries of
    the fragments that losing that bookie alone would re-replicate."""
    from bkctl.wire.client.fragments import entries_by_bookie, fragments_to_rereplicate
    from bkctl.wire.metadata.ledger import LedgerMetadata, LedgerState

    e, qw = sizes
    pool = [f"127.0.0.1:{3181 + i}" for i in range(e + 3)]
    firsts = [0]
    for gap in gaps[1:]:
        firsts.append(firsts[-1] + gap + 1)
    ensembles = tuple((first, tuple(pool[(i + k) % len(pool)] for k in range(e))) for i, first in enumerate(firsts))
    closed = last_entry_id >= firsts[-1] - 1
    md = LedgerMetadata(
        e, qw, qw, LedgerState.CLOSED if closed else LedgerState.OPEN, last_entry_id if closed else -1, 0, ensembles
    )
    expected = {}
    for bookie in md.bookies:
        held = sum(f.entry_count() or 0 for f in fragments_to_rereplicate(1, md, [bookie], last_entry_id))
        if held:
            expected[bookie] = held
    assert entries_by_bookie(md, last_entry_id) == expected


def test_a_read_only_bookie_filled_by_its_journal_is_told_the_way_out():
    """Issue 69, point 3: 0 B live and a journal that fills the disk: the line names the
    journal and how it is trimmed, not only the disk usage."""
    walk = walk_with([(A, Owner("application", "app"), 10, 0, False)])
    reading = bookied(A, [log(1, 4_096, 0)])
    reading.state = Registration.READ_ONLY
    reading.info.update(
        journalBytes=57 << 20, indexBytes=0, readOnlyReasons={"disk": "disk usage 96.0% over diskUsageThreshold 95%"}
    )
    doc = bookie_doc(reading, walk, "namespace")
    line = summary_line([doc], totals([doc]))
    assert "its journal holds 57.0 MiB: the journal is trimmed once a checkpoint has written" in line, line
    assert "a deleted ledger's entries are dropped, not written (delete ledgers to free it)" in line
    assert "'checkpoint postponed'" in line and "journalMaxSizeMB" in line


def test_the_walk_reads_open_ledgers_as_it_finds_them_and_holds_no_metadata_to_the_end(monkeypatch):
    """Issue 69, point 12: at 10^6 ledgers the walk held every open ledger's metadata (200,000) until
    its end, and peaked at 344 MiB.  The open ledgers' ends are read a chunk at a time as the walk
    finds them; the unlisted ones wait as (naming, copies) for the sweep; attributed as before."""
    from tests.support.fake_store import FakeMetadataStore

    store = FakeMetadataStore().start()
    pulsar = {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": b"t/ns/persistent/x"}
    other = dict(pulsar, **{"pulsar/managed-ledger": b"t/ns/persistent/y"})
    seen: list[int] = []  # the ledgers the walk had read when each chunk of open ones was asked for
    for lid in range(1, 41):
        custom = (pulsar if lid % 3 else other) if lid % 2 else {"application": b"app"}
        md = LedgerMetadata.new([A, B, C], 2, 2, ctime=1, custom_metadata=custom)
        store.ledgers.create(md if lid % 4 in (1, 2) else md.closed(9, 1000), lid)

    class Bookies:
        def run(self, fn, ledgers, window):
            seen.append(walked[0])
            return {lid: (4, 500) for lid, _bookies in ledgers}

    walked = [0]
    walk_of = store.ledgers.walk

    def counting_walk(**options):
        for item in walk_of(**options):
            walked[0] += 1
            yield item

    monkeypatch.setattr(store.ledgers, "walk", counting_walk)
    monkeypatch.setattr(disk_attribution, "OPEN_LEDGERS_A_STEP", 4)
    walk = walk_ledgers(store, Bookies, older_than=60, now_ms=10**12)
    assert seen == [6, 14, 22, 30, 38]  # the 4th open ledger of every 8 ledgers: as the walk goes
    assert walk.open_estimated == 20 and walk.open_unknown == {} and walk.ledgers == 40
    # counted by namespace (the report's level without --by topic): one owner for both topics, same sums
    grouped = walk_ledgers(store, Bookies, older_than=60, now_ms=10**12, level="namespace").tally
    assert len({o for o in walk.tally.logical if o.kind == "orphan"}) == 2
    assert [(o.kind, o.name, row) for o, row in grouped.logical.items() if o.kind == "orphan"] == [
        ("orphan", "t/ns", Logical(20, 15_000, 10))
    ]
    owners = {(o.kind, o.component): row for o, row in walk.tally.logical.items() if o.kind != "orphan"}
    orphans = [r for o, r in walk.tally.logical.items() if o.kind == "orphan"]
    owners[("orphan", "data")] = Logical(
        sum(r.ledgers for r in orphans), sum(r.length for r in orphans), sum(r.open_ledgers for r in orphans)
    )
    # every Pulsar ledger is an orphan (no managed ledger lists it): 10 closed, 10 open (5 entries, 500 B)
    assert owners == {
        ("orphan", "data"): Logical(20, 10 * 1000 + 10 * 500, 10),
        ("application", None): Logical(20, 10 * 1000 + 10 * 500, 10),
    }
