"""The bookie's disk check: read-only over diskUsageThreshold, writable again only below
diskUsageWarnThreshold (hysteresis), and never writable again for another reason's sake."""
from __future__ import annotations

import pytest
from twisted.internet.testing import MemoryReactorClock

from bookied.bookie import Bookie
from bookied.config import load_config_text
from bookied.service import BookieService


@pytest.fixture
def service(tmp_path, monkeypatch):
    cfg = load_config_text(f"advertisedAddress=127.0.0.1\nallowLoopback=true\n"
                           f"journalDirectories={tmp_path / 'j'}\nledgerDirectories={tmp_path / 'l'}\n"
                           "diskUsageThreshold=0.95\ndiskUsageWarnThreshold=0.90\n")
    svc = BookieService(cfg, MemoryReactorClock())
    svc.bookie = Bookie([], [], clock=svc.reactor)
    changes = []
    svc.bookie.on_readonly_change = changes.append
    usage = {"now": 0.5}
    monkeypatch.setattr(svc, "disk_usage", lambda: usage["now"])
    svc.usage, svc.changes = usage, changes
    return svc


def check(svc, usage):
    svc.usage["now"] = usage
    svc._check_disks()
    return svc.bookie.readonly


def test_read_only_over_the_threshold_and_writable_only_below_the_warn_threshold(service):
    assert check(service, 0.94) is False
    assert check(service, 0.95) is True
    assert "diskUsageThreshold" in service.bookie.readonly_reason
    assert check(service, 0.92) is True  # between the two thresholds: stays read-only
    assert check(service, 0.90) is True
    assert check(service, 0.89) is False
    assert service.changes == [True, False]


def test_a_bookie_read_only_for_another_reason_stays_read_only(service):
    service.bookie._journal_failed(None, OSError(5, "Input/output error"))
    assert check(service, 0.10) is True
    assert check(service, 0.99) is True
    assert check(service, 0.10) is True
    assert service.bookie.readonly_reason.startswith("journal write failed")
    assert service.changes == [True]


def test_a_draining_disk_does_not_undo_a_journal_failure_that_came_meanwhile(service):
    assert check(service, 0.97) is True
    service.bookie._journal_failed(None, OSError(28, "No space left on device"))
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
    service.bookie._journal_failed(None, OSError(5, "Input/output error"))
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

    service.disk_usage = broken
    service._check_disks()
    assert service.bookie.readonly is False
    assert "disk check failed" in caplog.text
