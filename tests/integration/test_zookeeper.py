"""The ZooKeeper launcher: discovery, start/stop by pid, recorded-pid safety."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from bkctl.sandbox import zookeeper as zkmod
from bkctl.sandbox.zookeeper import (
    MAIN_CLASS,
    ZooKeeperNotFound,
    ZooKeeperServer,
    ZooKeeperStartError,
    find_zookeeper_classpath,
    four_letter_word,
    free_port,
    is_zookeeper_process,
    pid_alive,
    process_cmdline,
    stop_recorded_zookeeper,
)
from tests.support.interrupts import die_with_parent

pytestmark = pytest.mark.integration


def test_session_server_answers(zookeeper):
    assert zookeeper.running and zookeeper.pid
    assert zookeeper.connect_string == f"127.0.0.1:{zookeeper.port}"
    assert "Zookeeper version" in four_letter_word("127.0.0.1", zookeeper.port, "srvr")
    cfg = zookeeper.config_path.read_text()
    assert "clientPortAddress=127.0.0.1" in cfg and "admin.enableServer=false" in cfg
    assert is_zookeeper_process(zookeeper.pid, zookeeper.data_dir)
    assert MAIN_CLASS in process_cmdline(zookeeper.pid)


def test_start_stop_by_pid(tmp_path):
    server = ZooKeeperServer(tmp_path / "zk", preexec_fn=die_with_parent)
    with server:
        pid, port = server.pid, server.port
        assert pid_alive(pid)
        assert zkmod.server_answers("127.0.0.1", port)
        assert server.log_path.exists()
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


def test_free_port_is_bindable():
    import socket

    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_discovery_order_and_install_hint(tmp_path, monkeypatch):
    monkeypatch.setattr(zkmod, "DEBIAN_JAR_DIR", tmp_path / "no-debian")
    monkeypatch.setattr(zkmod, "pyspark_jars_dir", lambda: None)
    with pytest.raises(ZooKeeperNotFound) as info:
        find_zookeeper_classpath(env={})
    message = str(info.value)
    assert "apt-get install zookeeper" in message
    assert "pip install 'bkctl[spark]'" in message
    assert "ZOOKEEPER_HOME" in message

    # ZOOKEEPER_HOME wins, and must really hold a server jar
    home = tmp_path / "zkhome"
    (home / "lib").mkdir(parents=True)
    with pytest.raises(ZooKeeperNotFound, match="ZOOKEEPER_HOME"):
        find_zookeeper_classpath(env={"ZOOKEEPER_HOME": str(home)})
    (home / "lib" / "zookeeper-3.9.5.jar").write_bytes(b"")
    (home / "lib" / "slf4j-api-2.0.17.jar").write_bytes(b"")
    cp = find_zookeeper_classpath(env={"ZOOKEEPER_HOME": str(home)})
    assert sorted(Path(p).name for p in cp) == ["slf4j-api-2.0.17.jar", "zookeeper-3.9.5.jar"]

    # Debian's package comes before pyspark
    debian = tmp_path / "debian"
    debian.mkdir()
    (debian / "zookeeper.jar").write_bytes(b"")
    (debian / "slf4j-nop.jar").write_bytes(b"")
    monkeypatch.setattr(zkmod, "DEBIAN_JAR_DIR", debian)
    cp = find_zookeeper_classpath(env={})
    assert [Path(p).name for p in cp] == ["zookeeper.jar", "slf4j-nop.jar"]


def test_pyspark_classpath_is_minimal():
    jars_dir = zkmod.pyspark_jars_dir()
    if jars_dir is None:
        pytest.skip("pyspark is not installed")
    names = [Path(p).name for p in zkmod._from_pyspark()]
    for prefix in ("zookeeper-3", "zookeeper-jute-", "slf4j-api-", "metrics-core-", "commons-io-",
                   "commons-cli-", "snappy-java-"):
        assert any(n.startswith(prefix) for n in names), prefix
    assert not any(n.startswith("spark-") for n in names)


def test_pyspark_jars_are_located_without_importing_pyspark():
    """Finding the jars must not pay pyspark's import (the sandbox starts ZooKeeper on every `up`)."""
    if zkmod.pyspark_jars_dir() is None:
        pytest.skip("pyspark is not installed")
    probe = ("import sys; from bkctl.sandbox import zookeeper as z; "
             "assert z._from_pyspark(), 'no jars'; print(sorted(m for m in sys.modules if m.startswith('pyspark')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_pid_alive_treats_zombies_as_dead():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    def state():
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
        return stat[stat.rfind(")") + 2]

    while time.monotonic() < deadline and state() != "Z":
        time.sleep(0.02)
    assert state() == "Z"  # exited, not yet waited for
    assert not pid_alive(proc.pid)
    proc.wait()
