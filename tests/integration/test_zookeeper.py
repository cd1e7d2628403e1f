"""The ZooKeeper launcher with a real ZooKeeper: start/stop by pid, recorded-pid safety (its parts
that start none are tests/unit/test_sandbox_zookeeper.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bkctl.sandbox import zookeeper as zkmod
from bkctl.sandbox.zookeeper import (
    MAIN_CLASS,
    ZooKeeperServer,
    ZooKeeperStartError,
    four_letter_word,
    is_zookeeper_process,
    pid_alive,
    process_cmdline,
    stop_recorded_zookeeper,
)
from tests.support.interrupts import die_with_parent
from tests.support.shared_zookeeper import ENV as SHARED


def test_session_server_answers(zookeeper):
    """The session's server: the one ``./dev test`` shares between its workers, or this session's own."""
    assert zookeeper.running
    assert zookeeper.connect_string == os.environ.get(SHARED, f"127.0.0.1:{zookeeper.port}")
    assert "Zookeeper version" in four_letter_word("127.0.0.1", zookeeper.port, "srvr")


def test_start_stop_by_pid(tmp_path):
    server = ZooKeeperServer(tmp_path / "zk", preexec_fn=die_with_parent)
    with server:
        pid, port = server.pid, server.port
        assert pid_alive(pid)
        assert zkmod.server_answers("127.0.0.1", port)
        assert server.log_path.exists()
        cfg = server.config_path.read_text()
        # maxClientCnxns=0: no limit on one address's connections (every test's are from 127.0.0.1)
        assert {"clientPortAddress=127.0.0.1", "admin.enableServer=false", "maxClientCnxns=0"} <= set(cfg.split())
        assert is_zookeeper_process(pid, server.data_dir)
        assert MAIN_CLASS in process_cmdline(pid)
    assert not pid_alive(pid)
    assert server.pid is None
    assert not zkmod.server_answers("127.0.0.1", port, timeout=0.5)
    server.stop()  # idempotent


def test_requested_port_in_use_fails_with_log_tail(zookeeper, tmp_path):
    server = ZooKeeperServer(tmp_path / "zk2", port=zookeeper.port, start_timeout=30, preexec_fn=die_with_parent)
    with pytest.raises(ZooKeeperStartError) as info:
        server.start()
    assert str(zookeeper.port) in str(info.value)
    assert server.pid is None
    assert zookeeper.running  # the session server is untouched


def test_stop_recorded_pid_checks_it_is_ours(tmp_path):
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not is_zookeeper_process(decoy.pid)
        assert stop_recorded_zookeeper(decoy.pid) is False
        assert decoy.poll() is None  # left alone
    finally:
        decoy.kill()
        decoy.wait()

    server = ZooKeeperServer(tmp_path / "zk", preexec_fn=die_with_parent).start()
    pid = server.pid
    try:
        # a different sandbox's directory does not match
        assert stop_recorded_zookeeper(pid, tmp_path / "elsewhere") is False
        assert pid_alive(pid)
        assert stop_recorded_zookeeper(pid, tmp_path / "zk") is True
        assert not pid_alive(pid)
        assert stop_recorded_zookeeper(pid, tmp_path / "zk") is False
    finally:
        server.stop()
