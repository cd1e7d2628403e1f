"""``bkctl top`` without a terminal: metrics read from bookied's and Java's names, a snapshot's rows
(down, lost, unreachable, Java without metrics), sorting and filtering, keys, frames."""

import io
import re
from dataclasses import replace

import pytest
from rich.console import Console

from bkctl.ops import autorecovery
from bkctl.ops import top as top_ops
from bkctl.ops.autorecovery import AutorecoveryReport, RepairRow
from bkctl.ops.bookie_reads import BookieReading
from bkctl.ops.bookies import Registration
from bkctl.ops.prometheus import Rates, Scrape, bucket_quantile, rates
from bkctl.ops.results import to_json
from bkctl.ops.top import (
    TopCluster,
    TopCollector,
    TopDisk,
    TopGc,
    TopRow,
    TopSnapshot,
    TopState,
    TopZooKeeper,
    ZooKeeperState,
    filter_rows,
    sort_rows,
)
from bkctl.top_screen import ViewState, apply_key, render, split_keys
from bkctl.wire.autorecovery.repairstate import LedgerRepair, LedgerRepairState, LostBookie
from tests.support.fake_store import FakeMetadataStore


def bookied_metrics(adds: int, add_buckets: dict, fsync: dict) -> str:
    lines = [
        f'bookie_requests_total{{op="add",status="EOK"}} {adds}',
        'bookie_requests_total{op="read",status="EOK"} 7',
        'bookie_requests_total{op="read",status="ENOENTRY"} 3',
    ]
    for le, n in add_buckets.items():
        lines.append(f'bookie_request_latency_seconds_bucket{{op="add",le="{le}"}} {n}')
    for le, n in fsync.items():
        lines.append(f'bookie_journal_fsync_latency_seconds_bucket{{le="{le}"}} {n}')
    return "# HELP x\n" + "\n".join(lines) + "\n"


def test_bookied_rates_and_quantiles_are_between_two_scrapes():
    before = Scrape(bookied_metrics(100, {"0.001": 90, "0.01": 100, "+Inf": 100}, {"0.001": 5, "+Inf": 5}))
    after = Scrape(bookied_metrics(300, {"0.001": 100, "0.01": 300, "+Inf": 300}, {"0.001": 5, "0.005": 9, "+Inf": 10}))
    assert after.naming == "bookied" and after.total("bookie_requests_total", op="read") == 10
    r = rates(before, after, 2.0)
    assert r.add_rate == 100.0 and r.read_rate == 0.0
    # 200 adds between the scrapes: 10 under 1 ms, 190 under 10 ms
    assert r.add_p50_ms == 10.0 and r.add_p99_ms == 10.0
    assert r.journal_sync_p99_ms == 5.0
    first = rates(None, after, 0.0)
    assert first.add_rate is None and first.add_p99_ms is None  # nothing to compare yet
    assert bucket_quantile({}, {1.0: 0, float("inf"): 0}, 0.5) is None


def test_java_summaries_are_read_in_their_own_window():
    text = (
        'bookkeeper_server_ADD_ENTRY_REQUEST{success="true",quantile="0.5"} 0.8\n'
        'bookkeeper_server_ADD_ENTRY_REQUEST{success="true",quantile="0.99"} 4.5\n'
        'bookkeeper_server_ADD_ENTRY_REQUEST{success="false",quantile="0.99"} 99\n'
        'bookkeeper_server_ADD_ENTRY_REQUEST_count{success="true"} 1500\n'
        'bookie_journal_JOURNAL_SYNC{success="true",quantile="0.99"} 2.0\n'
    )
    before = Scrape(text.replace("1500", "1000"))
    after = Scrape(text)
    assert after.naming == "java"
    r = rates(before, after, 5.0)
    assert r.add_rate == 100.0 and r.add_p50_ms == 0.8 and r.add_p99_ms == 4.5
    assert r.journal_sync_p99_ms == 2.0 and r.read_rate is None
    assert not Scrape("") and Scrape("# only comments\n").naming is None


def reading(bookie_id, state, *, metrics=None, logs=None, answered=True, unread=None):
    state = Registration(state)
    if not answered:
        return BookieReading(bookie_id, state, "h:1", unread=unread or {"info": "connection refused"}, read_at=1.0)
    return BookieReading(
        bookie_id,
        state,
        "h:1",
        info={"freeSpace": 25, "totalSpace": 100},
        gc={"is_in_force_gc": "false", "gcRuns": 2, "gcRunning": False}
        if logs is not None
        else {"is_in_force_gc": "false"},
        gc_details=[{"entryLogs": logs}] if logs is not None else [{"gcRunning": False}],
        metrics=metrics,
        unread=unread or {},
        read_at=1.0,
    )


def _lost(bookie_id, cookie=True, seen_by_auditor=True):
    return LostBookie(bookie_id, cookie, None, 0, False, None, None, None, None, seen_by_auditor, "lost")


def _repair(ledger_id, missing, worker, state, text=""):
    return RepairRow(text, None, LedgerRepair(ledger_id, state, worker, worker, None, None, (), tuple(missing), None))


#: what `autorecovery status` would say: c:1 lost, two ledgers marked
REPORT = AutorecoveryReport(
    enabled=True,
    lost_bookie_recovery_delay=0,
    underreplicated=2,
    auditor="a:1",
    auditor_keeps_status=True,
    lost_bookies=[_lost("d:1"), _lost("gone:1")],
    auditor_waits_for="nothing",
    workers=[],
    workers_note=None,
    ledgers=[
        _repair(7, ["d:1"], "a:1", LedgerRepairState.REREPLICATING),
        _repair(8, ["d:1", "gone:1"], None, LedgerRepairState.HELD_FAILED, "held after a failed attempt: no bookies"),
    ],
    lost_entries=[],
)


@pytest.fixture
def collector(monkeypatch):
    """A collector on a fake store whose bookie reads are given by the test (``collector.answers``)."""
    store = FakeMetadataStore().start()
    for b in ("a:1", "b:1"):
        store.registration.register(b, b"")
    store.registration.register("c:1", b"", readonly=True)
    for b in ("a:1", "b:1", "c:1", "d:1"):
        store.cookies.put(b, b"cookie")
    c = TopCollector(store, clock=lambda: 0.0, wall=lambda: 1_700_000_000.0)
    c.answers = {}
    c.report = REPORT
    monkeypatch.setattr(autorecovery, "autorecovery_report", lambda _store, now_ms: c.report)
    monkeypatch.setattr(
        top_ops,
        "read_bookies",
        lambda _store, rows, *_a, **_k: [
            c.answers.get(r.bookie_id, BookieReading(r.bookie_id, r.state, unread={"http": "not registered (down)"}))
            if r.state is not Registration.DOWN
            else BookieReading(r.bookie_id, Registration.DOWN, unread={"http": "not registered (down)"})
            for r in rows
        ],
    )
    yield c
    c.close()


def test_snapshot_rows_say_what_each_bookie_is(collector):
    logs = [{"logId": 1, "sizeBytes": 1000, "liveBytes": 400, "liveRatio": 0.4}]
    collector.answers = {
        "a:1": reading("a:1", "writable", logs=logs, metrics=bookied_metrics(10, {"+Inf": 10}, {"+Inf": 1})),
        "b:1": reading("b:1", "writable", answered=False),
        "c:1": reading("c:1", "read-only"),  # a Java bookie: no entry-log figures, /metrics empty
    }
    collector.answers["c:1"].unread["metrics"] = "empty (the bookie exports no metrics: no Prometheus stats provider?)"
    snap = collector.snapshot()
    rows = {r["bookie_id"]: r for r in to_json(snap.bookies)}
    # d:1 has a cookie and the auditor counts it lost; gone:1 is lost without a cookie (decommissioned)
    assert {b: r["state"] for b, r in rows.items()} == {
        "a:1": "writable",
        "b:1": "unreachable",
        "c:1": "read-only",
        "d:1": "lost",
        "gone:1": "lost",
    }
    a, c = rows["a:1"], rows["c:1"]
    assert a["reclaimable_bytes"] == 600 and a["used_percent"] == 75.0 and a["metrics"] == "bookied"
    assert a["add_rate"] is None  # the first scrape
    assert c["kind"] == "java" and c["reclaimable_bytes"] is None and c["metrics"] is None and "metrics" in c["unread"]
    assert snap.cluster.unreachable == 1 and snap.cluster.lost == 2 and snap.cluster.bookies == 5
    # the report `autorecovery status` shows, as it is
    assert snap.autorecovery is REPORT and snap.cluster.auditor == "a:1"
    assert snap.cluster.under_replicated == 2
    # a second scrape: rates over the time between them
    collector.answers["a:1"] = reading(
        "a:1", "writable", logs=logs, metrics=bookied_metrics(30, {"0.001": 20, "+Inf": 20}, {"+Inf": 1})
    )
    collector.answers["a:1"].read_at = 3.0
    a = {r["bookie_id"]: r for r in to_json(collector.snapshot().bookies)}["a:1"]
    assert a["add_rate"] == 10.0 and a["add_p99_ms"] == 1.0
    text = io.StringIO()
    Console(file=text, width=160).print(render(snap, ViewState(), live=False))
    frame = text.getvalue()
    assert "unreachable" in frame and "HTTP admin not answering" in frame and "no metrics" in frame
    assert (
        "no entry-log figures (Java)" in frame and "bookies 5: 1 writable, 1 read-only, 1 unreachable, 2 lost" in frame
    )
    assert "under-replicated 2 (1 held-failed, 1 re-replicating); lost: d:1, gone:1" in frame
    text = io.StringIO()
    Console(file=text, width=160).print(render(snap, ViewState(detail="d:1"), live=False))
    assert (
        "ledger 8: held after a failed attempt: no bookies" in text.getvalue()
        and "missing a copy here: 2" in text.getvalue()
    )


def test_a_bookie_with_a_cookie_the_auditor_does_not_count_is_down_not_lost(collector):
    """`autorecovery status` lists every bookie with a cookie and no registration as lost (its
    help's definition); top keeps "lost" for those the auditor found named by ledgers."""
    collector.report = replace(
        REPORT, lost_bookies=[_lost("d:1", seen_by_auditor=False), _lost("gone:1", cookie=False, seen_by_auditor=False)]
    )
    rows = {r["bookie_id"]: r["state"] for r in to_json(collector.snapshot().bookies)}
    assert rows["d:1"] == "down" and rows["gone:1"] == "lost"


def test_a_report_that_cannot_be_read_is_said(collector):
    def fail(_store, now_ms):
        raise RuntimeError("ZooKeeper went away")

    collector.report = None
    autorecovery.autorecovery_report = fail  # restored by the fixture's monkeypatch
    snap = collector.snapshot()
    assert snap.autorecovery is None and snap.autorecovery_error == "ZooKeeper went away"
    assert [r.state.value for r in snap.bookies] == ["unreachable", "unreachable", "unreachable", "down"]
    text = io.StringIO()
    Console(file=text, width=160).print(render(snap, ViewState(), live=False))
    assert "autorecovery: not read (ZooKeeper went away)" in text.getvalue()


def rows_of(*specs):
    return [
        TopRow(b, TopState(s), s, r, None, None, {}, None, None, TopDisk(), TopGc(), Rates(add_rate=a))
        for b, s, r, a in specs
    ]


def test_sorting_and_filtering():
    rows = rows_of(("b:1", "writable", "/r1", 5.0), ("a:1", "down", None, None), ("c:1", "writable", "/r2", 9.0))
    assert [r.bookie_id for r in sort_rows(rows, "bookie")] == ["a:1", "b:1", "c:1"]
    assert [r.bookie_id for r in sort_rows(rows, "adds")] == ["c:1", "b:1", "a:1"]  # unknown last
    assert [r.bookie_id for r in sort_rows(rows, "adds", reverse=True)] == ["b:1", "c:1", "a:1"]
    assert [r.bookie_id for r in sort_rows(rows, "state")] == ["a:1", "b:1", "c:1"]  # trouble first
    assert [r.bookie_id for r in filter_rows(rows, "R2")] == ["c:1"]
    assert [r.bookie_id for r in filter_rows(rows, "down")] == ["a:1"] and filter_rows(rows, " ") == rows


def test_keys_change_the_view():
    state = ViewState(rows=rows_of(("a:1", "writable", None, 1.0), ("b:1", "writable", None, 2.0)))
    assert split_keys("s\x1b[Bq") == ["s", "\x1b[B", "q"] and split_keys("\x1b") == ["\x1b"]
    assert apply_key(state, "s") and state.sort == "state"
    apply_key(state, "S")
    assert state.reverse
    apply_key(state, "\x1b[B")
    apply_key(state, "\r")
    assert state.detail == "b:1"
    apply_key(state, "\x1b")
    assert state.detail is None
    for key in "/b:1\r":
        apply_key(state, key)
    assert state.filter == "b:1" and state.editing is None
    apply_key(state, "?")
    assert state.help and apply_key(state, "x") and not state.help  # any key closes the help
    assert not apply_key(state, "q") and not apply_key(ViewState(), "\x03")


def one_bookie_snapshot(add_p50_ms: float = 2.5, add_p99_ms: float = 10.0) -> TopSnapshot:
    """A snapshot of one busy bookie with every column filled, for the layout tests."""
    row = TopRow(
        bookie_id="127.0.0.1:31255",
        state=TopState.WRITABLE,
        registration="writable",
        rack="/r1",
        http=None,
        kind="bookied",
        unread={},
        read_only_reason=None,
        metrics="bookied",
        disk=TopDisk(used_percent=70.0, total_bytes=252 << 30, reclaimable_bytes=270 << 10),
        gc=TopGc(gc_running=False),
        rates=Rates(
            add_rate=3581.0,
            add_p50_ms=add_p50_ms,
            add_p99_ms=add_p99_ms,
            read_rate=6641.0,
            read_p99_ms=1.0,
            journal_sync_p99_ms=5.0,
        ),
    )
    return TopSnapshot(
        time=0,
        cluster=TopCluster(
            1, 0, 0, 0, read_only=0, writable=1, under_replicated=None, auditor=None, autorecovery_enabled=None
        ),
        bookies=[row],
        autorecovery=None,
        autorecovery_error="x",
        zookeeper=TopZooKeeper(ZooKeeperState.OK, None, None, 0, None),
    )


def test_a_narrow_terminal_leaves_columns_out_rather_than_cutting_the_ids():
    snap = one_bookie_snapshot()
    for width, gone, kept in (
        (160, [], ["notes", "jsync p99", "rack"]),
        (100, ["notes", "gc", "rack"], ["disk"]),
        (70, ["jsync p99", "read p99", "reclaimable"], ["add/s", "disk"]),
    ):
        text = io.StringIO()
        Console(file=text, width=width).print(render(snap, ViewState(), live=True, width=width))
        lines = text.getvalue().splitlines()
        head = next(line for line in lines if line.startswith("bookie "))
        assert all(name not in head for name in gone) and all(name in head for name in kept), (width, head)
        assert any(re.match(r"127\.0\.0\.1:31255\s+writable ", line) for line in lines), (width, lines)


def test_a_late_frame_and_a_silent_zookeeper_are_said_in_red(collector):
    from bkctl.top_screen import header

    collector.answers = {"a:1": reading("a:1", "writable")}
    snap = collector.snapshot()
    assert snap.zookeeper.state is ZooKeeperState.OK and snap.zookeeper.read_at == snap.time
    fresh = header(snap, ViewState(interval=1.0), now_ms=snap.time + 400)
    assert "bookies read" in fresh.plain and "(0 s ago)" in fresh.plain and "zookeeper ok" in fresh.plain
    at = fresh.plain.index("bookies read")
    assert not any(span.start <= at < span.end and "red" in str(span.style) for span in fresh.spans)
    stalled = replace(
        snap,
        zookeeper=TopZooKeeper(
            state=ZooKeeperState.UNREACHABLE,
            since=snap.time - 20_000,
            error="no answer for 20 s",
            read_at=snap.time - 21_000,
            latency_ms=None,
        ),
    )
    late = header(stalled, ViewState(interval=1.0), now_ms=snap.time + 30_000)
    assert (
        "(30 s ago)" in late.plain and "ZooKeeper unreachable since" in late.plain and "(50 s): no answer" in late.plain
    )
    assert "registrations as of" in late.plain and "(51 s old)" in late.plain
    # the bookies' figures are as old as the snapshot, not "live" (issue 69, point 13)
    assert "live" not in late.plain and "the bookies' HTTP figures as of " in late.plain
    assert late.plain.split("HTTP figures as of ", 1)[1].split("\n")[0].endswith("(30 s old)")
    age = late.plain.index("bookies read")
    assert any(span.start <= age < span.end and "red" in str(span.style) for span in late.spans)


def test_the_sort_column_stays_details_say_yes_or_no_and_latencies_share_one_format(collector):
    snap = one_bookie_snapshot(add_p50_ms=0.25, add_p99_ms=12.0)
    text = io.StringIO()
    Console(file=text, width=100).print(render(snap, ViewState(sort="rack"), live=True, width=100))
    head = next(line for line in text.getvalue().splitlines() if line.startswith("bookie "))
    assert "rack" in head, head  # sorted by rack: the rack column is not the one left out
    assert "0.2/12.0" in text.getvalue() or "0.3/12.0" in text.getvalue(), text.getvalue()

    collector.answers = {"a:1": reading("a:1", "writable", logs=[])}
    snap = collector.snapshot()
    text = io.StringIO()
    Console(file=text, width=160).print(render(snap, ViewState(detail="a:1"), live=False))
    assert "forced no" in text.getvalue() and "False" not in text.getvalue() and "None" not in text.getvalue()
    collector.answers = {"a:1": reading("a:1", "writable", answered=False)}
    text = io.StringIO()
    Console(file=text, width=160).print(render(collector.snapshot(), ViewState(detail="a:1"), live=False))
    assert "forced -" in text.getvalue() and "None" not in text.getvalue(), text.getvalue()


def test_a_read_only_bookie_says_why(collector):
    collector.answers = {"c:1": reading("c:1", "read-only")}
    collector.answers["c:1"].info["readOnlyReasons"] = {"disk": "disk usage 96.0% over diskUsageThreshold 95%"}
    snap = collector.snapshot()
    row = {r["bookie_id"]: r for r in to_json(snap.bookies)}["c:1"]
    assert row["read_only_reason"] == "disk usage 96.0% over diskUsageThreshold 95%"
    text = io.StringIO()
    Console(file=text, width=200).print(render(snap, ViewState(), live=False))
    assert "read-only: disk usage 96.0% over diskUsageThreshold 95%" in text.getvalue()
    text = io.StringIO()
    Console(file=text, width=200).print(render(snap, ViewState(detail="c:1"), live=False))
    assert "; read-only: disk usage 96.0%" in text.getvalue()


def test_a_java_bookie_with_several_journals_shows_the_worst_p99_and_idle_summaries_as_unknown():
    text = (
        'bookie_journal_JOURNAL_SYNC{success="true",quantile="0.99",journalIndex="0"} 2.0\n'
        'bookie_journal_JOURNAL_SYNC{success="true",quantile="0.99",journalIndex="1"} 3.0\n'
        'bookkeeper_server_ADD_ENTRY_REQUEST{success="true",quantile="0.5"} NaN\n'
        'bookkeeper_server_ADD_ENTRY_REQUEST{success="true",quantile="0.99"} NaN\n'
        'bookkeeper_server_ADD_ENTRY_REQUEST_count{success="true"} 0.0\n'
        'bookkeeper_server_READ_ENTRY_REQUEST{success="true",quantile="0.99",journalIndex="0"} NaN\n'
        'bookkeeper_server_READ_ENTRY_REQUEST{success="true",quantile="0.99",journalIndex="1"} 7.5\n'
    )
    r = rates(Scrape(text), Scrape(text), 5.0)
    assert r.journal_sync_p99_ms == 3.0  # the worse journal's, not 2.0 + 3.0
    assert r.add_p50_ms is None and r.add_p99_ms is None and r.add_rate == 0.0  # idle: NaN is not known
    assert r.read_p99_ms == 7.5
    import json

    json.dumps(to_json(r), allow_nan=False)  # --json stays valid JSON


def test_sigterm_sets_a_flag_that_a_bare_except_cannot_swallow():
    """The live view's SIGTERM handler raises nothing: it sets the flag its loop reads and wakes
    the loop's wait.  A SystemExit raised there landed wherever the main thread was, and a
    library's bare ``except:`` (kazoo's) could swallow it: the view went on."""
    import os
    import signal

    from bkctl.top_screen import TerminationFlag

    wake_r, wake_w = os.pipe()
    flag = TerminationFlag(wake_w)
    previous = signal.signal(signal.SIGTERM, flag.on_sigterm)
    swallowed = None
    try:
        try:
            signal.raise_signal(signal.SIGTERM)  # the handler runs here, in the main thread
        except BaseException as e:  # noqa: BLE001 - what a bare except does with it
            swallowed = e
    finally:
        signal.signal(signal.SIGTERM, previous)
    try:
        assert swallowed is None and flag.is_set()
        assert os.read(wake_r, 16) == b"t"
    finally:
        os.close(wake_r)
        os.close(wake_w)
