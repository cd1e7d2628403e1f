"""bookied's day-2 HTTP endpoints (gc, gc_details, list_disk_file, last_log_mark, expand_storage)
on a fake bookie whose GarbageCollector runs on task.Clock."""

from __future__ import annotations

import json

from twisted.internet import defer, task

from bkctl.bookied import day2
from bkctl.bookied.garbage_collector import GarbageCollector
from bkctl.bookied.gc_policy import GcPolicy
from bkctl.bookied.storage.compactor import LogsDeleted, LogUsage
from tests.support.http import FakeStatus, body, code, render


class OneLogStore:
    """What the GC reads of an entry store: one log, half live, never compacted here."""

    directory = "/d/current"
    log_size_limit = 1024**3

    def active_log_ids(self):
        return []

    deleted_whole = LogsDeleted(0, 0)

    def delete_empty_logs(self):
        return []

    def log_usage(self):
        return {7: LogUsage(1000, 468, 3, 0.5)}

    def compaction_candidates(self, threshold, min_size=0):
        return []

    def open_compaction_writer(self):
        return None

    def close_compaction_writer(self, writer):
        pass


class AdminStatus(FakeStatus):
    def __init__(self, tmp_path):
        super().__init__()
        self.clock = task.Clock()
        self.passes: list[defer.Deferred] = []  # one per pass, fired by the test ("the thread")
        self.removed = 3

        def in_thread(fn):
            d = defer.Deferred()
            d.addCallback(lambda _: fn())
            self.passes.append(d)
            return d

        self.gc = GarbageCollector(
            GcPolicy(gc_wait_ms=1000, force_allow=True),
            [OneLogStore()],
            lambda stores: self.removed,
            self.clock,
            in_thread,
        )
        self.dirs = ([str(tmp_path / "j")], [str(tmp_path / "l")], [])
        self.expand_error: str | None = None

    def force_gc(self, force_major=None, force_minor=None):
        self.forced.append((force_major, force_minor))
        return self.gc.trigger(force_major, force_minor)

    def gc_status(self):
        return self.gc.status()

    def gc_details(self):
        return self.gc.details()

    def list_disk_files(self, file_type):
        return day2.list_disk_files(file_type, *self.dirs)

    def last_log_marks(self):
        return day2.last_log_marks([(0x1A2B, 512)])

    def expand_storage(self):
        if self.expand_error:
            return defer.fail(ValueError(self.expand_error))
        return defer.succeed("ok")


def test_gc_forced_pass_status_and_details(tmp_path):
    s = AdminStatus(tmp_path)
    status = json.loads(body(render(s, "/api/v1/bookie/gc")))
    assert status["is_in_force_gc"] == "false" and status["gcRuns"] == 0 and status["lastGcTime"] is None
    assert status["nextGcTime"] == 1000 and status["lastCompaction"] is None
    req = render(s, "/api/v1/bookie/gc", b"PUT")
    assert code(req) == 200 and json.loads(body(req)) == f"Triggered GC on BookieServer: {s.bookie_id}"
    assert s.forced == [(None, None)]
    assert json.loads(body(render(s, "/api/v1/bookie/gc")))["is_in_force_gc"] == "true"
    joined = s.gc()  # a periodic pass meanwhile is queued behind the running one
    s.clock.advance(5)
    s.passes[0].callback(None)
    assert not joined.called and len(s.passes) == 2
    s.passes[1].callback(None)
    assert joined.called
    (details,) = json.loads(body(render(s, "/api/v1/bookie/gc_details")))
    assert details["forceCompacting"] is False and details["gcRuns"] == 2 and details["ledgersRemoved"] == 6
    # the forced pass ran a major compaction (forceAllowCompaction), at t=5 s
    assert details["majorCompactionCounter"] == 1 and details["lastMajorCompactionTime"] == 5000
    assert details["entryLogs"] == [
        {
            "ledgerDirectory": "/d/current",
            "logId": 7,
            "sizeBytes": 1000,
            "liveBytes": 468,
            "liveEntries": 3,
            "liveRatio": 0.5,
            "active": False,
            "keptBecause": "below majorCompactionThreshold: the next major compaction takes it",
        }
    ]
    status = json.loads(body(render(s, "/api/v1/bookie/gc")))
    assert status["is_in_force_gc"] == "false" and status["lastGcTime"] == 5000 and status["state"] == "idle"
    # that major compaction reclaimed nothing: it is the last run, not the last compaction
    assert status["lastCompactionRun"]["kind"] == "major" and status["lastCompaction"] is None
    bad = render(s, "/api/v1/bookie/gc", b"PUT", body=b"[not json")
    assert code(bad) == 400
    ok = render(s, "/api/v1/bookie/gc", b"PUT", body=b'{"forceMajor": true}')
    assert code(ok) == 200 and s.forced[-1] == (True, False)
    ok = render(s, "/api/v1/bookie/gc", b"PUT", body=b'{"forceMajor": "TRUE", "forceMinor": "yes"}')
    assert code(ok) == 200 and s.forced[-1] == (True, False)  # Java's Boolean.parseBoolean


def test_list_disk_file_and_last_log_mark(tmp_path):
    s = AdminStatus(tmp_path)
    (tmp_path / "j" / "current").mkdir(parents=True)
    (tmp_path / "l" / "current" / "0" / "3").mkdir(parents=True)
    for name in (
        "j/current/1a2.txn",
        "j/current/0000000000000002.bjn",
        "l/current/0.log",
        "l/current/0/3/3.idx",
        "l/current/VERSION",
    ):
        (tmp_path / name).write_bytes(b"")
    files = json.loads(body(render(s, "/api/v1/bookie/list_disk_file")))
    assert files == {
        "journal files": "0000000000000002.bjn\t1a2.txn\t",
        "entrylog files": "0.log\t",
        "index files": "3.idx\t",
    }
    only = json.loads(body(render(s, "/api/v1/bookie/list_disk_file", args={b"file_type": [b"entrylog"]})))
    assert only == {"entrylog files": "0.log\t"}
    assert json.loads(body(render(s, "/api/v1/bookie/last_log_mark"))) == {
        "LastLogMark: Journal Id - 6699(1a2b.txn)": "Pos - 512"
    }


def test_expand_storage(tmp_path):
    s = AdminStatus(tmp_path)
    req = render(s, "/api/v1/bookie/expand_storage", b"PUT")
    assert code(req) == 200 and json.loads(body(req)) == "Success expand storage"
    s.expand_error = "cookie mismatch"
    req = render(s, "/api/v1/bookie/expand_storage", b"PUT")
    assert code(req) == 409 and "cookie mismatch" in body(req).decode()
    assert code(render(s, "/api/v1/bookie/expand_storage")) == 405
