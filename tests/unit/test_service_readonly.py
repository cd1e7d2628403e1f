"""Why a bookie is read-only, and what makes it writable again: the disk check
(read-only over diskUsageThreshold, writable again only below diskUsageLwmThreshold),
entry-log write errors at checkpoints, the HTTP admin switch -- each undoes only its own;
and readOnlyModeEnabled=false, which shuts the bookie down instead."""

from __future__ import annotations

import re
import threading

import pytest
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure

from bkctl.bookied.bookie import Bookie
from bkctl.bookied.config import load_config_text
from bkctl.bookied.service import BookieService, ReadOnlyNotAllowed
from bkctl.wire import fastpath


class InlineThreadsReactor(MemoryReactorClock):
    """Runs what is deferred to its thread pool at once, in the calling thread."""

    def callFromThread(self, f, *args, **kwargs):
        f(*args, **kwargs)

    def getThreadPool(self):
        return self

    def callInThreadWithCallback(self, on_result, f, *args, **kwargs):
        try:
            result = f(*args, **kwargs)
        except Exception:
            on_result(False, Failure())
        else:
            on_result(True, result)


def make_service(tmp_path, monkeypatch, settings="", *, record_changes=True, reactor=None):
    """A service with a bookie and no stores; ``reactor`` (default: one that runs its
    thread pool's work at once) is where its checkpoints run."""
    cfg = load_config_text(
        f"advertisedAddress=127.0.0.1\nallowLoopback=true\n"
        f"journalDirectories={tmp_path / 'j'}\nledgerDirectories={tmp_path / 'l'}\n"
        "diskUsageThreshold=0.95\ndiskUsageWarnThreshold=0.90\n" + settings
    )
    svc = BookieService(cfg, reactor if reactor is not None else InlineThreadsReactor(), twins=fastpath.selected())
    svc.bookie = Bookie([], [], clock=svc.reactor)
    changes = []
    svc.bookie.on_readonly_change = changes.append if record_changes else svc._readonly_changed
    usage = {"now": 0.5, "free": 1 << 40}
    monkeypatch.setattr(svc.upkeep, "disk_stats", lambda: (usage["now"], usage["free"]))
    svc.usage, svc.changes = usage, changes
    return svc


@pytest.fixture
def service(tmp_path, monkeypatch):
    return make_service(tmp_path, monkeypatch, "diskUsageLwmThreshold=0.85\n")


def check(svc, usage):
    svc.usage["now"] = usage
    svc.upkeep.check_disks()
    return svc.bookie.readonly


def test_read_only_over_the_threshold_and_writable_only_below_the_low_water_mark(service):
    assert check(service, 0.94) is False
    assert check(service, 0.95) is True
    assert "diskUsageThreshold" in service.bookie.readonly_reason
    assert check(service, 0.92) is True  # between the two thresholds: stays read-only
    assert check(service, 0.89) is True  # below the warn threshold too: still over the LWM
    assert check(service, 0.85) is True
    assert check(service, 0.84) is False
    assert check(service, 0.94) is False  # writable until the threshold again
    assert service.changes == [True, False]


def test_the_low_water_mark_defaults_to_the_threshold(tmp_path, monkeypatch):
    svc = make_service(tmp_path, monkeypatch)
    assert svc.cfg.disk_usage_lwm_threshold == 0.95
    assert check(svc, 0.96) is True
    assert check(svc, 0.94) is False  # as Java: no hysteresis unless diskUsageLwmThreshold says so
    assert svc.changes == [True, False]


class DiskPressure:
    """What the disk checks tell the garbage collector (Java's LedgerDirsListener calls)."""

    def __init__(self):
        self.calls = []

    def disk_full(self):
        self.calls.append("full")

    def disk_almost_full(self):
        self.calls.append("almost full")

    def disk_writable(self):
        self.calls.append("writable")


def test_a_disk_that_keeps_the_bookie_read_only_is_full_to_the_garbage_collector(service):
    """Between the LWM and the threshold a read-only bookie's disk is still full (Java's
    allDisksFull at every check while no directory is writable): the forced passes with the
    limits lifted go on until the bookie is writable, not one unlifted pass at the crossing."""
    service.zk = object()
    service.gc = gc = DiskPressure()
    assert check(service, 0.96) is True
    assert check(service, 0.92) is True and check(service, 0.88) is True
    assert gc.calls == ["full", "full", "full"]
    assert check(service, 0.84) is False
    assert gc.calls[-1] == "writable"
    assert check(service, 0.92) is False  # writable again: the warn band is only almost full
    assert gc.calls[-1] == "almost full"


def test_the_warn_threshold_logs_once_and_each_check_tells_the_garbage_collector(service, caplog):
    service.zk = object()
    service.gc = gc = DiskPressure()
    assert check(service, 0.89) is False
    assert gc.calls == ["writable"] and "diskUsageWarnThreshold" not in caplog.text
    assert check(service, 0.90) is False
    assert check(service, 0.93) is False
    assert gc.calls[1:] == ["almost full", "almost full"]
    assert caplog.text.count("over diskUsageWarnThreshold 0.9") == 1
    assert check(service, 0.96) is True
    assert gc.calls[-1] == "full"
    check(service, 0.50)
    assert gc.calls[-1] == "writable"
    check(service, 0.91)  # a new crossing
    assert caplog.text.count("over diskUsageWarnThreshold 0.9") == 2


@pytest.mark.parametrize("cause", ["disk", "journal", "ledger", "admin"])
def test_without_read_only_mode_the_bookie_shuts_down_instead(tmp_path, monkeypatch, caplog, cause):
    svc = make_service(tmp_path, monkeypatch, "readOnlyModeEnabled=false\n", record_changes=False)
    assert check(svc, 0.50) is False
    if cause == "disk":
        check(svc, 0.97)
    elif cause == "journal":
        svc.bookie.journal_failed(None, OSError(5, "Input/output error"))
    elif cause == "ledger":
        svc.stores = [FailingStore(OSError(28, "No space left on device"))]
        svc.upkeep.checkpoint()
    else:
        with pytest.raises(ValueError, match="readOnlyModeEnabled=false"):
            svc.set_readonly(True)
        assert not svc.reactor.hasStopped and not svc.bookie.readonly
        return
    assert svc.reactor.hasStopped and svc.exit_code == 1
    assert "but readOnlyModeEnabled=false: shutting down" in caplog.text


def test_with_read_only_mode_the_bookie_keeps_running(tmp_path, monkeypatch):
    svc = make_service(tmp_path, monkeypatch, record_changes=False)
    svc._readonly_changed = svc.changes.append  # (no ZooKeeper to move the registration in)
    svc.bookie.on_readonly_change = svc._readonly_changed
    check(svc, 0.97)
    assert svc.changes == [True] and not svc.reactor.hasStopped and svc.exit_code == 0


@pytest.mark.parametrize(
    "settings, usage, refused",
    [
        ("readOnlyModeEnabled=false\n", 0.97, "disk usage 97.0% over diskUsageThreshold"),
        ("readOnlyModeEnabled=false\n", 0.50, None),
        ("", 0.97, None),
        ("forceReadOnlyBookie=true\n", 0.50, None),
    ],
)
def test_a_bookie_that_would_start_read_only_without_read_only_mode_does_not_start(
    tmp_path, monkeypatch, settings, usage, refused
):
    svc = make_service(tmp_path, monkeypatch, settings)
    svc.usage["now"] = usage
    if refused:
        with pytest.raises(ReadOnlyNotAllowed, match=re.escape(refused)):
            svc._initial_state()
    else:
        svc._initial_state()
        assert svc.bookie.readonly is (usage > 0.95 or "force" in settings)


def test_a_bookie_read_only_for_another_reason_stays_read_only(service):
    service.bookie.journal_failed(None, OSError(5, "Input/output error"))
    assert check(service, 0.10) is True
    assert check(service, 0.99) is True
    assert check(service, 0.10) is True
    assert service.bookie.readonly_reason.startswith("journal write failed")
    assert service.changes == [True]


def test_a_draining_disk_does_not_undo_a_journal_failure_that_came_meanwhile(service):
    assert check(service, 0.97) is True
    service.bookie.journal_failed(None, OSError(28, "No space left on device"))
    assert "diskUsageThreshold" in service.bookie.readonly_reason
    assert "journal write failed" in service.bookie.readonly_reason
    assert check(service, 0.50) is True
    assert service.bookie.readonly_reason.startswith("journal write failed")
    assert service.changes == [True]


def test_the_admin_switch(service):
    service.set_readonly(True)
    assert check(service, 0.50) is True  # an idle disk does not undo the operator's switch
    service.set_readonly(False)
    assert service.bookie.readonly is False
    assert check(service, 0.97) is True
    with pytest.raises(ValueError, match="force=true"):
        service.set_readonly(False)
    assert service.bookie.readonly is True
    service.set_readonly(False, force=True)
    assert service.bookie.readonly is False
    assert check(service, 0.97) is True  # still full: the next check says so again
    service.bookie.journal_failed(None, OSError(5, "Input/output error"))
    with pytest.raises(ValueError, match="restart"):
        service.set_readonly(False, force=True)
    assert service.bookie.readonly is True


def test_force_read_only_bookie_cannot_be_switched_off(service):
    service.bookie.mark_readonly("config", "forceReadOnlyBookie")
    with pytest.raises(ValueError, match="forceReadOnly"):
        service.set_readonly(False, force=True)
    assert check(service, 0.10) is True


def test_a_failing_disk_check_changes_nothing(service, caplog):
    def broken():
        raise OSError(5, "Input/output error")

    service.upkeep.disk_stats = broken
    service.upkeep.check_disks()
    assert service.bookie.readonly is False
    assert "disk check failed" in caplog.text


def test_each_disk_check_is_counted_and_a_failed_one_is_not(service):
    """bookie_disk_checks_total: what a test (or an operator) waits on to know the
    disk has been looked at since it changed."""
    service._register_metrics()
    check(service, 0.5)
    check(service, 0.96)
    working = service.upkeep.disk_stats

    def broken():
        raise OSError(5, "Input/output error")

    service.upkeep.disk_stats = broken
    service.upkeep.check_disks()
    service.upkeep.disk_stats = working
    assert "\nbookie_disk_checks_total 2.0\n" in service.metrics_text()


class FailingStore:
    """An entry store whose flushes fail with ``errors`` first."""

    def __init__(self, *errors):
        self.errors = list(errors)
        self.flushes = 0
        #: ``paced`` of each flush, in order
        self.paced: list[bool] = []

    def flush(self, paced=False):
        self.flushes += 1
        self.paced.append(paced)
        if self.errors:
            raise self.errors.pop(0)


def test_an_entry_log_write_error_makes_the_bookie_read_only_until_a_checkpoint_succeeds(service, caplog):
    service.stores = [FailingStore(OSError(28, "No space left on device"))]
    service.upkeep.checkpoint()
    assert service.bookie.readonly is True
    assert "entry log write failed" in service.bookie.readonly_reason and "checkpoint failed" in caplog.text
    assert check(service, 0.10) is True  # the disk check does not undo it
    with pytest.raises(ValueError, match="until a checkpoint succeeds"):
        service.set_readonly(False, force=True)  # nor the operator
    service.upkeep.checkpoint()  # the retried flush goes through
    assert service.stores[0].flushes == 2
    assert service.bookie.readonly is False
    assert service.changes == [True, False]


class CachedStore(FailingStore):
    """A store holding ``cached_bytes`` in its write cache."""

    def __init__(self, cached_bytes: int):
        super().__init__()
        self.cached_bytes = cached_bytes
        self.directory = "/nowhere"


class DeletingCollector:
    """A garbage collector whose collection removes a deleted ledger: the store's cache empties."""

    def __init__(self, store: CachedStore):
        self.store = store
        self.collections = 0

    def collect_deleted(self):
        from types import SimpleNamespace

        from twisted.internet import defer

        self.collections += 1
        self.store.cached_bytes = 0
        return defer.succeed(SimpleNamespace(ledgers_removed=1))

    def disk_full(self):
        pass

    def disk_almost_full(self):
        pass

    def disk_writable(self):
        pass


@pytest.mark.parametrize("room", ["postponed", "enospc"])
def test_a_checkpoint_that_waits_for_room_has_the_deleted_ledgers_collected_and_runs(
    service, monkeypatch, caplog, room
):
    """Issue 73, point 9: a checkpoint waiting for room (postponed on a full disk, or failed with
    ENOSPC) waited for garbage collection's own interval (gcWaitTime, 10 minutes) to drop a deleted
    ledger's entries from the write cache; it asks for a collection now and runs once one went."""
    from bkctl.bookied import upkeep

    store = CachedStore(10 << 20)
    if room == "enospc":
        store.errors.append(OSError(28, "No space left on device"))
    else:
        assert check(service, 0.96) is True
    service.stores = [store]
    service.gc = collector = DeletingCollector(store)
    service.zk = object()
    service.running = True
    monkeypatch.setattr(upkeep, "_free_bytes", lambda path: 1 << 20)
    caplog.set_level("INFO", logger="bookied")
    service.upkeep.checkpoint()
    assert collector.collections == 1
    assert store.flushes == (2 if room == "enospc" else 1)  # the checkpoint ran again, and went through
    assert "checkpoint done: there is room again" in caplog.text


def test_a_disk_over_the_threshold_frees_what_the_journal_no_longer_needs(tmp_path, monkeypatch):
    """Issue 69, point 3: a bookie filled by its own journal stayed read-only for good (the
    checkpointed file never rolled); the disk check over the threshold frees it."""
    from bkctl.bookied.journal import EntryRecord, Journal

    svc = make_service(tmp_path, monkeypatch)
    j = Journal(str(tmp_path / "j"), max_group_wait_ms=0, max_backups=5, preallocate_mb=1, twins=fastpath.selected())
    j.start()
    done = threading.Event()
    j.append(EntryRecord(1, 0, b"x" * 5000), lambda err: done.set())
    assert done.wait(10)
    j.checkpoint(j.mark())
    svc.journals = [j]
    before = j.file_ids()
    assert check(svc, 0.5) is False and j.file_ids() == before  # below the threshold: left alone
    assert check(svc, 0.96) is True and j.file_ids() == [before[-1] + 1]
    j.close()


def test_between_the_low_water_mark_and_the_threshold_a_read_only_bookie_frees_its_journal(tmp_path, monkeypatch):
    """Issue 73, point 9: a journal that met ENOSPC turned the bookie read-only ("disk"); once the disk
    was back between the LWM and the threshold, what the journal held and no replay needed was
    freed only over the threshold, so the bookie stayed read-only for good."""
    from bkctl.bookied.journal import EntryRecord, Journal

    svc = make_service(tmp_path, monkeypatch, "diskUsageLwmThreshold=0.85\n")
    j = Journal(str(tmp_path / "j"), max_group_wait_ms=0, preallocate_mb=1, twins=fastpath.selected())
    j.start()
    done = threading.Event()
    j.append(EntryRecord(1, 0, b"x" * 5000), lambda err: done.set())
    assert done.wait(10)
    j.checkpoint(j.mark())
    before = j.file_ids()
    svc.journals = [j]
    assert check(svc, 0.90) is False and j.file_ids() == before  # writable: left alone
    svc.bookie.mark_readonly("disk", "journal: no space left for the journal's preallocation")
    check(svc, 0.90)
    assert j.file_ids() == [before[-1] + 1]
    j.close()
