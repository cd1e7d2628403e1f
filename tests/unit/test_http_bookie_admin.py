"""bookied's day-2 HTTP endpoints (gc, gc_details, list_disk_file, last_log_mark, expand_storage)
on a fake bookie, and the GarbageCollector's bookkeeping on task.Clock."""
from __future__ import annotations

import json

from twisted.internet import defer, task

from bkctl.bookied import garbage_collector
from tests.support.http import FakeStatus, body, code, render


class AdminStatus(FakeStatus):
    def __init__(self, tmp_path):
        super().__init__()
        self.clock = task.Clock()
        self.pass_ = defer.Deferred()
        self.gc = garbage_collector.GarbageCollector(lambda: self.pass_, self.clock)
        self.dirs = ([str(tmp_path / "j")], [str(tmp_path / "l")], [])
        self.expand_error: str | None = None

    def force_gc(self):
        return self.gc(force=True)

    def in_force_gc(self):
        return self.gc.in_force_gc()

    def gc_details(self):
        return self.gc.details()

    def list_disk_files(self, file_type):
        return garbage_collector.list_disk_files(file_type, *self.dirs)

    def last_log_marks(self):
        return garbage_collector.last_log_marks([(0x1a2b, 512)])

    def expand_storage(self):
        if self.expand_error:
            return defer.fail(ValueError(self.expand_error))
        return defer.succeed("ok")


def test_gc_forced_pass_and_details(tmp_path):
    s = AdminStatus(tmp_path)
    assert json.loads(body(render(s, "/api/v1/bookie/gc"))) == {"is_in_force_gc": "false"}
    req = render(s, "/api/v1/bookie/gc", b"PUT")
    assert code(req) == 200 and json.loads(body(req)) == f"Triggered GC on BookieServer: {s.bookie_id}"
    assert json.loads(body(render(s, "/api/v1/bookie/gc"))) == {"is_in_force_gc": "true"}
    joined = s.gc()  # a periodic pass meanwhile joins the running one
    s.clock.advance(5)
    s.pass_.callback(3)
    assert joined.called
    (details,) = json.loads(body(render(s, "/api/v1/bookie/gc_details")))
    assert details["forceCompacting"] is False and details["gcRuns"] == 1 and details["ledgersRemoved"] == 3
    assert details["lastMajorCompactionTime"] == 5000
    assert json.loads(body(render(s, "/api/v1/bookie/gc"))) == {"is_in_force_gc": "false"}
    bad = render(s, "/api/v1/bookie/gc", b"PUT", body=b"[not json")
    assert code(bad) == 400
    ok = render(s, "/api/v1/bookie/gc", b"PUT", body=b'{"forceMajor": true}')
    assert code(ok) == 200


def test_list_disk_file_and_last_log_mark(tmp_path):
    s = AdminStatus(tmp_path)
    (tmp_path / "j" / "current").mkdir(parents=True)
    (tmp_path / "l" / "current" / "0" / "3").mkdir(parents=True)
    for name in ("j/current/1a2.txn", "j/current/0000000000000002.bjn", "l/current/0.log",
                 "l/current/0/3/3.idx", "l/current/VERSION"):
        (tmp_path / name).write_bytes(b"")
    files = json.loads(body(render(s, "/api/v1/bookie/list_disk_file")))
    assert files == {"journal files": "0000000000000002.bjn\t1a2.txn\t", "entrylog files": "0.log\t",
                     "index files": "3.idx\t"}
    only = json.loads(body(render(s, "/api/v1/bookie/list_disk_file", args={b"file_type": [b"entrylog"]})))
    assert only == {"entrylog files": "0.log\t"}
    assert json.loads(body(render(s, "/api/v1/bookie/last_log_mark"))) == {
        "LastLogMark: Journal Id - 6699(1a2b.txn)": "Pos - 512"}


def test_expand_storage(tmp_path):
    s = AdminStatus(tmp_path)
    req = render(s, "/api/v1/bookie/expand_storage", b"PUT")
    assert code(req) == 200 and json.loads(body(req)) == "Success expand storage"
    s.expand_error = "cookie mismatch"
    req = render(s, "/api/v1/bookie/expand_storage", b"PUT")
    assert code(req) == 409 and "cookie mismatch" in body(req).decode()
    assert code(render(s, "/api/v1/bookie/expand_storage")) == 405
