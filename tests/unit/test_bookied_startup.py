"""bookied's start-up identity and environment checks (issue 15, items 15 and 17)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bkctl.bookied.config import ConfigError, load_config
from bkctl.bookied.main import EXIT_CONFIG, EXIT_INDEX, EXIT_REFUSED
from bkctl.bookied.service import BookieService
from bkctl.wire.bookie_disk import identity, layout
from bkctl.wire.metadata.errors import ZKUnavailable
from tests.support.fake_store import FakeMetadataStore

UNIT = Path(__file__).resolve().parents[2] / "bookied" / "bookied.service"


def _crash(*_args):
    raise ZKUnavailable("ZooKeeper at the fake unavailable: connection lost")


def _cookie(tmp_path):
    j, l = str(tmp_path / "journal"), str(tmp_path / "ledgers")
    layout.prepare_dirs([j, l])
    return identity.expected_cookie("127.0.0.1:3181", [j], [l], [], "instance-1")


def test_a_crash_between_stamping_the_directories_and_zookeeper_is_finished_at_the_next_start(tmp_path):
    cookie = _cookie(tmp_path)
    store = FakeMetadataStore().start()
    store.before("cookies.put", _crash)
    with pytest.raises(ZKUnavailable):
        identity.check_and_stamp(store, cookie)
    assert store.cookies.get(cookie.bookie_id) is None
    assert identity.check_and_stamp(store, cookie) == "new"
    assert store.cookies.get(cookie.bookie_id) == (cookie, 0)
    assert not layout.stamping_marker(cookie.journal_dirs[0])
    assert identity.check_and_stamp(store, cookie) == "ok"


def test_a_bookie_whose_zookeeper_cookie_was_deleted_is_refused(tmp_path):
    cookie = _cookie(tmp_path)
    store = FakeMetadataStore().start()
    assert identity.check_and_stamp(store, cookie) == "new"
    store.cookies.delete(cookie.bookie_id)  # bkctl decommission
    with pytest.raises(identity.Decommissioned, match="decommissioned.*bkctl bookieformat"):
        identity.check_and_stamp(store, cookie)
    assert store.cookies.get(cookie.bookie_id) is None


MOUNTINFO_PRIVATE = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
410 22 8:1 /tmp/systemd-private-6f2c-bookied.service-Ab12/tmp /tmp rw,relatime shared:1 - ext4 /dev/sda1 rw
"""
MOUNTINFO_PLAIN = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:27 / /tmp rw,nosuid,nodev shared:5 - tmpfs tmpfs rw
"""


def test_private_tmp_is_recognised_from_mountinfo():
    assert layout.private_tmp(MOUNTINFO_PRIVATE) is True
    assert layout.private_tmp(MOUNTINFO_PLAIN) is False


def test_default_directories_in_a_private_tmp_are_a_configuration_error(monkeypatch, tmp_path):
    monkeypatch.setattr(layout, "private_tmp", lambda mountinfo=None: True)
    cfg = load_config(None, {"ledgerDirectories": str(tmp_path / "ledgers")})  # journal: /tmp/bk-txn
    service = BookieService.__new__(BookieService)
    service.cfg = cfg
    with pytest.raises(ConfigError, match=r"journalDirectories: /tmp/bk-txn is under a private /tmp"):
        service._prepare_dirs(list(cfg.journal_directories), list(cfg.ledger_directories), [])


def _directives(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if re.match(r"^[A-Z]\w+=", line))


def test_unit_does_not_restart_after_configuration_errors_refusals_or_an_index_that_does_not_open():
    directives = _directives(UNIT.read_text())
    codes = {int(c) for c in directives["RestartPreventExitStatus"].split()}
    assert codes == {EXIT_CONFIG, EXIT_REFUSED, EXIT_INDEX}


def test_unit_comments_say_what_protect_system_does():
    text = UNIT.read_text()
    directives = _directives(text)
    comments = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    # the header tells operators that directories elsewhere need ReadWritePaths=: true only with strict
    assert "ReadWritePaths=" in comments
    assert re.search(r"ProtectSystem=(\w+)", comments).group(1) == directives["ProtectSystem"] == "strict"
    assert directives["PrivateTmp"] == "yes" and "journalDirectories=/var/lib/" in comments


def _registering_service(tmp_path, monkeypatch, failures: int):
    """A service about to register, whose store loses ZooKeeper ``failures`` times first."""
    from tests.unit.test_service_readonly import make_service

    svc = make_service(tmp_path, monkeypatch, "zkTimeout=5000\n")
    svc.zk = FakeMetadataStore().start()
    registered = svc.zk.registration.register
    left = {"failures": failures}

    def register(*args, **kwargs):
        if left["failures"]:
            left["failures"] -= 1
            raise ZKUnavailable("ZooKeeper at the fake unavailable: session expired")
        return registered(*args, **kwargs)

    monkeypatch.setattr(svc.zk.registration, "register", register)
    ready = []
    monkeypatch.setattr(svc.notifier, "ready", ready.append)
    monkeypatch.setattr("bkctl.wire.process.sdnotify.start_watchdog", lambda *_: None)
    monkeypatch.setattr(svc, "_stop_reactor", lambda: ready.append("stopped"))
    return svc, ready


def test_zookeeper_lost_while_registering_is_tried_again_for_zk_timeout(tmp_path, monkeypatch):
    """Java's bookie registers through a ZooKeeper client that retries, so a session that
    expires as it starts does not end it; the faults harness saw ours exit 1 there."""
    svc, ready = _registering_service(tmp_path, monkeypatch, failures=3)
    svc._register()
    assert ready == [] and svc.exit_code == 0
    svc.reactor.pump([1.0] * 3)
    assert ready == [f"serving as {svc.bookie_id}"] and svc.exit_code == 0
    assert svc.bookie_id in svc.zk.registration.writable_bookies()


def test_zookeeper_away_for_longer_than_zk_timeout_fails_the_start(tmp_path, monkeypatch):
    svc, ready = _registering_service(tmp_path, monkeypatch, failures=100)
    svc._register()
    svc.reactor.pump([1.0] * 10)
    assert ready == ["stopped"] and svc.exit_code == 1
    assert svc.bookie_id not in svc.zk.registration.writable_bookies()
